//! Atomics used by the breaker state machine: `std`'s, or loom's under `--cfg fusebox_loom` so the model
//! checker can explore every interleaving of the compare-and-swap transitions.

#[cfg(not(fusebox_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

#[cfg(fusebox_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
