//! The private API the expansion calls holds nothing it does not call: every public item of
//! `runtime/src/__private.rs` is named by the code generators of `macros/src`, and every public
//! method of `Site` (literal keys) and of `DynSite` (dynamic keys) is called by a real expansion
//! in `macros/tests/snapshots/`.
//! Items that are only named in the signatures of those items (trait bounds, return types) are
//! listed in [`IN_SIGNATURES`] with the item that needs them.

use std::path::{Path, PathBuf};

/// Public items of `__private` the expansion never names, each with the item of `__private`
/// whose signature names it (so it must stay reachable).
const IN_SIGNATURES: [(&str, &str); 16] = [
    ("Chaos", "chaos_admit"),
    ("DeclaredSite", "Declared"),
    ("RawPermit", "Permitted"),
    ("Permitted", "permit_succeeded"),
    ("SitePermit", "Site"),
    ("NoPushback", "PushbackOf"),
    ("AttemptLimit", "run_attempts"),
    ("AttemptBudget", "run_attempts"),
    ("RegistryRef", "registry_of"),
    ("FromRejection", "error_from_rejection"),
    ("FallbackFn", "call_fallback"),
    ("ViaFn", "FallbackFn"),
    ("NoFallback", "FallbackFn"),
    ("NotAFallback", "FallbackFn"),
    ("Prepend", "prepend_arg"),
    ("AsyncFallback", "AwaitSyncFallback"),
];

/// The workspace's root: the suite is its `tests/` package.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the suite lives in the workspace")
        .to_path_buf()
}

/// The text of `path` without its comment lines.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", path.display()));
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `.rs` files under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier `text` starts with (after leading blanks).
fn ident(text: &str) -> &str {
    let text = text.trim_start();
    let end = text.find(|c| !is_ident(c)).unwrap_or(text.len());
    &text[..end]
}

/// The names a module's top-level `pub` items (`pub fn`, `pub trait`, `pub struct`, `pub use`,
/// `pub const fn`) give, in order.
fn public_names(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("\npub ") {
        rest = &rest[at + "\npub ".len()..];
        let item = rest.trim_start_matches("const ");
        if let Some(used) = item.strip_prefix("use ") {
            let statement = &used[..used.find(';').expect("a `use` ends with `;`")];
            let list = match statement.find('{') {
                Some(open) => &statement[open + 1..statement.rfind('}').expect("a closed group")],
                None => statement,
            };
            for path in list.split(',').filter(|path| !path.trim().is_empty()) {
                let path = path.trim();
                let name = match path.split_once(" as ") {
                    Some((_, alias)) => alias.trim(),
                    None => path.rsplit("::").next().expect("a path"),
                };
                names.push(name.to_string());
            }
        } else {
            for keyword in ["fn ", "trait ", "struct ", "enum ", "type ", "mod "] {
                if let Some(named) = item.strip_prefix(keyword) {
                    names.push(ident(named).to_string());
                }
            }
        }
    }
    names
}

/// True when `code` names `name` through a private path (`#private::name`,
/// `#private_at::{…, name, …}`) or quotes it bare (`quote!(name)`, joined to such a path).
fn generator_names(code: &str, name: &str) -> bool {
    let mut rest = code;
    while let Some(at) = rest.find("#private") {
        rest = &rest[at + "#private".len()..];
        let after = rest.trim_start_matches(is_ident).trim_start();
        let Some(path) = after.strip_prefix("::") else {
            continue;
        };
        let path = path.trim_start();
        if let Some(group) = path.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            if group.split(',').any(|item| ident(item) == name) {
                return true;
            }
        } else if ident(path) == name {
            return true;
        }
    }
    code.match_indices("quote!(")
        .any(|(at, _)| ident(&code[at + "quote!(".len()..]) == name)
}

/// True when `snapshot` calls `method` on the site (`__FUSEBOX_SITE.method`) or through
/// `ty::method` (`Site::method`, `DynSite::method`).
fn snapshot_calls(snapshot: &str, ty: &str, method: &str) -> bool {
    let on_site = snapshot.match_indices("__FUSEBOX_SITE").any(|(at, _)| {
        let after = snapshot[at + "__FUSEBOX_SITE".len()..].trim_start();
        after
            .strip_prefix('.')
            .is_some_and(|call| ident(call) == method)
    });
    let path = format!("::{ty}::");
    let through_type = snapshot
        .match_indices(&path)
        .any(|(at, _)| ident(&snapshot[at + path.len()..]) == method);
    on_site || through_type
}
#[test]
fn every_public_item_of_private_is_named_by_the_expansion() {
    let private = code(&root().join("runtime/src/__private.rs"));
    let names = public_names(&private);
    for required in [
        "Site",
        "permit_succeeded",
        "run_attempts",
        "inventory",
        "AwaitFallback",
    ] {
        assert!(
            names.iter().any(|name| name == required),
            "`{required}` not found among the public items of `__private.rs`: {names:?}"
        );
    }
    let generators: Vec<String> = rust_files(&root().join("macros/src"))
        .iter()
        .filter(|path| path.file_name().is_some_and(|file| file != "tests.rs"))
        .map(|path| code(path))
        .collect();
    for (item, needed_by) in IN_SIGNATURES {
        assert!(
            names.iter().any(|name| name == item) && names.iter().any(|name| name == needed_by),
            "`IN_SIGNATURES` lists `{item}` for `{needed_by}`, but `__private.rs` lacks one of \
             them: remove the entry"
        );
    }
    let unnamed: Vec<&String> = names
        .iter()
        .filter(|name| !IN_SIGNATURES.iter().any(|(item, _)| item == name))
        .filter(|name| !generators.iter().any(|code| generator_names(code, name)))
        .collect();
    assert!(
        unnamed.is_empty(),
        "`__private.rs` exports items the expansion never names: {unnamed:?}; remove them, or \
         list them in `IN_SIGNATURES` when another item's signature names them"
    );
}

/// The public methods of `impl ty` in site.rs; `ty`'s call sites are the snapshots that build
/// one (`ty::new(`), whose `static` is `__FUSEBOX_SITE` in both kinds of expansion.
fn uncalled_methods(ty: &str) -> Vec<String> {
    let site = code(&root().join("runtime/src/call/site.rs"));
    let header = format!("\nimpl {ty} {{");
    let start = site
        .find(&header)
        .unwrap_or_else(|| panic!("`impl {ty}` in site.rs"));
    let body = &site[start..];
    let body = &body[..body
        .find("\n}\n")
        .unwrap_or_else(|| panic!("the end of `impl {ty}`"))];
    let methods: Vec<String> = body
        .match_indices("pub ")
        .filter_map(|(at, _)| {
            let item = body[at + "pub ".len()..].trim_start_matches("const ");
            item.strip_prefix("fn ")
                .map(|named| ident(named).to_string())
        })
        .collect();
    assert!(
        methods.iter().any(|method| method == "new"),
        "`{ty}::new` not found in site.rs: {methods:?}"
    );
    let built = format!("::{ty}::new(");
    let snapshots: Vec<String> = rust_files(&root().join("macros/tests/snapshots"))
        .iter()
        .map(|path| code(path))
        .filter(|snapshot| snapshot.contains(&built))
        .collect();
    assert!(!snapshots.is_empty(), "no snapshot builds a `{ty}`");
    methods
        .into_iter()
        .filter(|method| !snapshots.iter().any(|s| snapshot_calls(s, ty, method)))
        .collect()
}

#[test]
fn every_public_method_of_site_is_called_by_an_expansion() {
    let uncalled = uncalled_methods("Site");
    assert!(
        uncalled.is_empty(),
        "`Site` has public methods no expansion calls: {uncalled:?}; remove them (they are \
         private API), or add a snapshot of the expansion that calls them"
    );
}

#[test]
fn every_public_method_of_dyn_site_is_called_by_an_expansion() {
    let uncalled = uncalled_methods("DynSite");
    assert!(
        uncalled.is_empty(),
        "`DynSite` has public methods no expansion calls: {uncalled:?}; remove them (they are \
         private API), or add a snapshot of the expansion that calls them"
    );
}
