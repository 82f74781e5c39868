//! Atomics used by the breaker state machine: `std`'s, or loom's under `--cfg fusebox_loom` so the model
//! checker can explore every interleaving of the compare-and-swap transitions.

#[cfg(not(fusebox_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

#[cfg(fusebox_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

/// A value alone on its cache line, so writes to it do not slow down readers of its neighbours.
#[repr(align(64))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}
