//! Fault injection for tests and staging (feature `chaos`): failures, `Retry-After` answers,
//! latency and rejections injected into the calls of a key, at a rate or by a predicate, through
//! the paths real ones take — so fallbacks, retries, budgets, hedges and a shared circuit are
//! tested end to end.
//!
//! Nothing is injected unless code asks for it, and only into functions that opt in with the
//! attribute's `chaos = true` (without the feature that argument changes nothing: the expansion
//! is the same as without it). A function without it is never touched by an injection on its
//! key, and its closed path is the same instruction for instruction. The guide's testing
//! chapter ([`guide::testing`](crate::guide::testing)) shows a fallback tested with it.
//!
//! ```
//! # #[cfg(feature = "chaos")] {
//! use fusebox::chaos::Fault;
//!
//! #[derive(Debug)]
//! enum StockError { Timeout, Rejected(fusebox::Error) }
//! impl From<fusebox::Error> for StockError {
//!     fn from(error: fusebox::Error) -> Self { StockError::Rejected(error) }
//! }
//!
//! static REGISTRY: fusebox::Registry = fusebox::Registry::new();
//!
//! #[fusebox::circuit_breaker(key = "doc-chaos-stock", registry = REGISTRY, chaos = true)]
//! fn stock(item: u32) -> Result<u32, StockError> {
//!     Ok(item)
//! }
//!
//! REGISTRY.chaos().inject("doc-chaos-stock", Fault::failure(|| StockError::Timeout).when(|n| n == 2));
//! assert!(stock(1).is_ok());
//! assert!(matches!(stock(2), Err(StockError::Timeout)));
//! assert!(stock(3).is_ok());
//! REGISTRY.chaos().inject("doc-chaos-stock", Fault::rejection());
//! assert!(matches!(stock(4), Err(StockError::Rejected(e)) if e.is_rejected()));
//! REGISTRY.chaos().clear("doc-chaos-stock");
//! assert!(stock(5).is_ok());
//! # }
//! ```

mod adapter;
#[cfg(feature = "config")]
mod configured;
pub(crate) mod fault;

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

pub use adapter::{FaultValue, Injected};
pub use fault::{Fault, FaultKind};

/// One injection on a key: its fault and the number of calls that reached it.
pub(crate) struct Injection {
    pub(crate) key: String,
    pub(crate) fault: Fault,
    calls: AtomicU64,
}

impl Injection {
    /// True when the next call is hit (and counts it).
    pub(crate) fn hits(&self) -> bool {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        self.fault.hits(n)
    }
}

/// The injections of a registry (`Registry::chaos`): at most one fault per key, and the
/// named faults an operator may switch on and off ([`register`](Injections::register),
/// [`switch`](Injections::switch), the admin router's `POST /chaos/...`).
pub struct Injections {
    /// How many keys have a fault: 0 spares the annotated calls the map's lock.
    active: AtomicUsize,
    by_key: RwLock<HashMap<String, Arc<Injection>, BuildHasherDefault<DefaultHasher>>>,
    named: RwLock<BTreeMap<String, (String, Fault)>>,
    /// The injections the last load from each configuration source made (file, environment).
    #[cfg(feature = "config")]
    configured: std::sync::Mutex<(Configured, Configured)>,
}

/// The injections one configuration source made, by key.
#[cfg(feature = "config")]
type Configured = BTreeMap<String, std::sync::Weak<Injection>>;

/// A named fault [`Injections::switch`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFault(String);

impl UnknownFault {
    /// The name asked for.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UnknownFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no fault is registered as `{}`; register it first with `Injections::register`",
            self.0
        )
    }
}

impl std::error::Error for UnknownFault {}

impl Injections {
    pub(crate) const fn new() -> Self {
        Injections {
            active: AtomicUsize::new(0),
            by_key: RwLock::new(HashMap::with_hasher(BuildHasherDefault::new())),
            named: RwLock::new(BTreeMap::new()),
            #[cfg(feature = "config")]
            configured: std::sync::Mutex::new((BTreeMap::new(), BTreeMap::new())),
        }
    }

    /// Injects `fault` into the calls of `key` (replacing the key's fault, if any); its call
    /// count starts again at 1. Only functions whose attribute has `chaos = true` are hit.
    pub fn inject(&self, key: impl Into<String>, fault: Fault) {
        self.install(key.into(), fault);
    }

    /// [`inject`](Injections::inject), returning the injection.
    fn install(&self, key: String, fault: Fault) -> Arc<Injection> {
        let injection = Arc::new(Injection {
            key: key.clone(),
            fault,
            calls: AtomicU64::new(0),
        });
        let mut map = self
            .by_key
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        map.insert(key, Arc::clone(&injection));
        self.active.store(map.len(), Ordering::Release);
        injection
    }

    /// Removes the fault of `key`; false when it had none.
    pub fn clear(&self, key: &str) -> bool {
        let mut map = self
            .by_key
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        let removed = map.remove(key).is_some();
        self.active.store(map.len(), Ordering::Release);
        removed
    }

    /// Removes the fault of `key` when it is still `injection`, under one lock so an injection
    /// racing it stays; the kind removed, or `None` when another fault (or none) is in place.
    #[cfg(feature = "config")]
    fn remove_if_same(
        &self,
        key: &str,
        injection: &std::sync::Weak<Injection>,
    ) -> Option<FaultKind> {
        let mut map = self
            .by_key
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        let now = map.get(key)?;
        if !std::ptr::eq(Arc::as_ptr(now), injection.as_ptr()) {
            return None;
        }
        let kind = now.fault.kind();
        map.remove(key);
        self.active.store(map.len(), Ordering::Release);
        Some(kind)
    }

    /// Removes every key's fault (the named faults stay registered, switched off).
    pub fn clear_all(&self) {
        let mut map = self
            .by_key
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        map.clear();
        self.active.store(0, Ordering::Release);
    }

    /// The keys with a fault and its kind, sorted by key.
    #[must_use]
    pub fn injected(&self) -> Vec<(String, FaultKind)> {
        let map = self
            .by_key
            .read()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut list: Vec<_> = map
            .values()
            .map(|injection| (injection.key.clone(), injection.fault.kind()))
            .collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list
    }

    /// Registers `fault` on `key` under `name`, switched off: an operator switches it on and off
    /// by name ([`switch`](Injections::switch), the admin router), which is how a fault that
    /// needs a typed error value reaches staging. Registering a name again replaces it.
    pub fn register(&self, name: impl Into<String>, key: impl Into<String>, fault: Fault) {
        let mut named = self
            .named
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        named.insert(name.into(), (key.into(), fault));
    }

    /// The registered faults: name, key and kind, sorted by name.
    #[must_use]
    pub fn registered(&self) -> Vec<(String, String, FaultKind)> {
        let named = self
            .named
            .read()
            .unwrap_or_else(|poison| poison.into_inner());
        named
            .iter()
            .map(|(name, (key, fault))| (name.clone(), key.clone(), fault.kind()))
            .collect()
    }

    /// Switches the fault registered as `name` on (injected into its key, replacing the key's
    /// fault) or off (the key's fault cleared). Each switch is a WARN event `chaos_switched`
    /// naming the key, the fault's kind and name, and `on`.
    ///
    /// # Errors
    /// [`UnknownFault`] when no fault is registered as `name`.
    pub fn switch(&self, name: &str, on: bool) -> Result<(), UnknownFault> {
        let (key, fault) = {
            let named = self
                .named
                .read()
                .unwrap_or_else(|poison| poison.into_inner());
            named
                .get(name)
                .cloned()
                .ok_or_else(|| UnknownFault(name.to_owned()))?
        };
        let kind = fault.kind();
        if on {
            self.inject(key.clone(), fault);
        } else {
            self.clear(&key);
        }
        switched(&key, kind, Some(name), on);
        Ok(())
    }

    /// [`inject`](Injections::inject) for an operator: the same, plus the WARN event
    /// `chaos_switched` naming the key and the fault (what the admin router calls).
    pub fn switch_on(&self, key: &str, fault: Fault) {
        let kind = fault.kind();
        self.inject(key, fault);
        switched(key, kind, None, true);
    }

    /// [`clear`](Injections::clear) for an operator: the same, plus the WARN event
    /// `chaos_switched` naming the key and the fault it removed; false when it had none.
    pub fn switch_off(&self, key: &str) -> bool {
        let removed = {
            let mut map = self
                .by_key
                .write()
                .unwrap_or_else(|poison| poison.into_inner());
            let removed = map.remove(key);
            self.active.store(map.len(), Ordering::Release);
            removed
        };
        match removed {
            Some(injection) => {
                switched(key, injection.fault.kind(), None, false);
                true
            }
            None => false,
        }
    }

    /// The injection of `key`, if any.
    pub(crate) fn find(&self, key: &str) -> Option<Arc<Injection>> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let map = self
            .by_key
            .read()
            .unwrap_or_else(|poison| poison.into_inner());
        map.get(key).cloned()
    }
}

/// The WARN event of an operator's switch.
fn switched(key: &str, kind: FaultKind, name: Option<&str>, on: bool) {
    tracing::warn!(
        target: "fusebox",
        event = "chaos_switched",
        key,
        fault = kind.as_str(),
        name = name.unwrap_or(""),
        on,
        "chaos_switched"
    );
}

impl std::fmt::Debug for Injections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injections")
            .field("injected", &self.injected())
            .field("registered", &self.registered())
            .finish()
    }
}
