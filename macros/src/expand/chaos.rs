//! `chaos = true`: the function's calls run behind `fusebox::chaos`'s injection point. With the
//! runtime's feature `chaos` (which sets this crate's), a single call asks for its key's
//! injection after its admission (`chaos_admit`, which may turn the permit into a rejection) and
//! its body runs inside `chaos_async` or `chaos_sync`; the attempt driver's admission closure is
//! wrapped in `chaos_after_acquire` and each attempt's future in `chaos_async`. Without the
//! feature, or without the argument, nothing here adds a token.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

use super::names::Names;
use crate::args::{Args, Key};

/// True when the expansion has injection points.
pub(super) fn enabled(args: &Args) -> bool {
    args.chaos && cfg!(feature = "chaos")
}

/// The local holding the call's injection.
fn local() -> Ident {
    Ident::new("__fusebox_chaos", Span::mixed_site())
}

/// After a single call's admission: its key's injection (`registry`: the registry expression).
pub(super) fn admit(args: &Args, names: &Names, registry: &TokenStream) -> TokenStream {
    if !enabled(args) {
        return TokenStream::new();
    }
    let chaos = local();
    let Names {
        private,
        permit,
        name,
        ..
    } = names;
    quote! {
        let #chaos = #private::chaos_admit(#registry, &mut #permit.raw, #name);
    }
}

/// After the attempt driver's admission closure: the key's injection, found once per call, and
/// the closure wrapped so that a rejection fault turns an admitted attempt into a rejection.
pub(super) fn wrap_admit(args: &Args, names: &Names, registry: &TokenStream) -> TokenStream {
    if !enabled(args) {
        return TokenStream::new();
    }
    let private = &names.private;
    let chaos = local();
    let admit = Ident::new("__fusebox_admit", Span::mixed_site());
    let key = match &args.key {
        Key::Literal(key) => quote!(#key),
        Key::Dynamic(_) => {
            let breaker = Ident::new("__fusebox_breaker", Span::mixed_site());
            quote!(#breaker.key())
        }
    };
    quote! {
        let #chaos = #private::chaos_of(#registry, #key);
        let #chaos = &#chaos;
        let #admit = move || #private::chaos_after_acquire(#chaos, #admit());
    }
}

/// The body's future behind the injection point: `Chaos` moved in (a single call) or cloned
/// from the call's (an attempt).
pub(super) fn around_async(
    args: &Args,
    names: &Names,
    future: TokenStream,
    attempt: bool,
) -> TokenStream {
    if !enabled(args) {
        return future;
    }
    let private = &names.private;
    let chaos = local();
    let chaos = if attempt {
        quote!(::core::clone::Clone::clone(#chaos))
    } else {
        quote!(#chaos)
    };
    quote!(#private::chaos_async(#chaos, #future))
}

/// A plain `fn`'s body closure behind the injection point: a closure that runs `body` (a
/// closure) through `chaos_sync`.
pub(super) fn around_sync(
    args: &Args,
    names: &Names,
    body: TokenStream,
    capture: &TokenStream,
) -> TokenStream {
    if !enabled(args) {
        return body;
    }
    let private = &names.private;
    let chaos = local();
    quote!(#capture || #private::chaos_sync(&#chaos, #body))
}
