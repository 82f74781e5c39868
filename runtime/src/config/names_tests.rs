//! Unit tests of the group names a load keeps: only an accepted load keeps any, all or none of
//! them, and never more than [`MAX_GROUP_NAMES`](crate::limits::MAX_GROUP_NAMES).

use super::*;
use crate::groups::names;
use crate::policy::Policy;
use crate::registry::Registry;

/// A load refused for any reason keeps none of the group names it mentions: a breaker's
/// `group`, a `[groups.<name>]` table, from TOML or the environment, valid names and 10 KB ones.
#[test]
fn refused_loads_keep_no_group_name() {
    let r = Registry::new();
    r.breaker("k", Policy::new()).unwrap();
    let before = names().len();
    let long = "x".repeat(10_000);
    let mut mentioned = Vec::new();
    for i in 0..500 {
        let (a, b, c) = (
            format!("refused-member-{i}"),
            format!("refused-table-{i}"),
            format!("refused-env-{i}"),
        );
        // Each refused by a field of another key or group, after its names were read.
        let toml = format!(
            "[breakers.k]\ngroup = \"{a}\"\n[groups.{b}]\nmax_ejection = 20\n\
             [breakers.other]\nhalf_open = 0\n"
        );
        let error = r.load_toml(&toml).unwrap_err();
        assert!(matches!(error, ConfigError::Range(_)), "{error:?}");
        let toml = format!("[breakers.k]\ngroup = \"{a}\"\n[groups.{b}]\nmin_members = 0\n");
        assert!(matches!(r.load_toml(&toml), Err(ConfigError::Group { .. })));
        let vars = [
            ("FUSEBOX__K__GROUP".to_owned(), c.clone()),
            (format!("FUSEBOX_GROUPS__{c}__INTERVAL"), "5s".to_owned()),
            ("FUSEBOX__K__HALF_OPEN".to_owned(), "0".to_owned()),
        ];
        assert!(r.load_vars(vars).is_err());
        let toml = format!("[breakers.k]\ngroup = \"{long}{i}\"\n[groups.{long}{i}]\n");
        assert!(r.load_toml(&toml).is_err());
        mentioned.extend([a, b, c, format!("{long}{i}")]);
    }
    let kept = names();
    for name in &mentioned {
        assert_eq!(
            kept.get(name),
            None,
            "`{}…` was kept",
            &name[..20.min(name.len())]
        );
    }
    // Other tests of this process may keep a few names meanwhile; 2,000 refused names would
    // be 2,000 more.
    assert!(kept.len() < before + 100, "{before} -> {}", kept.len());
    drop(kept);
    assert!(r.group("refused-table-0").is_none());
    assert_eq!(r.get("k").unwrap().policy().settings().group, None);
}

/// An accepted load keeps its names and sets them; a name too long is refused as the field it
/// is, before any name is kept.
#[test]
fn an_accepted_load_keeps_its_names_and_a_long_name_is_refused_by_its_field() {
    let r = Registry::new();
    r.load_toml("[breakers.k]\ngroup = \"kept-member\"\n[groups.kept-table]\n")
        .unwrap();
    assert!(names().get("kept-member").is_some());
    assert!(names().get("kept-table").is_some());
    let k = r.breaker("k", Policy::new()).unwrap();
    assert_eq!(k.policy().settings().group, Some("kept-member"));
    let error = r
        .load_toml(&format!("[breakers.k]\ngroup = \"{}\"\n", "y".repeat(65)))
        .unwrap_err();
    let ConfigError::Field { key, message } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(key, "k");
    assert!(message.contains("invalid `group`"), "{message}");
    assert!(error.to_string().len() < 400, "{error}");
}

/// At most `max` names: a batch that would pass it keeps none of its names; the error names
/// the key (or the group) and the field.
#[test]
fn names_past_the_limit_are_refused_all_or_none() {
    let mut local = crate::groups::Names::default();
    local.add_all(["a", "b"], 3).unwrap();
    let full = local.add_all(["a", "c", "d"], 3).unwrap_err();
    assert_eq!(full.name, "d");
    assert_eq!(
        (local.len(), local.get("c")),
        (2, None),
        "none of the batch kept"
    );
    local.add_all(["c", "a", "c"], 3).unwrap();
    assert_eq!(local.len(), 3);

    let mut loaded = Loaded::default();
    loaded.members.insert("payment".into(), "pay".into());
    let ConfigError::Field { key, message } = loaded.too_many("pay") else {
        panic!()
    };
    assert_eq!(key, "payment");
    assert!(
        message.starts_with("`group`: group `pay` would be one group name more than the 1024"),
        "{message}"
    );
    let ConfigError::Group { group, .. } = loaded.too_many("search") else {
        panic!()
    };
    assert_eq!(group, "search");
}
