//! Load control beside the breaker: per-key retry budgets, hedged calls' latency and budget, and
//! the pushback a failure carries.

pub(crate) mod budget;
pub(crate) mod hedge;
pub(crate) mod pushback;
