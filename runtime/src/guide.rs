//! The user guide: how fusebox behaves and how to run it, one chapter per module. This module
//! holds documentation only; every example in it is a doctest.
//!
//! Start with [`start`], then read the chapter your question is in:
//!
//! | chapter | what it answers |
//! |---|---|
//! | [`start`] | the error type, the fallback and its [`Cause`](crate::Cause), calls without the attribute |
//! | [`semantics`] | states, trip rules, what counts, cancellation, panics, time, concurrency |
//! | [`retries`] | `timeout`, `retry`, `backoff` and `deadline` around a breaker; hedged calls |
//! | [`load_control`] | keeping load off a struggling backend: pushback (`Retry-After`), retry budgets, open-wait functions and jitter, adaptive throttling (`throttle`), the adaptive bulkhead |
//! | [`dynamic_keys`] | one breaker per host or tenant, and how the registry stays bounded |
//! | [`groups`] | per-host keys judged against their siblings: outlier ejection, the panic threshold, choosing healthy members |
//! | [`shadows`] | trying candidate policies on live traffic beside the one in force, and replaying them |
//! | [`operators`] | configuration without recompiling, manual states, why a circuit opened |
//! | [`observability`] | events, hooks, snapshots, metrics and the per-call outcome event |
//! | `fusebox_tower`, `fusebox_reqwest` | the tower layer and axum's answer, and the reqwest middleware (crates of their own) |
//! | [`testing`] | driving breakers with [`FakeClock`](crate::clock::FakeClock) |
//! | `fusebox_redis::replicas` | one circuit across replicas through Redis (the `fusebox-redis` crate; the seam is [`fusebox::store`](crate::store)) |
//! | [`compile_errors`] | every misuse of the attribute and the error it gives |
//!
//! The attribute's arguments are documented on [`circuit_breaker`](crate::circuit_breaker).

#[doc = include_str!("guide/start.md")]
pub mod start {}

#[doc = include_str!("guide/semantics.md")]
pub mod semantics {}

#[doc = include_str!("guide/retries.md")]
pub mod retries {}

#[doc = include_str!("guide/load_control.md")]
pub mod load_control {}

#[doc = include_str!("guide/dynamic_keys.md")]
pub mod dynamic_keys {}

#[doc = include_str!("guide/groups.md")]
#[cfg_attr(feature = "config", doc = include_str!("guide/groups_config.md"))]
pub mod groups {}

#[doc = include_str!("guide/shadows.md")]
pub mod shadows {}

#[doc = include_str!("guide/operators.md")]
#[cfg_attr(feature = "config", doc = include_str!("guide/configuration.md"))]
pub mod operators {}

#[doc = include_str!("guide/observability.md")]
#[cfg_attr(feature = "metrics", doc = include_str!("guide/metrics.md"))]
pub mod observability {}

#[doc = include_str!("guide/testing.md")]
pub mod testing {}

#[doc = include_str!("guide/compile_errors.md")]
pub mod compile_errors {}
