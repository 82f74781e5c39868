//! "Did you mean" suggestions for misspelled argument names.

use syn::Ident;

use super::NAMES;

pub(super) fn unknown_argument(name: &Ident) -> syn::Error {
    let list = NAMES
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut message = format!("unknown argument `{name}`; expected one of {list}");
    if let Some(close) = closest(&name.to_string()) {
        message.push_str(&format!("; did you mean `{close}`?"));
    }
    syn::Error::new(name.span(), message)
}

/// The known argument name closest to `written`, when it is plausibly a typo of it.
pub(super) fn closest(written: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .map(|name| (edit_distance(written, name), *name))
        .filter(|&(distance, name)| distance > 0 && distance <= (name.len() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance between two short ASCII-ish strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}
