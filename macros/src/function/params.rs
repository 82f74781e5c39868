//! The parameters of the annotated function: those a fallback gets (each a plain name, see
//! [`Params`]) and those every attempt of `retry` borrows again ([`check_attempts`]).

use proc_macro2::Span;
use syn::{Attribute, FnArg, Ident, Pat, Receiver, ReceiverKind, Signature, Type};

use crate::errors::Errors;
use crate::tokens::ungroup;

/// What a fallback call passes on.
#[derive(Default)]
pub(crate) struct Params {
    /// The function is a method: `self` (written here) goes first.
    pub(crate) receiver: Option<Span>,
    /// The names of the other parameters.
    pub(crate) names: Vec<Ident>,
    /// The `#[cfg(...)]` attributes of each of [`Params::names`] (empty for most): a parameter
    /// compiled out is not passed on.
    pub(crate) cfgs: Vec<Vec<Attribute>>,
}

impl Params {
    /// True when some parameter is under `#[cfg(...)]`.
    pub(crate) fn any_cfg(&self) -> bool {
        self.cfgs.iter().any(|cfg| !cfg.is_empty())
    }
}

/// The `#[cfg(...)]` attributes among `attrs`.
fn cfg_attrs(attrs: &[Attribute]) -> Vec<Attribute> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .cloned()
        .collect()
}

/// The attempt arguments written (`attempts`) need an `async fn`, and `retry` parameters every
/// attempt can borrow again (those under `#[cfg(...)]` add their errors to `conditional`).
pub(super) fn check_attempts(
    errors: &mut Errors,
    sig: &Signature,
    attempts: &[Ident],
    is_async: bool,
    conditional: &mut Vec<(Vec<Attribute>, syn::Error)>,
) -> Option<()> {
    match attempts.first() {
        None => Some(()),
        Some(_) if !is_async => {
            for name in attempts {
                errors.push(syn::Error::new(
                    name.span(),
                    format!(
                        "`{name}` needs an `async fn`: retries and hedges wait between attempts and \
                         timeouts need a timer, which a blocking call cannot give way to; make \
                         the function `async`, or remove `{name}`"
                    ),
                ));
            }
            None
        }
        // Only `retry` and `hedge` run the body more than once; `timeout` alone leaves the
        // parameters as they are.
        Some(_) => match attempts
            .iter()
            .find(|name| *name == "retry" || *name == "hedge")
        {
            Some(retry) => errors.ok(attempt_params(sig, retry, conditional)),
            None => Some(()),
        },
    }
}

/// The parameters handed to a fallback; each must be a plain name.
pub(super) fn fallback_params(sig: &Signature) -> syn::Result<Params> {
    let mut errors = Errors::default();
    let mut params = Params::default();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => params.receiver = Some(receiver.self_token.span),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(binding) if binding.by_ref.is_none() && binding.subpat.is_none() => {
                    params.names.push(binding.ident.clone());
                    params.cfgs.push(cfg_attrs(&typed.attrs));
                }
                pattern => errors.push(syn::Error::new_spanned(
                    pattern,
                    "with `fallback`, every parameter must be a plain name like `order: Order` \
                     so it can be passed to the fallback; take the value whole and bind the \
                     pattern inside the body, like `let (a, b) = pair;`",
                )),
            },
        }
    }
    errors.finish()?;
    Ok(params)
}

/// Checks the parameters for `retry`. Every attempt needs the arguments again, so the attempt
/// closure borrows them rather than moving them: a parameter taken by `&mut` or by value as
/// `self` cannot be shared between attempts, and a pattern or `mut` binding would not mean what
/// it says. `arg` is the attempt argument the messages name. The errors about a parameter under
/// `#[cfg(...)]` go to `conditional`, with its attributes: a parameter compiled out is no error.
fn attempt_params(
    sig: &Signature,
    arg: &Ident,
    conditional: &mut Vec<(Vec<Attribute>, syn::Error)>,
) -> syn::Result<()> {
    let mut all = Errors::default();
    let again = if arg == "hedge" {
        "a hedged call needs the arguments again for every attempt"
    } else {
        "retrying needs the arguments again for every attempt"
    };
    for input in &sig.inputs {
        let cfg = match input {
            FnArg::Typed(typed) => cfg_attrs(&typed.attrs),
            FnArg::Receiver(_) => Vec::new(),
        };
        let mut errors = Errors::default();
        attempt_param(input, arg, again, &mut errors);
        match errors.finish() {
            Err(error) if !cfg.is_empty() => conditional.push((cfg, error)),
            Err(error) => all.push(error),
            Ok(()) => {}
        }
    }
    all.finish()
}

/// The errors of one parameter for [`attempt_params`].
fn attempt_param(input: &FnArg, arg: &Ident, again: &str, errors: &mut Errors) {
    match input {
        FnArg::Receiver(receiver) => {
            if let Some(error) = receiver_error(receiver, arg, again) {
                errors.push(error);
            }
        }
        FnArg::Typed(typed) => {
            let binding = match &*typed.pat {
                Pat::Wild(_) => return,
                Pat::Ident(binding) if binding.by_ref.is_none() && binding.subpat.is_none() => {
                    binding
                }
                pattern => {
                    errors.push(syn::Error::new_spanned(
                        pattern,
                        format!(
                            "with `{arg}`, every parameter must be a plain name like \
                                 `order: Order`, borrowed again by every attempt; take the \
                                 value whole and bind the pattern inside the body"
                        ),
                    ));
                    return;
                }
            };
            if let Type::Reference(reference) = ungroup(&typed.ty) {
                if reference.mutability.is_some() {
                    errors.push(syn::Error::new_spanned(
                        input,
                        format!(
                            "{again}, and a `&mut` argument cannot be shared between \
                                 attempts; take `&T` (with interior mutability for state) \
                                 or remove `{arg}`"
                        ),
                    ));
                }
                // A shared reference is `Copy`: every attempt copies it.
                return;
            }
            if let Some(mutability) = &binding.mutability {
                errors.push(syn::Error::new(
                    mutability.span,
                    format!(
                        "with `{arg}`, every attempt borrows `{}` again, so the body cannot \
                             change it; remove `mut` and work on a copy inside the body, like \
                             `let mut {0} = {0}.clone();`",
                        binding.ident
                    ),
                ));
            }
        }
    }
}

/// Why `self` cannot be shared between attempts, if it cannot: only `&self` (or `self: &T`) can.
fn receiver_error(receiver: &Receiver, arg: &Ident, again: &str) -> Option<syn::Error> {
    let (written, mutable) = match &receiver.kind {
        ReceiverKind::Reference(_, _, None) => return None,
        ReceiverKind::Reference(_, _, Some(_)) => ("`&mut self`", true),
        ReceiverKind::Typed(_, ty) => match ungroup(ty) {
            Type::Reference(reference) if reference.mutability.is_none() => return None,
            Type::Reference(_) => ("`&mut self`", true),
            _ => ("`self` by value", false),
        },
        _ => ("`self` by value", false),
    };
    let why = if mutable {
        "a `&mut` borrow cannot be shared between attempts"
    } else {
        "the body cannot consume it"
    };
    Some(syn::Error::new_spanned(
        receiver,
        format!(
            "{again}, so {written} cannot be used with `{arg}`: {why}; take `&self` (with \
             interior mutability for state) or remove `{arg}`"
        ),
    ))
}
