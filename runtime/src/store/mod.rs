//! The store seam (feature `store`): the contract a store implements so that every breaker of a
//! registry is one circuit across the processes that share the store.
//!
//! [`Registry::share`](crate::Registry::share) hands a store to a registry. From then on each of
//! the registry's breakers, present and future, asks the store to [link](Store::link) its key:
//! the store answers with the [`SharedKey`] the breaker calls for that key, or keeps the key
//! local. A shared breaker then
//!
//! - asks its key for admission: at once ([`SharedKey::admit_now`], which may decline to decide
//!   without a round trip) or awaiting the store ([`SharedKey::admit`]); the [`Admission`] it gets
//!   back becomes the call's permit;
//! - reports the outcome of every call the store admitted, in the order the permits settle, with
//!   the [`Ticket`] the admission carried ([`SharedKey::report`]);
//! - waits, in strict stores, until the outcomes reported so far are recorded
//!   ([`SharedKey::awaits_recording`], [`SharedKey::flush`]).
//!
//! The store keeps the breaker's local state in line with the shared one through the
//! [`CircuitRef`] it is given ([`CircuitRef::follow`], [`CircuitRef::announce`],
//! [`CircuitRef::follow_transition`], [`CircuitRef::observe_window`]); the breaker stays the one place events, snapshots and
//! metrics come from. `fusebox-redis` implements the seam on Redis; [`MemoryStore`] implements it
//! in one process, for tests.
//!
//! **Semver promise.** The traits are not sealed: a store outside this crate implements them. A
//! later release adds methods only with a default body, and every enum and struct here is
//! `#[non_exhaustive]` (built through its constructors), so a store written against 0.1 builds
//! against every 0.x release after it. Reports reach a key in the order its permits settle, per
//! key and per generation of the store's state.

mod memory;

pub use crate::breaker::seam::{
    ANOTHER_REPLICA, Admission, BoxFuture, CircuitHandle, CircuitRef, Counts, Link, Outcome,
    REFRESH_AFTER, SharedKey, SharedTransition, Site, Store, Ticket, WeakCircuit, announce_unheld,
};
pub use memory::MemoryStore;
