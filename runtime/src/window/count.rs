//! The count window: the last N outcomes, one bit each.
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
//! cannot make a rule trip, so it claims no slot. When the window holds no failure (and tracks no
//! slow calls), every slot is a success, and evicting one for another changes nothing anyone can
//! read, the ring's rotation included (all its slots are alike): such a success writes nothing, so
//! the calls of a healthy breaker share its lines without writing them. One success in 256 on each
//! thread is counted anyway: a reset racing a fold can leave a failure bit set while the count
//! reads 0, and counted successes are what clear such a bit. Otherwise a success adds one to a
//! pending count by compare-and-swap. The first time that compare-and-swap fails (another caller
//! changed the count in between), the window allocates striped success counters, one cache line
//! each, and from then on a success of a full window adds one to its thread's stripe and writes
//! nothing shared. Every decision folds the pending and striped successes in first: a failure or a
//! slow call, a snapshot, a reconfiguration's copy. Folding takes a count and claims that many
//! slots at once, clearing their bits, which is exactly what that many single successes would have
//! done: successes are all alike, so only their order relative to failures matters, and a success
//! that returned before a failure's report began is in the window when that failure is judged. A
//! fold is done by the caller that decides, so no success is ever half-recorded (slot claimed, old
//! bit not yet cleared) while a failure is judged.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::stripes::{LazyStripes, STRIPE_FOLD, Stripes};
use super::{Counts, Sample, copy32, copy64};

/// A ring of bits with a running count of set bits.
///
/// `#[repr(C)]`: the count comes first, so a count window keeps its failure count on the
/// breaker's hot line (see [`CountWindow`]).
#[repr(C)]
pub(super) struct BitRing {
    pub(super) set: AtomicU32,
    pub(super) bits: Box<[AtomicU64]>,
}

impl BitRing {
    pub(super) fn new(len: u32) -> Self {
        BitRing {
            set: AtomicU32::new(0),
            bits: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Writes `value` at `slot`; returns the number of set bits after the write.
    #[inline]
    pub(super) fn write(&self, slot: u32, value: bool) -> u32 {
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        if value {
            if word.fetch_or(mask, Ordering::AcqRel) & mask == 0 {
                return self.set.fetch_add(1, Ordering::AcqRel) + 1;
            }
        } else if word.load(Ordering::Relaxed) & mask != 0
            && word.fetch_and(!mask, Ordering::AcqRel) & mask != 0
        {
            return self.take(1);
        }
        self.set.load(Ordering::Acquire)
    }

    /// Subtracts `cleared` bits from the count, never below zero, and returns the count after.
    /// A [`BitRing::reset`] between a bit's clearing and this subtraction has already zeroed the
    /// count: plain subtraction would wrap it to `u32::MAX`, a full window of failures. A failure
    /// recorded after that reset and before this subtraction is then left out of the count while
    /// its bit stays set, until a counted success clears the bit (see the module docs).
    #[inline]
    fn take(&self, cleared: u32) -> u32 {
        let before = self
            .set
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |set| {
                Some(set.saturating_sub(cleared))
            })
            .unwrap_or_else(|set| set);
        before.saturating_sub(cleared)
    }

    /// Clears a bit without reporting the total (the fast success path).
    #[inline(always)]
    pub(super) fn clear(&self, slot: u32) {
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        if word.load(Ordering::Relaxed) & mask != 0
            && word.fetch_and(!mask, Ordering::AcqRel) & mask != 0
        {
            self.take(1);
        }
    }

    /// Clears `count` bits from `slot` on (wrapping around a ring of `len` bits), as `count`
    /// single [`BitRing::clear`]s would.
    pub(super) fn clear_range(&self, mut slot: u32, count: u32, len: u32) {
        let mut left = count.min(len);
        while left != 0 {
            let bit = slot % 64;
            let run = left.min(64 - bit).min(len - slot);
            let mask = (u64::MAX >> (64 - run)) << bit;
            let word = &self.bits[(slot / 64) as usize];
            if word.load(Ordering::Relaxed) & mask != 0 {
                let cleared = (word.fetch_and(!mask, Ordering::AcqRel) & mask).count_ones();
                if cleared != 0 {
                    self.take(cleared);
                }
            }
            left -= run;
            slot += run;
            if slot == len {
                slot = 0;
            }
        }
    }

    pub(super) fn count(&self) -> u32 {
        self.set.load(Ordering::Acquire)
    }

    pub(super) fn reset(&self) {
        for word in self.bits.iter() {
            word.store(0, Ordering::Release);
        }
        self.set.store(0, Ordering::Release);
    }

    /// Copies the bits and the count of `from`, a ring of the same length.
    fn copy_from(&self, from: &BitRing) {
        for (to, from) in self.bits.iter().zip(from.bits.iter()) {
            copy64(to, from);
        }
        copy32(&self.set, &from.set);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.bits)
    }
}

/// The last `len` outcomes.
///
/// `#[repr(C)]`: a success on a full window reads `full`, `untimed` and the failure count, and,
/// when the window holds a failure, `pending` and `stripes`; one on a filling window claims
/// `head`: all in the first 40 bytes, which the breaker keeps on its hot line.
#[repr(C)]
pub(crate) struct CountWindow {
    /// Successes of a full window not yet folded in.
    pub(super) pending: AtomicU64,
    /// Slots claimed so far (wraps after 2^32 calls, which only reorders one slot).
    pub(super) head: AtomicU32,
    /// Set once `len` slots were claimed since the last reset.
    pub(super) full: AtomicBool,
    /// No slow ring (`slow` is `None`), read on the hot line by a full window's success.
    pub(super) untimed: bool,
    /// Successes of a full, contended window not yet folded in (allocated on first contention).
    pub(super) stripes: LazyStripes,
    /// Failures: its count is on the hot line.
    pub(super) failures: BitRing,
    len: u32,
    /// Lemire's multiplier for `x % len` without a division.
    magic: u64,
    slow: Option<BitRing>,
}

thread_local! {
    /// Successes this thread let pass on clean full windows, modulo 256 (see
    /// [`skip_on_this_thread`]).
    static SKIPPED: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// True for 255 in 256 of this thread's successes on a clean full window: those write nothing.
/// The 256th is counted as before, so a failure bit that a reset racing a fold left set while
/// the count reads 0 is still cleared by later successes (about 256 times the window's length of
/// them), as counted successes always cleared it.
#[inline(always)]
fn skip_on_this_thread() -> bool {
    SKIPPED.with(|skipped| {
        let next = skipped.get().wrapping_add(1);
        skipped.set(next);
        next != 0
    })
}

/// `a % d` for the `magic` of `d` (Lemire, Kaser & Kurz, "Faster remainder by direct computation").
#[inline(always)]
pub(super) fn fastmod(a: u32, magic: u64, d: u32) -> u32 {
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
            untimed: !track_slow,
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
    /// judgement. When it holds no failure (and tracks no slow calls) the success writes nothing:
    /// it would evict a success like itself (see the module docs). Otherwise it adds one to the
    /// pending successes by compare-and-swap, or, once that met contention, to its thread's
    /// stripe. Both are folded in before the window is read.
    #[inline(always)]
    pub(super) fn record_fast_success(&self, min_calls: u32) -> Option<Counts> {
        if self.full.load(Ordering::Relaxed) {
            if self.untimed
                && self.failures.set.load(Ordering::Relaxed) == 0
                && skip_on_this_thread()
            {
                return None;
            }
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
    pub(super) fn contended(&self) {
        self.add_to(self.stripes.get_or_init(Stripes::boxed).mine());
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
    pub(super) fn record(&self, sample: Sample) -> Counts {
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

    pub(super) fn counts(&self) -> Counts {
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

    pub(super) fn reset(&self) {
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

    /// Copies the outcomes of `from` into this new window, if both have the same length (else
    /// leaves it alone); `from`'s pending and striped successes are folded in first.
    pub(super) fn copy_from(&self, from: &CountWindow) {
        if self.len != from.len {
            return;
        }
        from.fold();
        copy32(&self.head, &from.head);
        self.full
            .store(from.full.load(Ordering::Acquire), Ordering::Release);
        self.failures.copy_from(&from.failures);
        if let (Some(to), Some(from)) = (&self.slow, &from.slow) {
            to.copy_from(from);
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.failures.heap_bytes()
            + self.slow.as_ref().map_or(0, BitRing::heap_bytes)
            + self
                .stripes
                .get()
                .map_or(0, |stripes| std::mem::size_of_val(&*stripes.counts))
    }
}
