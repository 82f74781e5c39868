//! A breaker's life: creation, the successor that replaces it on reconfiguration, and the
//! marks the registry's eviction sweep reads (used, pinned, evictable).

use super::*;

impl Circuit {
    pub(crate) fn new(key: Key, policy: Policy, clock: ClockSource, hooks: Arc<Hooks>) -> Self {
        #[cfg(feature = "metrics")]
        let key_for_meters = &key.as_str().to_owned();
        let settings = policy.settings();
        let limiter = match settings.max_concurrent {
            Some(Concurrency::Adaptive { floor, ceiling }) => Some(Box::new(
                limit::Limiter::starting(key.as_str(), floor, ceiling),
            )),
            #[cfg(feature = "metrics")]
            Some(Concurrency::Fixed(max)) => {
                metrics::gauge!(crate::observe::metrics::CONCURRENCY_LIMIT, "key" => key.as_str().to_owned())
                    .set(f64::from(max));
                None
            }
            _ => None,
        };
        let budget = settings
            .retry_budget
            .map(|budget| Box::new(crate::load::budget::Budget::new(budget, key.as_str())));
        let shadows = crate::shadow::Shadows::of(key.as_str(), &policy).map(Arc::new);
        Circuit {
            key,
            policy,
            member: None,
            clock,
            hooks,
            state: AtomicU64::new(Word::INITIAL.0),
            time: TimeStamp::new(),
            min_calls: settings.min_calls,
            window: Outcomes::new(&policy),
            run: AtomicU32::new(0),
            reopens: AtomicU32::new(0),
            pushback: AtomicU64::new(0),
            reopen_pushback: AtomicU64::new(0),
            phase: AtomicU64::new(0),
            phase_seq: AtomicU64::new(0),
            metrics_only: AtomicBool::new(false),
            counters: Padded(Counters {
                rejected: AtomicU64::new(0),
                throttled: AtomicU64::new(0),
                retries_rejected: AtomicU64::new(0),
                in_flight: SharedCount::default(),
                limiter,
            }),
            marks: AtomicU8::new(USED),
            pinned: AtomicBool::new(true),
            general: AtomicU8::new(u8::from(
                settings.slow.is_some()
                    || settings.consecutive.is_some()
                    || settings.max_concurrent.is_some()
                    || settings.throttle.is_some()
                    || shadows.is_some(),
            )),
            stacking: super::stack::Stacking::default(),
            budgeted: settings.retry_budget.is_some(),
            budget,
            hedging: std::sync::OnceLock::new(),
            shadows,
            successor: std::sync::OnceLock::new(),
            replaced: AtomicBool::new(false),
            episode: Episode::default(),
            last: std::sync::Mutex::new(None),
            #[cfg(feature = "metrics")]
            meters: crate::observe::Meters::new(key_for_meters),
            #[cfg(feature = "store")]
            store: None,
            #[cfg(feature = "store")]
            shared: super::store::SharedView::default(),
        }
    }

    /// This breaker, sharing its state through `store`: its calls leave the local fast paths.
    #[cfg(feature = "store")]
    pub(crate) fn with_store(mut self, store: Box<dyn super::seam::SharedKey>) -> Circuit {
        self.general = AtomicU8::new(1);
        let here = self
            .policy
            .settings()
            .quorum
            .map(|_| super::quorum::Here::new(&self.policy));
        self.store = Some(Box::new(super::store::Linked { key: store, here }));
        self
    }

    /// A breaker for a new policy that continues this one's state: every state carries over
    /// (open keeps its deadline; half-open keeps its probes, whose reports reach the successor),
    /// except half-open under a different recovery mode, which becomes open with its wait already
    /// over (see [`Circuit::announce_handover`]). The window's outcomes carry over when its kind and
    /// size are unchanged, and calls in flight keep counting against the bulkhead.
    pub(crate) fn successor_with(&self, policy: Policy) -> Circuit {
        let mut next = Circuit::new(
            self.key.clone(),
            policy,
            self.clock.clone(),
            self.hooks.clone(),
        );
        next.counters.0.in_flight = self.counters.in_flight.share();
        if let Some(shadows) = self.shadows.as_ref().filter(|s| s.same_text(&policy)) {
            // The same shadows judge on: their windows and states continue.
            next.shadows = Some(shadows.clone());
        }
        if let (Some(Concurrency::Adaptive { floor, ceiling }), Some(limiter)) = (
            policy.settings().max_concurrent,
            self.counters.limiter.as_deref(),
        ) {
            // The new bounds, from the limit and no-load latency learnt so far.
            next.counters.0.limiter = Some(Box::new(limiter.continued(
                self.key.as_str(),
                floor,
                ceiling,
            )));
        }
        let word = self.load();
        let (new, old) = (policy.settings(), self.policy.settings());
        let carried = match word.state() {
            State::HalfOpen if new.recovery != old.recovery => word.to_open(self.now(), 0),
            _ => word,
        };
        if new.window == old.window {
            next.window.copy_from(&self.window);
        }
        if new.consecutive.is_some() && old.consecutive.is_some() {
            next.run
                .store(self.run.load(Ordering::Acquire), Ordering::Release);
        }
        if new.recovery == old.recovery {
            next.phase
                .store(self.phase.load(Ordering::Acquire), Ordering::Release);
            next.phase_seq
                .store(self.phase_seq.load(Ordering::Acquire), Ordering::Release);
        }
        if carried == word {
            next.time.copy_from(&self.time);
        } else {
            next.time.set(carried, self.now());
        }
        next.state.store(carried.0, Ordering::Release);
        next.metrics_only
            .store(self.metrics_only.load(Ordering::Acquire), Ordering::Release);
        self.stacking.carry_to(&next.stacking);
        if next.stacking.tracks() {
            next.general.store(1, Ordering::Release);
        }
        if let (Some(next), Some(this)) = (&next.budget, &self.budget) {
            next.copy_from(this);
        }
        next.counters.rejected.store(
            self.counters.rejected.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.counters.throttled.store(
            self.counters.throttled.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.counters.retries_rejected.store(
            self.counters.retries_rejected.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.reopens
            .store(self.reopens.load(Ordering::Acquire), Ordering::Release);
        next.pushback
            .store(self.pushback.load(Ordering::Acquire), Ordering::Release);
        next.pinned
            .store(self.pinned.load(Ordering::Acquire), Ordering::Release);
        next.episode.since.store(
            self.episode.since.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.episode.reported.store(
            self.episode.reported.load(Ordering::Acquire),
            Ordering::Release,
        );
        *next.last.lock().unwrap_or_else(|p| p.into_inner()) = self.last_transition_record();
        #[cfg(feature = "store")]
        next.shared.copy_from(&self.shared);
        next
    }

    /// Emits the transition a reconfiguration made (half-open to open when the recovery mode
    /// changed), so the event stream stays continuous. `before` is the replaced breaker's state.
    pub(crate) fn announce_handover(&self, before: State) {
        let now = self.load().state();
        if before != now {
            let counts = self.window.counts(self.now());
            self.emit(before, now, counts, &"operator", Trigger::Reconfigured);
        }
    }

    /// The newest breaker of this chain (itself unless reconfigured).
    #[inline]
    pub(crate) fn current(self: &Arc<Circuit>) -> &Arc<Circuit> {
        let mut core = self;
        while let Some(next) = core.next() {
            core = next;
        }
        core
    }

    /// The breaker that replaced this one, when one did: the flag on the hot line first, so a
    /// call on a breaker never replaced reads no other line for it.
    #[inline(always)]
    pub(super) fn next(&self) -> Option<&Arc<Circuit>> {
        if self.replaced.load(Ordering::Acquire) {
            self.successor.get()
        } else {
            None
        }
    }

    /// The newest breaker of the chain of a kept circuit (see [`Circuit::kept`]).
    #[inline(always)]
    pub(crate) fn newest(&'static self) -> &'static Circuit {
        let mut core = self;
        while let Some(next) = core.next() {
            core = next;
        }
        core
    }

    /// This circuit, kept for the life of the process: the fixed-key tower layer's services
    /// hold it by a plain reference, so a call takes and gives back no reference count. One
    /// counted reference per kept circuit is never given back (taken once, on the first
    /// request for it); the circuits it replaces when reconfigured are reached through it.
    pub(crate) fn kept(self: &Arc<Circuit>) -> &'static Circuit {
        /// Every circuit kept so far (few: one per key a fixed-key layer wraps, and its
        /// replacements; looked up only when a layer wraps a service).
        static KEPT: std::sync::Mutex<Vec<&'static Circuit>> = std::sync::Mutex::new(Vec::new());
        let mut kept = KEPT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(core) = kept.iter().find(|core| std::ptr::eq(**core, &**self)) {
            return core;
        }
        let core: &'static Circuit = Box::leak(Box::new(self.clone()));
        kept.push(core);
        core
    }

    /// Asks `core` (a kept circuit, or the newest of its chain) for admission on behalf of
    /// `site`, like [`Breaker::admit`], with a permit that holds it by reference.
    #[inline(always)]
    pub(crate) fn enter_kept(&'static self, site: FnName) -> OwnedPermit {
        OwnedPermit::enter(permit::Holder::Kept(self.newest()), site)
    }

    /// Retires this breaker in favour of `next`.
    pub(crate) fn retire(&self, next: Arc<Circuit>) -> Result<(), Arc<Circuit>> {
        self.successor.set(next)?;
        self.replaced.store(true, Ordering::Release);
        Ok(())
    }

    /// Marks a dynamic breaker as used since the last sweep.
    #[inline]
    pub(crate) fn touch(&self) {
        if self.marks.load(Ordering::Relaxed) & USED == 0 {
            self.marks.fetch_or(USED, Ordering::Relaxed);
        }
    }

    /// Marks a dynamic breaker as removed from its registry by the eviction sweep.
    pub(crate) fn mark_evicted(&self) {
        self.marks.fetch_or(EVICTED, Ordering::Release);
    }

    /// True once the eviction sweep removed this breaker from its registry.
    #[inline]
    pub(crate) fn is_evicted(&self) -> bool {
        self.marks.load(Ordering::Acquire) & EVICTED != 0
    }

    /// Clears the used mark: a new dynamic breaker counts as used once a second call finds it.
    pub(crate) fn mark_unused(&self) {
        self.marks.fetch_and(!USED, Ordering::Relaxed);
    }

    /// Marks a breaker as created for a dynamic key (evictable) or not.
    pub(crate) fn set_pinned(&self, pinned: bool) {
        self.pinned.store(pinned, Ordering::Release);
    }

    /// Pins a breaker made for a dynamic key (now claimed by a literal key or by hand); true when
    /// it was not pinned before.
    pub(crate) fn claim(&self) -> bool {
        !self.pinned.swap(true, Ordering::AcqRel)
    }

    /// True when never evicted (see [`Circuit::claim`]).
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Acquire)
    }

    /// The eviction sweep's question: may this breaker go? Nothing in flight, and either closed and
    /// not used since the previous look (the used mark is cleared as a second chance), or open with
    /// its wait over: it holds nothing the next probe would not find out again. An open circuit
    /// within its wait, half-open probing, and the operators' states are never evicted.
    pub(crate) fn evictable(&self) -> bool {
        if self.pinned.load(Ordering::Acquire) {
            return false;
        }
        let busy = self.policy.settings().max_concurrent.is_some()
            && self.counters.in_flight.load(Ordering::Acquire) != 0;
        if busy {
            return false;
        }
        let word = self.load();
        match word.state() {
            State::Closed => self.marks.fetch_and(!USED, Ordering::AcqRel) & USED == 0,
            State::Open => {
                // A stale word (`None`) changed under us: not evictable this time.
                let now = self.now();
                self.time_of(word, now)
                    .is_some_and(|t| word.open_remaining_nanos(now, Some(t)) == 0)
            }
            _ => false,
        }
    }
}
