//! Code generation. The function keeps its signature; its body becomes: admission through a
//! per-function `static` call site, the original body wrapped in a closure or an `async` block (so
//! `return` and `?` stay inside it; an `async` body that has neither, nor a macro call, runs in
//! place as a plain block), classification of the outcome, the report on the permit, and the
//! fallback (an `async fn`'s is awaited after the call settled).
//!
//! Each part has a file of its own under `expand/`: the names the generated code shares
//! (`names.rs`), the call site and the admission (`admission.rs`), the body of a call run once
//! and its outcome arms (`once.rs`), or, with `timeout`, `retry`, `backoff` or `deadline`, the
//! attempt closure run by the runtime's attempt driver (`attempts.rs`; without them nothing of
//! that machinery is generated); what a failed or refused call returns (`settle.rs`), the failure
//! test, the error-type alias and the fallback call (`classify.rs`), and the `Policy` and
//! `Attempts` values (`values.rs`). The committed snapshots under `macros/tests/snapshots/` show
//! whole expansions.

mod admission;
mod attempts;
mod chaos;
mod classify;
mod names;
mod once;
mod settle;
#[cfg(feature = "store")]
mod store;
mod values;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};

use admission::Site;
use attempts::{Attempt, attempts_body};
use names::{Names, is_method};
use once::once_body;

use crate::args::Args;
use crate::function::Function;

/// Rewrites a checked function.
pub(crate) fn expand(args: Args, function: Function) -> TokenStream {
    let is_async = function.is_async();
    let Function {
        mut item,
        output,
        params,
        conditional,
        boxed,
    } = function;
    let conditional = conditional_errors(conditional);
    if !is_async {
        inline_hint(&mut item.attrs);
    }
    let names = Names::new(&args, output, is_method(&item.sig));
    let body = item.body.to_token_stream();
    let site = Site::new(&args, &names, &item.sig);
    let new_body = if args.attempts.any() && !attempts::timeout_only(&args.attempts) {
        let attempt = Attempt {
            site: &site,
            params: &params,
            body,
        };
        attempts_body(&args, &names, attempt)
    } else {
        once_body(&args, &names, &site, &params, &body, is_async)
    };
    if boxed {
        // `#[async_trait]`'s shape: the body boxed as that attribute boxed it.
        let private = &names.private;
        return item.with_body(quote! {
            #private::box_pin(async move {
                #conditional
                #new_body
            })
        });
    }
    item.with_body(quote!(#conditional #new_body))
}

/// `#[inline]` on a plain `fn` whose attributes say nothing of inlining. Its closed path is a few
/// dozen instructions around the body; behind a call it also pays the callee-saved registers its
/// cold paths need, stored in its prologue, which the window's locked read-modify-write then
/// waits for (twice the time of the same call inlined). An `async fn`'s `poll` needs no hint:
/// the future is polled where it is awaited.
fn inline_hint(attrs: &mut Vec<syn::Attribute>) {
    let says = |attr: &syn::Attribute| {
        attr.path().is_ident("inline")
            || (attr.path().is_ident("cfg_attr")
                && attr.meta.to_token_stream().to_string().contains("inline"))
    };
    if !attrs.iter().any(says) {
        attrs.push(syn::parse_quote!(#[inline]));
    }
}

/// The errors about parameters under `#[cfg(...)]`, each under the same attributes: they hold
/// when the parameter is compiled in.
fn conditional_errors(conditional: Vec<(Vec<syn::Attribute>, syn::Error)>) -> TokenStream {
    conditional
        .into_iter()
        .flat_map(|(cfg, error)| {
            error.into_iter().map(move |error| {
                let error = error.to_compile_error();
                quote!(#(#cfg)* { #error })
            })
        })
        .collect()
}

/// True when an `async fn`'s expansion asks a shared key's store: with the `store` feature (set
/// by the runtime's), except in this crate's own tests, whose snapshots show the expansion
/// without a store whatever the workspace's features (the suite's store tests run the other).
pub(crate) const fn with_store() -> bool {
    cfg!(all(feature = "store", not(test)))
}
