//! The README's "tower, axum, reqwest" snippets are compiled code: each one appears, line for
//! line, in a doctest of `fusebox::tower` or in a `tests/tower_*.rs` file.

use std::path::Path;

/// The lines of a source file as a reader sees them in docs: doc-comment markers removed, hidden
/// doctest lines (`# …`) dropped, indentation trimmed.
fn visible_lines(source: &str) -> Vec<String> {
    source
        .lines()
        .map(|line| {
            let line = line.trim_start();
            line.strip_prefix("//! ")
                .or_else(|| line.strip_prefix("/// "))
                .or_else(|| line.strip_prefix("//!"))
                .unwrap_or(line)
                .trim()
        })
        .filter(|line| !line.starts_with("# ") && *line != "#")
        .map(str::to_owned)
        .collect()
}

fn snippets(readme: &str) -> Vec<Vec<String>> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("tower, axum, reqwest\n"))
        .expect("the README has a \"tower, axum, reqwest\" section");
    let mut out = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match (&mut current, line.trim()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(_), "```") => out.push(current.take().unwrap()),
            (Some(lines), text) => lines.push(text.to_owned()),
            (None, _) => {}
        }
    }
    out.into_iter()
        .map(|lines| lines.into_iter().filter(|l| !l.is_empty()).collect())
        .collect()
}

#[test]
fn every_readme_tower_snippet_is_compiled_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut sources = Vec::new();
    for dir in [root.join("runtime/src/tower"), root.join("tests")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let ours = dir.ends_with("tower") || name.starts_with("tower_");
            if ours && name.ends_with(".rs") && name != "tower_readme.rs" {
                let text = std::fs::read_to_string(&path).unwrap();
                let lines: Vec<String> = visible_lines(&text)
                    .into_iter()
                    .filter(|l| !l.is_empty())
                    .collect();
                sources.push((name, lines));
            }
        }
    }
    let found = snippets(&readme);
    assert!(
        found.len() >= 4,
        "the section shows the layer, refusals, axum, reqwest and the order"
    );
    for snippet in found {
        let compiled = sources.iter().any(|(_, lines)| {
            lines
                .windows(snippet.len())
                .any(|w| w == snippet.as_slice())
        });
        assert!(
            compiled,
            "README snippet not found in any doctest of `fusebox::tower` or tests/tower_*.rs; \
             update the README to the compiled code:\n{}",
            snippet.join("\n")
        );
    }
}
