//! Reading candidates: a `--policy` string, or a TOML file of `[policies.<name>]` tables.

use super::table::build;
use super::{Candidate, PolicyError};

/// `fusebox::Policy::new()`'s defaults, and, as in the attribute, `consecutive` without
/// `failure_rate` turns the failure-rate rule off; `default_name` names it when no `name:` is given.
///
/// # Errors
///
/// A [`PolicyError`] naming the field when a field is unknown, a value does not parse, or the
/// policy is invalid.
pub fn parse_policy_arg(arg: &str, default_name: &str) -> Result<Candidate, PolicyError> {
    let place = format!("--policy \"{arg}\"");
    let (name, body) = match arg.split_once(':') {
        Some((name, body)) if !name.contains('=') => (name.trim(), body),
        _ => (default_name, arg),
    };
    let mut fields = Vec::new();
    for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        // `retry_budget=20%, 10/s`: the floor after the comma belongs to the budget.
        if let Some(budget) =
            fields
                .last_mut()
                .filter(|(f, _, _): &&mut (String, String, String)| {
                    f == "retry_budget" && !part.contains('=')
                })
        {
            budget.1 = format!("{}, {part}", budget.1);
            continue;
        }
        let Some((field, value)) = part.split_once('=') else {
            return Err(PolicyError {
                place,
                field: Some(part.to_owned()),
                message: "expected `field=value`, e.g. `window=100`".into(),
            });
        };
        fields.push((
            field.trim().to_owned(),
            value.trim().trim_matches('"').to_owned(),
            place.clone(),
        ));
    }
    build(name, &fields, &place)
}

///
/// # Errors
///
/// A [`PolicyError`] naming the file, the candidate and the field when the TOML does not
/// parse, a field is unknown or a policy is invalid.
pub fn parse_policy_file(text: &str, file: &str) -> Result<Vec<Candidate>, PolicyError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| PolicyError {
        place: format!("{file}{}", line_of_span(text, e.span())),
        field: None,
        message: format!("not valid TOML: {}", e.message()),
    })?;
    let whole = |message: String| PolicyError {
        place: file.to_owned(),
        field: None,
        message,
    };
    let policies = match table.get("policies") {
        Some(toml::Value::Table(t)) => t,
        _ => {
            return Err(whole(
                "no `[policies.<name>]` tables; write one per candidate, e.g. `[policies.fast]` then `window = 20`".into(),
            ));
        }
    };
    if let Some(other) = table.keys().find(|k| *k != "policies") {
        return Err(whole(format!(
            "unknown top-level entry `{other}`; candidates go in `[policies.<name>]` tables"
        )));
    }
    let mut out = Vec::new();
    for (name, body) in policies {
        let toml::Value::Table(body) = body else {
            return Err(whole(format!(
                "`policies.{name}` must be a table: `[policies.{name}]`"
            )));
        };
        let mut fields = Vec::new();
        for (field, value) in body {
            let raw = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => other.to_string(),
            };
            let line = find_field_line(text, name, field);
            let at = match line {
                Some(line) => format!("{file} line {line} (`policies.{name}`)"),
                None => format!("{file} (`policies.{name}`)"),
            };
            fields.push((line.unwrap_or(usize::MAX), field.clone(), raw, at));
        }
        // Tables come sorted by name: keep the order the file wrote them in.
        fields.sort_by_key(|f| f.0);
        let fields: Vec<_> = fields.into_iter().map(|(_, f, r, a)| (f, r, a)).collect();
        let header = find_header_line(text, name).unwrap_or(usize::MAX);
        out.push((
            header,
            build(name, &fields, &format!("{file} (`policies.{name}`)"))?,
        ));
    }
    out.sort_by_key(|c| c.0);
    let out: Vec<Candidate> = out.into_iter().map(|(_, c)| c).collect();
    if out.is_empty() {
        return Err(whole("no candidates in `[policies]`".into()));
    }
    Ok(out)
}

fn line_of_span(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" line {line}")
        }
        None => String::new(),
    }
}

/// The 1-based line of the `[policies.<name>]` header.
fn find_header_line(text: &str, name: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let header = line.trim().trim_matches(|c| c == '[' || c == ']').trim();
            line.trim().starts_with('[')
                && (header == format!("policies.{name}")
                    || header == format!("policies.\"{name}\""))
        })
        .map(|i| i + 1)
}

/// The 1-based line of `field = …` inside `[policies.<name>]`, found by scanning the text.
fn find_field_line(text: &str, name: &str, field: &str) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t.trim_matches(|c| c == '[' || c == ']').trim();
            inside =
                header == format!("policies.{name}") || header == format!("policies.\"{name}\"");
            continue;
        }
        if inside
            && t.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == field)
        {
            return Some(i + 1);
        }
    }
    None
}
