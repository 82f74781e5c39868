//! Code generation. The function keeps its signature; its body becomes: admission through a
//! per-function `static` call site, the original body wrapped in a closure or an `async` block (so
//! `return` and `?` stay inside it; an `async` body that has neither, nor a macro call, runs in
//! place as a plain block, see [`awaits_in_place`]), classification of the outcome, the report on
//! the permit, and the fallback (an `async fn`'s is awaited after the call settled, see
//! [`defers_fallback`]).
//!
//! With `timeout`, `retry`, `backoff` or `deadline` the body instead becomes an attempt closure run
//! by the runtime's attempt driver (`expand/attempts.rs`); without them nothing of that machinery
//! is generated. Both paths share one generator each for the admission ([`admission`]), the
//! error-type alias ([`error_alias`]) and what a failed or refused call returns ([`settle`]);
//! the failure test and the fallback call are in `expand/classify.rs`, the `Policy` and
//! `Attempts` values in `expand/values.rs`. The committed snapshots under
//! `macros/tests/snapshots/` show whole expansions.
//!
//! One concept, kept in one file though it passes 600 lines: the rewritten function body, whose
//! parts (admission, error alias, outcome, settling, the shared-store wait) each have one
//! generator here.

mod attempts;
mod classify;
mod values;

#[cfg(test)]
mod tests;

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::visit_mut::VisitMut;
use syn::{
    Expr, ExprPath, FnArg, GenericArgument, Ident, Lifetime, Pat, Path, PathArguments, Token, Type,
    TypeInfer, TypePath,
};

use attempts::{Attempt, attempts_body};
use classify::{classify, fallback_call, pushback, uses_alias};
use values::{declare, policy};

use crate::args::{self, Args, Key};
use crate::errors::Errors;
use crate::function::{self, Function, Params};
use crate::validate;

/// The whole attribute: parse, check, then rewrite; on any error the item is returned unchanged
/// with every error appended.
pub(crate) fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args::Parsed {
        attempt_names,
        args,
    } = args::parse(args);
    // What the argument checks let through is judged by the runtime's own validation.
    let args = errors.ok(args.and_then(|args| validate::check(&args.policy).map(|()| args)));
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

/// The runtime's module of items for the expansion, named with this crate's version
/// (`__private_0_1_0`): `fusebox` pins `fusebox-macros` to its own version, and a macro paired
/// with another runtime fails to compile with "could not find `__private_…` in `fusebox`"
/// instead of misusing items whose shape changed.
pub(crate) fn private_module() -> Ident {
    let version: String = env!("CARGO_PKG_VERSION")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Ident::new(&format!("__private_{version}"), Span::call_site())
}

/// The `static` call site's name.
const SITE: &str = "__FUSEBOX_SITE";
/// The name of a method's `static` `MethodName`.
const METHOD_NAME: &str = "__FUSEBOX_NAME";

/// Names shared by the generated code.
struct Names {
    /// `::fusebox::__private_<version>`, or `<crate = path>::__private_<version>`.
    private: TokenStream,
    /// The return type as the expansion names it: as written, or with each `impl Trait` in it
    /// replaced by `_` (see [`nameable_output`]).
    output: Type,
    /// The return type that names the error type: as written, or with each `impl Trait` in it
    /// replaced by `()` (the error type of `Result<T, E>` or an alias of it does not depend on `T`;
    /// rustc cannot project out of a type still to be inferred).
    error_output: Type,
    /// The error type: `E` of a return type written `Result<T, E>` that holds an `impl Trait`,
    /// otherwise `<R as Outcome>::Error` with `R` the [`Names::error_output`].
    error_type: TokenStream,
    /// Where to point errors about the return type.
    output_span: Span,
    permit: Ident,
    /// The function's path as the reports take it: the site's, or a method's `MethodName`'s.
    name: TokenStream,
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
    /// The `Cause` an `async fn`'s fallback is called with (see [`defers_fallback`]).
    cause: Ident,
    /// The block that settles a call whose fallback is deferred (see [`defers_fallback`]).
    settled: Lifetime,
}

impl Names {
    /// The permit's `RawPermit` and the function's path, the arguments of every report: the
    /// functions that take them are not generic, so each annotated function adds none of its
    /// own.
    fn raw_and_name(&self) -> TokenStream {
        let Names { permit, name, .. } = self;
        quote!(&mut #permit.raw, #name)
    }

    /// The permit's raw part, borrowed, for the checks of its admission.
    fn raw(&self) -> TokenStream {
        let permit = &self.permit;
        quote!(&#permit.raw)
    }

    /// The runtime's private module, located at `span` so a failed bound is reported there.
    fn private_at(&self, span: Span) -> TokenStream {
        respan(self.private.clone(), span)
    }
}

/// `tokens`, every one located at `span` (keeping its own hygiene).
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
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

/// The return type with every `impl Trait` in it replaced by `_`, which rustc infers from the
/// body (`impl Trait` may not appear in a path, a turbofish or a `let`'s type); the same with
/// `()` in their place, to name the error type through; and the error type itself, `E`, when it
/// is written `Result<T, E>`. `None` when the return type holds no `impl Trait`.
fn nameable_output(output: &Type) -> Option<(Type, Type, Option<Type>)> {
    /// Replaces each `impl Trait` by `_` (`unit`: by `()`).
    struct Replace {
        unit: bool,
        found: bool,
    }
    impl VisitMut for Replace {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(written) = ty {
                let span = written.impl_token.span;
                *ty = if self.unit {
                    syn::parse_quote_spanned!(span=> ())
                } else {
                    Type::Infer(TypeInfer {
                        attrs: Vec::new(),
                        underscore_token: Token![_](span),
                    })
                };
                self.found = true;
                return;
            }
            syn::visit_mut::visit_type_mut(self, ty);
        }
    }
    let replaced = |unit| {
        let mut ty = output.clone();
        let mut replace = Replace { unit, found: false };
        replace.visit_type_mut(&mut ty);
        replace.found.then_some(ty)
    };
    let nameable = replaced(false)?;
    let error_output = replaced(true)?;
    let error = match ungroup(&nameable) {
        Type::Path(TypePath {
            qself: None, path, ..
        }) => path.segments.last().and_then(|last| match &last.arguments {
            PathArguments::AngleBracketed(arguments)
                if last.ident == "Result" && arguments.args.len() == 2 =>
            {
                match arguments.args.last() {
                    Some(GenericArgument::Type(error)) => Some(error.clone()),
                    _ => None,
                }
            }
            _ => None,
        }),
        _ => None,
    };
    Some((nameable, error_output, error))
}

/// A type without the invisible groups and parentheses macros wrap around it.
fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => ungroup(&group.elem),
        Type::Paren(paren) => ungroup(&paren.elem),
        other => other,
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

impl Names {
    /// The names of the expansion of a function returning `output` (a method's when `method`).
    fn new(args: &Args, output: Type, method: bool) -> Names {
        let krate = match &args.krate {
            Some(path) => path.to_token_stream(),
            None => quote!(::fusebox),
        };
        let local = |name: &str| Ident::new(name, Span::mixed_site());
        let private = {
            let private = private_module();
            quote!(#krate::#private)
        };
        let output_span = output.span();
        let error_path = error_path(&output);
        let (output, error_output, error_type) = match nameable_output(&output) {
            Some((nameable, error_output, Some(error))) => {
                (nameable, error_output, error.to_token_stream())
            }
            Some((nameable, error_output, None)) => {
                let error = quote!(<#error_output as #private::Outcome>::Error);
                (nameable, error_output, error)
            }
            None => {
                let error = quote!(<#output as #private::Outcome>::Error);
                (output.clone(), output, error)
            }
        };
        // A function's path is a place of its site (`&SITE.function`), not a call.
        let name = if method {
            let name = Ident::new(METHOD_NAME, Span::mixed_site());
            quote!(#name.cached())
        } else {
            let site = Ident::new(SITE, Span::mixed_site());
            quote!(&#site.function)
        };
        Names {
            name,
            private,
            output_span,
            error_path,
            output,
            error_output,
            error_type,
            permit: local("__fusebox_permit"),
            result: local("__fusebox_result"),
            error: local("__fusebox_error"),
            value: local("__fusebox_value"),
            refused: local("__fusebox_refused"),
            error_of: Ident::new("__FuseboxErrorOf", Span::call_site()),
            cause: local("__fusebox_cause"),
            settled: Lifetime::new("'__fusebox_settled", Span::mixed_site()),
        }
    }
}

/// Rewrites a checked function.
fn expand(args: Args, function: Function) -> TokenStream {
    let is_async = function.is_async();
    let Function {
        item,
        output,
        params,
        conditional,
        boxed,
    } = function;
    let conditional = conditional_errors(conditional);
    let names = Names::new(&args, output, is_method(&item.sig));
    let private = &names.private;

    let body = item.body.to_token_stream();
    let function_name = item.sig.ident.unraw().to_string();
    // A method's events name its type: `type_name::<Self>()` is only known in the body.
    let method_name = is_method(&item.sig).then(|| MethodNaming {
        name: Ident::new(METHOD_NAME, Span::mixed_site()),
        function_name: function_name.clone(),
    });
    let registry = match &args.registry {
        Some(path) => {
            let private = names.private_at(path.span());
            quote_spanned!(path.span()=> #private::registry_of(&#path))
        }
        None => quote!(&#private::GLOBAL),
    };
    let site = Site {
        site: Ident::new(SITE, Span::mixed_site()),
        function_path: quote!(::core::concat!(::core::module_path!(), "::", #function_name)),
        policy: policy(&args.policy, private),
        registry,
        method_name,
    };
    let new_body = if args.attempts.any() && !attempts::timeout_only(&args.attempts) {
        let attempt = Attempt {
            site: &site,
            params: &params,
            body,
        };
        attempts_body(&args, &names, attempt)
    } else {
        let timeout = args.attempts.timeout.filter(|_| is_async);
        // With `timeout`, the body's future is awaited inside the timer's.
        let run = match timeout {
            None if is_async && awaits_in_place(&body) => in_place(&names, &body),
            Some(_) => run_once(&names, args.fallback.is_some(), is_async, &body),
            None if is_async => {
                let run = run_once(&names, args.fallback.is_some(), is_async, &body);
                quote!(#run.await)
            }
            None => run_once(&names, args.fallback.is_some(), is_async, &body),
        };
        let admit = if cfg!(feature = "redis") && is_async {
            Admit::SharedPermit
        } else if is_async {
            Admit::Permit
        } else {
            Admit::LocalPermit
        };
        let admission = admission(&args, &names, &site, admit);
        let outcome = outcome(&args, &names, &params, is_async, &run, timeout);
        let alias = error_alias(&args, &names);
        match deferred_fallback(&args, &names, &params, is_async) {
            // The call settles in a block of its own that ends with the cause, so the permit,
            // the body's future and its result are all dead when the fallback's future is made.
            Some(call) => {
                let Names { cause, settled, .. } = &names;
                quote! {
                    #alias
                    let #cause = #settled: {
                        #admission
                        #outcome
                    };
                    #call
                }
            }
            None => quote! {
                #alias
                #admission
                #outcome
            },
        }
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

/// True when the fallback of an `async fn` is called after the call has settled: the settling
/// block returns the function's own result and ends with the fallback's `Cause`, then the
/// fallback is called and awaited once, outside it. The body's future and the fallback's never
/// live in the function's future at once, so its size is the larger of the two, not their sum.
fn defers_fallback(args: &Args, is_async: bool) -> bool {
    is_async && args.fallback.is_some()
}

/// The call of a deferred fallback with the cause the settling block ended with (`None` when
/// the fallback is not deferred, see [`defers_fallback`]).
fn deferred_fallback(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
) -> Option<TokenStream> {
    let fallback = args.fallback.as_ref()?;
    defers_fallback(args, is_async).then(|| {
        let cause = &names.cause;
        fallback_call(fallback, params, is_async, names, quote!(#cause))
    })
}

/// `Cause::<E>::#variant`, with `E` the function's error type.
fn cause(names: &Names, variant: &TokenStream) -> TokenStream {
    let Names {
        private,
        error_type,
        ..
    } = names;
    quote!(#private::Cause::<#error_type>::#variant)
}

/// The original body, wrapped in a closure (called here) or an `async` block (not yet awaited)
/// whose output is pinned to the return type. Without a fallback it is moved into the wrapper, so the future captures exactly
/// what the original function captured. With one it only borrows the parameters, which are then
/// handed to the fallback.
fn run_once(names: &Names, fallback: bool, is_async: bool, body: &TokenStream) -> TokenStream {
    let Names {
        output,
        output_span,
        ..
    } = names;
    let capture = if fallback {
        TokenStream::new()
    } else {
        quote!(move)
    };
    let private_at_output = names.private_at(*output_span);
    if is_async {
        let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
        quote!(#wrap(async #capture #body))
    } else {
        let wrap = quote_spanned!(*output_span=> #private_at_output::sync_body::<#output, _>);
        quote!(#wrap(#capture || #body))
    }
}

/// True when the body of an `async fn` can run in place, as a plain block of the function's
/// own body, with no `async` block around it (whose state and moved copy of the parameters the
/// function's future would carry): it has no `return` and no `?`, which would leave the function
/// rather than the body and skip the report, and calls no macro, whose expansion might. The test
/// is on tokens and errs on the safe side (a `return` in a nested closure, `!(…)` or `?Sized`
/// also keep the `async` block).
fn awaits_in_place(body: &TokenStream) -> bool {
    fn plain(tokens: TokenStream) -> bool {
        let mut after_bang = false;
        for token in tokens {
            let ok = match &token {
                TokenTree::Ident(ident) => ident != "return",
                TokenTree::Punct(punct) => punct.as_char() != '?',
                TokenTree::Group(group) => !after_bang && plain(group.stream()),
                TokenTree::Literal(_) => true,
            };
            if !ok {
                return false;
            }
            after_bang = matches!(&token, TokenTree::Punct(punct) if punct.as_char() == '!');
        }
        true
    }
    plain(body.clone())
}

/// The body of an `async fn` run in place (see [`awaits_in_place`]): the block itself, its
/// value pinned to the return type (located there, like [`run_once`]'s).
fn in_place(names: &Names, body: &TokenStream) -> TokenStream {
    let Names {
        output,
        output_span,
        ..
    } = names;
    let private_at_output = names.private_at(*output_span);
    let wrap = quote_spanned!(*output_span=> #private_at_output::in_place_body::<#output>);
    quote!(#wrap(#body))
}

/// The call site of one function: its `static`, and what the admission needs.
struct Site {
    /// The `static` call site.
    site: Ident,
    /// `module_path!()::name`.
    function_path: TokenStream,
    /// The `Policy` expression.
    policy: TokenStream,
    /// The registry expression.
    registry: TokenStream,
    /// For a method: how its name is declared and reached.
    method_name: Option<MethodNaming>,
}

/// A method's name for events: a `static` `MethodName`, completed with `type_name::<Self>()` on
/// the first call.
struct MethodNaming {
    /// The `static`.
    name: Ident,
    /// The method's own name.
    function_name: String,
}

/// How a call is admitted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// `let mut permit = SITE.enter(…)`: one admission, the body runs once.
    Permit,
    /// `let admit = || SITE.acquire(…)`: the attempt driver admits each attempt.
    Closure,
    /// [`Admit::Permit`] for an `async fn` that may ask a shared registry's store.
    SharedPermit,
    /// [`Admit::Permit`] for a plain `fn`: a dynamic key's breaker is borrowed under the
    /// registry map's guard for the call, not counted.
    LocalPermit,
}

/// The admission, for both paths: the `static` call site (a `Site` registered at link time for a
/// literal key, a `DynSite` and the key's breaker for a dynamic key), then the permit or the
/// admission closure.
fn admission(args: &Args, names: &Names, site: &Site, admit: Admit) -> TokenStream {
    let private = &names.private;
    let Site {
        site,
        function_path,
        policy,
        registry,
        method_name,
    } = site;
    let permit = &names.permit;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let admit_local = local("__fusebox_admit");
    let breaker = local("__fusebox_breaker");
    let held = local("__fusebox_held");
    // The permit finds the function's name through the name itself (`&'static &'static str`):
    // three words, and no type of the expansion's own.
    let name = &names.name;
    let permit_of = |raw: TokenStream| quote!(#private::NamedPermit { raw: #raw, site: #name });
    let enter = |ask_store: bool, args: TokenStream| {
        permit_of(quote!(#site.enter::<#ask_store>(#args, #name)))
    };
    let method_declare = method_declare(method_name.as_ref(), private);
    match &args.key {
        Key::Literal(key) => {
            let declare = declare(site, args.registry.as_ref(), private);
            let head = quote! {
                static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
                #declare
            };
            match admit {
                Admit::Permit | Admit::SharedPermit | Admit::LocalPermit => {
                    let permit_value = enter(admit == Admit::SharedPermit, registry.clone());
                    quote! {
                        #head
                        #method_declare
                        let mut #permit = #permit_value;
                    }
                }
                Admit::Closure => {
                    let registry_local = local("__fusebox_registry");
                    let (named, named_declare) = site_name(names);
                    quote! {
                        #head
                        #named_declare
                        let #registry_local = #registry;
                        #method_declare
                        let #admit_local = move || #site.acquire(#registry_local, #named);
                    }
                }
            }
        }
        Key::Dynamic(key) => {
            // Evaluated before the body (or the first attempt) runs; the borrow ends with this
            // statement.
            let key_str = quote_spanned!(key.span()=>
                ::core::convert::AsRef::<str>::as_ref(&(#key))
            );
            // The call owns the key's breaker unless the site's cache lends it (one word, kept
            // alive across the body's awaits); the permit borrows it. A plain `fn` borrows it
            // from the registry's map under a guard held for the call instead of owning it.
            let (holder, take) = match admit {
                Admit::Permit | Admit::SharedPermit => {
                    let permit_value = enter(
                        admit == Admit::SharedPermit,
                        quote!(#registry, #key_str, &mut #held),
                    );
                    (
                        quote!(SiteBreaker),
                        quote! {
                            let mut #permit = #permit_value;
                        },
                    )
                }
                Admit::LocalPermit => {
                    let permit_value = permit_of(
                        quote!(#site.enter_local(#registry, #key_str, &mut #held, #name)),
                    );
                    (
                        quote!(LocalBreaker),
                        quote! {
                            let mut #permit = #permit_value;
                        },
                    )
                }
                Admit::Closure => {
                    let (named, named_declare) = site_name(names);
                    (
                        quote!(SiteBreaker),
                        quote! {
                            #named_declare
                            let #breaker = #site.breaker(#registry, #key_str, &mut #held);
                            let #admit_local = move || #site.acquire(#breaker, #named);
                        },
                    )
                }
            };
            quote! {
                static #site: #private::DynSite = #private::DynSite::new(#function_path, #policy);
                let mut #held = #private::#holder::new();
                #method_declare
                #take
            }
        }
    }
}

/// A method's `static` name and its completion on the first call, before the admission (nothing
/// for a function).
fn method_declare(method_name: Option<&MethodNaming>, private: &TokenStream) -> TokenStream {
    let Some(MethodNaming {
        name,
        function_name,
    }) = method_name
    else {
        return TokenStream::new();
    };
    quote! {
        static #name: #private::MethodName = #private::MethodName::new(#function_name);
        #name.get(::core::any::type_name::<Self>);
    }
}

/// The zero-sized type through which an attempt's permit finds the function's name, and its
/// declaration. The attempt driver keeps a permit in several of its states, so there the name
/// type saves a word in each; a single call's permit holds the name itself (one word, and no
/// type of the expansion's own to compile). The driver's permits ask it when they report or are
/// dropped unreported; a single call's reports pass the name themselves
/// ([`Names::raw_and_name`]).
fn site_name(names: &Names) -> (Ident, TokenStream) {
    let Names { private, name, .. } = names;
    let named = Ident::new("__FuseboxName", Span::mixed_site());
    let declare = quote! {
        struct #named;
        impl #private::Named for #named {
            #[inline(always)]
            fn name(&self) -> &'static &'static str {
                #name
            }
        }
    };
    (named, declare)
}

/// The local alias `__FuseboxErrorOf<R>` of `<R as Outcome>::Error`, when a bare variant name
/// needs it (the return type is not written `Result<T, E>`), for both paths.
fn error_alias(args: &Args, names: &Names) -> Option<TokenStream> {
    let Names {
        private, error_of, ..
    } = names;
    (names.error_path.is_none() && uses_alias(args.failure.as_ref())).then(|| {
        quote! {
            type #error_of<__R> = <__R as #private::Outcome>::Error;
        }
    })
}

/// What a failed call and a refused call return, for both paths: the error and
/// `Err(reject(refused))`, or the fallback's value with `Cause::Failed(error)` and `refused`
/// (`Cause::<refused_cause>`). When the fallback is deferred ([`defers_fallback`]), the two
/// causes themselves: the settling block ends with them.
fn settle(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
    refused_cause: TokenStream,
) -> (TokenStream, TokenStream) {
    let Names {
        private,
        output_span,
        error,
        refused,
        ..
    } = names;
    let err = quote!(::core::result::Result::Err);
    match &args.fallback {
        None => (
            respan(quote!(#err(#error)), *output_span),
            respan(
                quote!(#err(#private::error_from_refusal(#refused))),
                *output_span,
            ),
        ),
        Some(_) if defers_fallback(args, is_async) => (
            cause(names, &quote!(Failed(#error))),
            cause(names, &refused_cause),
        ),
        Some(fallback) => (
            fallback_call(
                fallback,
                params,
                is_async,
                names,
                cause(names, &quote!(Failed(#error))),
            ),
            fallback_call(
                fallback,
                params,
                is_async,
                names,
                cause(names, &refused_cause),
            ),
        ),
    }
}

/// How the outcome arms of a call run once leave: as the function's value, or, with a deferred
/// fallback ([`defers_fallback`]), the function's own result by `return` (with a shared store,
/// as `Ok` first, for the store's wait) and a cause as the settling block's value (with a shared
/// store, as `Err`).
struct Exits {
    defers: bool,
    shared: bool,
}

impl Exits {
    fn new(args: &Args, is_async: bool) -> Self {
        Exits {
            defers: defers_fallback(args, is_async),
            shared: cfg!(feature = "redis") && is_async,
        }
    }

    /// The function's own result `tokens`, leaving.
    fn done(&self, tokens: TokenStream) -> TokenStream {
        match (self.defers, self.shared) {
            (true, false) => quote!(return #tokens),
            (true, true) => quote!(::core::result::Result::Ok(#tokens)),
            (false, _) => tokens,
        }
    }

    /// What a call handed to the fallback evaluates to (`tokens`: the fallback's value, or the
    /// cause when it is deferred).
    fn to_fallback(&self, tokens: TokenStream) -> TokenStream {
        if self.defers && self.shared {
            quote!(::core::result::Result::Err(#tokens))
        } else {
            tokens
        }
    }
}

/// The refusal check and the outcome arms of a call run once: the success is reported and
/// returned; an error is classified, reported, and returned or handed to the fallback.
fn outcome(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
    run: &TokenStream,
    timeout: Option<args::Spanned<u64>>,
) -> TokenStream {
    let Names {
        private,
        output_span,
        error,
        value,
        refused,
        result,
        ..
    } = names;
    let raw_and_name = names.raw_and_name();
    // Patterns and values of the function's own `Result` are located at the return type: when the
    // function does not return a `Result`, every resulting mismatch is reported there.
    let at_output = |tokens: TokenStream| respan(tokens, *output_span);
    let ok_value = at_output(quote!(::core::result::Result::Ok(#value)));
    let err_error = at_output(quote!(::core::result::Result::Err(#error)));
    let (on_failed, on_refused) = settle(args, names, params, is_async, quote!(Rejected(#refused)));
    let exits = Exits::new(args, is_async);
    let on_failed = exits.to_fallback(on_failed);
    let ok_done = exits.done(ok_value.clone());
    let err_done = exits.done(err_error.clone());
    // The result is taken apart and rebuilt rather than inspected and returned: on the success
    // path only the `Ok` value moves, never the whole `Result` (whose error type may be large),
    // which keeps the hot path free of memory-to-memory copies.
    //
    // An error converted from an inner breaker's refusal (a stacked attribute, an annotated
    // function calling another) is not counted by the default classification, and never as a
    // success (`refused_inside`, `permit_ignored`).
    // A counted error reports the wait it asked for, when its type implements `RetryAfter`.
    let wait = pushback(names, false);
    let report_error = match (classify(args.failure.as_ref(), names, true), &args.fallback) {
        (Some(counts), None) => quote! {
            #err_error => {
                if #counts { #private::permit_failed_after(#raw_and_name, #wait) } else { #private::permit_ignored::<#is_async>(#raw_and_name) }
                #on_failed
            }
        },
        (Some(counts), Some(_)) => quote! {
            #err_error if #counts => {
                #private::permit_failed_after(#raw_and_name, #wait);
                #on_failed
            }
            #err_error => {
                #private::permit_ignored::<#is_async>(#raw_and_name);
                #err_done
            }
        },
        (None, _) => quote! {
            #err_error if !#private::refused_inside::<#is_async>() => {
                #private::permit_failed_after(#raw_and_name, #wait);
                #on_failed
            }
            #err_error => {
                #private::permit_ignored_outright(#raw_and_name);
                #err_done
            }
        },
    };
    let report_ok = report_ok(args, names);
    let scrutinee = match timeout {
        Some(_) => result.to_token_stream(),
        None => run.clone(),
    };
    let mut matched = quote! {
        match #scrutinee {
            #ok_value => {
                #report_ok
                #ok_done
            }
            #report_error
        }
    };
    if let Some(limit) = timeout {
        // `timeout` without `retry`: the body's future and the timer are awaited in place, so the
        // function's future holds the timer and nothing more than without `timeout`. A timed-out
        // call is a counted failure and reaches the caller as `Reason::TimedOut` (the fallback's
        // `Cause::TimedOut`).
        let limit = crate::setters::duration(limit);
        let (_, on_timeout) = settle(args, names, params, is_async, quote!(TimedOut(#refused)));
        let on_timeout = exits.to_fallback(on_timeout);
        let ok = quote!(::core::result::Result::Ok);
        let err = quote!(::core::result::Result::Err);
        matched = quote! {
            match #private::timeout_body(#limit, #run).await {
                #ok(#result) => #matched,
                #err(_) => {
                    let #refused = #private::permit_timed_out(#raw_and_name);
                    #on_timeout
                }
            }
        };
    }
    let defers = exits.defers;
    let on_refused = if defers {
        let settled = &names.settled;
        quote!(break #settled #on_refused;)
    } else {
        quote!(return #on_refused;)
    };
    shared_store(
        is_async,
        defers,
        args.fallback.is_none(),
        names,
        on_refused,
        matched,
    )
}

/// The report of a call that returned `Ok`: a success, or, with `failure_if`, what the predicate
/// says of the value (located at the predicate, so a wrong signature is reported there); the
/// value is returned as is.
fn report_ok(args: &Args, names: &Names) -> TokenStream {
    let Names { private, value, .. } = names;
    let raw_and_name = names.raw_and_name();
    match &args.failure_if {
        None => quote!(#private::permit_succeeded(#raw_and_name);),
        Some(predicate) => {
            let span = predicate.span();
            let value = Ident::new(&value.to_string(), value.span().located_at(span));
            quote_spanned! {span=>
                if #predicate(&#value) {
                    #private::permit_failed(#raw_and_name)
                } else {
                    #private::permit_succeeded(#raw_and_name)
                }
            }
        }
    }
}

/// The refusal check and the call. With the `redis` feature, an `async fn` on a shared registry
/// awaits the store's admission in the (cold) refusal branch and the recording of its outcome
/// after the call; without it, or for a sync function, the expansion is unchanged.
fn shared_store(
    is_async: bool,
    defers: bool,
    no_fallback: bool,
    names: &Names,
    on_refused: TokenStream,
    matched: TokenStream,
) -> TokenStream {
    let Names {
        private,
        refused,
        output,
        value,
        cause,
        error_type,
        ..
    } = names;
    let raw = names.raw();
    let raw_and_name = names.raw_and_name();
    if cfg!(feature = "redis") && is_async && defers {
        let out = Ident::new("__fusebox_out", Span::mixed_site());
        let ok = quote!(::core::result::Result::Ok);
        let err = quote!(::core::result::Result::Err);
        quote! {
            if #private::asks_store(#raw) {
                #private::admit_shared(#raw_and_name).await;
            }
            if let ::core::option::Option::Some(#refused) = #private::permit_refusal(#raw) {
                #on_refused
            }
            // The function's own result (`Ok`) or the fallback's cause (`Err`), recorded in the
            // store before either goes on.
            let #out: ::core::result::Result<
                #output,
                #private::Cause<#error_type>,
            > = #matched;
            let #out = if #private::reports_to_store(#raw) {
                #private::flush_then(#raw, #out).await
            } else {
                #out
            };
            match #out {
                #ok(#value) => return #value,
                #err(#cause) => #cause,
            }
        }
    } else if cfg!(feature = "redis") && is_async {
        let out = Ident::new("__fusebox_out", Span::mixed_site());
        quote! {
            // The store's admission replaces the permit; then one refusal check (so the fallback
            // call is written once), whose refusal lives only in this statement.
            if #private::asks_store(#raw) {
                #private::admit_shared(#raw_and_name).await;
            }
            if let ::core::option::Option::Some(#refused) = #private::permit_refusal(#raw) {
                #on_refused
            }
            // Typed as the function's output, so a wrong fallback is one mismatch, not two.
            let #out: #output = #matched;
            if #private::reports_to_store(#raw) {
                // The result moves into the (boxed) wait, so the function's own future holds
                // nothing of it across this await.
                return #private::flush_then(#raw, #out).await;
            }
            #out
        }
    } else if no_fallback {
        // Without a fallback a refusal returns the function's own error at once: one call, whose
        // `Option` ends with this statement, so an admitted call's future holds nothing of it
        // across the body's `.await`. Located at the return type, where a missing
        // `From<fusebox::Error>` is reported.
        let rejection = respan(quote!(#private::rejection(#raw)), names.output_span);
        let err = respan(quote!(::core::result::Result::Err), names.output_span);
        quote! {
            if let ::core::option::Option::Some(#refused) = #rejection {
                return #err(#refused);
            }
            #matched
        }
    } else {
        quote! {
            // A refusal returns at once; its temporaries end here, so an admitted call's future
            // holds nothing of it across the body's `.await`. A flag, then the error: an `if let`
            // on an `Option<Error>` would keep the option borrowed, and so in the future, across
            // the fallback's `.await`.
            if #private::permit_refused(#raw) {
                let #refused = #private::refusal_error(#raw);
                #on_refused
            }
            #matched
        }
    }
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
