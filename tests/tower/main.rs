//! `fusebox_tower`: the layer, its order among tower's own layers, the axum variant and the
//! reqwest middleware; one test binary, built with the `tower` feature (`axum` and `reqwest` add
//! their modules). `cargo test -p fusebox-suite --all-features --test tower -- middleware` runs
//! one module.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
mod support;

#[cfg(feature = "axum")]
mod axum_layer;
mod budget;
mod chaos;
mod compose;
#[cfg(all(feature = "reqwest", feature = "axum"))]
mod hedge;
mod layer;
#[cfg(all(feature = "reqwest", feature = "axum"))]
mod middleware;
#[cfg(all(feature = "reqwest", feature = "axum"))]
mod middleware_chaos;
#[cfg(all(feature = "reqwest", feature = "axum"))]
mod pushback;
mod stacking;
