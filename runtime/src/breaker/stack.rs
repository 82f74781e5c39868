//! Stacking: calls on one circuit made inside an admission of the same circuit (an annotated
//! function that calls through the tower layer or the reqwest middleware on its own key, a layer
//! over a layer, an annotated function calling another on the same key). The innermost admission
//! records each of its calls; the admissions around it pass through: they take no second
//! bulkhead slot or probe, and their own outcome is not recorded (it settles as ignored).
//!
//! A circuit tracks stacking only once more than one admitting site names it ([`Stacking`]'s
//! site word: an annotated function's call site, an adapter's instance, see
//! [`SiteId`]). Until then it keeps its fast paths: a key with one site cannot
//! stack (recursion aside). Once two sites name it, its calls take the general paths, where each
//! admission of a call chain (a tokio task, or a thread outside any task) is a level of that
//! chain's entry; an admission that finds its chain's entry is inside another.
//!
//! The site that makes a circuit track stacking may be the inner one of a call already under way
//! (an annotated function's first call, a middleware's first request): an annotated function
//! admitted on the fast path leaves its circuit's address in a thread-local (see
//! `nested::last_entered`), and the claim that starts the tracking adopts that admission as the
//! outer level of the current chain.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use super::*;

/// The site word of a circuit no site named yet.
const NO_SITE: usize = 0;
/// The site word of a circuit that two sites name: it tracks stacking.
const SEVERAL: usize = 2;
/// The deepest chain: one deeper is taken for levels left open by permits that settled in
/// another chain (admitted in one task, reported in another) and starts over.
const MAX_DEPTH: u32 = 16;

/// Where a call chain runs: its tokio task, or its thread outside any task.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Caller {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Caller {
    fn current() -> Caller {
        match tokio::task::try_id() {
            Some(task) => Caller::Task(task),
            None => Caller::Thread(std::thread::current().id()),
        }
    }
}

thread_local! {
    /// Set while [`alone`] runs: admissions on this thread open no level of a call chain.
    static ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `admit` with the admissions it makes outside every call chain: the attempts of a hedged
/// call are siblings made in one task, not calls inside each other. Such an admission is asked
/// of the circuit as any call's is and opens no level; its permit's settle finds no level of
/// its own (a hedged call inside another admission of its key ends that one's level early: that
/// call is then recorded too, as it was before stacking was tracked).
pub(crate) fn alone<T>(admit: impl FnOnce() -> T) -> T {
    ALONE.set(true);
    let out = admit();
    ALONE.set(false);
    out
}

/// The admissions of one circuit open in one call chain.
struct Chain {
    caller: Caller,
    /// The outermost admission (its mode and generation): what the levels inside it run under.
    outer: Word,
    /// Open admissions, outermost first.
    depth: u32,
    /// Bit `i`: level `i` had an admission of the circuit inside it (the first 64 levels).
    inside: u64,
}

/// A circuit's stacking state: which sites name it, and the chains open in it once several do.
#[derive(Default)]
pub(crate) struct Stacking {
    /// [`NO_SITE`], the one site naming the circuit, or [`SEVERAL`].
    sites: AtomicUsize,
    chains: Mutex<Vec<Chain>>,
}

impl Stacking {
    /// True once several sites name the circuit.
    #[inline]
    pub(super) fn tracks(&self) -> bool {
        self.sites.load(Ordering::Relaxed) == SEVERAL
    }

    /// The same site word, for a circuit that replaces this one.
    pub(super) fn carry_to(&self, next: &Stacking) {
        next.sites
            .store(self.sites.load(Ordering::Acquire), Ordering::Release);
    }

    /// Names the circuit from `site`; true when this made a second site name it.
    fn claim(&self, site: usize) -> bool {
        let mut current = self.sites.load(Ordering::Acquire);
        loop {
            let next = match current {
                SEVERAL => return false,
                NO_SITE => site,
                one if one == site => return false,
                _ => SEVERAL,
            };
            match self
                .sites
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next == SEVERAL,
                Err(seen) => current = seen,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Chain>> {
        self.chains
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Enters one level in `caller`'s chain: the outermost admission when it is inside one
    /// (the level around it is marked), `None` when the chain is new.
    fn enter(&self, caller: Caller) -> Option<Word> {
        let mut chains = self.lock();
        let at = chains.iter().position(|chain| chain.caller == caller)?;
        if chains[at].depth >= MAX_DEPTH {
            chains.swap_remove(at);
            return None;
        }
        let chain = &mut chains[at];
        if let Some(bit) = 1u64.checked_shl(chain.depth - 1) {
            chain.inside |= bit;
        }
        chain.depth += 1;
        Some(chain.outer)
    }

    /// Opens `caller`'s chain with its outermost admission `outer`.
    fn open(&self, caller: Caller, outer: Word, inside: bool) {
        self.lock().push(Chain {
            caller,
            outer,
            depth: 1,
            inside: u64::from(inside),
        });
    }

    /// Leaves the innermost level of `caller`'s chain: true when an admission of the circuit ran
    /// inside it. A caller with no chain (admitted before the circuit tracked stacking) has
    /// none.
    fn leave(&self, caller: Caller) -> bool {
        let mut chains = self.lock();
        let Some(at) = chains.iter().position(|chain| chain.caller == caller) else {
            return false;
        };
        let chain = &mut chains[at];
        chain.depth -= 1;
        let bit = 1u64.checked_shl(chain.depth).unwrap_or(0);
        let inside = chain.inside & bit != 0;
        chain.inside &= !bit;
        if chain.depth == 0 {
            chains.swap_remove(at);
        }
        inside
    }

    /// Open chains (for tests).
    #[cfg(test)]
    pub(super) fn open_chains(&self) -> usize {
        self.lock().len()
    }
}

impl Circuit {
    /// Names this circuit from the admitting site `site` (an address or a [`SiteId`]'s
    /// number, never 0 or 2). The second site makes it track stacking: it leaves the fast paths.
    /// A call this thread's last annotated admission may have made on the fast path (the outer
    /// of the call under way, whose inner site is naming the circuit now) becomes the outer level
    /// of this thread's or task's chain, and a closed circuit moves to its next generation, so
    /// that the outcome of that call, admitted under the previous one, is not recorded (nor are
    /// those of calls in flight elsewhere: this happens once in a circuit's life).
    pub(crate) fn claim_site(&self, site: usize) {
        // A key shared through a store is not tracked: its generations are the store's, and a
        // local move to the next one would disown every outcome reported since.
        #[cfg(feature = "store")]
        if self.store.is_some() {
            return;
        }
        if !self.stacking.claim(site) {
            return;
        }
        self.general.store(1, Ordering::Release);
        if crate::nested::last_entered() != std::ptr::from_ref(self).addr() {
            return;
        }
        let word = self.load();
        if word.state() == State::Closed {
            let next = word.to_closed();
            if self
                .state
                .compare_exchange(word.0, next.0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.stacking.open(Caller::current(), next.epoch(), true);
            }
        }
    }

    /// Admission of a circuit that tracks stacking: inside an admission of this circuit in the
    /// same call chain, a call runs under the outer admission while the circuit is in the state
    /// it admitted under (no second bulkhead slot or probe), and asks the circuit as any call
    /// does once it moved on; otherwise it asks as any call does and opens its chain.
    #[cold]
    #[inline(never)]
    pub(super) fn admit_stacked(&self, site: FnName) -> Result<Word, Rejection> {
        if ALONE.get() {
            return self.admit_alone(site);
        }
        let caller = Caller::current();
        let Some(outer) = self.stacking.enter(caller) else {
            let admitted = self.admit_alone(site);
            if let Ok(word) = admitted {
                self.stacking.open(caller, word, false);
            }
            return admitted;
        };
        let admitted = if outer.same_epoch(self.load()) {
            let start = if self.timed() {
                self.now()
            } else if crate::observe::record::wanted() {
                permit::marked(self.now())
            } else {
                0
            };
            Ok(permit::admitted(outer.epoch(), start, false))
        } else {
            self.admit_alone(site)
        };
        if admitted.is_err() {
            // A rejected permit never settles: its level ends here (the outer stays marked).
            self.stacking.leave(caller);
        }
        admitted
    }

    /// The outcome a call admitted by this circuit reports, when it tracks stacking: ignored
    /// when an admission of the circuit ran inside the call's (that one recorded).
    #[inline(never)]
    pub(super) fn leave_level(&self, outcome: Verdict) -> Verdict {
        if self.stacking.leave(Caller::current()) {
            Verdict::Ignored
        } else {
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Policy, Registry, SiteId};

    static SITE: &str = "stack::tests";

    /// A breaker of `key` two adapters name: it tracks stacking.
    fn stacking(key: &str, policy: Policy) -> crate::Breaker {
        let breaker = Registry::new().breaker(key, policy).unwrap();
        breaker.claim(SiteId::new());
        assert!(!breaker.core.current().stacking.tracks(), "one site");
        breaker.claim(SiteId::new());
        assert!(breaker.core.current().stacking.tracks(), "two sites");
        breaker
    }

    fn chains(breaker: &crate::Breaker) -> usize {
        breaker.core.current().stacking.open_chains()
    }

    #[test]
    fn an_inner_admission_records_and_the_outer_passes_through() {
        let breaker = stacking("stack-inner", Policy::new().max_concurrent(1));
        let outer = breaker.admit(&SITE);
        let inner = breaker.admit(&SITE);
        assert!(
            !inner.is_rejected(),
            "the outer's bulkhead slot is the call's"
        );
        inner.failure();
        outer.failure();
        assert_eq!(breaker.snapshot().failures, 1, "the inner's outcome alone");
        assert_eq!(chains(&breaker), 0);
    }

    #[test]
    fn an_inner_call_is_the_outer_probe() {
        let clock = crate::clock::FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let policy = Policy::new()
            .window(2)
            .min_calls(1)
            .failure_rate(50)
            .open_for(std::time::Duration::from_secs(1));
        let breaker = registry.breaker("stack-probe", policy).unwrap();
        breaker.claim(SiteId::new());
        breaker.claim(SiteId::new());
        breaker.admit(&SITE).failure();
        assert_eq!(breaker.state(), crate::State::Open);
        clock.advance(std::time::Duration::from_secs(1));
        let outer = breaker.admit(&SITE);
        assert!(outer.is_probe());
        let inner = breaker.admit(&SITE);
        assert!(inner.is_probe(), "the outer's probe, not a second one");
        inner.success();
        assert_eq!(
            breaker.state(),
            crate::State::Closed,
            "the inner attempt decides"
        );
        outer.failure();
        assert_eq!(
            breaker.state(),
            crate::State::Closed,
            "the outer passes through"
        );
        assert_eq!(chains(&breaker), 0);
    }

    #[test]
    fn a_cancelled_or_panicking_call_leaves_no_chain() {
        let breaker = stacking("stack-cancel", Policy::new());
        let outer = breaker.admit(&SITE);
        let inner = breaker.admit(&SITE);
        drop(inner);
        drop(outer);
        assert_eq!(chains(&breaker), 0, "cancelled");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _outer = breaker.admit(&SITE);
            let _inner = breaker.admit(&SITE);
            panic!("in the inner call");
        }));
        assert!(panicked.is_err());
        assert_eq!(chains(&breaker), 0, "panicked");
        assert_eq!(
            breaker.snapshot().failures,
            1,
            "the panic counts once, at the inner"
        );
        breaker.admit(&SITE).failure();
        assert_eq!(breaker.snapshot().failures, 2, "a later call is recorded");
    }

    #[test]
    fn levels_left_open_by_permits_reported_elsewhere_do_not_pile_up() {
        let breaker = stacking("stack-moved", Policy::new().window(100).min_calls(100));
        let permits: Vec<_> = (0..super::MAX_DEPTH)
            .map(|_| breaker.admit(&SITE))
            .collect();
        // Reported on another thread, where no chain knows them: each recorded, and this
        // thread's levels stay open.
        std::thread::scope(|s| {
            s.spawn(move || permits.into_iter().for_each(crate::OwnedPermit::failure));
        });
        assert_eq!(breaker.snapshot().failures, super::MAX_DEPTH);
        assert_eq!(chains(&breaker), 1);
        // A call past the deepest chain starts over: recorded, and its chain closes.
        breaker.admit(&SITE).failure();
        assert_eq!(breaker.snapshot().failures, super::MAX_DEPTH + 1);
        assert_eq!(chains(&breaker), 0);
    }

    #[test]
    fn calls_on_two_threads_are_two_chains() {
        let breaker = stacking("stack-threads", Policy::new());
        let here = breaker.admit(&SITE);
        std::thread::scope(|s| {
            s.spawn(|| breaker.admit(&SITE).failure());
        });
        here.failure();
        assert_eq!(
            breaker.snapshot().failures,
            2,
            "unrelated calls, each recorded"
        );
    }
}
