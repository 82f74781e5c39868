//! The admission, for both paths: the function's call site ([`Site`], a `static` registered at
//! link time for a literal key, a `DynSite` and the key's breaker for a dynamic key), then the
//! permit of a call run once or the admission closure of the attempt driver ([`Admit`]).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned as _;
use syn::{Expr, Ident, LitStr, Path, Signature};

use super::names::{METHOD_NAME, Names, SITE, is_method};
use super::values::{declare, policy};
use crate::args::{Args, Key};

/// The call site of one function: its `static`, and what the admission needs.
pub(super) struct Site {
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

impl Site {
    /// The call site of the function whose signature is `sig`.
    pub(super) fn new(args: &Args, names: &Names, sig: &Signature) -> Site {
        let private = &names.private;
        let function_name = sig.ident.unraw().to_string();
        // A method's events name its type: `type_name::<Self>()` is only known in the body.
        let method_name = is_method(sig).then(|| MethodNaming {
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
        Site {
            site: Ident::new(SITE, Span::mixed_site()),
            function_path: quote!(::core::concat!(::core::module_path!(), "::", #function_name)),
            policy: policy(&args.policy, private),
            registry,
            method_name,
        }
    }
}

impl Site {
    /// The registry expression (read again by `chaos = true`'s injection point).
    pub(super) fn registry(&self) -> &TokenStream {
        &self.registry
    }
}

/// A method's name for events: a `static` `MethodName`, completed with `type_name::<Self>()` on
/// the first call.
pub(super) struct MethodNaming {
    /// The `static`.
    name: Ident,
    /// The method's own name.
    function_name: String,
}

/// How a call is admitted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Admit {
    /// `let admit = || SITE.acquire(…)`: the attempt driver admits each attempt.
    Closure,
    /// `let mut permit = SITE.enter(…)`: one admission, the body runs once; an `async fn`'s permit
    /// may ask a shared registry's store.
    SharedPermit,
    /// [`Admit::SharedPermit`] of a literal key that asks no store (an `async fn` without the
    /// `store` feature or `chaos`): a two-word permit that reaches its circuit and the function's
    /// name through the site's link (a dynamic key's admission takes it as `SharedPermit`).
    LinkedPermit,
    /// [`Admit::SharedPermit`] for a plain `fn`: a dynamic key's breaker is borrowed under the
    /// registry map's guard for the call, not counted.
    LocalPermit,
}

/// The admission, for both paths: the `static` call site (a `Site` registered at link time for a
/// literal key, a `DynSite` and the key's breaker for a dynamic key), then the permit or the
/// admission closure.
pub(super) fn admission(args: &Args, names: &Names, site: &Site, admit: Admit) -> TokenStream {
    let method_declare = method_declare(site.method_name.as_ref(), &names.private);
    match &args.key {
        Key::Literal(key) => literal_admission(
            key,
            args.registry.as_ref(),
            names,
            site,
            admit,
            method_declare,
        ),
        Key::Dynamic(key) => dynamic_admission(key, names, site, admit, method_declare),
    }
}

/// The admission of a literal key: a `Site` registered at link time (for the registry at
/// `registry_path`, or the global one), then the permit or the admission closure.
fn literal_admission(
    key: &LitStr,
    registry_path: Option<&Path>,
    names: &Names,
    site: &Site,
    admit: Admit,
    method_declare: TokenStream,
) -> TokenStream {
    let private = &names.private;
    let Site {
        site,
        function_path,
        policy,
        registry,
        ..
    } = site;
    let permit = &names.permit;
    let declare = declare(site, registry_path, private);
    let head = quote! {
        static #site: #private::Site = #private::Site::new(#key, #function_path, #policy);
        #declare
    };
    match admit {
        Admit::LinkedPermit => {
            let name = &names.name;
            quote! {
                #head
                #method_declare
                let mut #permit = #site.enter_linked(#registry, #name);
            }
        }
        Admit::SharedPermit | Admit::LocalPermit => {
            let permit_value = enter(names, site, admit == Admit::SharedPermit, registry.clone());
            quote! {
                #head
                #method_declare
                let mut #permit = #permit_value;
            }
        }
        Admit::Closure => {
            let admit_local = Ident::new("__fusebox_admit", Span::mixed_site());
            let registry_local = Ident::new("__fusebox_registry", Span::mixed_site());
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

/// The admission of a dynamic key: a `DynSite`, the key's breaker, then the permit or the
/// admission closure.
fn dynamic_admission(
    key: &Expr,
    names: &Names,
    site: &Site,
    admit: Admit,
    method_declare: TokenStream,
) -> TokenStream {
    let private = &names.private;
    let Site {
        site,
        function_path,
        policy,
        registry,
        ..
    } = site;
    let permit = &names.permit;
    let name = &names.name;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let admit_local = local("__fusebox_admit");
    let breaker = local("__fusebox_breaker");
    let held = local("__fusebox_held");
    // Evaluated before the body (or the first attempt) runs; the borrow ends with this
    // statement.
    let key_str = quote_spanned!(key.span()=>
        ::core::convert::AsRef::<str>::as_ref(&(#key))
    );
    // The call owns the key's breaker unless the site's cache lends it (one word, kept
    // alive across the body's awaits); the permit borrows it. A plain `fn` borrows it
    // from the registry's map under a guard held for the call instead of owning it.
    let (holder, take) = match admit {
        Admit::SharedPermit | Admit::LinkedPermit => {
            let permit_value = enter(names, site, true, quote!(#registry, #key_str, &mut #held));
            (
                quote!(SiteBreaker),
                quote! {
                    let mut #permit = #permit_value;
                },
            )
        }
        Admit::LocalPermit => {
            let permit_value = named_permit(
                names,
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

/// The permit `raw`, with the function's name. The permit finds the name through the name itself
/// (`&'static &'static str`): three words, and no type of the expansion's own.
fn named_permit(names: &Names, raw: TokenStream) -> TokenStream {
    let Names { private, name, .. } = names;
    quote!(#private::NamedPermit { raw: #raw, site: #name })
}

/// The permit of `site.enter` with `args`, asking a shared registry's store when `ask_store`.
fn enter(names: &Names, site: &Ident, ask_store: bool, args: TokenStream) -> TokenStream {
    let name = &names.name;
    // `true` for an `async fn` with the `store` feature: its permit may ask a shared key's store.
    let ask_store = ask_store && crate::expand::with_store();
    named_permit(names, quote!(#site.enter::<#ask_store>(#args, #name)))
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
/// ([`Names::report_args`]).
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
