//! "Open here only": the view of a shared key with a [`quorum`](crate::Policy::quorum) that this
//! replica opens alone when its own outcomes reach the policy's rules while the shared circuit,
//! waiting for the quorum, stays closed. Its own window, open wait and probes; nothing here is on
//! the path of a key without a quorum.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::{Circuit, FnName};
use crate::error::Reason;
use crate::observe::Trigger;
use crate::state::{State, Verdict};
use crate::sync::Ordering;
use crate::window::{Counts, Outcomes, Sample};

/// [`Here::until`] while this replica's probes run.
const PROBING: u64 = u64::MAX;

/// This replica's own view of a shared key with a quorum.
pub(crate) struct Here {
    /// This replica's outcomes of the shared calls, judged by the key's policy.
    window: Outcomes,
    /// Counted failures in a row among them.
    run: AtomicU32,
    /// 0: closed here (the shared state decides); [`PROBING`]: this replica's probes run;
    /// otherwise the instant, on the breaker's clock, this replica's open wait ends.
    until: AtomicU64,
    /// Probes admitted since the wait ended (or the lease re-armed them).
    issued: AtomicU32,
    /// The transitions, one at a time: failed recoveries in a row, probes passed, and when the
    /// probes began.
    steps: Mutex<Steps>,
}

#[derive(Default)]
struct Steps {
    reopens: u32,
    passed: u32,
    probing_since: u64,
}

/// What a snapshot shows of a replica open alone: its local state and the wait left.
pub(crate) struct HereView {
    pub(crate) state: State,
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl Here {
    pub(crate) fn new(policy: &crate::policy::Policy) -> Here {
        Here {
            window: Outcomes::new(policy),
            run: AtomicU32::new(0),
            until: AtomicU64::new(0),
            issued: AtomicU32::new(0),
            steps: Mutex::new(Steps::default()),
        }
    }

    fn steps(&self) -> std::sync::MutexGuard<'_, Steps> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shared state moved (the store's answer): this replica's own view starts again.
    pub(crate) fn forget(&self) {
        let mut steps = self.steps();
        self.until.store(0, Ordering::Release);
        self.issued.store(0, Ordering::Release);
        self.window.reset();
        self.run.store(0, Ordering::Release);
        *steps = Steps::default();
    }

    /// This replica's view for a snapshot; `None` while it follows the shared state.
    pub(crate) fn view(&self, now: u64) -> Option<HereView> {
        match self.until.load(Ordering::Acquire) {
            0 => None,
            PROBING => Some(HereView {
                state: State::HalfOpen,
                retry_after: None,
            }),
            until => Some(HereView {
                state: State::Open,
                retry_after: Some(std::time::Duration::from_nanos(until.saturating_sub(now))),
            }),
        }
    }
}

impl Circuit {
    /// The wait left while this replica is open alone; `None` otherwise (closed here, or its
    /// wait over).
    #[inline]
    pub(super) fn open_here(&self, here: &Here) -> Option<u64> {
        let until = here.until.load(Ordering::Acquire);
        if until == 0 || until == PROBING {
            return None;
        }
        let now = self.now();
        (now < until).then(|| until - now)
    }

    /// This replica's own admission of a call the store admitted, on a shared key with a quorum:
    /// `Err` with the reason and the wait while it is open here, or its probes are out.
    pub(super) fn admit_here(&self, here: &Here, site: FnName) -> Result<(), (Reason, u64)> {
        let until = here.until.load(Ordering::Acquire);
        if until == 0 {
            return Ok(());
        }
        let now = self.now();
        if until != PROBING && now < until {
            return Err((Reason::Open, until - now));
        }
        let probes = self.policy.settings().half_open.max(1);
        let claimed = here
            .issued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < probes).then_some(n + 1)
            })
            .is_ok();
        if claimed {
            if until != PROBING {
                self.probe_here(here, until, now, site);
            }
            // Reopened meanwhile (a probe failed): the slot is not one of the new wait's.
            if here.until.load(Ordering::Acquire) == PROBING {
                return Ok(());
            }
            let _ = here
                .issued
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            return Err((Reason::Open, crate::state::NO_WAIT));
        }
        // Probes that never report (their calls were not recorded) are given back after the
        // lease, as the shared circuit's are; a wait over with its slots still taken begins
        // its probes anew.
        let mut steps = here.steps();
        let current = here.until.load(Ordering::Acquire);
        let lease = crate::policy::lease_nanos(&self.policy);
        if current == PROBING && now.saturating_sub(steps.probing_since) >= lease {
            steps.probing_since = now;
            here.issued.store(1, Ordering::Release);
            return Ok(());
        }
        if current != 0 && current != PROBING && now >= current {
            here.issued.store(0, Ordering::Release);
            drop(steps);
            return self.admit_here(here, site);
        }
        Err((Reason::HalfOpenFull, crate::state::NO_WAIT))
    }

    /// The open wait `until` here is over (`now`): this replica's probes begin, unless another
    /// call began them, or a probe's failure set a new wait, meanwhile.
    #[cold]
    fn probe_here(&self, here: &Here, until: u64, now: u64, site: FnName) {
        let mut steps = here.steps();
        if here.until.load(Ordering::Acquire) != until {
            return;
        }
        here.until.store(PROBING, Ordering::Release);
        steps.probing_since = now;
        steps.passed = 0;
        drop(steps);
        self.emit_as(
            State::Open,
            State::HalfOpen,
            Counts::default(),
            site,
            Trigger::OpenWaitOver,
            false,
        );
    }

    /// Judges this replica's own outcome of a shared call (`slow` when it was slow): it opens
    /// here when the outcomes reach a rule while the shared circuit is closed; a probe's closes
    /// or reopens it.
    pub(super) fn settle_here(&self, here: &Here, outcome: Verdict, slow: bool, site: FnName) {
        let until = here.until.load(Ordering::Acquire);
        if outcome == Verdict::Ignored {
            if until == PROBING {
                let _ = here
                    .issued
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            }
            return;
        }
        let failure = outcome == Verdict::Failure;
        match until {
            0 => self.count_here(here, failure, slow, site),
            PROBING => self.probe_settled(here, failure, site),
            // Open here: the outcome of a call admitted before it opened.
            _ => {}
        }
    }

    /// Records an outcome in this replica's own window; opens here on a rule.
    fn count_here(&self, here: &Here, failure: bool, slow: bool, site: FnName) {
        let now = self.now();
        let counts = here.window.record(now, Sample { failure, slow });
        let run = if failure {
            here.run.fetch_add(1, Ordering::AcqRel).saturating_add(1)
        } else {
            here.run.store(0, Ordering::Release);
            0
        };
        let tripped = Trigger::tripped(&self.policy, counts, failure, run).is_some();
        // The shared circuit already open (or forced) holds every call.
        if !tripped || self.load().state() != State::Closed {
            return;
        }
        self.open_alone(here, 0, counts, site, Trigger::HereOnly, State::Closed);
    }

    /// A probe's outcome: a failure reopens here (the wait grows by `open_backoff`), the last
    /// probe's success closes here.
    fn probe_settled(&self, here: &Here, failure: bool, site: FnName) {
        let mut steps = here.steps();
        if here.until.load(Ordering::Acquire) != PROBING {
            return;
        }
        if failure {
            let reopens = steps.reopens.saturating_add(1);
            let probes = Counts {
                calls: steps.passed + 1,
                failures: 1,
                slow: 0,
            };
            drop(steps);
            self.open_alone(
                here,
                reopens,
                probes,
                site,
                Trigger::ProbeFailed,
                State::HalfOpen,
            );
            return;
        }
        steps.passed += 1;
        if steps.passed < self.policy.settings().half_open.max(1) {
            return;
        }
        let passed = steps.passed;
        *steps = Steps::default();
        here.window.reset();
        here.run.store(0, Ordering::Release);
        here.issued.store(0, Ordering::Release);
        here.until.store(0, Ordering::Release);
        drop(steps);
        let probes = Counts {
            calls: passed,
            failures: 0,
            slow: 0,
        };
        self.emit_as(
            State::HalfOpen,
            State::Closed,
            probes,
            site,
            Trigger::ProbesPassed,
            false,
        );
    }

    /// Opens this replica's view alone after `reopens` failed recoveries, decided by `counts`.
    #[cold]
    fn open_alone(
        &self,
        here: &Here,
        reopens: u32,
        counts: Counts,
        site: FnName,
        trigger: Trigger,
        from: State,
    ) {
        let now = self.now();
        let mut steps = here.steps();
        let until = here.until.load(Ordering::Acquire);
        let expected = if from == State::Closed { 0 } else { PROBING };
        if until != expected {
            return;
        }
        let wait = self.open_wait(reopens, counts, now);
        here.until.store(
            now.saturating_add(wait.nanos).min(PROBING - 1),
            Ordering::Release,
        );
        here.issued.store(0, Ordering::Release);
        steps.reopens = reopens;
        steps.passed = 0;
        drop(steps);
        self.emit_as(from, State::Open, counts, site, trigger, false);
        if let Some(store) = self.store.as_ref() {
            store.opened_alone(super::seam::Site(site));
        }
    }
}
