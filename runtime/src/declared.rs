//! Breakers the program declares: every `#[circuit_breaker]` with a literal key is registered at
//! link time (through `inventory`), so a registry knows each declared key and policy before the
//! first call. Overrides are validated against them when loaded, a configured key that nothing
//! declares is reported with the closest declared names, and snapshots list every declared breaker.

use crate::policy::Policy;

/// What a declaration needs of a call site: its key and the policy it declares. Implemented by
/// the `Site` of each annotated function (this module names neither the call site nor the
/// registry, so the registry can read declarations without depending on either).
pub trait DeclaredSite: Sync {
    /// The literal key.
    fn key(&self) -> &'static str;
    /// The declared policy as the breaker will run it.
    fn policy(&self) -> Policy;
}

/// One annotated call site with a literal key, and which registry it uses.
pub struct Declared {
    site: &'static dyn DeclaredSite,
    /// True for the address of the registry the site's breaker lives in.
    registry: fn(usize) -> bool,
}

impl Declared {
    /// The call site `site`, whose breaker lives in the registry at an address for which
    /// `registry` is true.
    pub const fn new(site: &'static dyn DeclaredSite, registry: fn(usize) -> bool) -> Self {
        Declared { site, registry }
    }
}

impl std::fmt::Debug for Declared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Declared")
            .field("key", &self.site.key())
            .finish_non_exhaustive()
    }
}

inventory::collect!(Declared);

/// A declared breaker of one registry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Declaration {
    pub(crate) key: &'static str,
    pub(crate) policy: Policy,
}

/// Every declaration whose breaker lives in the registry at address `registry`.
pub(crate) fn of(registry: usize) -> impl Iterator<Item = Declaration> {
    inventory::iter::<Declared>
        .into_iter()
        .filter(move |d| (d.registry)(registry))
        .map(|d| Declaration {
            key: d.site.key(),
            policy: d.site.policy(),
        })
}

/// The declared names closest to `key` (edit distance at most a third of the longer name, at
/// least 2), best first.
pub(crate) fn closest<'a>(key: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .map(|name| (edit_distance(key, name), name))
        .filter(|&(d, name)| d <= (key.len().max(name.len()) / 3).max(2))
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().take(256).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().take(256).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names() {
        let names = ["payment", "search", "shipping"];
        assert_eq!(closest("paymnet", names), vec!["payment"]);
        assert_eq!(closest("serch", names), vec!["search"]);
        assert!(closest("inventory", names).is_empty());
    }
}
