//! The loom model check of fusebox lives in `tests/loom.rs`; this crate has no code of its own.
