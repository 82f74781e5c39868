//! Integration tests and examples of fusebox live in `tests/` and `examples/`; this crate has no code of its own.
