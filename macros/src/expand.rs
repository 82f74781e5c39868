//! Code generation. The function keeps its signature; its body becomes: admission through a
//! per-function `static` call site, the original body wrapped in a closure or an `async` block (so
//! `return` and `?` stay inside it), classification of the outcome, the report on the permit, and
//! the fallback.
//!
//! With `timeout`, `retry`, `backoff` or `deadline` the body instead becomes an attempt closure run
//! by the runtime's attempt driver (see [`attempts_body`]); without them nothing of that machinery
//! is generated.

use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::{Expr, GenericArgument, Ident, Path, PathArguments, Stmt, Type, TypePath};

use crate::args::{
    self, Args, AttemptArgs, DEFAULT_MIN_CALLS, Failure, Key, PolicyArgs, RecoveryArg, Spanned,
    Variant, WindowArg,
};
use crate::errors::Errors;
use crate::function::{self, Function, Params};

/// The whole attribute: parse, check, then rewrite; on any error the item is returned unchanged
/// with every error appended.
pub(crate) fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let attempt_names = args::attempt_names(args.clone());
    let args = errors.ok(args::parse(args));
    let fallback = args.as_ref().is_some_and(|args| args.fallback.is_some());
    let function = errors.ok(function::parse(item.clone(), fallback, &attempt_names));
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
        borrowed,
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
    let site = Ident::new("__FUSEBOX_SITE", Span::mixed_site());
    let function_name = item.sig.ident.unraw().to_string();
    let function_path = quote!(::core::concat!(::core::module_path!(), "::", #function_name));
    let policy = policy(&args.policy, private);
    let registry = match &args.registry {
        Some(path) => {
            let private = names.private_at(path.span());
            quote_spanned!(path.span()=> #private::registry_of(&#path))
        }
        None => quote!(#private::global()),
    };
    if args.attempts.any() {
        let attempt = Attempt {
            site: &site,
            function_path: &function_path,
            policy: &policy,
            registry: &registry,
            params: &params,
            borrowed: &borrowed,
            body,
        };
        let new_body = attempts_body(&args, &names, attempt);
        item.block.stmts = vec![Stmt::Expr(Expr::Verbatim(new_body), None)];
        return item.into_token_stream();
    }
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
            // The result is taken apart and rebuilt rather than inspected and returned: on the
            // success path only the `Ok` value moves, never the whole `Result` (whose error type
            // may be large), which keeps the hot path free of memory-to-memory copies.
            let report_error = match classify(args.failure.as_ref(), &names, true) {
                Some(counts) => quote! {
                    #err_error => {
                        if #counts { #permit.failed() } else { #permit.ignored() }
                        #err_error
                    }
                },
                None => quote! {
                    #err_error => {
                        #permit.failed();
                        #err_error
                    }
                },
            };
            // A refusal returns at once; its temporaries end here, so an admitted call's
            // future holds nothing of it across the body's `.await`.
            let matched = quote! {
                match #run {
                    #ok_value => {
                        #permit.succeeded();
                        #ok_value
                    }
                    #report_error
                }
            };
            shared_store(is_async, &names, quote!(return #rejected;), matched)
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
                        #permit.failed();
                        #on_failure
                    }
                    #err_error => {
                        #permit.ignored();
                        #err_error
                    }
                },
                None => quote! {
                    #err_error => {
                        #permit.failed();
                        #on_failure
                    }
                },
            };
            let matched = quote! {
                match #run {
                    #ok_value => {
                        #permit.succeeded();
                        #ok_value
                    }
                    #report_error
                }
            };
            shared_store(is_async, &names, quote!(return #on_refused;), matched)
        }
    };

    let alias = (names.error_path.is_none() && uses_alias(args.failure.as_ref())).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    });
    let enter = Ident::new(
        if cfg!(feature = "redis") && is_async {
            "enter_async"
        } else {
            "enter"
        },
        Span::call_site(),
    );
    let admission = match &args.key {
        Key::Literal(key) => quote! {
            static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
            let mut #permit = #site.#enter(#registry);
        },
        Key::Dynamic(key) => {
            // Evaluated before the body runs; the borrow ends with this statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let #breaker = #site.breaker(#registry, #key_str);
                let mut #permit = #site.#enter(&#breaker);
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

/// The refusal check and the call. With the `redis` feature, an `async fn` on a shared registry
/// awaits the store's admission in the (cold) refusal branch and the recording of its outcome
/// after the call; without it, or for a sync function, the expansion is unchanged.
fn shared_store(
    is_async: bool,
    names: &Names,
    on_refused: TokenStream,
    matched: TokenStream,
) -> TokenStream {
    let Names {
        private,
        permit,
        refused,
        ..
    } = names;
    if cfg!(feature = "redis") && is_async {
        let out = Ident::new("__fusebox_out", Span::mixed_site());
        let asked = Ident::new("__fusebox_asked", Span::mixed_site());
        quote! {
            // The refusal is dropped before the store is awaited, so the function's future
            // holds nothing of it.
            let #asked = match #permit.refusal() {
                ::core::option::Option::Some(#refused) if !#private::asks_store(&#permit) => {
                    #on_refused
                }
                ::core::option::Option::Some(_) => true,
                ::core::option::Option::None => false,
            };
            if #asked {
                if let ::core::option::Option::Some(#refused) =
                    #private::admit_shared(&mut #permit).await
                {
                    #on_refused
                }
            }
            let #out = #matched;
            if #private::reports_to_store(&#permit) {
                #private::flush_shared(&#permit).await;
            }
            #out
        }
    } else {
        quote! {
            if let ::core::option::Option::Some(#refused) = #permit.refusal() {
                #on_refused
            }
            #matched
        }
    }
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
            let by_ref = owned.then(|| quote_spanned!(span=> &));
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
        Some(base) => {
            // Bound to a `Policy` first, so anything else is a type mismatch reported at the path.
            let span = base.span();
            let ty = respan(quote!(#private::Policy), span);
            let local = Ident::new("__fusebox_base", Span::mixed_site());
            quote_spanned!(span=> {
                let #local: #ty = #base;
                #local
            })
        }
        None => quote!(#private::Policy::DEFAULT),
    };
    match policy.window {
        Some(WindowArg::Count(window)) => {
            let calls = literal(window, Literal::u32_unsuffixed);
            expr = quote!(#expr.window(#calls));
            // `min_calls` never exceeds `window`: when only `window` is written and it is below
            // the base's `min_calls`, `min_calls` becomes `window` (so `window = 5` evaluates after
            // 5 calls).
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
        Some(WindowArg::Time(span)) => {
            let span = duration(span);
            expr = quote!(#expr.time_window(#span));
        }
        None => {}
    }
    if let Some(min_calls) = policy.min_calls {
        let calls = literal(min_calls, Literal::u32_unsuffixed);
        expr = quote!(#expr.min_calls(#calls));
    }
    if let Some(rate) = policy.failure_rate {
        let percent = literal(rate, Literal::u8_unsuffixed);
        expr = quote!(#expr.failure_rate(#percent));
    }
    if let Some(consecutive) = policy.consecutive {
        let failures = literal(consecutive, Literal::u32_unsuffixed);
        expr = quote!(#expr.consecutive(#failures));
        // `consecutive` alone is the simple policy: N counted failures in a row open the circuit,
        // and the failure-rate rule is off. With `failure_rate` written too, both rules apply and
        // either may trip. A `policy = CONST` base keeps its own rate rule (on or off).
        if policy.failure_rate.is_none() && policy.base.is_none() {
            expr = quote!(#expr.rate_off());
        }
    }
    if let Some(slow) = policy.slow {
        let threshold = duration(slow);
        expr = quote!(#expr.slow(#threshold));
    }
    if let Some(rate) = policy.slow_rate {
        let percent = literal(rate, Literal::u8_unsuffixed);
        expr = quote!(#expr.slow_rate(#percent));
    }
    if let Some(open_for) = policy.open_for {
        let wait = duration(open_for);
        expr = quote!(#expr.open_for(#wait));
    }
    if let Some(factor) = policy.open_backoff {
        let factor = literal(factor, Literal::f64_unsuffixed);
        expr = quote!(#expr.open_backoff(#factor));
    }
    if let Some(open_max) = policy.open_max {
        let wait = duration(open_max);
        expr = quote!(#expr.open_max(#wait));
    }
    if let Some(probes) = policy.half_open {
        let probes = literal(probes, Literal::u32_unsuffixed);
        expr = quote!(#expr.half_open(#probes));
    }
    if let Some(lease) = policy.half_open_lease {
        let lease = duration(lease);
        expr = quote!(#expr.half_open_lease(#lease));
    }
    // `recovery = probes` is the default; with a base it was refused while checking.
    if let Some(RecoveryArg::Progressive { phases, min_passes }) = policy.recovery {
        let phases = literal(phases, Literal::u32_unsuffixed);
        let min_passes = literal(min_passes, Literal::u32_unsuffixed);
        expr = quote!(#expr.progressive(#phases, #min_passes));
    }
    if let Some(calls) = policy.max_concurrent {
        let calls = literal(calls, Literal::u32_unsuffixed);
        expr = quote!(#expr.max_concurrent(#calls));
    }
    expr
}

/// A `Duration` of the given nanoseconds, located where it was written.
fn duration(nanos: Spanned<u64>) -> TokenStream {
    let nanos = literal(nanos, Literal::u64_unsuffixed);
    quote!(::core::time::Duration::from_nanos(#nanos))
}

/// The `Attempts` value of `timeout`, `retry`, `backoff` and `deadline`.
fn attempts_value(attempts: &AttemptArgs, private: &TokenStream) -> TokenStream {
    let optional = |value: Option<Spanned<u64>>| match value {
        Some(nanos) => {
            let nanos = duration(nanos);
            quote!(::core::option::Option::Some(#nanos))
        }
        None => quote!(::core::option::Option::None),
    };
    let timeout = optional(attempts.timeout);
    let deadline = optional(attempts.deadline);
    let retry = match attempts.retry {
        Some(retry) => literal(retry, Literal::u32_unsuffixed),
        None => Literal::u32_unsuffixed(1),
    };
    let backoff = match attempts.backoff {
        Some(nanos) => duration(nanos),
        None => quote!(::core::time::Duration::ZERO),
    };
    quote! {
        #private::Attempts {
            timeout: #timeout,
            retry: #retry,
            backoff: #backoff,
            deadline: #deadline,
        }
    }
}

/// What [`attempts_body`] needs from [`expand`].
struct Attempt<'a> {
    site: &'a Ident,
    function_path: &'a TokenStream,
    policy: &'a TokenStream,
    registry: &'a TokenStream,
    params: &'a Params,
    borrowed: &'a [Ident],
    /// The original body, braces included.
    body: TokenStream,
}

/// The body of an `async fn` with `timeout`, `retry`, `backoff` or `deadline`:
///
/// ```text
/// static SITE: Site = Site::new(key, function, policy);      // or DynSite, and the breaker
/// let admit = move || SITE.acquire(registry);                 // or `|| SITE.acquire(&breaker)`
/// const ATTEMPTS: Attempts = Attempts { timeout, retry, backoff, deadline };
/// let settled = {
///     let order = &order;                                     // each owned parameter
///     run_attempts(admit, &ATTEMPTS, move || async_body::<R, _>(async move { body }), is_failure)
///         .await
/// };
/// match settled {
///     Settled::Done(result) => result,
///     Settled::Failed(error) => Err(error),                   // or fallback(…, Cause::Failed(error))
///     Settled::Refused(refused) => Err(reject(refused)),      // or fallback(…, Cause::Rejected(refused))
/// }
/// ```
///
/// The driver calls the attempt closure once per attempt, so every attempt needs the arguments
/// again: the closure holds only shared references (a parameter already taken as `&T`, and `&self`,
/// is copied as is; every other one is re-bound as `&T` for the body). So with these arguments an
/// owned parameter `order: Order` is seen by the body as `&Order`, a body that consumes an
/// argument cannot be retried (it does not compile: clone what it needs), the arguments must be
/// `Sync` for the future to be `Send`, and `&mut self`, `&mut T`, `self` by value and `mut`
/// bindings are refused with an error at the parameter. The parameters stay owned outside the
/// attempt block, so a fallback still receives them by value. The body keeps `return` and `?`:
/// it is still an `async` block whose output is pinned to the function's return type.
///
/// A timed-out attempt arrives as `Settled::Refused` with reason `TimedOut`, so it reaches the
/// caller through `From<fusebox::Error>` or the fallback's `Cause::Rejected`.
fn attempts_body(args: &Args, names: &Names, attempt: Attempt<'_>) -> TokenStream {
    let Names {
        private,
        output,
        output_span,
        error,
        refused,
        result,
        error_of,
        ..
    } = names;
    let Attempt {
        site,
        function_path,
        policy,
        registry,
        params,
        borrowed,
        body,
    } = attempt;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let admit = local("__fusebox_admit");
    let settled = local("__fusebox_settled");
    let attempts = Ident::new("__FUSEBOX_ATTEMPTS", Span::mixed_site());
    let registry_local = local("__fusebox_registry");
    let breaker = local("__fusebox_breaker");

    let admission = match &args.key {
        Key::Literal(key) => quote! {
            static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
            let #registry_local = #registry;
            let #admit = move || #site.acquire(#registry_local);
        },
        Key::Dynamic(key) => {
            // Evaluated before the first attempt; the borrow ends with this statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let #breaker = #site.breaker(#registry, #key_str);
                let #admit = || #site.acquire(&#breaker);
            }
        }
    };
    let attempts_value = attempts_value(&args.attempts, private);

    let private_at_output = names.private_at(*output_span);
    let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
    // The attempt's `async` block is located at the body, so a body whose result no longer fits
    // (an owned parameter is now borrowed) is reported there rather than at the attribute.
    let body_span = body
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |token| token.span());
    let async_move = quote_spanned!(body_span=> async move);
    let error_type = respan(
        quote!(<#output as #private_at_output::Outcome>::Error),
        *output_span,
    );
    let is_failure = match classify(args.failure.as_ref(), names, false) {
        Some(counts) => quote!(|#error: &#error_type| -> bool { #counts }),
        None => quote!(|_: &#error_type| -> bool { true }),
    };
    let shadows = borrowed.iter().map(|name| quote!(let #name = &#name;));

    let at_output = |tokens: TokenStream| respan(tokens, *output_span);
    let err = quote!(::core::result::Result::Err);
    let (on_failed, on_refused) = match &args.fallback {
        None => (
            at_output(quote!(#err(#error))),
            at_output(quote!(#err(#private::reject(#refused)))),
        ),
        Some(fallback) => (
            fallback_call(fallback, params, true, names, quote!(Failed(#error))),
            fallback_call(fallback, params, true, names, quote!(Rejected(#refused))),
        ),
    };
    let alias = (names.error_path.is_none() && uses_alias(args.failure.as_ref())).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    });
    quote! {
        #alias
        #admission
        const #attempts: #private::Attempts = #attempts_value;
        let #settled = {
            #(#shadows)*
            #private::run_attempts(
                #admit,
                &#attempts,
                move || #wrap(#async_move #body),
                #is_failure,
            )
            .await
        };
        match #settled {
            #private::Settled::Done(#result) => #result,
            #private::Settled::Failed(#error) => #on_failed,
            #private::Settled::Refused(#refused) => #on_refused,
        }
    }
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
        assert!(
            !out.contains("Attempts") && !out.contains("run_attempts"),
            "{out}"
        );
    }

    #[test]
    fn attempts_go_through_the_driver_with_borrowed_parameters() {
        let out = circuit_breaker(
            quote!(
                key = "k",
                timeout = "800ms",
                retry = 3,
                backoff = "100ms",
                consecutive = 5
            ),
            quote!(
                async fn f(&self, order: Order, id: &str) -> Result<u32, ApiError> {
                    self.send(order, id).await
                }
            ),
        )
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            out.contains("Policy :: DEFAULT . consecutive (5) . rate_off ()"),
            "{out}"
        );
        assert!(
            out.contains(
                "Attempts { timeout : :: core :: option :: Option :: Some (:: core :: time :: \
                 Duration :: from_nanos (800000000)) , retry : 3 , backoff : :: core :: time :: \
                 Duration :: from_nanos (100000000) , deadline : :: core :: option :: Option :: None , }"
            ),
            "{out}"
        );
        assert!(out.contains("let order = & order ;"), "{out}");
        assert!(!out.contains("let id ="), "{out}");
        assert!(!out.contains("let self"), "{out}");
        assert!(out.contains("move || :: fusebox :: __private :: async_body :: < Result < u32 , ApiError > , _ > (async move { self . send (order , id) . await })"), "{out}");
        assert!(
            out.contains(":: fusebox :: __private :: Settled :: Refused"),
            "{out}"
        );
    }
}
