//! The names the generated code shares ([`Names`]): the runtime's private module, the locals of
//! the rewritten body, and the return and error types as the expansion can name them (with each
//! `impl Trait` of the return type replaced, see [`nameable_output`]); and whether the function is
//! a method ([`is_method`]), whose events name its type.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::spanned::Spanned as _;
use syn::visit_mut::VisitMut;
use syn::{
    GenericArgument, Ident, Lifetime, Path, PathArguments, Token, Type, TypeInfer, TypePath,
};

use crate::args::Args;
use crate::tokens::{respan, ungroup};

/// The runtime's module of items for the expansion, named with this crate's version
/// (`__private_0_1_0`): `fusebox` pins `fusebox-macros` to its own version, and a macro paired
/// with another runtime fails to compile with "could not find `__private_…` in `fusebox`"
/// instead of misusing items whose shape changed.
fn private_module() -> Ident {
    let version: String = env!("CARGO_PKG_VERSION")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Ident::new(&format!("__private_{version}"), Span::call_site())
}

/// The `static` call site's name.
pub(super) const SITE: &str = "__FUSEBOX_SITE";
/// The name of a method's `static` `MethodName`.
pub(super) const METHOD_NAME: &str = "__FUSEBOX_NAME";

/// Names shared by the generated code.
pub(super) struct Names {
    /// `::fusebox::__private_<version>`, or `<crate = path>::__private_<version>`.
    pub(super) private: TokenStream,
    /// The return type as the expansion names it: as written, or with each `impl Trait` in it
    /// replaced by `_` (see [`nameable_output`]).
    pub(super) output: Type,
    /// The return type that names the error type: as written, or with each `impl Trait` in it
    /// replaced by `()` (the error type of `Result<T, E>` or an alias of it does not depend on `T`;
    /// rustc cannot project out of a type still to be inferred).
    pub(super) error_output: Type,
    /// The error type: `E` of a return type written `Result<T, E>` that holds an `impl Trait`,
    /// otherwise `<R as Outcome>::Error` with `R` the [`Names::error_output`].
    pub(super) error_type: TokenStream,
    /// Where to point errors about the return type.
    pub(super) output_span: Span,
    pub(super) permit: Ident,
    /// The function's path as the reports take it: the site's, or a method's `MethodName`'s.
    pub(super) name: TokenStream,
    pub(super) result: Ident,
    pub(super) error: Ident,
    pub(super) value: Ident,
    pub(super) refused: Ident,
    /// The error type as a path usable in a pattern, when the return type is written
    /// `Result<T, E>` with `E` a path: a bare variant name becomes `E::Timeout { .. }`.
    pub(super) error_path: Option<Path>,
    /// Otherwise the local alias `__FuseboxErrorOf<R>` = `<R as Outcome>::Error`, and a bare
    /// variant name becomes `__FuseboxErrorOf::<RET>::Timeout { .. }` whatever alias the return
    /// type is written with.
    pub(super) error_of: Ident,
    /// True when the return type is written `io::Result<T>` or `Result<T, io::Error>` (any path
    /// ending so): a bare name in `failure = [...]` is then a `std::io::ErrorKind`.
    pub(super) io_error: bool,
    /// The `Cause` an `async fn`'s fallback is called with (see
    /// [`defers_fallback`](super::settle::defers_fallback)).
    pub(super) cause: Ident,
    /// The block that settles a call whose fallback is deferred (see
    /// [`defers_fallback`](super::settle::defers_fallback)).
    pub(super) settled: Lifetime,
}

impl Names {
    /// The permit's `RawPermit` and the function's path, the arguments of a shared key's store
    /// functions (a store's `async fn` holds a `NamedPermit`).
    #[cfg(feature = "store")]
    pub(super) fn raw_and_name(&self) -> TokenStream {
        let Names { permit, name, .. } = self;
        quote!(&mut #permit.raw, #name)
    }

    /// The permit and the function's path, the arguments of every report: the functions that
    /// take them are generic over the kind of permit only (`Permitted`: two per crate).
    pub(super) fn report_args(&self) -> TokenStream {
        let Names { permit, name, .. } = self;
        quote!(&mut #permit, #name)
    }

    /// The permit, borrowed, for the checks of its admission (generic as [`Names::report_args`]).
    pub(super) fn checked(&self) -> TokenStream {
        let permit = &self.permit;
        quote!(&#permit)
    }

    /// The permit's raw part, borrowed, for the checks of its admission.
    #[cfg(feature = "store")]
    pub(super) fn raw(&self) -> TokenStream {
        let permit = &self.permit;
        quote!(&#permit.raw)
    }

    /// The runtime's private module, located at `span` so a failed bound is reported there.
    pub(super) fn private_at(&self, span: Span) -> TokenStream {
        respan(self.private.clone(), span)
    }

    /// The names of the expansion of a function returning `output` (a method's when `method`).
    pub(super) fn new(args: &Args, output: Type, method: bool) -> Names {
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
        let io_error = returns_io_error(&output, error_path.as_ref());
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
            io_error,
            output,
            error_output,
            error_type,
            permit: local("__fusebox_permit"),
            result: local("__fusebox_result"),
            error: local("__fusebox_error"),
            value: local("__fusebox_value"),
            refused: local("__fusebox_rejected"),
            error_of: Ident::new("__FuseboxErrorOf", Span::call_site()),
            cause: local("__fusebox_cause"),
            settled: Lifetime::new("'__fusebox_settled", Span::mixed_site()),
        }
    }
}

/// `E` of a return type written `Result<T, E>` (any path ending in `Result`), as a path that can
/// start a pattern (`Wrapped<X>` becomes `Wrapped::<X>`).
pub(super) fn error_path(output: &Type) -> Option<Path> {
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

/// True for a return type written `io::Result<T>` (`std::io::Result<T>`, `tokio::io::Result<T>`)
/// or `Result<T, io::Error>` (`error_path`: its `E`): its error is a `std::io::Error`.
pub(super) fn returns_io_error(output: &Type, error_path: Option<&Path>) -> bool {
    let ends_with = |path: &Path, module: &str, name: &str| {
        let mut names = path.segments.iter().rev().map(|segment| &segment.ident);
        names.next().is_some_and(|last| last == name) && names.next().is_some_and(|m| m == module)
    };
    if let Some(error) = error_path {
        return ends_with(error, "io", "Error");
    }
    match ungroup(output) {
        Type::Path(TypePath {
            qself: None, path, ..
        }) => {
            ends_with(path, "io", "Result")
                && matches!(&path.segments.last().map(|s| &s.arguments),
                    Some(PathArguments::AngleBracketed(arguments)) if arguments.args.len() == 1)
        }
        _ => false,
    }
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

/// True for a method: a function with a receiver, or one whose signature names `Self` (an
/// associated function of an impl).
pub(super) fn is_method(sig: &syn::Signature) -> bool {
    fn names_self(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "Self",
            TokenTree::Group(group) => names_self(group.stream()),
            _ => false,
        })
    }
    sig.receiver().is_some() || names_self(sig.to_token_stream())
}
