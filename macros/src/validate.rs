//! The attribute's policy arguments run through the runtime's own validation.
//!
//! [`policy_of`] makes the `fusebox_policy::Policy` setter calls the expansion emits (one list,
//! `setters.rs`), and [`check`] runs `Policy::validate`, the check the runtime runs when the
//! breaker is registered, reporting a refused field at the token of the argument that set it.
//! The argument checks in `args` report the common mistakes first with their own messages; this
//! one catches whatever they let through, so the attribute never accepts a policy the runtime
//! would refuse.

use fusebox_policy::Policy;
use proc_macro2::Span;

use crate::args::PolicyArgs;
use crate::setters::setters;

/// The policy the expansion builds from `args`: its setter calls made on the default (`None`
/// with `policy = CONST`, whose fields are only known when the program runs).
pub(crate) fn policy_of(args: &PolicyArgs) -> Option<Policy> {
    if args.base.is_some() {
        return None;
    }
    Some(
        setters(args)
            .into_iter()
            .fold(Policy::new(), |policy, setter| setter.apply(policy)),
    )
}

/// The span of the argument that set `field` (as `PolicyError::field` names it); a rule
/// between fields without its own argument is reported at the argument that brought it in.
fn span_of(args: &PolicyArgs, field: &str) -> Option<Span> {
    let setters = setters(args);
    let find = |field: &str| setters.iter().find_map(|setter| setter.span_of(field));
    find(field).or_else(|| match field {
        // A policy with no rule that trips: `consecutive` turned the rate rule off.
        "failure_rate" => find("consecutive"),
        // `open_max` (the default) below `open_for` matters with `open_backoff`.
        "open_max" => find("open_backoff"),
        _ => None,
    })
}

/// Runs `Policy::validate` on the policy of `args`; a refusal is reported at the token of the
/// argument that set the refused field (the attribute when no argument did).
pub(crate) fn check(args: &PolicyArgs) -> syn::Result<()> {
    let Some(policy) = policy_of(args) else {
        return Ok(());
    };
    policy.validate().map_err(|e| {
        let span = span_of(args, e.field()).unwrap_or_else(Span::call_site);
        syn::Error::new(span, e.to_string())
    })
}
