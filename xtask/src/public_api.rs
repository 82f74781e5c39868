//! `cargo xtask public-api`: writes the public API of the published library crates, one item per
//! line, to `<crate dir>/public-api.txt`, so a change to the surface shows in review;
//! `cargo xtask public-api --check` fails when a committed file is stale.
//!
//! The lines come from rustdoc's JSON output (`--output-format json`, unstable: the stable
//! toolchain runs it with `RUSTC_BOOTSTRAP=1`), with every feature on. Items hidden from the docs
//! (`#[doc(hidden)]`, the expansion's private module) are not listed. An item re-exported from a
//! sibling crate is listed as a `pub use` of its source path; that crate's own file lists it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use serde_json::Value;

/// The crates whose API is kept: (package, directory in the workspace).
const CRATES: [(&str, &str); 8] = [
    ("fusebox", "runtime"),
    ("fusebox-policy", "policy"),
    ("fusebox-macros", "macros"),
    ("fusebox-replay", "replay"),
    ("fusebox-tower", "integrations/tower"),
    ("fusebox-reqwest", "integrations/reqwest"),
    ("fusebox-redis", "integrations/redis"),
    ("fusebox-admin", "integrations/admin"),
];

/// The crates whose types the core's public API must not name: each is pre-1.0 or belongs to
/// an integration crate, so a release of one would otherwise be a breaking release of
/// `fusebox`.
const FOREIGN_TO_CORE: [&str; 10] = [
    "tower_service::",
    "tower_layer::",
    "tower::",
    "http::",
    "axum::",
    "axum_core::",
    "reqwest::",
    "reqwest_middleware::",
    "serde_json::",
    "redis::",
];

/// The file each crate's directory holds.
const FILE: &str = "public-api.txt";

/// The command that refreshes the files, for messages.
const REFRESH: &str = "cargo xtask public-api";

pub(crate) fn run(args: &[String]) -> ExitCode {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("usage: {REFRESH} [--check]");
            return ExitCode::FAILURE;
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace");
    let mut stale = Vec::new();
    for (package, dir) in CRATES {
        let listing = match listing(root, package) {
            Ok(listing) => listing,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        };
        if package == "fusebox" {
            let foreign: Vec<&str> = listing
                .lines()
                .filter(|line| FOREIGN_TO_CORE.iter().any(|name| line.contains(name)))
                .collect();
            if !foreign.is_empty() {
                eprintln!(
                    "error: the public API of `fusebox` names a type of an integration's crate; \
                     move the item to that integration (`integrations/`):\n  {}",
                    foreign.join("\n  ")
                );
                return ExitCode::FAILURE;
            }
        }
        let path = root.join(dir).join(FILE);
        let text = format!(
            "# The public API of `{package}` (every feature), one item per line, from rustdoc's \
             JSON.\n# Written by `{REFRESH}`; `.ci/run` checks it with `{REFRESH} --check`.\n{listing}"
        );
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            println!("{}: up to date", path.display());
        } else if check {
            stale.push(format!("{dir}/{FILE}"));
            print_diff(&current, &text);
        } else if let Err(e) = std::fs::write(&path, text) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            println!("{}: written", path.display());
        }
    }
    if stale.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "error: the public API changed and {} not say so; run `{REFRESH}` and commit the result",
            if stale.len() == 1 {
                format!("`{}` does", stale[0])
            } else {
                format!("`{}` do", stale.join("`, `"))
            }
        );
        ExitCode::FAILURE
    }
}

/// The lines only one of `old` and `new` has, marked `-` and `+`.
fn print_diff(old: &str, new: &str) {
    let old: std::collections::BTreeSet<&str> = old.lines().collect();
    let new: std::collections::BTreeSet<&str> = new.lines().collect();
    for line in old.difference(&new) {
        eprintln!("- {line}");
    }
    for line in new.difference(&old) {
        eprintln!("+ {line}");
    }
}

/// The public items of `package`, sorted, one per line.
fn listing(root: &Path, package: &str) -> Result<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let status = Command::new(&cargo)
        .current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .args(["rustdoc", "-p", package, "--all-features", "--lib", "--"])
        .args(["-Z", "unstable-options", "--output-format", "json"])
        .status()
        .map_err(|e| format!("cannot run `{cargo} rustdoc`: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo rustdoc -p {package}` failed"));
    }
    let json = target
        .join("doc")
        .join(format!("{}.json", package.replace('-', "_")));
    let text = std::fs::read_to_string(&json)
        .map_err(|e| format!("cannot read `{}`: {e}", json.display()))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("`{}`: {e}", json.display()))?;
    let mut lister = Lister {
        doc: &doc,
        public: std::collections::HashMap::new(),
        lines: Vec::new(),
    };
    let root_id = id_of(&doc["root"]);
    lister.names(&root_id, "", None);
    lister.item(&root_id, "", None);
    // Grouped by the item they belong to (a type, its members, then its impls).
    lister.lines.sort_by_cached_key(|line| sort_key(line));
    lister.lines.dedup();
    Ok(lister.lines.iter().fold(String::new(), |mut out, line| {
        let _ = writeln!(out, "{line}");
        out
    }))
}

/// An id of rustdoc's JSON as the index's key.
fn id_of(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The elements of an array (none for anything else).
fn each(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// The strings of an array of strings.
fn strings(value: &Value) -> Vec<&str> {
    each(value).filter_map(Value::as_str).collect()
}

/// `parts` joined by `separator` between `open` and `close`; nothing when there are none.
fn wrapped(parts: &[String], open: &str, separator: &str, close: &str) -> String {
    if parts.is_empty() {
        String::new()
    } else {
        format!("{open}{}{close}", parts.join(separator))
    }
}

/// `&'a mut referent` as the `borrowed_ref` type `borrowed` says.
fn reference(borrowed: &Value, referent: &str) -> String {
    let lifetime = borrowed["lifetime"]
        .as_str()
        .map_or(String::new(), |l| format!("{l} "));
    let mutable = if borrowed["is_mutable"].as_bool() == Some(true) {
        "mut "
    } else {
        ""
    };
    format!("&{lifetime}{mutable}{referent}")
}

/// The first (only) key of a tagged value and what it holds.
fn tagged(value: &Value) -> (&str, &Value) {
    match value {
        Value::Object(map) => map
            .iter()
            .next()
            .map_or(("", &Value::Null), |(k, v)| (k.as_str(), v)),
        Value::String(s) => (s.as_str(), &Value::Null),
        _ => ("", &Value::Null),
    }
}

/// What a line sorts by: the path of its item (an impl: of the type it is for), then the line.
fn sort_key(line: &str) -> String {
    let item = unattributed(line);
    if let Some(rest) = item.strip_prefix("impl") {
        let head = rest.split(": type ").next().unwrap_or(rest);
        let head = head.split(" where ").next().unwrap_or(head);
        let ty = head.rsplit(" for ").next().unwrap_or(head);
        return format!("{ty}\u{1}{item}");
    }
    const KEYWORDS: [&str; 13] = [
        "pub", "const", "async", "unsafe", "fn", "struct", "enum", "trait", "type", "mod",
        "static", "use", "macro",
    ];
    let path = item
        .split(' ')
        .find(|word| !KEYWORDS.contains(word))
        .unwrap_or(item);
    let path = path.split(['(', '<', '{']).next().unwrap_or(path);
    format!("{}\u{0}{item}", path.trim_end_matches(':'))
}

/// `line` without its leading attributes (`#[must_use] `, …).
fn unattributed(line: &str) -> &str {
    let mut rest = line;
    while let Some(after) = rest.strip_prefix("#[") {
        rest = after.split_once("] ").map_or(after, |(_, tail)| tail);
    }
    rest
}

struct Lister<'d> {
    doc: &'d Value,
    /// The public path of each of the crate's own items, by id (the shortest, when re-exported
    /// several times), to name them in signatures.
    public: std::collections::HashMap<String, String>,
    lines: Vec<String>,
}

impl<'d> Lister<'d> {
    fn get(&self, id: &str) -> Option<&'d Value> {
        let doc: &'d Value = self.doc;
        doc["index"].get(id)
    }

    /// `#[must_use]` and `#[non_exhaustive]` of an item, as a prefix.
    fn attrs(item: &Value) -> String {
        let mut out = String::new();
        for attr in each(&item["attrs"]) {
            match tagged(attr).0 {
                "must_use" => out.push_str("#[must_use] "),
                "non_exhaustive" => out.push_str("#[non_exhaustive] "),
                _ => {}
            }
        }
        out
    }

    fn push(&mut self, item: &Value, line: String) {
        let line = format!("{}{line}", Self::attrs(item));
        let line = match item["deprecation"].is_null() {
            true => line,
            false => format!("#[deprecated] {line}"),
        };
        self.lines.push(line);
    }

    /// The item `id` and its path under `path` (its parent's), named `name` when re-exported.
    fn at(&self, id: &str, path: &str, name: Option<&str>) -> Option<(&'d Value, String)> {
        let item = self.get(id)?;
        let name = name.or_else(|| item["name"].as_str()).unwrap_or("");
        let full = if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}::{name}")
        };
        Some((item, full))
    }

    /// The canonical path rustdoc gives the item `id` (another crate's, or a private one).
    fn canonical(&self, id: &str) -> Option<String> {
        let parts = self.doc["paths"][id]["path"].as_array()?;
        let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
        Some(parts.join("::"))
    }

    /// Records the public path of the item `id` (under `path`, named `name` when re-exported)
    /// and of everything a module or a re-export reaches from it.
    fn names(&mut self, id: &str, path: &str, name: Option<&str>) {
        let Some((item, full)) = self.at(id, path, name) else {
            return;
        };
        let (kind, inner) = tagged(&item["inner"]);
        match kind {
            "use" => {
                let target = id_of(&inner["id"]);
                if inner["is_glob"].as_bool() == Some(true) {
                    if let Some(module) = self.get(&target) {
                        for child in each(&module["inner"]["module"]["items"]) {
                            self.names(&id_of(child), path, None);
                        }
                    }
                } else {
                    self.names(&target, path, inner["name"].as_str());
                }
                return;
            }
            "module" => {
                for child in each(&inner["items"]) {
                    self.names(&id_of(child), &full, None);
                }
            }
            _ => {}
        }
        let shorter = self
            .public
            .get(id)
            .is_none_or(|known| (known.len(), known.as_str()) > (full.len(), full.as_str()));
        if shorter {
            self.public.insert(id.to_owned(), full);
        }
    }

    /// Lists the item `id` under `path` (its parent's path), named `name` when re-exported.
    fn item(&mut self, id: &str, path: &str, name: Option<&str>) {
        let Some((item, full)) = self.at(id, path, name) else {
            return;
        };
        let (kind, inner) = tagged(&item["inner"]);
        match kind {
            "module" => {
                self.push(item, format!("pub mod {full}"));
                for child in each(&inner["items"]) {
                    self.item(&id_of(child), &full, None);
                }
            }
            "use" => self.reexport(inner, path),
            "struct" => self.structure(item, inner, &full),
            "enum" => self.enumeration(item, inner, &full),
            "trait" => self.trait_items(item, inner, &full),
            "function" => {
                let line = self.function(inner, &full);
                self.push(item, line);
            }
            "constant" => {
                let line = format!("pub const {full}: {}", self.ty(&inner["type"]));
                self.push(item, line);
            }
            "static" => {
                let line = format!("pub static {full}: {}", self.ty(&inner["type"]));
                self.push(item, line);
            }
            "type_alias" => {
                let line = format!(
                    "pub type {full}{} = {}",
                    self.generics(&inner["generics"]),
                    self.ty(&inner["type"])
                );
                self.push(item, line);
            }
            "proc_macro" => self.push(item, format!("pub macro {full}")),
            "macro" => self.push(item, format!("pub macro_rules! {full}")),
            other => self.push(item, format!("pub {other} {full}")),
        }
    }

    /// A `pub use`: the item itself when this crate has it, else the source path.
    fn reexport(&mut self, inner: &Value, path: &str) {
        let name = inner["name"].as_str().unwrap_or("");
        let target = id_of(&inner["id"]);
        let glob = inner["is_glob"].as_bool().unwrap_or(false);
        if let Some(item) = self.get(&target) {
            if glob {
                let items = &item["inner"]["module"]["items"];
                for child in each(items) {
                    self.item(&id_of(child), path, None);
                }
            } else {
                self.item(&target, path, Some(name));
            }
            return;
        }
        let source = self
            .canonical(&target)
            .unwrap_or_else(|| inner["source"].as_str().unwrap_or("").to_owned());
        let line = if glob {
            format!("pub use {path}::* = {source}::*")
        } else {
            format!("pub use {path}::{name} = {source}")
        };
        self.lines.push(line);
    }

    fn structure(&mut self, item: &Value, inner: &Value, full: &str) {
        let generics = self.generics(&inner["generics"]);
        let (kind, fields) = tagged(&inner["kind"]);
        let line = match kind {
            "tuple" => format!(
                "pub struct {full}{generics}({})",
                self.tuple_fields(fields, "pub ")
            ),
            _ => format!("pub struct {full}{generics}"),
        };
        self.push(item, line);
        if kind == "plain" {
            self.fields(&fields["fields"], full);
        }
        self.impls(&inner["impls"], full);
    }

    /// The types of a tuple struct's or variant's fields, each after `visibility` (`_`: a field
    /// hidden from the docs).
    fn tuple_fields(&self, fields: &Value, visibility: &str) -> String {
        let fields: Vec<String> = each(fields)
            .map(|field| match self.get(&id_of(field)) {
                Some(field) => format!("{visibility}{}", self.ty(&field["inner"]["struct_field"])),
                None => "_".to_owned(),
            })
            .collect();
        fields.join(", ")
    }

    fn fields(&mut self, fields: &Value, path: &str) {
        for field in each(fields) {
            if let Some(field) = self.get(&id_of(field)) {
                let line = format!(
                    "pub {path}::{}: {}",
                    field["name"].as_str().unwrap_or(""),
                    self.ty(&field["inner"]["struct_field"])
                );
                self.push(field, line);
            }
        }
    }

    fn enumeration(&mut self, item: &Value, inner: &Value, full: &str) {
        let line = format!("pub enum {full}{}", self.generics(&inner["generics"]));
        self.push(item, line);
        for variant in each(&inner["variants"]) {
            let Some(variant) = self.get(&id_of(variant)) else {
                continue;
            };
            let name = format!("{full}::{}", variant["name"].as_str().unwrap_or(""));
            let (kind, fields) = tagged(&variant["inner"]["variant"]["kind"]);
            match kind {
                "tuple" => {
                    let line = format!("pub {name}({})", self.tuple_fields(fields, ""));
                    self.push(variant, line);
                }
                "struct" => {
                    self.push(variant, format!("pub {name} {{ .. }}"));
                    self.fields(&fields["fields"], &name);
                }
                _ => self.push(variant, format!("pub {name}")),
            }
        }
        self.impls(&inner["impls"], full);
    }

    fn trait_items(&mut self, item: &Value, inner: &Value, full: &str) {
        let bounds = self.bounds(&inner["bounds"]);
        let supertraits = if bounds.is_empty() {
            String::new()
        } else {
            format!(": {bounds}")
        };
        let line = format!(
            "pub trait {full}{}{supertraits}",
            self.generics(&inner["generics"])
        );
        self.push(item, line);
        for member in each(&inner["items"]) {
            self.member(&id_of(member), full);
        }
    }

    /// An associated item of a trait or an inherent impl, under `path`.
    fn member(&mut self, id: &str, path: &str) {
        let Some(item) = self.get(id) else {
            return;
        };
        let full = format!("{path}::{}", item["name"].as_str().unwrap_or(""));
        let (kind, inner) = tagged(&item["inner"]);
        let line = match kind {
            "function" => self.function(inner, &full),
            "assoc_const" => format!("pub const {full}: {}", self.ty(&inner["type"])),
            "assoc_type" => {
                let bounds = self.bounds(&inner["bounds"]);
                match inner["type"].is_null() {
                    true if bounds.is_empty() => format!("pub type {full}"),
                    true => format!("pub type {full}: {bounds}"),
                    false => format!("pub type {full} = {}", self.ty(&inner["type"])),
                }
            }
            other => format!("pub {other} {full}"),
        };
        self.push(item, line);
    }

    /// The impls of a type: inherent impls' public items, and every trait impl but the blanket
    /// ones (with their associated types).
    fn impls(&mut self, impls: &Value, full: &str) {
        for id in each(impls) {
            let Some(item) = self.get(&id_of(id)) else {
                continue;
            };
            let inner = &item["inner"]["impl"];
            if !inner["blanket_impl"].is_null() {
                continue;
            }
            let generics = self.generics(&inner["generics"]);
            let for_type = self.ty(&inner["for"]);
            if inner["trait"].is_null() {
                for member in each(&inner["items"]) {
                    let public = self
                        .get(&id_of(member))
                        .is_some_and(|member| member["visibility"].as_str() == Some("public"));
                    if public {
                        self.member(&id_of(member), full);
                    }
                }
                continue;
            }
            let negative = if inner["is_negative"].as_bool() == Some(true) {
                "!"
            } else {
                ""
            };
            let head = format!(
                "impl{generics} {negative}{} for {for_type}{}",
                self.path(&inner["trait"]),
                self.where_clause(&inner["generics"])
            );
            self.lines.push(head.clone());
            for member in each(&inner["items"]) {
                let Some(member) = self.get(&id_of(member)) else {
                    continue;
                };
                if let ("assoc_type", assoc) = tagged(&member["inner"]) {
                    let line = format!(
                        "{head}: type {} = {}",
                        member["name"].as_str().unwrap_or(""),
                        self.ty(&assoc["type"])
                    );
                    self.lines.push(line);
                }
            }
        }
    }

    fn function(&self, inner: &Value, full: &str) -> String {
        let header = &inner["header"];
        let mut out = String::from("pub ");
        for (flag, word) in [
            ("is_const", "const "),
            ("is_async", "async "),
            ("is_unsafe", "unsafe "),
        ] {
            if header[flag].as_bool() == Some(true) {
                out.push_str(word);
            }
        }
        let sig = if inner["sig"].is_null() {
            &inner["decl"]
        } else {
            &inner["sig"]
        };
        let _ = write!(
            out,
            "fn {full}{}({})",
            self.generics(&inner["generics"]),
            self.inputs(&sig["inputs"])
        );
        if !sig["output"].is_null() {
            let _ = write!(out, " -> {}", self.ty(&sig["output"]));
        }
        out.push_str(&self.where_clause(&inner["generics"]));
        out
    }

    fn inputs(&self, inputs: &Value) -> String {
        let args: Vec<String> = each(inputs)
            .map(|pair| {
                let name = pair[0].as_str().unwrap_or("_");
                let ty = &pair[1];
                if name == "self" {
                    if ty["generic"].as_str() == Some("Self") {
                        return "self".to_owned();
                    }
                    let borrowed = &ty["borrowed_ref"];
                    if borrowed["type"]["generic"].as_str() == Some("Self") {
                        return reference(borrowed, "self");
                    }
                }
                format!("{name}: {}", self.ty(ty))
            })
            .collect();
        args.join(", ")
    }

    /// `<…>` of a generics block (synthetic parameters, from `impl Trait` arguments, left out).
    fn generics(&self, generics: &Value) -> String {
        let params: Vec<String> = each(&generics["params"])
            .filter_map(|param| {
                let name = param["name"].as_str().unwrap_or("");
                let (kind, inner) = tagged(&param["kind"]);
                match kind {
                    "lifetime" => {
                        let outlives = strings(&inner["outlives"]);
                        Some(if outlives.is_empty() {
                            name.to_owned()
                        } else {
                            format!("{name}: {}", outlives.join(" + "))
                        })
                    }
                    "type" => {
                        if inner["is_synthetic"].as_bool() == Some(true) {
                            return None;
                        }
                        let mut out = name.to_owned();
                        let bounds = self.bounds(&inner["bounds"]);
                        if !bounds.is_empty() {
                            let _ = write!(out, ": {bounds}");
                        }
                        if !inner["default"].is_null() {
                            let _ = write!(out, " = {}", self.ty(&inner["default"]));
                        }
                        Some(out)
                    }
                    "const" => Some(format!("const {name}: {}", self.ty(&inner["type"]))),
                    _ => Some(name.to_owned()),
                }
            })
            .collect();
        wrapped(&params, "<", ", ", ">")
    }

    fn where_clause(&self, generics: &Value) -> String {
        let predicates: Vec<String> = each(&generics["where_predicates"])
            .map(|predicate| {
                let (kind, inner) = tagged(predicate);
                match kind {
                    "bound_predicate" => format!(
                        "{}{}: {}",
                        self.higher_ranked(&inner["generic_params"]),
                        self.ty(&inner["type"]),
                        self.bounds(&inner["bounds"])
                    ),
                    "lifetime_predicate" => {
                        let outlives = strings(&inner["outlives"]);
                        format!(
                            "{}: {}",
                            inner["lifetime"].as_str().unwrap_or(""),
                            outlives.join(" + ")
                        )
                    }
                    "eq_predicate" => {
                        format!("{} == {}", self.ty(&inner["lhs"]), self.term(&inner["rhs"]))
                    }
                    other => other.to_owned(),
                }
            })
            .collect();
        wrapped(&predicates, " where ", ", ", "")
    }

    fn higher_ranked(&self, params: &Value) -> String {
        let names: Vec<&str> = each(params)
            .filter_map(|param| param["name"].as_str())
            .collect();
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        wrapped(&names, "for<", ", ", "> ")
    }

    fn bounds(&self, bounds: &Value) -> String {
        let bounds: Vec<String> = each(bounds)
            .map(|bound| {
                let (kind, inner) = tagged(bound);
                match kind {
                    "trait_bound" => {
                        let modifier = match inner["modifier"].as_str() {
                            Some("maybe") => "?",
                            Some("maybe_const") => "~const ",
                            _ => "",
                        };
                        format!(
                            "{}{modifier}{}",
                            self.higher_ranked(&inner["generic_params"]),
                            self.path(&inner["trait"])
                        )
                    }
                    "outlives" => inner.as_str().unwrap_or("").to_owned(),
                    "use" => "use<..>".to_owned(),
                    other => other.to_owned(),
                }
            })
            .collect();
        bounds.join(" + ")
    }

    /// A path with its arguments, named by its canonical path when rustdoc knows it.
    fn path(&self, path: &Value) -> String {
        let id = id_of(&path["id"]);
        if let Some(public) = self.public.get(&id) {
            return format!("{public}{}", self.args(&path["args"]));
        }
        let name = self
            .canonical(&id)
            .unwrap_or_else(|| path["path"].as_str().unwrap_or("").to_owned());
        format!("{name}{}", self.args(&path["args"]))
    }

    fn args(&self, args: &Value) -> String {
        let (kind, inner) = tagged(args);
        match kind {
            "angle_bracketed" => {
                let mut parts: Vec<String> = each(&inner["args"])
                    .map(|arg| {
                        let (kind, value) = tagged(arg);
                        match kind {
                            "lifetime" => value.as_str().unwrap_or("").to_owned(),
                            "type" => self.ty(value),
                            "const" => value["expr"].as_str().unwrap_or("_").to_owned(),
                            _ => "_".to_owned(),
                        }
                    })
                    .collect();
                for constraint in each(&inner["constraints"]) {
                    let name = constraint["name"].as_str().unwrap_or("");
                    let (kind, binding) = tagged(&constraint["binding"]);
                    parts.push(match kind {
                        "equality" => format!("{name} = {}", self.term(binding)),
                        _ => format!("{name}: {}", self.bounds(binding)),
                    });
                }
                if parts.is_empty() {
                    String::new()
                } else {
                    format!("<{}>", parts.join(", "))
                }
            }
            "parenthesized" => {
                let inputs: Vec<String> = each(&inner["inputs"]).map(|ty| self.ty(ty)).collect();
                let output = if inner["output"].is_null() {
                    String::new()
                } else {
                    format!(" -> {}", self.ty(&inner["output"]))
                };
                format!("({}){output}", inputs.join(", "))
            }
            _ => String::new(),
        }
    }

    fn term(&self, term: &Value) -> String {
        let (kind, inner) = tagged(term);
        match kind {
            "type" => self.ty(inner),
            "constant" => inner["expr"].as_str().unwrap_or("_").to_owned(),
            _ => "_".to_owned(),
        }
    }

    fn ty(&self, ty: &Value) -> String {
        let (kind, inner) = tagged(ty);
        match kind {
            "resolved_path" => self.path(inner),
            "dyn_trait" => {
                let mut parts: Vec<String> = each(&inner["traits"])
                    .map(|poly| {
                        format!(
                            "{}{}",
                            self.higher_ranked(&poly["generic_params"]),
                            self.path(&poly["trait"])
                        )
                    })
                    .collect();
                if let Some(lifetime) = inner["lifetime"].as_str() {
                    parts.push(lifetime.to_owned());
                }
                format!("dyn {}", parts.join(" + "))
            }
            "generic" | "primitive" => inner.as_str().unwrap_or("").to_owned(),
            "function_pointer" => {
                let sig = if inner["sig"].is_null() {
                    &inner["decl"]
                } else {
                    &inner["sig"]
                };
                let output = if sig["output"].is_null() {
                    String::new()
                } else {
                    format!(" -> {}", self.ty(&sig["output"]))
                };
                format!(
                    "{}fn({}){output}",
                    self.higher_ranked(&inner["generic_params"]),
                    self.inputs(&sig["inputs"])
                )
            }
            "tuple" => {
                let types: Vec<String> = each(inner).map(|ty| self.ty(ty)).collect();
                if types.len() == 1 {
                    format!("({},)", types[0])
                } else {
                    format!("({})", types.join(", "))
                }
            }
            "slice" => format!("[{}]", self.ty(inner)),
            "array" => format!(
                "[{}; {}]",
                self.ty(&inner["type"]),
                inner["len"].as_str().unwrap_or("_")
            ),
            "impl_trait" => format!("impl {}", self.bounds(inner)),
            "infer" => "_".to_owned(),
            "raw_pointer" => format!(
                "*{} {}",
                if inner["is_mutable"].as_bool() == Some(true) {
                    "mut"
                } else {
                    "const"
                },
                self.ty(&inner["type"])
            ),
            "borrowed_ref" => reference(inner, &self.ty(&inner["type"])),
            "qualified_path" => {
                let self_type = self.ty(&inner["self_type"]);
                let name = inner["name"].as_str().unwrap_or("");
                if inner["trait"].is_null() {
                    format!("{self_type}::{name}")
                } else {
                    format!("<{self_type} as {}>::{name}", self.path(&inner["trait"]))
                }
            }
            other => format!("<{other}>"),
        }
    }
}
