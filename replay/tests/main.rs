//! The replay tool's tests, one module per topic, in one test binary (one link per build).

mod support {
    //! What several topics share.

    pub(crate) mod memory;
}

mod adaptive;
mod bad_input;
mod chart;
mod cli;
mod generators;
mod groups;
mod hostile_input;
mod live_replay;
mod memory;
mod open_jitter;
mod record_layer;
mod retry_budget;
mod search_front;
mod shadows;
mod throttle;
