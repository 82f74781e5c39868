//! Code generation. The function keeps its signature; its body becomes: admission through a
//! per-function `static` call site, the original body wrapped in a closure or an `async` block (so
//! `return` and `?` stay inside it), classification of the outcome, the report on the permit, and
//! the fallback.

use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::{Expr, GenericArgument, Ident, Path, PathArguments, Stmt, Type, TypePath};

use crate::args::{self, Args, DEFAULT_MIN_CALLS, Failure, Key, PolicyArgs, Spanned, Variant};
use crate::errors::Errors;
use crate::function::{self, Function, Params};

/// The whole attribute: parse, check, then rewrite; on any error the item is returned unchanged
/// with every error appended.
pub(crate) fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = errors.ok(args::parse(args));
    let fallback = args.as_ref().is_some_and(|args| args.fallback.is_some());
    let function = errors.ok(function::parse(item.clone(), fallback));
    match (args, function, errors.finish()) {
        (Some(args), Some(function), Ok(())) => expand(args, function),
        (_, _, result) => {
            let mut output = item;
            if let Err(error) = result {
                output.extend(error.to_compile_error());
            }
            output
        }
    }
}

/// Names shared by the generated code.
struct Names {
    /// `::fusebox::__private`, or `<crate = path>::__private`.
    private: TokenStream,
    /// The written return type.
    output: Type,
    /// Where to point errors about the return type.
    output_span: Span,
    permit: Ident,
    result: Ident,
    error: Ident,
    value: Ident,
    refused: Ident,
    /// The error type as a path usable in a pattern, when the return type is written
    /// `Result<T, E>` with `E` a path: a bare variant name becomes `E::Timeout { .. }`.
    error_path: Option<Path>,
    /// Otherwise the local alias `__FuseboxErrorOf<R>` = `<R as Outcome>::Error`, and a bare
    /// variant name becomes `__FuseboxErrorOf::<RET>::Timeout { .. }` whatever alias the return
    /// type is written with.
    error_of: Ident,
}

impl Names {
    /// The runtime's private module, located at `span` so a failed bound is reported there.
    fn private_at(&self, span: Span) -> TokenStream {
        respan(self.private.clone(), span)
    }
}

/// `tokens`, every one located at `span` (keeping its own hygiene).
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(group.span().located_at(span));
                token = TokenTree::Group(inner);
            } else {
                token.set_span(token.span().located_at(span));
            }
            token
        })
        .collect()
}

/// `E` of a return type written `Result<T, E>` (any path ending in `Result`), as a path that can
/// start a pattern (`Wrapped<X>` becomes `Wrapped::<X>`).
fn error_path(output: &Type) -> Option<Path> {
    let Type::Path(TypePath {
        qself: None, path, ..
    }) = ungroup(output)
    else {
        return None;
    };
    let last = path.segments.last()?;
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return None;
    };
    if last.ident != "Result" || arguments.args.len() != 2 {
        return None;
    }
    let Some(GenericArgument::Type(error)) = arguments.args.last() else {
        return None;
    };
    let Type::Path(TypePath {
        qself: None, path, ..
    }) = ungroup(error)
    else {
        return None;
    };
    let mut path = path.clone();
    for segment in &mut path.segments {
        if let PathArguments::AngleBracketed(arguments) = &mut segment.arguments {
            arguments.colon2_token.get_or_insert_with(Default::default);
        }
    }
    Some(path)
}

/// A type without the invisible groups and parentheses macros wrap around it.
fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => ungroup(&group.elem),
        Type::Paren(paren) => ungroup(&paren.elem),
        other => other,
    }
}

/// Rewrites a checked function.
fn expand(args: Args, function: Function) -> TokenStream {
    let Function {
        mut item,
        output,
        params,
    } = function;
    let krate = match &args.krate {
        Some(path) => path.to_token_stream(),
        None => quote!(::fusebox),
    };
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let names = Names {
        private: quote!(#krate::__private),
        output_span: output.span(),
        error_path: error_path(&output),
        output,
        permit: local("__fusebox_permit"),
        result: local("__fusebox_result"),
        error: local("__fusebox_error"),
        value: local("__fusebox_value"),
        refused: local("__fusebox_refused"),
        error_of: Ident::new("__FuseboxErrorOf", Span::call_site()),
    };
    let Names {
        private,
        output,
        output_span,
        permit,
        result,
        error,
        value,
        refused,
        error_of,
        ..
    } = &names;
    let is_async = item.sig.asyncness.is_some();

    // The original body, wrapped. Without a fallback it is moved into the wrapper, so the future
    // captures exactly what the original function captured. With one it only borrows the
    // parameters, which are then handed to the fallback.
    let stmts = std::mem::take(&mut item.block.stmts);
    let mut body = TokenStream::new();
    item.block
        .brace_token
        .surround(&mut body, |tokens| tokens.append_all(&stmts));
    let capture = match args.fallback {
        Some(_) => TokenStream::new(),
        None => quote!(move),
    };
    let private_at_output = names.private_at(*output_span);
    let run = if is_async {
        let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
        quote!(#wrap(async #capture #body).await)
    } else {
        let wrap = quote_spanned!(*output_span=> #private_at_output::sync_body::<#output, _>);
        quote!(#wrap(#capture || #body))
    };

    let site = Ident::new("__FUSEBOX_SITE", Span::mixed_site());
    let function_name = item.sig.ident.unraw().to_string();
    let policy = policy(&args.policy, private);
    let registry = match &args.registry {
        Some(path) => {
            let private = names.private_at(path.span());
            quote_spanned!(path.span()=> #private::registry_of(&#path))
        }
        None => quote!(#private::global()),
    };
    let breaker = Ident::new("__fusebox_breaker", Span::mixed_site());

    // Patterns and values of the function's own `Result` are located at the return type: when the
    // function does not return a `Result`, every resulting mismatch is reported there.
    let at_output = |tokens: TokenStream| respan(tokens, *output_span);
    let ok = quote!(::core::result::Result::Ok);
    let err = quote!(::core::result::Result::Err);
    let ok_value = at_output(quote!(#ok(#value)));
    let err_error = at_output(quote!(#err(#error)));
    let outcome = match &args.fallback {
        None => {
            let rejected = at_output(quote!(#err(#private::reject(#refused))));
            let report_error = match classify(args.failure.as_ref(), &names, false) {
                Some(counts) => quote! {
                    #err_error => if #counts { #permit.failure() } else { #permit.ignore() },
                },
                None => {
                    let err_any = at_output(quote!(#err(_)));
                    quote!(#err_any => #permit.failure(),)
                }
            };
            let ok_any = at_output(quote!(#ok(_)));
            quote! {
                // A refusal returns at once; its temporaries end here, so an admitted call's
                // future holds nothing of it across the body's `.await`.
                if let ::core::option::Option::Some(#refused) = #permit.refusal() {
                    return #rejected;
                }
                let #result = #run;
                match &#result {
                    #ok_any => #permit.success(),
                    #report_error
                }
                #result
            }
        }
        Some(fallback) => {
            let on_refused = fallback_call(
                fallback,
                &params,
                is_async,
                &names,
                quote!(Rejected(#refused)),
            );
            let on_failure =
                fallback_call(fallback, &params, is_async, &names, quote!(Failed(#error)));
            let report_error = match classify(args.failure.as_ref(), &names, true) {
                Some(counts) => quote! {
                    #err_error if #counts => {
                        #permit.failure();
                        #on_failure
                    }
                    #err_error => {
                        #permit.ignore();
                        #err_error
                    }
                },
                None => quote! {
                    #err_error => {
                        #permit.failure();
                        #on_failure
                    }
                },
            };
            quote! {
                if let ::core::option::Option::Some(#refused) = #permit.refusal() {
                    return #on_refused;
                }
                let #result = #run;
                match #result {
                    #ok_value => {
                        #permit.success();
                        #ok_value
                    }
                    #report_error
                }
            }
        }
    };

    let alias = (names.error_path.is_none() && uses_alias(args.failure.as_ref())).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    });
    let function_path = quote!(::core::concat!(::core::module_path!(), "::", #function_name));
    let admission = match &args.key {
        Key::Literal(key) => quote! {
            static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
            let #permit = #site.enter(#registry);
        },
        Key::Dynamic(key) => {
            // Evaluated before the body runs; the borrow ends with this statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let #breaker = #site.breaker(#registry, #key_str);
                let #permit = #site.enter(&#breaker);
            }
        }
    };
    let new_body = quote! {
        #alias
        #admission
        #outcome
    };
    item.block.stmts = vec![Stmt::Expr(Expr::Verbatim(new_body), None)];
    item.into_token_stream()
}

/// True when a bare variant name needs the error-type alias.
fn uses_alias(failure: Option<&Failure>) -> bool {
    matches!(failure, Some(Failure::Variants(variants))
        if variants.iter().any(|variant| matches!(variant, Variant::Bare(_))))
}

/// A `bool` expression: does the error count as a failure? The error is the local `error` of
/// [`Names`], a `&E` or, when `owned`, an `E`. `None` when every error counts.
fn classify(failure: Option<&Failure>, names: &Names, owned: bool) -> Option<TokenStream> {
    let Names {
        output,
        error,
        error_of,
        error_path,
        ..
    } = names;
    let by_ref = owned.then(|| quote!(&));
    match failure? {
        Failure::Predicate(predicate) => {
            let span = predicate.span();
            // Located at the predicate, so a wrong signature is reported there.
            let error = Ident::new("__fusebox_error", error.span().located_at(span));
            Some(quote_spanned!(span=> #predicate(#by_ref #error)))
        }
        Failure::Variants(variants) => {
            let patterns = variants.iter().map(|variant| match variant {
                Variant::Bare(name) => {
                    let span = name.span();
                    let rest = quote_spanned!(span=> { .. });
                    let error_type = match error_path {
                        Some(path) => path.to_token_stream(),
                        None => quote!(#error_of::<#output>),
                    };
                    let error_type = respan(error_type, span);
                    quote!(#error_type::#name #rest)
                }
                Variant::Path(path) => {
                    let rest = quote_spanned!(path.span()=> { .. });
                    quote!(#path #rest)
                }
            });
            Some(quote!(::core::matches!(#by_ref #error, #(#patterns)|*)))
        }
    }
}

/// The call of the fallback with the function's parameters and `Cause::<cause>`, spanned at the
/// fallback's name so a wrong signature is reported there.
fn fallback_call(
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
    let call = quote_spanned!(span=> #callee(#receiver #(#args,)* #private::Cause::#cause));
    if is_async {
        quote_spanned!(span=> #private::async_fallback::<#output, _>(#call).await)
    } else {
        call
    }
}

/// The `Policy` expression: the base (`policy = CONST` or the default) with each written knob
/// applied on top.
fn policy(policy: &PolicyArgs, private: &TokenStream) -> TokenStream {
    let mut expr = match &policy.base {
        Some(base) => base.to_token_stream(),
        None => quote!(#private::Policy::DEFAULT),
    };
    if let Some(window) = policy.window {
        let calls = literal(window, Literal::u32_unsuffixed);
        expr = quote!(#expr.window(#calls));
        // `min_calls` never exceeds `window`: when only `window` is written and it is below the
        // base's `min_calls`, `min_calls` becomes `window` (so `window = 5` evaluates after 5 calls).
        if policy.min_calls.is_none() {
            match &policy.base {
                None if u64::from(window.value) < DEFAULT_MIN_CALLS => {
                    expr = quote!(#expr.min_calls(#calls));
                }
                None => {}
                Some(_) => {
                    let base = Ident::new("__fusebox_policy", Span::mixed_site());
                    expr = quote!({
                        let #base = #expr;
                        if #base.min_calls_len() > #calls {
                            #base.min_calls(#calls)
                        } else {
                            #base
                        }
                    });
                }
            }
        }
    }
    if let Some(min_calls) = policy.min_calls {
        let calls = literal(min_calls, Literal::u32_unsuffixed);
        expr = quote!(#expr.min_calls(#calls));
    }
    if let Some(rate) = policy.failure_rate {
        let percent = literal(rate, Literal::u8_unsuffixed);
        expr = quote!(#expr.failure_rate(#percent));
    }
    if let Some(open_for) = policy.open_for {
        let nanos = literal(open_for, Literal::u64_unsuffixed);
        expr = quote!(#expr.open_for(::core::time::Duration::from_nanos(#nanos)));
    }
    if let Some(probes) = policy.half_open {
        let probes = literal(probes, Literal::u32_unsuffixed);
        expr = quote!(#expr.half_open(#probes));
    }
    expr
}

/// An unsuffixed literal located where the value was written.
fn literal<T>(value: Spanned<T>, make: fn(T) -> Literal) -> Literal {
    let mut literal = make(value.value);
    literal.set_span(value.span);
    literal
}

#[cfg(test)]
mod tests {
    use super::{circuit_breaker, error_path};
    use quote::{ToTokens, quote};

    #[test]
    fn error_type_of_a_written_result() {
        let path = |ty: proc_macro2::TokenStream| {
            error_path(&syn::parse2(ty).unwrap()).map(|p| p.to_token_stream().to_string())
        };
        assert_eq!(
            path(quote!(Result<u8, ApiError>)).as_deref(),
            Some("ApiError")
        );
        assert_eq!(
            path(quote!(std::result::Result<(), errors::Wrapped<T>>)).as_deref(),
            Some("errors :: Wrapped :: < T >")
        );
        assert_eq!(path(quote!(Result<u8, Self>)).as_deref(), Some("Self"));
        assert_eq!(path(quote!(ApiResult<u8>)), None);
        assert_eq!(path(quote!(io::Result<u8>)), None);
        assert_eq!(path(quote!(Result<u8, (A, B)>)), None);
        assert_eq!(path(quote!(u8)), None);
    }

    #[test]
    fn on_error_the_item_is_unchanged() {
        let item = quote!(
            fn f(kind: Kind) -> ApiResult<u32> {
                respond(kind)
            }
        );
        let out = circuit_breaker(quote!(key = "k", window = 0, falure = []), item.clone());
        let out = out.to_string();
        assert!(out.starts_with(&item.to_string()), "{out}");
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
    }

    #[test]
    fn rewrites_the_body_only() {
        let out = circuit_breaker(
            quote!(key = "k", window = 4, failure = [Timeout]),
            quote!(
                #[inline]
                pub fn f(kind: Kind) -> ApiResult<u32> {
                    respond(kind)
                }
            ),
        )
        .to_string();
        assert!(out.starts_with("# [inline] pub fn f (kind : Kind) -> ApiResult < u32 > {"));
        assert!(
            out.contains("Policy :: DEFAULT . window (4) . min_calls (4)"),
            "{out}"
        );
        assert!(
            out.contains("sync_body :: < ApiResult < u32 > , _ > (move || { respond (kind) })")
        );
        assert!(out.contains("__FuseboxErrorOf :: < ApiResult < u32 > > :: Timeout { .. }"));
        assert!(!out.contains("compile_error"));
    }
}
