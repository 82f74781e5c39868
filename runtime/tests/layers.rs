//! The import rules of ARCHITECTURE.md, checked on the source, so that no two files come to
//! import each other: in `runtime/src`, `breaker/` names nothing of the modules built on it and
//! `groups/` names no breaker; in `window/` and in fusebox-redis (`integrations/redis/src`) each
//! file imports from its siblings only those listed before it.

use std::path::Path;

/// fusebox-redis's sources, as a folder of `runtime/src`.
const REDIS_DIR: &str = "../../integrations/redis/src";

/// The files of fusebox-redis, each importing from its siblings only those before it.
const REDIS: [&str; 11] = [
    "op", "conn", "view", "link", "script", "report", "task", "admit", "cached", "store", "builder",
];

/// The files of `window/`, each importing from its siblings only those before it.
const WINDOW: [&str; 4] = ["stripes", "count", "time", "tests"];

/// The modules built on `breaker/`, which none of its files may name.
const ABOVE_BREAKER: [&str; 4] = ["store", "registry", "call", "__private"];

/// The source of `src/{file}`, without its comment lines.
fn code(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", path.display()));
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first path segment of every import through the parent module (`super::name…`, or
/// `{parent}name…`: `crate::window::`, or `crate::` in a crate's top folder), including each path
/// of a `super::{a::X, b}` group.
fn from_parent(code: &str, parent: &str) -> Vec<String> {
    let code = code.replace(parent, "super::");
    let mut names = Vec::new();
    for (at, _) in code.match_indices("super::") {
        let rest = &code[at + "super::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            names.push(first_segment(rest));
            continue;
        };
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    names.push(first_segment(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(first_segment(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    names
}

/// The identifier `path` starts with.
fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every file of `dir` imports, of its siblings (reached through `parent`), only those listed
/// before it in `order`.
fn imports_only_earlier_files(dir: &str, parent: &str, order: &[&str]) {
    for (i, file) in order.iter().enumerate() {
        let imported = from_parent(&code(&format!("{dir}/{file}.rs")), parent);
        for later in &order[i + 1..] {
            assert!(
                !imported.iter().any(|name| name == later),
                "`{dir}/{file}.rs` imports from `{dir}/{later}.rs`, which comes after it: move what \
                 both need into the earlier file (ARCHITECTURE.md lists the order)"
            );
        }
    }
}

#[test]
fn redis_files_import_only_the_files_before_them() {
    imports_only_earlier_files(REDIS_DIR, "crate::", &REDIS);
}

#[test]
fn window_files_import_only_the_files_before_them() {
    imports_only_earlier_files("window", "crate::window::", &WINDOW);
}

#[test]
fn every_file_of_the_listed_folders_is_in_its_list() {
    for (dir, order) in [(REDIS_DIR, &REDIS[..]), ("window", &WINDOW)] {
        let dir_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
        for entry in std::fs::read_dir(&dir_path).expect("the folder exists") {
            let name = entry.expect("a readable entry").file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".rs")
                && stem != "mod"
                && stem != "lib"
            {
                assert!(
                    order.contains(&stem),
                    "`{dir}/{name}` is in no place of the `{dir}` order of this test: add it"
                );
            }
        }
    }
}

/// The source of every `.rs` file of `src/{dir}`, without comment lines, with its name.
fn files_of(dir: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&path).expect("the folder exists") {
        let name = entry.expect("a readable entry").file_name();
        let name = name.to_string_lossy().into_owned();
        if name.ends_with(".rs") {
            let code = code(&format!("{dir}/{name}"));
            files.push((name, code));
        }
    }
    files
}

#[test]
fn the_breaker_names_nothing_built_on_it() {
    for (name, code) in files_of("breaker") {
        for above in ABOVE_BREAKER {
            assert!(
                !code.contains(&format!("crate::{above}")),
                "`breaker/{name}` names `crate::{above}`, which is built on the breaker: reach it \
                 through a seam the breaker defines (as `breaker/seam.rs`'s `SharedKey`)"
            );
        }
    }
}

#[test]
fn the_groups_name_no_breaker() {
    for (name, code) in files_of("groups") {
        for breaker in ["crate::breaker", "Circuit"] {
            assert!(
                !code.contains(breaker),
                "`groups/{name}` names `{breaker}`: ask the member's breaker through \
                 `MemberBreaker` (`groups/evaluation.rs`), which the breaker implements"
            );
        }
    }
}

#[test]
fn a_sibling_import_is_seen_in_every_form() {
    let code = "use super::{Degrade, link::{Client, SharedKey}};\nuse super::script::call;\n\
                let x = crate::report::send(1);";
    assert_eq!(
        from_parent(code, "crate::"),
        ["Degrade", "link", "script", "report"]
    );
}
