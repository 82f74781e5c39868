//! The call: the call sites of the attribute, the attempt driver that composes timeouts,
//! retries and deadlines with the breaker, hedged calls, and fault injection's points.

pub(crate) mod attempts;
#[cfg(feature = "chaos")]
pub(crate) mod chaos;
pub(crate) mod hedge;
pub(crate) mod site;
