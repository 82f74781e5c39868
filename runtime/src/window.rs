//! Sliding windows: the last N outcomes (count) or the outcomes of the last span of time (time).
//!
//! **Count window.** Each slot is one bit (1 = failure), plus a second ring for slow calls when they
//! are tracked. Recording claims the next slot with one `fetch_add` on the cursor, then swaps the
//! slot's bit; a running total changes only when the bit flips, so it always equals the number of
//! set bits once writers finish. A success over a success slot costs the `fetch_add` and one load.
//!
//! A reader takes the failure (and slow) totals before the number of filled slots: every writer
//! claims its slot before it sets a bit, so every failure a reader counts has its call counted too.
//!
//! **Full count window.** Once the window is full, a success only evicts the oldest outcome and
//! cannot make a rule trip, so it claims no slot: it adds one to a pending count by
//! compare-and-swap. The first time that compare-and-swap fails (another caller changed the count
//! in between), the window allocates striped success counters, one cache line each, and from then
//! on a success of a full window adds one to its thread's stripe and writes nothing shared. Every
//! decision folds the pending and striped successes in first: a failure or a slow call, a
//! snapshot, a reconfiguration's copy. Folding takes a count and claims that many slots at once,
//! clearing their bits, which is exactly what that many single successes would have done:
//! successes are all alike, so only their order relative to failures matters, and a success that
//! returned before a failure's report began is in the window when that failure is judged. A fold
//! is done by the caller that decides, so no success is ever half-recorded (slot claimed, old bit
//! not yet cleared) while a failure is judged.
//!
//! **Time window.** [`TIME_BUCKETS`] buckets, each stamped with the index of the time slice it
//! counts. A writer whose slice is newer than the bucket's stamp claims it by CAS and clears it, so
//! rotation happens lazily on the request path and a long idle costs nothing extra: totals only sum
//! buckets whose stamp lies within the window. A bucket's calls and failures share one atomic word
//! (calls in the low half, failures in the high half), so one `fetch_add` records both and every
//! reading is a consistent pair: no reader ever sees a failure without its call, however many
//! threads record at once. Slow calls, when tracked, have their own counter, read before the pair.
//! When a bucket starts a new slice, the writer that claims it marks it while it clears the counters
//! and the other writers of that slice wait for the clear (a few nanoseconds), so no outcome of the
//! new slice is wiped. A writer whose clock reading is behind the bucket's slice (it read the time,
//! then was preempted past the boundary) counts its outcome in the newer slice. A success that is
//! not slow costs one clock read and one `fetch_add`; it sums nothing unless it is the first
//! record of its slice (older slices may just have expired) or brings the window to `min_calls`.
//! Once the other slices alone hold `min_calls`, no success of the slice needs a judgement: it
//! adds to its bucket by compare-and-swap, and after the first contention it goes to its thread's
//! stripe (shared with the count window's design), tagged with its slice, which every reading of
//! the window first folds into that slice's bucket. A success deferred by a caller that read the
//! clock just before a boundary, and folded after the new slice's first record summed the older
//! slices, is missing from that slice's judgements (it counts again once summed afresh).
//!
//! One concept, kept in one file though it passes 600 lines: the two window shapes share one
//! interface (`Outcomes`) and the copy between them on reload.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering, Padded};

use crate::policy::{Policy, TIME_BUCKETS, Window as WindowKind};

/// What a window holds at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    /// Outcomes in the window.
    pub(crate) calls: u32,
    /// Failures among them.
    pub(crate) failures: u32,
    /// Slow calls among them (successes or failures).
    pub(crate) slow: u32,
}

impl Counts {
    /// Failure rate in percent (0 when empty).
    pub(crate) fn failure_rate(self) -> f64 {
        percent(self.failures, self.calls)
    }

    /// Slow-call rate in percent (0 when empty).
    pub(crate) fn slow_rate(self) -> f64 {
        percent(self.slow, self.calls)
    }

    /// True when the policy's rate rules say the circuit must open.
    #[inline]
    pub(crate) fn trips(self, policy: &Policy) -> bool {
        let reaches = |part: u32, rate: u8| {
            rate != 0 && u64::from(part) * 100 >= u64::from(rate) * u64::from(self.calls)
        };
        self.calls >= policy.min_calls
            && (reaches(self.failures, policy.failure_rate)
                || (policy.slow_nanos != 0 && reaches(self.slow, policy.slow_rate)))
    }
}

fn percent(part: u32, all: u32) -> f64 {
    if all == 0 {
        0.0
    } else {
        f64::from(part) * 100.0 / f64::from(all)
    }
}

/// A recorded outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) failure: bool,
    pub(crate) slow: bool,
}

/// The window of one breaker.
pub(crate) enum Outcomes {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Outcomes {
    pub(crate) fn new(policy: &Policy) -> Self {
        match policy.window {
            WindowKind::Count(n) => Outcomes::Count(CountWindow::new(n, policy.slow_nanos != 0)),
            WindowKind::Time(span) => Outcomes::Time(TimeWindow::new(
                crate::clock::duration_to_nanos(span),
                policy.slow_nanos != 0,
            )),
        }
    }

    /// True when recording needs the current time.
    #[inline]
    pub(crate) fn needs_time(&self) -> bool {
        matches!(self, Outcomes::Time(_))
    }

    /// Records a success that was not slow (`now` is only called by time windows). Returns the
    /// counts when they must be judged: a success cannot raise a rate, but it can bring the
    /// window to `min_calls`, the moment the rules start to apply, and a time window's rate can
    /// rise when its oldest slice expires. Count windows judge when a success brings them to
    /// `min_calls`; time windows also judge the first record of each slice.
    #[inline(always)]
    pub(crate) fn record_fast_success(
        &self,
        now: impl FnOnce() -> u64,
        min_calls: u32,
    ) -> Option<Counts> {
        match self {
            Outcomes::Count(w) => w.record_fast_success(min_calls),
            Outcomes::Time(w) => w.record_fast_success(now(), min_calls),
        }
    }

    /// Records a sample; returns the counts right after it.
    #[inline]
    pub(crate) fn record(&self, now: u64, sample: Sample) -> Counts {
        match self {
            Outcomes::Count(w) => w.record(sample),
            Outcomes::Time(w) => w.record(now, sample),
        }
    }

    /// The current counts (`now` is only read by time windows).
    pub(crate) fn counts(&self, now: u64) -> Counts {
        match self {
            Outcomes::Count(w) => w.counts(),
            Outcomes::Time(w) => w.counts(now),
        }
    }

    /// Empties the window.
    pub(crate) fn reset(&self) {
        match self {
            Outcomes::Count(w) => w.reset(),
            Outcomes::Time(w) => w.reset(),
        }
    }

    /// Heap bytes owned by the window.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Outcomes::Count(w) => w.heap_bytes(),
            Outcomes::Time(w) => w.heap_bytes(),
        }
    }

    /// Copies the outcomes of `from`, a window of the same kind and size, into this new window
    /// (a reconfigured breaker keeps its window). Windows of another shape are left alone.
    pub(crate) fn copy_from(&self, from: &Outcomes) {
        let copy32 = |to: &AtomicU32, from: &AtomicU32| {
            to.store(from.load(Ordering::Acquire), Ordering::Release);
        };
        let copy64 = |to: &AtomicU64, from: &AtomicU64| {
            to.store(from.load(Ordering::Acquire), Ordering::Release);
        };
        let ring = |to: &BitRing, from: &BitRing| {
            for (to, from) in to.bits.iter().zip(from.bits.iter()) {
                copy64(to, from);
            }
            copy32(&to.set, &from.set);
        };
        match (self, from) {
            (Outcomes::Count(to), Outcomes::Count(from)) if to.len == from.len => {
                from.fold();
                copy32(&to.head, &from.head);
                to.full
                    .store(from.full.load(Ordering::Acquire), Ordering::Release);
                ring(&to.failures, &from.failures);
                if let (Some(to), Some(from)) = (&to.slow, &from.slow) {
                    ring(to, from);
                }
            }
            (Outcomes::Time(to), Outcomes::Time(from)) if to.slice_nanos == from.slice_nanos => {
                from.fold();
                let slow = to.track_slow && from.track_slow;
                for (to, from) in to.buckets.iter().zip(from.buckets.iter()) {
                    copy64(&to.stamp, &from.stamp);
                    copy64(&to.tally, &from.tally);
                    if slow {
                        copy32(&to.slow, &from.slow);
                    }
                }
                copy64(&to.current, &from.current);
                copy64(&to.prior_for, &from.prior_for);
                copy64(&to.prior_tally, &from.prior_tally);
                if slow {
                    copy32(&to.prior_slow, &from.prior_slow);
                }
            }
            _ => {}
        }
    }
}

/// A ring of bits with a running count of set bits.
struct BitRing {
    set: AtomicU32,
    bits: Box<[AtomicU64]>,
}

impl BitRing {
    fn new(len: u32) -> Self {
        BitRing {
            set: AtomicU32::new(0),
            bits: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Writes `value` at `slot`; returns the number of set bits after the write.
    #[inline]
    fn write(&self, slot: u32, value: bool) -> u32 {
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        if value {
            if word.fetch_or(mask, Ordering::AcqRel) & mask == 0 {
                return self.set.fetch_add(1, Ordering::AcqRel) + 1;
            }
        } else if word.load(Ordering::Relaxed) & mask != 0
            && word.fetch_and(!mask, Ordering::AcqRel) & mask != 0
        {
            return self.set.fetch_sub(1, Ordering::AcqRel) - 1;
        }
        self.set.load(Ordering::Acquire)
    }

    /// Clears a bit without reporting the total (the fast success path).
    #[inline(always)]
    fn clear(&self, slot: u32) {
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        if word.load(Ordering::Relaxed) & mask != 0
            && word.fetch_and(!mask, Ordering::AcqRel) & mask != 0
        {
            self.set.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Clears `count` bits from `slot` on (wrapping around a ring of `len` bits), as `count`
    /// single [`BitRing::clear`]s would.
    fn clear_range(&self, mut slot: u32, count: u32, len: u32) {
        let mut left = count.min(len);
        while left != 0 {
            let bit = slot % 64;
            let run = left.min(64 - bit).min(len - slot);
            let mask = (u64::MAX >> (64 - run)) << bit;
            let word = &self.bits[(slot / 64) as usize];
            if word.load(Ordering::Relaxed) & mask != 0 {
                let cleared = (word.fetch_and(!mask, Ordering::AcqRel) & mask).count_ones();
                if cleared != 0 {
                    self.set.fetch_sub(cleared, Ordering::AcqRel);
                }
            }
            left -= run;
            slot += run;
            if slot == len {
                slot = 0;
            }
        }
    }

    fn count(&self) -> u32 {
        self.set.load(Ordering::Acquire)
    }

    fn reset(&self) {
        for word in self.bits.iter() {
            word.store(0, Ordering::Release);
        }
        self.set.store(0, Ordering::Release);
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.bits)
    }
}

/// The last `len` outcomes.
///
/// `#[repr(C)]`: a success on a full window reads the enum's variant (the niche of `failures`'
/// box), `full`, `stripes` and `pending`, all on the first cache line; the cursor of a filling
/// window follows on it.
#[repr(C)]
pub(crate) struct CountWindow {
    failures: BitRing,
    /// Successes of a full window not yet folded in.
    pending: AtomicU64,
    /// Successes of a full, contended window not yet folded in (allocated on first contention).
    stripes: LazyStripes,
    /// Set once `len` slots were claimed since the last reset.
    full: AtomicBool,
    /// Slots claimed so far (wraps after 2^32 calls, which only reorders one slot).
    head: AtomicU32,
    len: u32,
    /// Lemire's multiplier for `x % len` without a division.
    magic: u64,
    slow: Option<BitRing>,
}

/// The stripes of a window, allocated on its first contention.
#[cfg(not(fusebox_loom))]
type LazyStripes = std::sync::OnceLock<Stripes>;

/// The stripes of a window, allocated at once and engaged on its first contention: loom cannot
/// see `OnceLock`'s publication, so the model publishes them through one of its atomics instead.
#[cfg(fusebox_loom)]
struct LazyStripes {
    stripes: Stripes,
    engaged: AtomicBool,
}

#[cfg(fusebox_loom)]
impl LazyStripes {
    fn new() -> Self {
        LazyStripes {
            stripes: Stripes::new(),
            engaged: AtomicBool::new(false),
        }
    }

    fn get(&self) -> Option<&Stripes> {
        self.engaged
            .load(Ordering::Acquire)
            .then_some(&self.stripes)
    }

    fn get_or_init(&self, _: fn() -> Stripes) -> &Stripes {
        self.engaged.store(true, Ordering::Release);
        &self.stripes
    }
}

/// Striped success counters: one per cache line, picked by thread (their number is a power of
/// two). One pointer and a length, so a window keeps them within 24 bytes (see [`CountWindow`]).
struct Stripes {
    counts: Box<[Padded<AtomicU64>]>,
}

/// A pending or striped count at which it is folded in, so it never overflows.
const STRIPE_FOLD: u64 = if cfg!(test) { 64 } else { 1 << 30 };

impl Stripes {
    fn new() -> Self {
        let len = stripe_count();
        Stripes {
            counts: (0..len).map(|_| Padded(AtomicU64::new(0))).collect(),
        }
    }

    /// The calling thread's stripe.
    #[inline(always)]
    fn mine(&self) -> &AtomicU64 {
        &self.counts[thread_index() & (self.counts.len() - 1)]
    }
}

/// Stripes per contended window: twice the available parallelism as a power of two, 2 to 256.
fn stripe_count() -> usize {
    #[cfg(fusebox_loom)]
    {
        2
    }
    #[cfg(not(fusebox_loom))]
    {
        static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *COUNT.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(4, usize::from);
            (cores * 2).next_power_of_two().clamp(2, 256)
        })
    }
}

/// A small number fixed per thread, handed out in turn, so threads spread over the stripes.
#[inline(always)]
fn thread_index() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(0) };
    }
    INDEX.with(|index| {
        let mut current = index.get();
        if current == 0 {
            current = NEXT.fetch_add(1, Ordering::Relaxed);
            index.set(current);
        }
        current
    })
}

/// `a % d` for the `magic` of `d` (Lemire, Kaser & Kurz, "Faster remainder by direct computation").
#[inline(always)]
fn fastmod(a: u32, magic: u64, d: u32) -> u32 {
    let low = magic.wrapping_mul(u64::from(a));
    ((u128::from(low) * u128::from(d)) >> 64) as u32
}

impl CountWindow {
    pub(crate) fn new(len: u32, track_slow: bool) -> Self {
        let len = len.max(1);
        CountWindow {
            len,
            magic: (u64::MAX / u64::from(len)).wrapping_add(1),
            head: AtomicU32::new(0),
            full: AtomicBool::new(false),
            failures: BitRing::new(len),
            slow: track_slow.then(|| BitRing::new(len)),
            pending: AtomicU64::new(0),
            stripes: LazyStripes::new(),
        }
    }

    /// Claims the next slot; returns it and the number of filled slots after this one.
    #[inline(always)]
    fn claim(&self) -> (u32, u32) {
        let index = self.head.fetch_add(1, Ordering::AcqRel);
        let slot = fastmod(index, self.magic, self.len);
        let calls = if index.wrapping_add(1) >= self.len || self.full.load(Ordering::Relaxed) {
            if !self.full.load(Ordering::Relaxed) {
                self.full.store(true, Ordering::Relaxed);
            }
            self.len
        } else {
            index + 1
        };
        (slot, calls)
    }

    /// Records a success that was not slow; returns the counts when it brings the window to
    /// `min_calls`. A full window (whose calls are all `len`, at least `min_calls`) needs no
    /// judgement: the success adds one to the pending successes by compare-and-swap, or, once that
    /// met contention, to its thread's stripe. Both are folded in before the window is read.
    #[inline(always)]
    fn record_fast_success(&self, min_calls: u32) -> Option<Counts> {
        if self.full.load(Ordering::Relaxed) {
            if let Some(stripes) = self.stripes.get() {
                self.add_to(stripes.mine());
                return None;
            }
            let pending = self.pending.load(Ordering::Relaxed);
            if pending >= STRIPE_FOLD {
                self.fold_count(&self.pending);
                self.pending.fetch_add(1, Ordering::AcqRel);
            } else if self
                .pending
                .compare_exchange(pending, pending + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                self.contended();
            }
            return None;
        }
        let (slot, calls) = self.claim();
        self.clear(slot);
        (calls == min_calls).then(|| self.counts())
    }

    /// Marks `slot` a success in every ring.
    #[inline(always)]
    fn clear(&self, slot: u32) {
        self.failures.clear(slot);
        if let Some(slow) = &self.slow {
            slow.clear(slot);
        }
    }

    /// A success whose compare-and-swap met contention: counted in a stripe, allocated now if
    /// needed.
    #[cold]
    fn contended(&self) {
        self.add_to(self.stripes.get_or_init(Stripes::new).mine());
    }

    /// Adds one success to `count` (a stripe), folding it in when it is due.
    #[inline(always)]
    fn add_to(&self, count: &AtomicU64) {
        if count.fetch_add(1, Ordering::AcqRel) + 1 >= STRIPE_FOLD {
            self.fold_count(count);
        }
    }

    /// Folds the pending and the striped successes into the window (see the module docs).
    #[inline]
    fn fold(&self) {
        if self.pending.load(Ordering::Acquire) != 0 {
            self.fold_count(&self.pending);
        }
        if let Some(stripes) = self.stripes.get() {
            for stripe in stripes.counts.iter() {
                if stripe.load(Ordering::Acquire) != 0 {
                    self.fold_count(stripe);
                }
            }
        }
    }

    /// Takes the successes counted in `count` and claims that many slots at once, clearing
    /// their bits.
    #[cold]
    fn fold_count(&self, count: &AtomicU64) {
        // At most `STRIPE_FOLD`: a count is folded in when it reaches it.
        let count = count.swap(0, Ordering::AcqRel) as u32;
        if count == 0 {
            return;
        }
        let index = self.head.fetch_add(count, Ordering::AcqRel);
        let slot = fastmod(index, self.magic, self.len);
        self.failures.clear_range(slot, count, self.len);
        if let Some(slow) = &self.slow {
            slow.clear_range(slot, count, self.len);
        }
        if !self.full.load(Ordering::Relaxed)
            && u64::from(index) + u64::from(count) >= u64::from(self.len)
        {
            self.full.store(true, Ordering::Relaxed);
        }
    }

    #[inline]
    fn record(&self, sample: Sample) -> Counts {
        self.fold();
        let (slot, _) = self.claim();
        let failures = self.failures.write(slot, sample.failure);
        let slow = match &self.slow {
            Some(ring) => ring.write(slot, sample.slow),
            None => 0,
        };
        // Read the number of calls after writing: two writers that claimed slots in one order and
        // wrote them in the other must not both judge a window that lacks the other's outcome. The
        // last writer sees every claimed slot and every written bit.
        let calls = self.filled();
        Counts {
            calls,
            failures: failures.min(calls),
            slow: slow.min(calls),
        }
    }

    /// Slots filled since the last reset (at most `len`).
    #[inline]
    fn filled(&self) -> u32 {
        if self.full.load(Ordering::Acquire) {
            self.len
        } else {
            self.head.load(Ordering::Acquire).min(self.len)
        }
    }

    fn counts(&self) -> Counts {
        self.fold();
        // Totals first, calls last: a writer claims its slot before it sets its bit, so every
        // failure counted here has its call among `calls`.
        let slow = self.slow.as_ref().map_or(0, BitRing::count);
        let failures = self.failures.count();
        let calls = self.filled();
        Counts {
            calls,
            failures: failures.min(calls),
            slow: slow.min(calls),
        }
    }

    fn reset(&self) {
        self.pending.store(0, Ordering::Release);
        if let Some(stripes) = self.stripes.get() {
            for stripe in stripes.counts.iter() {
                stripe.store(0, Ordering::Release);
            }
        }
        self.failures.reset();
        if let Some(slow) = &self.slow {
            slow.reset();
        }
        self.full.store(false, Ordering::Release);
        self.head.store(0, Ordering::Release);
    }

    fn heap_bytes(&self) -> usize {
        self.failures.heap_bytes()
            + self.slow.as_ref().map_or(0, BitRing::heap_bytes)
            + self
                .stripes
                .get()
                .map_or(0, |stripes| std::mem::size_of_val(&*stripes.counts))
    }
}

/// The stamp of a bucket whose counters are being cleared for a new slice (never a slice: slices
/// are nanoseconds divided by at least one, plus one).
const CLAIMING: u64 = u64::MAX;

/// Waits for a bucket being cleared: a few spins, then yields the thread.
#[inline]
fn pause(waited: &mut u32) {
    *waited += 1;
    #[cfg(fusebox_loom)]
    loom::thread::yield_now();
    #[cfg(not(fusebox_loom))]
    if *waited < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Calls in the low 32 bits of a tally, failures in the high 32.
const FAILURE_ONE: u64 = 1 << 32;

/// One call, and one failure when `failure`: what a record adds to a tally.
#[inline(always)]
fn tally_of(failure: bool) -> u64 {
    1 | u64::from(failure) << 32
}

/// (calls, failures) of a tally.
#[inline(always)]
fn split(tally: u64) -> (u32, u32) {
    (tally as u32, (tally / FAILURE_ONE) as u32)
}

struct Bucket {
    /// Index of the time slice counted here, plus one (0: never used).
    stamp: AtomicU64,
    /// Calls (low half) and failures (high half), updated together.
    tally: AtomicU64,
    /// Slow calls (only written when slow calls are tracked).
    slow: AtomicU32,
}

/// The outcomes of the last `span`, in [`TIME_BUCKETS`] slices.
pub(crate) struct TimeWindow {
    slice_nanos: u64,
    /// Slow calls are tracked (the policy sets `slow`).
    track_slow: bool,
    buckets: Box<[Bucket]>,
    /// The slice most recently seen, so most calls find theirs without a division.
    current: AtomicU64,
    /// The slice `prior_*` were summed for: the window's other slices, which do not change while
    /// that slice lasts. A record then costs its own bucket plus two loads, not a full sum.
    prior_for: AtomicU64,
    /// Calls and failures of the other slices, as one tally.
    prior_tally: AtomicU64,
    prior_slow: AtomicU32,
    /// Successes deferred while the window is contended, each tagged with its slice (allocated on
    /// first contention; see [`TimeWindow::record_fast_success`]).
    stripes: LazyStripes,
}

impl TimeWindow {
    pub(crate) fn new(span_nanos: u64, track_slow: bool) -> Self {
        TimeWindow {
            slice_nanos: (span_nanos / u64::from(TIME_BUCKETS)).max(1),
            track_slow,
            buckets: (0..TIME_BUCKETS)
                .map(|_| Bucket {
                    stamp: AtomicU64::new(0),
                    tally: AtomicU64::new(0),
                    slow: AtomicU32::new(0),
                })
                .collect(),
            current: AtomicU64::new(0),
            prior_for: AtomicU64::new(0),
            prior_tally: AtomicU64::new(0),
            prior_slow: AtomicU32::new(0),
            stripes: LazyStripes::new(),
        }
    }

    /// The slice (1-based) that `now` falls in.
    #[inline]
    fn slice(&self, now: u64) -> u64 {
        let cached = self.current.load(Ordering::Relaxed);
        let start = cached.wrapping_sub(1).wrapping_mul(self.slice_nanos);
        if cached != 0 && now >= start && now - start < self.slice_nanos {
            return cached;
        }
        let slice = now / self.slice_nanos + 1;
        self.current.store(slice, Ordering::Relaxed);
        slice
    }

    /// The bucket of `slice`, claimed for it.
    #[inline(always)]
    fn bucket(&self, slice: u64) -> &Bucket {
        let bucket = &self.buckets[(slice % u64::from(TIME_BUCKETS)) as usize];
        let stamp = bucket.stamp.load(Ordering::Acquire);
        if stamp != slice {
            self.rotate(bucket, stamp, slice);
        }
        bucket
    }

    /// Records a success that was not slow: one `fetch_add` on its bucket. Returns the counts only
    /// when they must be judged (see [`Outcomes::record_fast_success`]): when this record brings
    /// the window to `min_calls` (within a slice the window's calls grow by one per record, so
    /// exactly one record sees them reach it), or when the other slices' totals are not yet summed
    /// for this slice (its first record: older slices may have expired since the last judgement).
    /// Between those moments a success only adds a call, which cannot make a rate rule trip.
    ///
    /// When the other slices alone hold `min_calls`, no success of this slice is judged: the
    /// success adds to its bucket by compare-and-swap, and once that met contention, to its
    /// thread's stripe, tagged with the slice and folded into the slice's bucket before any
    /// reading of the window.
    #[inline(always)]
    fn record_fast_success(&self, now: u64, min_calls: u32) -> Option<Counts> {
        let slice = self.slice(now);
        let bucket = self.bucket(slice);
        if self.prior_for.load(Ordering::Acquire) == slice {
            let prior_calls = self.prior_tally.load(Ordering::Acquire) as u32;
            if prior_calls >= min_calls {
                if let Some(stripes) = self.stripes.get() {
                    self.defer(stripes.mine(), slice);
                    return None;
                }
                let tally = bucket.tally.load(Ordering::Relaxed);
                if bucket
                    .tally
                    .compare_exchange(tally, tally + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    self.contended(slice);
                }
                return None;
            }
            let tally = bucket.tally.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
            if prior_calls.wrapping_add(tally as u32) != min_calls {
                return None;
            }
            return Some(self.judged(bucket, slice, tally));
        }
        let tally = bucket.tally.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        Some(self.judged(bucket, slice, tally))
    }

    /// A success whose compare-and-swap met contention: deferred in a stripe, allocated now if
    /// needed.
    #[cold]
    fn contended(&self, slice: u64) {
        self.defer(self.stripes.get_or_init(Stripes::new).mine(), slice);
    }

    /// Adds one success of `slice` to `stripe`: the stripe's high half tags its slice, the low half
    /// counts. A stripe holding another slice's successes (or too many) first hands them to
    /// their bucket.
    #[inline(always)]
    fn defer(&self, stripe: &AtomicU64, slice: u64) {
        let tag = u64::from(slice as u32) << 32;
        let mut seen = stripe.load(Ordering::Relaxed);
        loop {
            let same = seen & !u64::from(u32::MAX) == tag && (seen as u32) < STRIPE_FOLD as u32;
            let next = if same { seen + 1 } else { tag | 1 };
            match stripe.compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    if !same {
                        self.flush(seen);
                    }
                    return;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// Adds the successes of a stripe's value to the bucket of their slice, if it still counts
    /// that slice (else they expired with it).
    #[cold]
    fn flush(&self, stripe: u64) {
        let (count, tag) = (stripe as u32, (stripe >> 32) as u32);
        if count == 0 {
            return;
        }
        for bucket in self.buckets.iter() {
            let stamp = bucket.stamp.load(Ordering::Acquire);
            if stamp != 0 && stamp != CLAIMING && stamp as u32 == tag {
                bucket.tally.fetch_add(u64::from(count), Ordering::AcqRel);
                return;
            }
        }
    }

    /// Hands every stripe's deferred successes to their buckets; false when there are no stripes.
    #[inline]
    fn fold(&self) -> bool {
        let Some(stripes) = self.stripes.get() else {
            return false;
        };
        for stripe in stripes.counts.iter() {
            if stripe.load(Ordering::Acquire) != 0 {
                self.flush(stripe.swap(0, Ordering::AcqRel));
            }
        }
        true
    }

    #[inline]
    fn record(&self, now: u64, sample: Sample) -> Counts {
        let slice = self.slice(now);
        let bucket = self.bucket(slice);
        let add = tally_of(sample.failure);
        let tally = bucket
            .tally
            .fetch_add(add, Ordering::AcqRel)
            .wrapping_add(add);
        if self.track_slow && sample.slow {
            bucket.slow.fetch_add(1, Ordering::AcqRel);
        }
        self.judged(bucket, slice, tally)
    }

    /// The window's counts right after a record in `bucket` of `slice` left it at `tally`
    /// (deferred successes folded in first).
    #[inline]
    fn judged(&self, bucket: &Bucket, slice: u64, mut tally: u64) -> Counts {
        if self.fold() {
            tally = bucket.tally.load(Ordering::Acquire);
        }
        let slow = if self.track_slow {
            let slow = bucket.slow.load(Ordering::Acquire);
            // A writer counts its call before its slow mark: the tally read after the slow count
            // holds the call of every slow mark in it.
            tally = bucket.tally.load(Ordering::Acquire);
            slow
        } else {
            0
        };
        let (calls, failures) = split(tally);
        let prior = self.prior(slice);
        // Wrapping: a slice's tally itself wraps after 2^32 calls.
        Counts {
            calls: prior.calls.wrapping_add(calls),
            failures: prior.failures.wrapping_add(failures),
            slow: prior.slow.wrapping_add(slow),
        }
    }

    /// Makes `bucket` count `slice` when it holds an older one. The writer that claims it marks it
    /// [`CLAIMING`] while it clears the counters, and writers of the same slice wait for the clear:
    /// an outcome recorded at the boundary is never wiped by the clear. (A writer whose time is
    /// behind the bucket's slice counts in the newer slice.)
    #[cold]
    fn rotate(&self, bucket: &Bucket, mut stamp: u64, slice: u64) {
        let mut waited = 0u32;
        loop {
            if stamp == CLAIMING {
                pause(&mut waited);
                stamp = bucket.stamp.load(Ordering::Acquire);
                continue;
            }
            if stamp >= slice {
                return;
            }
            match bucket.stamp.compare_exchange(
                stamp,
                CLAIMING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    bucket.tally.store(0, Ordering::Relaxed);
                    bucket.slow.store(0, Ordering::Relaxed);
                    bucket.stamp.store(slice, Ordering::Release);
                    return;
                }
                Err(seen) => stamp = seen,
            }
        }
    }

    /// The counts of the window's slices before `slice`.
    #[inline]
    fn prior(&self, slice: u64) -> Counts {
        if self.prior_for.load(Ordering::Acquire) == slice {
            let slow = self.prior_slow.load(Ordering::Acquire);
            let (calls, failures) = split(self.prior_tally.load(Ordering::Acquire));
            return Counts {
                calls,
                failures,
                slow,
            };
        }
        let prior = self.sum(slice.saturating_sub(u64::from(TIME_BUCKETS) - 1), slice - 1);
        self.prior_tally.store(
            u64::from(prior.calls) | u64::from(prior.failures) << 32,
            Ordering::Release,
        );
        self.prior_slow.store(prior.slow, Ordering::Release);
        self.prior_for.store(slice, Ordering::Release);
        prior
    }

    /// The counts of the buckets stamped with a slice in `oldest..=newest`.
    fn sum(&self, oldest: u64, newest: u64) -> Counts {
        let mut total = Counts::default();
        for bucket in self.buckets.iter() {
            let stamp = bucket.stamp.load(Ordering::Acquire);
            if stamp >= oldest && stamp <= newest {
                let slow = bucket.slow.load(Ordering::Acquire);
                let (calls, failures) = split(bucket.tally.load(Ordering::Acquire));
                total.calls = total.calls.saturating_add(calls);
                total.failures = total.failures.saturating_add(failures);
                total.slow = total.slow.saturating_add(slow.min(calls));
            }
        }
        total
    }

    fn counts(&self, now: u64) -> Counts {
        self.fold();
        let slice = self.slice(now);
        self.sum(slice.saturating_sub(u64::from(TIME_BUCKETS) - 1), slice)
    }

    fn reset(&self) {
        if let Some(stripes) = self.stripes.get() {
            for stripe in stripes.counts.iter() {
                stripe.store(0, Ordering::Release);
            }
        }
        self.prior_for.store(0, Ordering::Release);
        for bucket in self.buckets.iter() {
            bucket.stamp.store(0, Ordering::Release);
            bucket.tally.store(0, Ordering::Release);
            bucket.slow.store(0, Ordering::Release);
        }
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
            + self
                .stripes
                .get()
                .map_or(0, |stripes| std::mem::size_of_val(&*stripes.counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAIL: Sample = Sample {
        failure: true,
        slow: false,
    };
    const OK: Sample = Sample {
        failure: false,
        slow: false,
    };
    const SLOW_OK: Sample = Sample {
        failure: false,
        slow: true,
    };

    #[test]
    fn old_outcomes_are_evicted() {
        let w = CountWindow::new(10, false);
        for _ in 0..5 {
            w.record(FAIL);
        }
        for _ in 0..10 {
            w.record_fast_success(u32::MAX);
        }
        assert_eq!(
            w.counts(),
            Counts {
                calls: 10,
                failures: 0,
                slow: 0
            }
        );
        let mut last = Counts::default();
        for _ in 0..5 {
            last = w.record(FAIL);
        }
        assert_eq!(
            last,
            Counts {
                calls: 10,
                failures: 5,
                slow: 0
            }
        );
        let policy = Policy::new().window(10).min_calls(10);
        assert!(last.trips(&policy));
        assert!(!last.trips(&policy.failure_rate(51)));
    }

    #[test]
    fn windows_longer_than_one_word_and_slow_ring() {
        let w = CountWindow::new(130, true);
        for i in 0..1000 {
            w.record(if i % 2 == 0 { FAIL } else { SLOW_OK });
        }
        assert_eq!(
            w.counts(),
            Counts {
                calls: 130,
                failures: 65,
                slow: 65
            }
        );
        w.reset();
        assert_eq!(w.counts(), Counts::default());
        assert_eq!(w.heap_bytes(), 48);
    }

    #[test]
    fn min_calls_gate_and_slow_rate() {
        let w = CountWindow::new(10, true);
        let policy = Policy::new().window(10).min_calls(5);
        for _ in 0..4 {
            assert!(!w.record(FAIL).trips(&policy));
        }
        assert!(w.record(FAIL).trips(&policy));
        let slow_policy = Policy::new()
            .window(4)
            .min_calls(4)
            .rate_off()
            .slow(std::time::Duration::from_secs(1))
            .slow_rate(75);
        let w = CountWindow::new(4, true);
        w.record(OK);
        w.record(SLOW_OK);
        w.record(SLOW_OK);
        assert!(!w.counts().trips(&slow_policy));
        assert!(w.record(SLOW_OK).trips(&slow_policy));
    }

    #[test]
    fn fastmod_matches_the_remainder() {
        for d in [1u32, 2, 3, 7, 10, 64, 100, 1000, 999_983, 1_000_000] {
            let magic = (u64::MAX / u64::from(d)).wrapping_add(1);
            for a in [0u32, 1, 2, 99, 100, 101, 12_345, u32::MAX - 1, u32::MAX] {
                assert_eq!(fastmod(a, magic, d), a % d, "{a} % {d}");
            }
        }
    }

    #[test]
    fn time_window_rotates_lazily_and_forgets_after_its_span() {
        let s = 1_000_000_000u64; // window of 10 s, buckets of 1 s
        let w = TimeWindow::new(10 * s, false);
        for t in 0..10 {
            w.record(t * s, FAIL);
        }
        assert_eq!(
            w.counts(9 * s),
            Counts {
                calls: 10,
                failures: 10,
                slow: 0
            }
        );
        // One bucket later the oldest slice has left the window.
        assert_eq!(w.counts(10 * s).calls, 9);
        w.record(10 * s, OK);
        assert_eq!(
            w.counts(10 * s),
            Counts {
                calls: 10,
                failures: 9,
                slow: 0
            }
        );
        // A long idle: nothing left, and the next record starts a clean bucket.
        assert_eq!(w.counts(1_000 * s), Counts::default());
        assert_eq!(
            w.record(1_000 * s, FAIL),
            Counts {
                calls: 1,
                failures: 1,
                slow: 0
            }
        );
        w.reset();
        assert_eq!(w.counts(1_000 * s), Counts::default());
    }

    #[test]
    fn time_window_tracks_slow_calls_only_when_asked() {
        let s = 1_000_000_000u64;
        let tracked = TimeWindow::new(10 * s, true);
        let untracked = TimeWindow::new(10 * s, false);
        for w in [&tracked, &untracked] {
            w.record(0, SLOW_OK);
            w.record(s, FAIL);
            w.record(2 * s, SLOW_OK);
        }
        assert_eq!(
            tracked.record(2 * s, OK),
            Counts {
                calls: 4,
                failures: 1,
                slow: 2
            }
        );
        assert_eq!(tracked.counts(3 * s), tracked.counts(2 * s));
        assert_eq!(
            untracked.counts(2 * s),
            Counts {
                calls: 3,
                failures: 1,
                slow: 0
            }
        );
    }

    #[test]
    fn a_time_window_success_is_judged_only_at_min_calls_or_a_new_slice() {
        let s = 1_000_000_000u64;
        let w = TimeWindow::new(10 * s, false);
        let counts = |calls, failures| Counts {
            calls,
            failures,
            slow: 0,
        };
        assert_eq!(w.record(0, FAIL), counts(1, 1));
        // Mid-slice successes below and above `min_calls = 3` need no judgement.
        assert_eq!(w.record_fast_success(1, 3), None);
        assert_eq!(w.record_fast_success(2, 3), Some(counts(3, 1)));
        assert_eq!(w.record_fast_success(3, 3), None);
        // The first record of a slice is judged (older slices may have expired), then not again.
        assert_eq!(w.record_fast_success(s, 3), Some(counts(5, 1)));
        assert_eq!(w.record_fast_success(s + 1, 3), None);
        // Past the span the old slices have left: the first success judges what remains.
        assert_eq!(w.record(10 * s + 5, FAIL), counts(3, 1));
        assert_eq!(w.record_fast_success(11 * s, 3), Some(counts(2, 1)));
        assert_eq!(w.counts(11 * s), counts(2, 1));
    }

    #[test]
    fn clearing_a_range_is_clearing_each_slot() {
        for len in [1u32, 3, 63, 64, 65, 130] {
            for start in 0..len {
                for count in [0, 1, 2, len - 1, len, len + 1, 2 * len + 3] {
                    let (one_by_one, at_once) = (BitRing::new(len), BitRing::new(len));
                    for ring in [&one_by_one, &at_once] {
                        for slot in 0..len {
                            if slot % 3 != 1 {
                                ring.write(slot, true);
                            }
                        }
                    }
                    for i in 0..count {
                        one_by_one.clear((start + i) % len);
                    }
                    at_once.clear_range(start, count, len);
                    let bits = |ring: &BitRing| -> Vec<u64> {
                        ring.bits
                            .iter()
                            .map(|w| w.load(Ordering::Relaxed))
                            .collect()
                    };
                    assert_eq!(bits(&at_once), bits(&one_by_one), "{len} {start} {count}");
                    assert_eq!(at_once.count(), one_by_one.count(), "{len} {start} {count}");
                }
            }
        }
    }

    #[test]
    fn striped_successes_are_folded_in_before_every_decision() {
        let exact = CountWindow::new(10, true);
        let striped = CountWindow::new(10, true);
        let slow_fail = Sample {
            failure: true,
            slow: true,
        };
        for w in [&exact, &striped] {
            for _ in 0..10 {
                w.record(slow_fail);
            }
        }
        // The same outcomes, the successes of `striped` counted in its stripes.
        for _ in 0..7 {
            exact.record_fast_success(u32::MAX);
            striped.contended();
        }
        assert!(striped.stripes.get().is_some());
        assert_eq!(striped.record_fast_success(u32::MAX), None); // a stripe too, now
        exact.record_fast_success(u32::MAX);
        // A snapshot folds them in: 8 successes evicted 8 of the 10 failures.
        let expected = Counts {
            calls: 10,
            failures: 2,
            slow: 2,
        };
        assert_eq!(exact.counts(), expected);
        assert_eq!(striped.counts(), expected);
        // A failure folds them in before it is judged.
        for _ in 0..5 {
            exact.record_fast_success(u32::MAX);
            striped.record_fast_success(u32::MAX);
        }
        assert_eq!(exact.record(FAIL), striped.record(FAIL));
        assert_eq!(
            striped.counts(),
            Counts {
                calls: 10,
                failures: 1,
                slow: 0
            }
        );
        // So does a copy; a reset drops what the stripes hold.
        for _ in 0..10 {
            exact.record_fast_success(u32::MAX);
            striped.record_fast_success(u32::MAX);
        }
        let copy = Outcomes::Count(CountWindow::new(10, true));
        copy.copy_from(&Outcomes::Count(striped));
        assert_eq!(copy.counts(0), exact.counts());
        let reset = CountWindow::new(4, false);
        for _ in 0..4 {
            reset.record(FAIL);
        }
        reset.contended();
        reset.reset();
        assert_eq!(reset.counts(), Counts::default());
        assert_eq!(reset.heap_bytes(), 8 + stripe_count() * 64);
    }

    #[test]
    fn a_full_pending_or_striped_count_is_folded_in_without_contention() {
        let w = CountWindow::new(100, false);
        for _ in 0..100 {
            w.record(FAIL);
        }
        for _ in 0..STRIPE_FOLD + 10 {
            w.record_fast_success(u32::MAX);
        }
        // Folded once on the way, and no stripes for a window nobody contended for.
        assert!(w.stripes.get().is_none());
        assert_eq!(w.pending.load(Ordering::Relaxed), 10);
        assert_eq!(u64::from(w.failures.count()), 100 - STRIPE_FOLD);
        w.contended();
        for _ in 0..STRIPE_FOLD {
            w.record_fast_success(u32::MAX);
        }
        assert_eq!(w.stripes.get().unwrap().mine().load(Ordering::Relaxed), 1);
        assert_eq!(
            w.counts(),
            Counts {
                calls: 100,
                failures: 0,
                slow: 0
            }
        );
    }

    #[test]
    fn a_contended_time_window_folds_deferred_successes_into_their_slice() {
        let s = 1_000_000_000u64;
        let w = TimeWindow::new(10 * s, false);
        let counts = |calls, failures| Counts {
            calls,
            failures,
            slow: 0,
        };
        for _ in 0..4 {
            w.record(0, OK);
        }
        assert_eq!(w.record(0, FAIL), counts(5, 1));
        // Slice 2: its first record sums slice 1, which holds `min_calls = 3` on its own.
        assert_eq!(w.record_fast_success(s, 3), Some(counts(6, 1)));
        w.contended(2); // as if a compare-and-swap had failed
        for _ in 0..3 {
            assert_eq!(w.record_fast_success(s + 1, 3), None);
        }
        assert_eq!(
            w.stripes.get().unwrap().mine().load(Ordering::Relaxed),
            2 << 32 | 4
        );
        // Every reading folds them in: a snapshot, a failure's judgement.
        assert_eq!(w.counts(s + 2), counts(10, 1));
        w.record_fast_success(s + 3, 3);
        assert_eq!(w.record(s + 4, FAIL), counts(12, 2));
        w.record_fast_success(2 * s, 3); // slice 3's first record: judged, not deferred
        w.record_fast_success(2 * s, 3);
        w.record_fast_success(2 * s + 1, 3);
        w.record(2 * s + 2, OK); // no stripe: a direct record
        assert_eq!(w.counts(2 * s + 3), counts(16, 2));
        // A deferral for a newer slice hands the stripe's older successes to their bucket.
        w.record_fast_success(2 * s + 4, 3);
        let mine = w.stripes.get().unwrap().mine();
        w.defer(mine, 4);
        assert_eq!(mine.load(Ordering::Relaxed), 4 << 32 | 1);
        assert_eq!(w.sum(3, 3), counts(5, 0));
        // Deferred successes of a slice that expired leave with it.
        assert_eq!(w.counts(13 * s), counts(0, 0));
        w.record_fast_success(13 * s, 3);
        w.reset();
        assert_eq!(w.counts(13 * s), Counts::default());
        assert_eq!(w.heap_bytes(), 10 * 24 + stripe_count() * 64);
    }

    #[test]
    fn a_tally_keeps_calls_and_failures_apart() {
        let mut tally = 0u64;
        for failure in [true, false, true, true] {
            tally += tally_of(failure);
        }
        assert_eq!(split(tally), (4, 3));
        assert_eq!(split(u64::from(u32::MAX) | 7 << 32), (u32::MAX, 7));
    }

    /// A success on a full count window reads the enum's variant (the niche of `failures`' box,
    /// at offset 0: `Outcomes` has no tag of its own), `full`, `stripes` and `pending`: all on the
    /// window's first cache line.
    #[test]
    fn a_full_windows_success_reads_one_cache_line() {
        use std::mem::{offset_of, size_of};
        assert_eq!(
            size_of::<Outcomes>(),
            size_of::<CountWindow>(),
            "no separate tag"
        );
        assert_eq!(offset_of!(CountWindow, failures), 0);
        let read = [
            (
                "failures",
                offset_of!(CountWindow, failures),
                size_of::<BitRing>(),
            ),
            (
                "pending",
                offset_of!(CountWindow, pending),
                size_of::<AtomicU64>(),
            ),
            (
                "stripes",
                offset_of!(CountWindow, stripes),
                size_of::<LazyStripes>(),
            ),
            (
                "full",
                offset_of!(CountWindow, full),
                size_of::<AtomicBool>(),
            ),
        ];
        for (name, offset, size) in read {
            assert!(
                offset + size <= 64,
                "`{name}` ends at byte {}, past the first line",
                offset + size
            );
        }
    }
}
