//! The call: the call sites of the attribute, and the attempt driver that composes timeouts,
//! retries and deadlines with the breaker.

pub(crate) mod attempts;
pub(crate) mod site;
