//! The call: the call sites of the attribute, the attempt driver that composes timeouts,
//! retries and deadlines with the breaker, and hedged calls.

pub(crate) mod attempts;
pub(crate) mod hedge;
pub(crate) mod site;
