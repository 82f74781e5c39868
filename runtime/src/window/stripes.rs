//! Striped success counters: where a window's successes go once callers contend for it.
//!
//! A success that needs no judgement (a full count window's, or a time window's once its other
//! slices alone hold `min_calls`) first adds to one shared word by compare-and-swap. The first
//! time that compare-and-swap fails, the window allocates [`Stripes`]: one counter per cache line,
//! twice the available parallelism rounded to a power of two (2 to 256), each thread picking its
//! own by a small index handed out in turn. From then on such a success writes nothing shared.
//! The window that owns the stripes folds them in before every reading; a count reaching
//! [`STRIPE_FOLD`] is handed to the window by a caller adding to it, so no counter ever overflows.
//!
//! Under loom the stripes are allocated with the window and engaged through one of the model's
//! atomics, since the model cannot see `OnceLock`'s publication.

#[cfg(fusebox_loom)]
use crate::sync::{AtomicBool, Ordering};
use crate::sync::{AtomicU64, Padded};

/// The stripes of a window, allocated on its first contention. Boxed, so a window keeps them in
/// 16 bytes (see `CountWindow`).
#[cfg(not(fusebox_loom))]
pub(super) type LazyStripes = std::sync::OnceLock<Box<Stripes>>;

/// The stripes of a window, allocated at once and engaged on its first contention: loom cannot
/// see `OnceLock`'s publication, so the model publishes them through one of its atomics instead.
#[cfg(fusebox_loom)]
pub(super) struct LazyStripes {
    stripes: Stripes,
    engaged: AtomicBool,
}

#[cfg(fusebox_loom)]
impl LazyStripes {
    pub(super) fn new() -> Self {
        LazyStripes {
            stripes: Stripes::new(),
            engaged: AtomicBool::new(false),
        }
    }

    pub(super) fn get(&self) -> Option<&Stripes> {
        self.engaged
            .load(Ordering::Acquire)
            .then_some(&self.stripes)
    }

    pub(super) fn get_or_init(&self, _: fn() -> Box<Stripes>) -> &Stripes {
        self.engaged.store(true, Ordering::Release);
        &self.stripes
    }
}

/// Striped success counters: one per cache line, picked by thread.
/// Their number is a power of two.
pub(super) struct Stripes {
    pub(super) counts: Box<[Padded<AtomicU64>]>,
}

/// A pending or striped count at which it is folded in, so it never overflows.
pub(super) const STRIPE_FOLD: u64 = if cfg!(test) { 64 } else { 1 << 30 };

impl Stripes {
    /// New stripes, boxed as a window keeps them.
    pub(super) fn boxed() -> Box<Self> {
        Box::new(Self::new())
    }

    pub(super) fn new() -> Self {
        let len = stripe_count();
        Stripes {
            counts: (0..len).map(|_| Padded(AtomicU64::new(0))).collect(),
        }
    }

    /// The calling thread's stripe.
    #[inline(always)]
    pub(super) fn mine(&self) -> &AtomicU64 {
        &self.counts[thread_index() & (self.counts.len() - 1)]
    }
}

/// Stripes per contended window: twice the available parallelism as a power of two, 2 to 256.
pub(super) fn stripe_count() -> usize {
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
