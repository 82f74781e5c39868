//! Load control beside the breaker: per-key retry budgets, and the pushback a failure carries.

pub(crate) mod budget;
pub(crate) mod pushback;
