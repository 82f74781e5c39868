//! The count-based sliding window: the last N outcomes as a ring of bits, with a running total.
//!
//! Each slot is one bit (1 = failure). Recording claims the next slot with one compare-and-swap on a
//! packed cursor (position and number of filled slots), then swaps the slot's bit; the failure total
//! changes only when the bit flips, so it always equals the number of set bits once writers finish.
//! A success over a success slot — the common case — costs the cursor CAS and one load.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// What a window holds at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Outcomes in the window (at most its length).
    pub(crate) calls: u32,
    /// Failures among them.
    pub(crate) failures: u32,
}

impl Counts {
    /// Failure rate in percent (0 when empty).
    pub(crate) fn failure_rate(self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            f64::from(self.failures) * 100.0 / f64::from(self.calls)
        }
    }

    /// True when at least `min_calls` were recorded and failures reach `rate` percent.
    #[inline]
    pub(crate) fn trips(self, min_calls: u32, rate: u8) -> bool {
        self.calls >= min_calls
            && u64::from(self.failures) * 100 >= u64::from(rate) * u64::from(self.calls)
    }
}

pub(crate) struct CountWindow {
    len: u32,
    /// Low 32 bits: next slot; high 32 bits: filled slots (saturates at `len`).
    cursor: AtomicU64,
    failures: AtomicU32,
    bits: Box<[AtomicU64]>,
}

impl CountWindow {
    pub(crate) fn new(len: u32) -> Self {
        let len = len.max(1);
        let words = len.div_ceil(64) as usize;
        CountWindow {
            len,
            cursor: AtomicU64::new(0),
            failures: AtomicU32::new(0),
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Claims the next slot; returns it and the number of filled slots after this one.
    #[inline]
    fn claim(&self) -> (u32, u32) {
        let mut cur = self.cursor.load(Ordering::Relaxed);
        loop {
            let pos = cur as u32;
            let filled = (cur >> 32) as u32;
            let next_pos = if pos + 1 >= self.len { 0 } else { pos + 1 };
            let next_filled = if filled < self.len {
                filled + 1
            } else {
                filled
            };
            let next = u64::from(next_pos) | u64::from(next_filled) << 32;
            match self
                .cursor
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return (pos, next_filled),
                Err(seen) => cur = seen,
            }
        }
    }

    /// Records a success.
    #[inline]
    pub(crate) fn record_success(&self) {
        let (slot, _) = self.claim();
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        if word.load(Ordering::Relaxed) & mask != 0
            && word.fetch_and(!mask, Ordering::AcqRel) & mask != 0
        {
            self.failures.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Records a failure; returns the counts right after it.
    #[inline]
    pub(crate) fn record_failure(&self) -> Counts {
        let (slot, calls) = self.claim();
        let word = &self.bits[(slot / 64) as usize];
        let mask = 1u64 << (slot % 64);
        let failures = if word.fetch_or(mask, Ordering::AcqRel) & mask == 0 {
            self.failures.fetch_add(1, Ordering::AcqRel) + 1
        } else {
            self.failures.load(Ordering::Acquire)
        };
        Counts {
            calls,
            failures: failures.min(calls),
        }
    }

    /// The current counts.
    pub(crate) fn counts(&self) -> Counts {
        let calls = (self.cursor.load(Ordering::Acquire) >> 32) as u32;
        let failures = self.failures.load(Ordering::Acquire);
        Counts {
            calls,
            failures: failures.min(calls),
        }
    }

    /// Empties the window.
    pub(crate) fn reset(&self) {
        for word in self.bits.iter() {
            word.store(0, Ordering::Release);
        }
        self.failures.store(0, Ordering::Release);
        self.cursor.store(0, Ordering::Release);
    }

    /// Heap bytes owned by the window.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_outcomes_are_evicted() {
        let w = CountWindow::new(10);
        for _ in 0..5 {
            w.record_failure();
        }
        for _ in 0..10 {
            w.record_success();
        }
        assert_eq!(
            w.counts(),
            Counts {
                calls: 10,
                failures: 0
            }
        );
        let mut last = Counts {
            calls: 0,
            failures: 0,
        };
        for _ in 0..5 {
            last = w.record_failure();
        }
        assert_eq!(
            last,
            Counts {
                calls: 10,
                failures: 5
            }
        );
        assert!(last.trips(10, 50));
        assert!(!last.trips(10, 51));
    }

    #[test]
    fn windows_longer_than_one_word() {
        let w = CountWindow::new(130);
        for i in 0..1000 {
            if i % 2 == 0 {
                w.record_failure();
            } else {
                w.record_success();
            }
        }
        assert_eq!(
            w.counts(),
            Counts {
                calls: 130,
                failures: 65
            }
        );
        w.reset();
        assert_eq!(
            w.counts(),
            Counts {
                calls: 0,
                failures: 0
            }
        );
        assert_eq!(w.heap_bytes(), 24);
    }

    #[test]
    fn min_calls_gate() {
        let w = CountWindow::new(10);
        for _ in 0..4 {
            assert!(!w.record_failure().trips(5, 50));
        }
        assert!(w.record_failure().trips(5, 50));
    }
}
