//! Code generation. The function keeps its signature; its body becomes: admission through a
//! per-function `static` call site, the original body wrapped in a closure or an `async` block (so
//! `return` and `?` stay inside it), classification of the outcome, the report on the permit, and
//! the fallback.
//!
//! With `timeout`, `retry`, `backoff` or `deadline` the body instead becomes an attempt closure run
//! by the runtime's attempt driver (see [`attempts_body`]); without them nothing of that machinery
//! is generated.

use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::{
    Expr, ExprPath, FnArg, GenericArgument, Ident, Pat, Path, PathArguments, Type, TypePath,
};

use crate::args::{
    self, Args, AttemptArgs, Failure, Key, PolicyArgs, RecoveryArg, Spanned, Variant, WindowArg,
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
    let key_check = match (&args, &function) {
        (Some(args), Some(function)) => check_key_name(&args.key, function),
        _ => Ok(()),
    };
    errors.ok(key_check);
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

/// `key = payment`, a bare name that is no parameter of the function and not an upper-case
/// `const` or `static`: most likely a literal key written without its quotes. Any other
/// expression is a dynamic key, checked by rustc.
fn check_key_name(key: &Key, function: &Function) -> syn::Result<()> {
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
        item,
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
    let body = item.body.to_token_stream();
    let site = Ident::new("__FUSEBOX_SITE", Span::mixed_site());
    let function_name = item.sig.ident.unraw().to_string();
    let function_path = quote!(::core::concat!(::core::module_path!(), "::", #function_name));
    // A method's events name its type: `type_name::<Self>()` is only known in the body.
    let method_name = is_method(&item.sig).then(|| {
        let name = Ident::new("__FUSEBOX_NAME", Span::mixed_site());
        let local = Ident::new("__fusebox_name", Span::mixed_site());
        let declare = quote! {
            static #name: #private::MethodName = #private::MethodName::new(#function_name);
            let #local = #name.get(::core::any::type_name::<Self>);
        };
        (declare, local)
    });
    let policy = policy(&args.policy, private);
    let registry = match &args.registry {
        Some(path) => {
            let private = names.private_at(path.span());
            quote_spanned!(path.span()=> #private::registry_of(&#path))
        }
        None => quote!(#private::global()),
    };
    let declare = declare(&site, args.registry.as_ref(), private);
    if args.attempts.any() {
        let attempt = Attempt {
            site: &site,
            function_path: &function_path,
            policy: &policy,
            registry: &registry,
            params: &params,
            method_name: method_name.clone(),
            body,
        };
        let new_body = attempts_body(&args, &names, attempt);
        return item.with_body(new_body);
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
            shared_store(is_async, output, &names, quote!(return #rejected;), matched)
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
            shared_store(
                is_async,
                output,
                &names,
                quote!(return #on_refused;),
                matched,
            )
        }
    };

    let alias = (names.error_path.is_none() && uses_alias(args.failure.as_ref())).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    });
    let shared_async = cfg!(feature = "redis") && is_async;
    let (method_declare, enter, method_arg) = match &method_name {
        Some((declare, local)) => (
            declare.clone(),
            if shared_async {
                quote!(enter_async_as)
            } else {
                quote!(enter_as)
            },
            quote!(, #local),
        ),
        None => (
            TokenStream::new(),
            if shared_async {
                quote!(enter_async)
            } else {
                quote!(enter)
            },
            TokenStream::new(),
        ),
    };
    let admission = match &args.key {
        Key::Literal(key) => quote! {
            static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
            #declare
            #method_declare
            let mut #permit = #site.#enter(#registry #method_arg);
        },
        Key::Dynamic(key) => {
            // Evaluated before the body runs; the borrow ends with this statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let #breaker = #site.breaker(#registry, #key_str);
                #method_declare
                let mut #permit = #site.#enter(&#breaker #method_arg);
            }
        }
    };
    let new_body = quote! {
        #alias
        #admission
        #outcome
    };
    item.with_body(new_body)
}

/// True for a method: a function with a receiver, or one whose signature names `Self` (an
/// associated function of an impl).
fn is_method(sig: &syn::Signature) -> bool {
    fn names_self(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "Self",
            TokenTree::Group(group) => names_self(group.stream()),
            _ => false,
        })
    }
    sig.receiver().is_some() || names_self(sig.to_token_stream())
}

/// The refusal check and the call. With the `redis` feature, an `async fn` on a shared registry
/// awaits the store's admission in the (cold) refusal branch and the recording of its outcome
/// after the call; without it, or for a sync function, the expansion is unchanged.
fn shared_store(
    is_async: bool,
    output: &Type,
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
        quote! {
            // The store's admission replaces the permit; then one refusal check (so the fallback
            // call is written once), whose refusal lives only in this statement.
            if #private::asks_store(&#permit) {
                #private::admit_shared(&mut #permit).await;
            }
            if let ::core::option::Option::Some(#refused) = #permit.refusal() {
                #on_refused
            }
            // Typed as the function's output, so a wrong fallback is one mismatch, not two.
            let #out: #output = #matched;
            if #private::reports_to_store(&#permit) {
                // The result moves into the (boxed) wait, so the function's own future holds
                // nothing of it across this await.
                return #private::flush_then(&#permit, #out).await;
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
    // Up to 12 arguments go as one tuple through `call_fallback`, so a fallback with the wrong
    // parameters is one error showing both signatures; more are passed directly. The cause
    // names the error type, so the refused and the failed call check the very same signature
    // (reported once).
    let count = usize::from(params.receiver.is_some()) + params.names.len() + 1;
    let cause = quote!(#private::Cause::<<#output as #private::Outcome>::Error>::#cause);
    let private_at = respan(private.clone(), span);
    let call = if count <= 12 {
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

/// The `Policy` expression: the base (`policy = CONST` or the default) with each written knob
/// applied on top through its `Policy` setter. The rules between fields (`min_calls` following a
/// small `window`, `consecutive` alone turning the rate rule off) are the setters' own.
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
    if let Some(shared) = policy.shared {
        let shared = shared.value;
        expr = quote!(#expr.shared(#shared));
    }
    expr
}

/// Registers a literal-key site at link time, with a test for the registry it uses, so the
/// registry knows the declared key and policy before the first call.
fn declare(site: &Ident, registry: Option<&syn::Path>, private: &TokenStream) -> TokenStream {
    let r = Ident::new("__fusebox_registry", Span::mixed_site());
    let matcher = match registry {
        Some(path) => quote!(|#r| #private::in_registry(&#path, #r)),
        None => quote!(#private::in_global),
    };
    quote! {
        #private::inventory::submit! {
            #private::Declared::new(&#site, #matcher)
        }
    }
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
    /// For a method: the declaration of its name and the local holding it.
    method_name: Option<(TokenStream, Ident)>,
    /// The original body, braces included.
    body: TokenStream,
}

/// The body of an `async fn` with `timeout`, `retry`, `backoff` or `deadline`:
///
/// ```text
/// static SITE: Site = Site::new(key, function, policy);      // or DynSite, and the breaker
/// let admit = move || SITE.acquire(registry);                 // or `|| SITE.acquire(&breaker)`
/// const ATTEMPTS: Attempts = Attempts { timeout, retry, backoff, deadline };
/// let settled = run_attempts(admit, &ATTEMPTS, attempt, is_failure).await;
/// match settled {
///     Settled::Done(result) => result,
///     Settled::Failed(error) => Err(error),                   // or fallback(…, Cause::Failed(error))
///     Settled::Refused(refused) => Err(reject(refused)),      // or fallback(…, Cause::from_error(refused))
/// }
/// ```
///
/// With `retry`, `attempt` is `|| async_body::<R, _>(async { body })`: the driver calls it once
/// per attempt, so it borrows the parameters (neither the closure nor the `async` block is
/// `move`). The body sees every parameter with its written type and may use it by reference or
/// copy it; a body that consumes one cannot be retried (rustc: "cannot move out of … a captured
/// variable in an `FnMut` closure", the closure located at `retry`: clone what it needs). The
/// arguments must be `Sync` for the future to be `Send`, and `&mut self`, `&mut T`, `self` by
/// value and `mut` bindings are refused with an error at the parameter. The parameters stay
/// owned outside the attempts, so a fallback still receives them by value.
///
/// Without `retry` the body runs once: its future is made before the driver runs (it runs
/// nothing until polled) and `attempt` hands it out once. It owns the parameters (`async move`,
/// like a function without these arguments), or borrows them when there is a fallback, which
/// receives them afterwards; either way they keep their types. The body keeps `return` and `?`:
/// it is an `async` block whose output is pinned to the function's return type.
///
/// A timed-out attempt arrives as `Settled::Refused` with reason `TimedOut`, so it reaches the
/// caller through `From<fusebox::Error>` or, by `Cause::from_error`, as the fallback's
/// `Cause::TimedOut` (never `Cause::Rejected`, which means the backend was never called).
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
        method_name,
        body,
    } = attempt;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let admit = local("__fusebox_admit");
    let settled = local("__fusebox_settled");
    let attempts = Ident::new("__FUSEBOX_ATTEMPTS", Span::mixed_site());
    let declare = declare(site, args.registry.as_ref(), private);
    let registry_local = local("__fusebox_registry");
    let breaker = local("__fusebox_breaker");

    let (method_declare, acquire, method_arg) = match method_name {
        Some((declare, local)) => (declare.clone(), quote!(acquire_as), quote!(, #local)),
        None => (TokenStream::new(), quote!(acquire), TokenStream::new()),
    };
    let admission = match &args.key {
        Key::Literal(key) => quote! {
            static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
            #declare
            let #registry_local = #registry;
            #method_declare
            let #admit = move || #site.#acquire(#registry_local #method_arg);
        },
        Key::Dynamic(key) => {
            // Evaluated before the first attempt; the borrow ends with this statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let #breaker = #site.breaker(#registry, #key_str);
                #method_declare
                let #admit = || #site.#acquire(&#breaker #method_arg);
            }
        }
    };
    let attempts_value = attempts_value(&args.attempts, private);

    let private_at_output = names.private_at(*output_span);
    let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
    // The attempt's `async` block is located at the body, so an error about it is reported
    // there rather than at the attribute.
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
    let retry_span = args.attempts.retry.map(|retry| retry.span);
    // Without `retry` the body runs once: its future owns the parameters (like the body of a
    // function without these arguments), so they keep their types and the body may consume
    // them. With a fallback it borrows them instead, to hand them over afterwards.
    let once = Ident::new("__fusebox_once", Span::mixed_site());
    let attempt = match retry_span {
        // With `retry` the body runs once per attempt: the attempt closure borrows the
        // parameters (it is not `move`, nor is the body's `async` block), so the body sees them
        // with their own types and can use them by reference or copy them, and a body that
        // consumes one is rustc's "cannot move out of a captured variable in an `FnMut`
        // closure", the closure located at `retry`.
        Some(span) => {
            let closure = quote_spanned!(span=> ||);
            let async_block = quote_spanned!(body_span=> async);
            quote!(#closure #wrap(#async_block #body))
        }
        None => {
            let async_block = match args.fallback {
                Some(_) => quote_spanned!(body_span=> async),
                None => async_move.clone(),
            };
            // The body's future is made here (it runs nothing until polled) and handed out once.
            quote!({
                let mut #once = ::core::option::Option::Some(#wrap(#async_block #body));
                move || match #once.take() {
                    ::core::option::Option::Some(#once) => #once,
                    ::core::option::Option::None => ::core::unreachable!(
                        "an attempt without `retry` runs once"
                    ),
                }
            })
        }
    };

    let at_output = |tokens: TokenStream| respan(tokens, *output_span);
    let err = quote!(::core::result::Result::Err);
    let (on_failed, on_refused) = match &args.fallback {
        None => (
            at_output(quote!(#err(#error))),
            at_output(quote!(#err(#private::reject(#refused)))),
        ),
        Some(fallback) => (
            fallback_call(fallback, params, true, names, quote!(Failed(#error))),
            fallback_call(fallback, params, true, names, quote!(from_error(#refused))),
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
            #private::run_attempts(
                #admit,
                &#attempts,
                #attempt,
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
    fn a_bare_key_name_must_be_a_parameter_or_upper_case() {
        let item = quote!(
            fn charge(host: &str, (a, b): (u8, u8)) -> Result<u8, E> {
                Ok(a + b)
            }
        );
        let plain = quote!(
            fn charge(host: &str) -> Result<u8, E> {
                Ok(1)
            }
        );
        let errors = |args, item| circuit_breaker(args, item).to_string();
        let out = errors(quote!(key = payment), plain.clone());
        assert!(
            out.contains("`payment` is not a parameter of `charge`: a literal key is a string"),
            "{out}"
        );
        for args in [
            quote!(key = host),
            quote!(key = KEY),
            quote!(key = crate::payment),
            quote!(key = host.to_owned()),
        ] {
            let out = errors(args.clone(), plain.clone());
            assert!(!out.contains("compile_error"), "{args}: {out}");
        }
        // A pattern parameter may bind the name: rustc decides.
        let out = errors(quote!(key = a), item);
        assert!(!out.contains("compile_error"), "{out}");
    }

    #[test]
    fn methods_name_their_type_and_free_functions_their_module() {
        let method = circuit_breaker(
            quote!(key = "k"),
            quote!(
                fn get(&self) -> Result<u8, E> {
                    Ok(1)
                }
            ),
        )
        .to_string();
        assert!(
            method.contains("MethodName :: new (\"get\")")
                && method.contains("type_name :: < Self >")
                && method.contains("enter_as"),
            "{method}"
        );
        let associated = circuit_breaker(
            quote!(key = "k"),
            quote!(
                fn new() -> Result<Self, E> {
                    todo!()
                }
            ),
        )
        .to_string();
        assert!(associated.contains("type_name :: < Self >"), "{associated}");
        let free = circuit_breaker(
            quote!(key = "k"),
            quote!(
                fn get() -> Result<u8, E> {
                    Ok(1)
                }
            ),
        )
        .to_string();
        assert!(
            !free.contains("MethodName") && !free.contains("Self"),
            "{free}"
        );
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
        assert!(out.contains("Policy :: DEFAULT . window (4))"), "{out}");
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
    fn retried_attempts_go_through_the_driver_and_borrow_the_parameters() {
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
            out.contains("Policy :: DEFAULT . consecutive (5))"),
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
        // With `retry` the attempt borrows the parameters: no `move`, no re-binding.
        assert!(!out.contains("let order ="), "{out}");
        assert!(out.contains("|| :: fusebox :: __private :: async_body :: < Result < u32 , ApiError > , _ > (async { self . send (order , id) . await })"), "{out}");
        assert!(
            !out.contains("move || :: fusebox :: __private :: async_body"),
            "{out}"
        );
        assert!(
            out.contains(":: fusebox :: __private :: Settled :: Refused"),
            "{out}"
        );
    }
}
