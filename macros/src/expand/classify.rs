//! Classification and the fallback: the `bool` test of whether an error counts as a failure
//! (`failure = [...]`, a `std::io::Error`'s kinds included, or a predicate), the error-type alias a bare variant needs
//! ([`error_alias`]), and the call of the fallback with the function's parameters and the cause.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Ident, Path};

use super::names::Names;
use crate::args::{Args, Failure, Variant};
use crate::function::Params;
use crate::tokens::respan;

/// True when a bare variant name needs the error-type alias (not for a `std::io::Error`, whose
/// bare names are kinds).
fn uses_alias(failure: Option<&Failure>, io_error: bool) -> bool {
    !io_error
        && matches!(failure, Some(Failure::Variants(variants))
            if variants.iter().any(|variant| matches!(variant, Variant::Bare(_))))
}

/// True for a path to a kind of `std::io::Error`: `io::ErrorKind::TimedOut`,
/// `std::io::ErrorKind::TimedOut`.
fn is_io_kind(path: &Path) -> bool {
    let mut names = path.segments.iter().rev().skip(1).map(|s| &s.ident);
    names.next().is_some_and(|name| name == "ErrorKind") && names.next().is_some_and(|m| m == "io")
}

/// The local alias `__FuseboxErrorOf<R>` of `<R as Outcome>::Error`, when a bare variant name
/// needs it (the return type is not written `Result<T, E>`), for both paths.
pub(super) fn error_alias(args: &Args, names: &Names) -> Option<TokenStream> {
    let Names {
        private, error_of, ..
    } = names;
    (names.error_path.is_none() && uses_alias(args.failure.as_ref(), names.io_error)).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    })
}

/// A `bool` expression: does the error count as a failure? The error is the local `error` of
/// [`Names`], a `&E` or, when `owned`, an `E`. `None` when every error counts.
pub(super) fn classify(
    failure: Option<&Failure>,
    names: &Names,
    owned: bool,
) -> Option<TokenStream> {
    let error = &names.error;
    let by_ref = owned.then(|| quote!(&));
    match failure? {
        Failure::Predicate(predicate) => {
            let span = predicate.span();
            // Located at the predicate, so a wrong signature is reported there.
            let error = Ident::new("__fusebox_error", error.span().located_at(span));
            let by_ref = owned.then(|| quote_spanned!(span=> &));
            Some(quote_spanned!(span=> #predicate(#by_ref #error)))
        }
        Failure::Variants(variants) => Some(variants_test(variants, names, by_ref)),
    }
}

/// The test of `failure = [...]`: one `matches!` on the error for the variants of its type, and
/// one on `error.kind()` for the kinds of a `std::io::Error` (bare names on an `io::Result`, or
/// `io::ErrorKind::TimedOut` written out); either or both.
fn variants_test(variants: &[Variant], names: &Names, by_ref: Option<TokenStream>) -> TokenStream {
    let Names {
        private,
        error_output,
        error,
        error_of,
        error_path,
        io_error,
        ..
    } = names;
    let (kinds, variants): (Vec<&Variant>, Vec<&Variant>) =
        variants.iter().partition(|variant| match variant {
            Variant::Bare(_) => *io_error,
            Variant::Path(path) => is_io_kind(path),
        });
    let kinds = kinds.first().map(|first| {
        let kind = |variant: &&Variant| match variant {
            Variant::Bare(name) => {
                let private = respan(private.clone(), name.span());
                quote!(#private::IoErrorKind::#name)
            }
            Variant::Path(path) => path.to_token_stream(),
        };
        // Located at the first kind, so an error type other than `std::io::Error` is reported
        // there.
        let span = match first {
            Variant::Bare(name) => name.span(),
            Variant::Path(path) => path.span(),
        };
        let private = respan(private.clone(), span);
        let kinds = kinds.iter().map(kind);
        quote!(::core::matches!(#private::io_error_kind(#by_ref #error), #(#kinds)|*))
    });
    let patterns = variants.iter().map(|variant| match variant {
        Variant::Bare(name) => {
            let span = name.span();
            let rest = quote_spanned!(span=> { .. });
            let error_type = match error_path {
                Some(path) => path.to_token_stream(),
                None => quote!(#error_of::<#error_output>),
            };
            let error_type = respan(error_type, span);
            quote!(#error_type::#name #rest)
        }
        Variant::Path(path) => {
            let rest = quote_spanned!(path.span()=> { .. });
            quote!(#path #rest)
        }
    });
    let patterns =
        (!variants.is_empty()).then(|| quote!(::core::matches!(#by_ref #error, #(#patterns)|*)));
    match (kinds, patterns) {
        (Some(kinds), Some(patterns)) => quote!((#kinds || #patterns)),
        (Some(test), None) | (None, Some(test)) => test,
        (None, None) => quote!(false),
    }
}

/// An `Option<Duration>` expression: the wait the error asked for, when its type implements
/// `RetryAfter` (`PushbackOf`'s inherent `pushback` needs the bound; without it the method found
/// is that of `NoPushback`, which `PushbackOf` derefs to, and answers `None`). The error is the
/// local `error` of [`Names`], an `E` or, when `by_ref`, a `&E`.
pub(super) fn pushback(names: &Names, by_ref: bool) -> TokenStream {
    let Names { private, error, .. } = names;
    let reference = (!by_ref).then(|| quote!(&));
    quote!(#private::PushbackOf(#reference #error).pushback())
}

/// The call of the fallback with the function's parameters and `cause` (a `Cause` expression),
/// spanned at the fallback's name so a wrong signature is reported there.
pub(super) fn fallback_call(
    fallback: &Path,
    params: &Params,
    is_async: bool,
    names: &Names,
    cause: TokenStream,
) -> TokenStream {
    let Names {
        private, output, ..
    } = names;
    let span = fallback.span();
    let callee = match (params.receiver, fallback.get_ident()) {
        (Some(_), Some(name)) => quote_spanned!(span=> Self::#name),
        _ => fallback.to_token_stream(),
    };
    // Each name keeps its own hygiene (it must resolve to the parameter) but is located at the
    // fallback, where a type mismatch is reported.
    let receiver = params.receiver.map(|self_span| {
        let self_token = Ident::new("self", self_span.located_at(span));
        quote_spanned!(span=> #self_token,)
    });
    let args = params.names.iter().map(|name| {
        let mut name = name.clone();
        name.set_span(name.span().located_at(span));
        name
    });
    // Up to 12 arguments go as one tuple through `call_fallback`, so a fallback with the wrong
    // parameters is one error showing both signatures; more are passed directly. The cause
    // names the error type, so the refused and the failed call check the very same signature
    // (reported once).
    let count = usize::from(params.receiver.is_some()) + params.names.len() + 1;
    let private_at = respan(private.clone(), span);
    let call = if params.any_cfg() {
        // A parameter under `#[cfg(...)]` is passed only when it is compiled in (the fallback
        // declares it under the same attributes): the tuple is built from the last argument to
        // the first, each `let` under its parameter's attributes.
        let tuple = Ident::new("__fusebox_args", Span::mixed_site());
        let prepends = args.zip(&params.cfgs).rev().map(|(name, cfg)| {
                quote_spanned!(span=> #(#cfg)* let #tuple = #private_at::prepend_arg(#tuple, #name);)
            });
        let receiver = params.receiver.map(|self_span| {
            let self_token = Ident::new("self", self_span.located_at(span));
            quote_spanned!(span=> let #tuple = #private_at::prepend_arg(#tuple, #self_token);)
        });
        quote_spanned!(span=> {
            let #tuple = (#cause,);
            #(#prepends)*
            #receiver
            #private_at::call_fallback(#tuple, #callee)
        })
    } else if count <= 12 {
        quote_spanned!(span=> #private_at::call_fallback((#receiver #(#args,)* #cause,), #callee))
    } else {
        quote_spanned!(span=> #callee(#receiver #(#args,)* #cause))
    };
    if !is_async {
        return call;
    }
    // What an async fallback returned is awaited through `FallbackReturn`: a future as is; a
    // sync fallback's value is one error that says so (and a future of the right type, so the
    // `.await` itself does not fail too).
    quote_spanned!(span=> {
        #[allow(unused_imports)]
        use #private_at::{AwaitFallback as _, AwaitSyncFallback as _};
        #private_at::FallbackReturn::<#output, _>::new(#call).fallback_future()
    }.await)
}
