//! Watching breakers: transition hooks registered on a [`Registry`](crate::Registry).
//!
//! Hooks run on the thread that made the transition, after it is published and outside any lock, so
//! a hook may read the breaker (or even trip another one) without deadlocking anything.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::state::State;

/// One state change of one breaker.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Transition<'a> {
    /// The breaker's key.
    pub key: &'a str,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// Failure rate of the window (or of the probes) that decided, in percent.
    pub failure_rate: f64,
    /// Slow-call rate of that window, in percent.
    pub slow_rate: f64,
    /// Calls in that window (or probes).
    pub calls: u32,
    /// Path of the annotated function whose call caused it (`"operator"` for manual controls).
    pub function: &'a str,
}

type Hook = Arc<dyn Fn(&Transition<'_>) + Send + Sync>;

/// The hooks of one registry, shared with its breakers.
#[derive(Default)]
pub(crate) struct Hooks {
    any: AtomicBool,
    list: RwLock<Vec<Hook>>,
}

impl Hooks {
    pub(crate) fn add(&self, hook: Hook) {
        self.list
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
        self.any.store(true, Ordering::Release);
    }

    pub(crate) fn call(&self, transition: &Transition<'_>) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        // Copy the list out so no lock is held while user code runs.
        let hooks: Vec<Hook> = self.list.read().unwrap_or_else(|p| p.into_inner()).clone();
        for hook in hooks {
            hook(transition);
        }
    }
}
