//! The checks of the arguments as a whole and against the function: the attribute's policy run
//! through the runtime's own validation, and a `key` that names no parameter
//! ([`check_key_name`]).
//!
//! [`policy_of`] makes the `fusebox_policy::Policy` setter calls the expansion emits (one list,
//! `setters.rs`), and [`check`] runs `Policy::validate`, the check the runtime runs when the
//! breaker is registered, reporting a refused field at the token of the argument that set it.
//! The argument checks in `args` report the common mistakes first with their own messages; this
//! one catches whatever they let through, so the attribute never accepts a policy the runtime
//! would refuse.

use fusebox_policy::Policy;
use proc_macro2::Span;
use syn::{Expr, ExprPath, FnArg, Pat};

use crate::args::{Key, PolicyArgs};
use crate::function::Function;
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

/// `key = payment`, a bare name that is no parameter of the function and not an upper-case
/// `const` or `static`: most likely a literal key written without its quotes. Any other
/// expression is a dynamic key, checked by rustc.
pub(crate) fn check_key_name(key: &Key, function: &Function) -> syn::Result<()> {
    let Key::Dynamic(Expr::Path(ExprPath {
        qself: None, path, ..
    })) = key
    else {
        return Ok(());
    };
    let Some(name) = path.get_ident() else {
        return Ok(());
    };
    let mut params = Vec::new();
    for input in &function.item.sig.inputs {
        match input {
            FnArg::Receiver(_) => {}
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(binding) => params.push(&binding.ident),
                // A pattern may bind the name: leave it to rustc.
                _ => return Ok(()),
            },
        }
    }
    let written = name.to_string();
    let upper = written.chars().all(|c| !c.is_lowercase());
    if upper || params.contains(&name) {
        return Ok(());
    }
    Err(syn::Error::new(
        name.span(),
        format!(
            "`{written}` is not a parameter of `{}`: a literal key is a string, write \
             `key = \"{written}\"`; a dynamic key is an expression of the parameters, like \
             `key = host` (a `const` or `static` key must be named in upper case, or by a path \
             like `crate::{written}`)",
            function.item.sig.ident
        ),
    ))
}
