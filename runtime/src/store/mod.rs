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
//! [`CircuitRef::observe_window`]); the breaker stays the one place events, snapshots and
//! metrics come from. `fusebox-redis` implements the seam on Redis; [`MemoryStore`] implements it
//! in one process, for tests.
//!
//! **Semver promise.** The traits are not sealed: a store outside this crate implements them. A
//! later release adds methods only with a default body, and every enum and struct here is
//! `#[non_exhaustive]` (built through its constructors), so a store written against 0.1 builds
//! against every 0.x release after it. Reports reach a key in the order its permits settle, per
//! key and per generation of the store's state.

mod circuit;
mod memory;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use circuit::{CircuitHandle, CircuitRef, WeakCircuit};
pub use memory::MemoryStore;

use crate::{Reason, Verdict};

/// A boxed future, as the seam's asynchronous methods return it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A place breakers share their state through.
///
/// Implemented by a store (`fusebox_redis::RedisStore`, [`MemoryStore`]) and given to a registry
/// with [`Registry::share`](crate::Registry::share).
pub trait Store: Send + Sync + 'static {
    /// Links the breaker of `circuit`'s key to the store: the key the breaker calls from now on,
    /// or [`Link::Local`] / [`Link::Unshareable`] to keep it local. Called once per breaker (a
    /// reconfigured breaker is linked again), while the breaker is being built: `circuit` gives
    /// its key and policy, and reaches the breaker once it is built.
    fn link(&self, circuit: WeakCircuit) -> Link;
}

/// A store's answer to [`Store::link`].
#[non_exhaustive]
pub enum Link {
    /// The key is shared: the breaker calls this key's side of the store.
    Shared(Box<dyn SharedKey>),
    /// The key stays local (the store keeps it out of sharing by its settings or its policy).
    Local,
    /// The key stays local because the store cannot share its policy: its snapshot says
    /// [`Sharing::Unshareable`](crate::Sharing::Unshareable). The store says why in an event.
    Unshareable,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::Shared(_) => "Shared",
            Link::Local => "Local",
            Link::Unshareable => "Unshareable",
        })
    }
}

/// The store's side of one shared key.
pub trait SharedKey: Send + Sync + 'static {
    /// Admission without awaiting the store, from what the store already knows of the key: the
    /// answer, or `None` to let the breaker decide (the breaker then awaits [`SharedKey::admit`]
    /// when `can_wait`, and decides alone otherwise). The default decides nothing here.
    fn admit_now(&self, circuit: CircuitRef<'_>, site: Site, can_wait: bool) -> Option<Admission> {
        let _ = (circuit, site, can_wait);
        None
    }

    /// The store's admission of a call of `site`, awaited by the caller.
    fn admit<'a>(&'a self, circuit: CircuitRef<'a>, site: Site) -> BoxFuture<'a, Admission>;

    /// The outcome of a call the store admitted with `ticket` ([`Admission::Admitted`]), reported
    /// where its permit settles: record it off the call path.
    fn report(&self, ticket: Ticket, site: Site, outcome: Outcome);

    /// True when a caller should await the recording of its outcome ([`SharedKey::flush`]) before
    /// it returns. The default: never.
    fn awaits_recording(&self) -> bool {
        false
    }

    /// Waits until the outcomes reported so far are recorded (bounded by the store's own
    /// timeout). The default returns at once.
    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// True while the store does not answer (its calls degrade), as snapshots show it. The
    /// default: never.
    fn degraded(&self) -> bool {
        false
    }
}

/// What a store answers to an admission.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Admitted by the store: the outcome is reported to it with this ticket.
    Admitted(Ticket),
    /// Admitted without recording the outcome anywhere (a store that fails open).
    Unrecorded,
    /// Decided by the breaker's local state alone, as a local key's call (a store that cannot
    /// answer and degrades to the local breaker); its outcome is recorded locally.
    Local,
    /// Rejected, with the reason and the wait before the next call may be admitted.
    Rejected {
        /// Why.
        reason: Reason,
        /// The wait the caller is told, when the store knows it.
        retry_after: Option<Duration>,
    },
}

impl Admission {
    /// A rejection for `reason`, with the wait the caller is told.
    #[must_use]
    pub fn rejected(reason: Reason, retry_after: Option<Duration>) -> Self {
        Admission::Rejected {
            reason,
            retry_after,
        }
    }
}

/// What a permit the store admitted carries back to it with its outcome: the generation of the
/// store's state it was admitted under (kept modulo [`Ticket::GENERATIONS`]), or none known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket(u16);

impl Ticket {
    /// How many generations a ticket tells apart: it keeps a generation modulo this.
    pub const GENERATIONS: u64 = 1 << 10;

    /// A ticket for a call admitted under `generation` (kept modulo [`Ticket::GENERATIONS`]).
    #[must_use]
    pub const fn generation(generation: u64) -> Self {
        Ticket((generation % Self::GENERATIONS) as u16)
    }

    /// A ticket for a call admitted while the replica knew no generation of the key.
    #[must_use]
    pub const fn unknown() -> Self {
        Ticket(Self::GENERATIONS as u16)
    }

    /// The generation modulo [`Ticket::GENERATIONS`], or `None` for [`Ticket::unknown`].
    #[must_use]
    pub const fn admitted_under(self) -> Option<u64> {
        if self.0 as u64 == Self::GENERATIONS {
            None
        } else {
            Some(self.0 as u64)
        }
    }
}

/// The outcome of a call the store admitted: its verdict, and whether slow-call timing found it
/// slow.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Success, failure, or ignored (an error that does not count, a cancelled call).
    pub verdict: Verdict,
    /// The call took longer than the policy's slow-call threshold.
    pub slow: bool,
}

impl Outcome {
    /// An outcome.
    #[must_use]
    pub const fn new(verdict: Verdict, slow: bool) -> Self {
        Outcome { verdict, slow }
    }
}

/// The place a call was made from: the annotated function's name, or the name an adapter gives.
/// Two sites are equal when they are the same `static` (compared by address, not by name).
#[derive(Clone, Copy, Debug)]
pub struct Site(pub(crate) &'static &'static str);

impl PartialEq for Site {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Site {}

impl std::hash::Hash for Site {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl Site {
    /// A site named `name` (a `static` holding the name: sites are compared by address).
    #[must_use]
    pub const fn new(name: &'static &'static str) -> Self {
        Site(name)
    }

    /// The site's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        self.0
    }
}

/// The counts a transition carries in its event: the window (or the probes) that decided it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls counted.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them.
    pub slow: u32,
}

impl Counts {
    /// Counts of `calls`, `failures` and `slow` calls.
    #[must_use]
    pub const fn new(calls: u32, failures: u32, slow: u32) -> Self {
        Counts {
            calls,
            failures,
            slow,
        }
    }
}

/// Announces a transition the store committed on `key` while no breaker of this process holds
/// the key (an operator's command): the event a breaker's transition gives, with `shared = true`.
pub fn announce_unheld(
    key: &str,
    from: crate::State,
    to: crate::State,
    counts: Counts,
    site: Site,
) {
    crate::observe::emit(
        &crate::observe::Hooks::default(),
        key,
        from,
        to,
        counts.into(),
        site.0,
        crate::Trigger::Operator,
        true,
        None,
    );
}

impl From<Counts> for crate::window::Counts {
    fn from(counts: Counts) -> Self {
        crate::window::Counts {
            calls: counts.calls,
            failures: counts.failures,
            slow: counts.slow,
        }
    }
}
