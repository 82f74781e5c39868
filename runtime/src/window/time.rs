//! The time window: the outcomes of the last span, in buckets rotated lazily.
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
//! stripe (`stripes.rs`), tagged with its slice, which every reading of the window first folds
//! into that slice's bucket. A success deferred by a caller that read the clock just before a
//! boundary, and folded after the new slice's first record summed the older slices, is missing
//! from that slice's judgements (it counts again once summed afresh).
//!
//! **Quiet slice.** The slice whose successes need no judgement (its bucket claimed, the other
//! slices summed for it and holding `min_calls` alone) is published in one word, `quiet`: the
//! slice and its bucket's index. A success whose time falls in it reads that word, the slice's
//! length and the stripes, all on the window's first cache line, and adds to the bucket: no
//! division, no stamp or totals to compare. Any other success (a slice's first records, a window
//! below `min_calls`) takes the general path above, which publishes the slice once it is quiet.
//! A reset unpublishes it first.

use crate::policy::TIME_BUCKETS;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

use super::stripes::{LazyStripes, STRIPE_FOLD, Stripes};
use super::{Counts, Sample, copy32, copy64};

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
pub(super) fn tally_of(failure: bool) -> u64 {
    1 | u64::from(failure) << 32
}

/// (calls, failures) of a tally.
#[inline(always)]
pub(super) fn split(tally: u64) -> (u32, u32) {
    (tally as u32, (tally / FAILURE_ONE) as u32)
}

/// Bits of [`TimeWindow::quiet`] that hold the quiet slice's bucket index (the slice is above).
pub(super) const QUIET_INDEX_BITS: u32 = 4;

const _: () = assert!(TIME_BUCKETS <= 1 << QUIET_INDEX_BITS);

/// The buckets of a window, one per slice of its span.
pub(super) type Buckets = [Bucket; TIME_BUCKETS as usize];

pub(super) struct Bucket {
    /// Index of the time slice counted here, plus one (0: never used).
    stamp: AtomicU64,
    /// Calls (low half) and failures (high half), updated together.
    tally: AtomicU64,
    /// Slow calls (only written when slow calls are tracked).
    slow: AtomicU32,
}

/// The outcomes of the last `span`, in [`TIME_BUCKETS`] slices.
///
/// `#[repr(C)]`: a success in the quiet slice reads `quiet`, `slice_nanos`, `buckets` and
/// `stripes`, first, in 40 bytes (see `a_quiet_slices_success_reads_one_cache_line`), and then
/// writes its bucket.
#[repr(C)]
pub(crate) struct TimeWindow {
    /// The quiet slice (see the module's documentation): the slice, shifted left by
    /// [`QUIET_INDEX_BITS`], and its bucket's index below; 0 when no slice is quiet.
    pub(super) quiet: AtomicU64,
    pub(super) slice_nanos: u64,
    pub(super) buckets: Box<Buckets>,
    /// Successes deferred while the window is contended, each tagged with its slice (allocated on
    /// first contention; see [`TimeWindow::record_fast_success`]).
    pub(super) stripes: LazyStripes,
    /// Slow calls are tracked (the policy sets `slow`).
    track_slow: bool,
    /// The slice most recently seen, so most calls find theirs without a division.
    current: AtomicU64,
    /// The slice `prior_*` were summed for: the window's other slices, which do not change while
    /// that slice lasts. A record then costs its own bucket plus two loads, not a full sum.
    prior_for: AtomicU64,
    /// Calls and failures of the other slices, as one tally.
    prior_tally: AtomicU64,
    prior_slow: AtomicU32,
}

impl TimeWindow {
    pub(crate) fn new(span_nanos: u64, track_slow: bool) -> Self {
        TimeWindow {
            quiet: AtomicU64::new(0),
            slice_nanos: (span_nanos / u64::from(TIME_BUCKETS)).max(1),
            track_slow,
            buckets: Box::new(std::array::from_fn(|_| Bucket {
                stamp: AtomicU64::new(0),
                tally: AtomicU64::new(0),
                slow: AtomicU32::new(0),
            })),
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

    /// The index of the bucket of `slice`.
    #[inline(always)]
    fn index(slice: u64) -> usize {
        (slice % u64::from(TIME_BUCKETS)) as usize
    }

    /// The bucket of `slice`, claimed for it.
    #[inline(always)]
    fn bucket(&self, slice: u64) -> &Bucket {
        let bucket = &self.buckets[Self::index(slice)];
        let stamp = bucket.stamp.load(Ordering::Acquire);
        if stamp != slice {
            self.rotate(bucket, stamp, slice);
        }
        bucket
    }

    /// Records a success that was not slow: one `fetch_add` on its bucket. Returns the counts only
    /// when they must be judged (see [`Outcomes::record_fast_success`](super::Outcomes::record_fast_success)): when this record brings
    /// the window to `min_calls` (within a slice the window's calls grow by one per record, so
    /// exactly one record sees them reach it), or when the other slices' totals are not yet summed
    /// for this slice (its first record: older slices may have expired since the last judgement).
    /// Between those moments a success only adds a call, which cannot make a rate rule trip.
    ///
    /// When the other slices alone hold `min_calls`, no success of this slice is judged: the
    /// success adds to its bucket by compare-and-swap, and once that met contention, to its
    /// thread's stripe, tagged with the slice and folded into the slice's bucket before any
    /// reading of the window. Such a slice is published as quiet, and a success whose time falls
    /// in it goes there straight from one word (see the module's documentation). A window
    /// takes one `min_calls` (its breaker's) for all its records.
    #[inline(always)]
    pub(super) fn record_fast_success(&self, now: u64, min_calls: u32) -> Option<Counts> {
        let quiet = self.quiet.load(Ordering::Acquire);
        let slice = quiet >> QUIET_INDEX_BITS;
        // The slice starts at `(slice - 1) * slice_nanos`; a time before it wraps to more than a
        // slice.
        let into = now.wrapping_sub(slice.wrapping_sub(1).wrapping_mul(self.slice_nanos));
        if quiet != 0 && into < self.slice_nanos {
            let index = (quiet & ((1 << QUIET_INDEX_BITS) - 1)) as usize;
            self.add_success(&self.buckets[index], slice);
            return None;
        }
        self.record_unquiet_success(now, min_calls)
    }

    /// Adds a success that needs no judgement to `bucket`, the bucket of `slice`: by
    /// compare-and-swap, or to the thread's stripe once the window met contention.
    #[inline(always)]
    fn add_success(&self, bucket: &Bucket, slice: u64) {
        if let Some(stripes) = self.stripes.get() {
            self.defer(stripes.mine(), slice);
            return;
        }
        let tally = bucket.tally.load(Ordering::Relaxed);
        if bucket
            .tally
            .compare_exchange(tally, tally + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            self.contended(slice);
        }
    }

    /// [`TimeWindow::record_fast_success`] outside the quiet slice: finds the slice, claims its
    /// bucket, and publishes the slice as quiet once the other slices hold `min_calls`.
    #[inline]
    fn record_unquiet_success(&self, now: u64, min_calls: u32) -> Option<Counts> {
        let slice = self.slice(now);
        let bucket = self.bucket(slice);
        if self.prior_for.load(Ordering::Acquire) == slice {
            let prior_calls = self.prior_tally.load(Ordering::Acquire) as u32;
            if prior_calls >= min_calls {
                self.make_quiet(bucket, slice);
                self.add_success(bucket, slice);
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

    /// Publishes `slice`, whose bucket is `bucket` and whose other slices were summed for it and
    /// hold `min_calls`, as the quiet slice; unless the bucket moved on to a newer slice, or a
    /// reset forgot the sums meanwhile (it clears `prior_for` before it unpublishes).
    #[cold]
    fn make_quiet(&self, bucket: &Bucket, slice: u64) {
        let word = slice << QUIET_INDEX_BITS | Self::index(slice) as u64;
        if slice >> (64 - QUIET_INDEX_BITS) != 0
            || self.quiet.load(Ordering::Relaxed) == word
            || bucket.stamp.load(Ordering::Acquire) != slice
        {
            return;
        }
        self.quiet.store(word, Ordering::SeqCst);
        if self.prior_for.load(Ordering::SeqCst) != slice {
            let _ = self
                .quiet
                .compare_exchange(word, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// A success whose compare-and-swap met contention: deferred in a stripe, allocated now if
    /// needed.
    #[cold]
    pub(super) fn contended(&self, slice: u64) {
        self.defer(self.stripes.get_or_init(Stripes::boxed).mine(), slice);
    }

    /// Adds one success of `slice` to `stripe`: the stripe's high half tags its slice, the low half
    /// counts. A stripe holding another slice's successes (or too many) first hands them to
    /// their bucket.
    #[inline(always)]
    pub(super) fn defer(&self, stripe: &AtomicU64, slice: u64) {
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
    pub(super) fn record(&self, now: u64, sample: Sample) -> Counts {
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
    pub(super) fn sum(&self, oldest: u64, newest: u64) -> Counts {
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

    pub(super) fn counts(&self, now: u64) -> Counts {
        self.fold();
        let slice = self.slice(now);
        self.sum(slice.saturating_sub(u64::from(TIME_BUCKETS) - 1), slice)
    }

    pub(super) fn reset(&self) {
        if let Some(stripes) = self.stripes.get() {
            for stripe in stripes.counts.iter() {
                stripe.store(0, Ordering::Release);
            }
        }
        self.prior_for.store(0, Ordering::SeqCst);
        self.quiet.store(0, Ordering::SeqCst);
        for bucket in self.buckets.iter() {
            bucket.stamp.store(0, Ordering::Release);
            bucket.tally.store(0, Ordering::Release);
            bucket.slow.store(0, Ordering::Release);
        }
    }

    /// Copies the outcomes of `from` into this new window, if both have the same slices (else
    /// leaves it alone); `from`'s deferred successes are folded in first.
    pub(super) fn copy_from(&self, from: &TimeWindow) {
        if self.slice_nanos != from.slice_nanos {
            return;
        }
        from.fold();
        let slow = self.track_slow && from.track_slow;
        for (to, from) in self.buckets.iter().zip(from.buckets.iter()) {
            copy64(&to.stamp, &from.stamp);
            copy64(&to.tally, &from.tally);
            if slow {
                copy32(&to.slow, &from.slow);
            }
        }
        // `quiet` is left unpublished: the new breaker's `min_calls` may differ, and its first
        // success publishes it again.
        copy64(&self.current, &from.current);
        copy64(&self.prior_for, &from.prior_for);
        copy64(&self.prior_tally, &from.prior_tally);
        if slow {
            copy32(&self.prior_slow, &from.prior_slow);
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Buckets>()
            + self
                .stripes
                .get()
                .map_or(0, |stripes| std::mem::size_of_val(&*stripes.counts))
    }
}
