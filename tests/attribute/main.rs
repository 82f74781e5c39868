//! The `#[circuit_breaker]` attribute and the in-memory runtime under it: one test binary, a
//! module per area. `cargo test -p fusebox-suite --test attribute -- policies` runs one module.
//!
//! Everything here shares one process: each module keeps its breakers in registries of its own
//! (the global `fusebox::registry()` only under keys no other module uses), and the panic hook
//! `soak` installs passes on every panic it did not plan.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod adaptive;
mod attempts;
mod behaviour;
mod budget;
mod chaos;
mod classification;
mod events;
mod expand_ok;
mod failure_count;
mod failure_if;
mod flood;
mod groups;
mod hedge;
mod open_wait;
mod overrides;
mod panics;
mod policies;
mod private_surface;
mod pushback;
mod retry_vs_breaker;
mod shadows;
mod sizes;
mod soak;
mod throttle;
mod time_window_limits;
