//! The annotated item: which functions the attribute accepts; the parameters a fallback gets and
//! those `retry` needs again are checked in `function/params.rs`.

mod params;
#[cfg(test)]
mod tests;

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
use syn::{
    Attribute, GenericArgument, Ident, Item, PathArguments, ReturnType, Signature, TraitItemFn,
    Type, TypeParamBound, Visibility,
};

use crate::errors::Errors;
use crate::tokens::ungroup;
pub(crate) use params::Params;
use params::{check_attempts, fallback_params};

/// A function as written, with its body kept as raw tokens: only the signature is parsed, so a
/// syntax error inside the body is left for rustc to report where it is.
pub(crate) struct RawFn {
    /// The outer attributes.
    pub(crate) attrs: Vec<Attribute>,
    /// The visibility.
    pub(crate) vis: Visibility,
    /// The signature.
    pub(crate) sig: Signature,
    /// The body, braces included, unparsed.
    pub(crate) body: Group,
}

impl Parse for RawFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(body.span(), "expected the function body"));
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the function body"));
        }
        Ok(RawFn {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

impl RawFn {
    /// The function with `body` (the statements, without braces) as its body.
    pub(crate) fn with_body(&self, body: TokenStream) -> TokenStream {
        let mut tokens = TokenStream::new();
        tokens.append_all(&self.attrs);
        self.vis.to_tokens(&mut tokens);
        self.sig.to_tokens(&mut tokens);
        let mut group = Group::new(Delimiter::Brace, body);
        group.set_span(self.body.span());
        tokens.append(group);
        tokens
    }
}

/// A function the attribute can rewrite.
pub(crate) struct Function {
    /// The function as written.
    pub(crate) item: RawFn,
    /// Its written return type.
    pub(crate) output: Type,
    /// Its parameters, in order, when a fallback needs them.
    pub(crate) params: Params,
    /// Errors about parameters under `#[cfg(...)]`, each with those attributes: they hold only
    /// when the parameter is compiled in, so the expansion emits them under the same attributes.
    pub(crate) conditional: Vec<(Vec<Attribute>, syn::Error)>,
    /// An `async fn` of an `#[async_trait]` impl, as that attribute (which runs first) left it:
    /// a `fn` returning `Pin<Box<dyn Future<Output = R> + …>>` whose body is
    /// `Box::pin(async move { … })`. [`Function::output`] is then `R`, `item.body` the `async`
    /// block's body, and the expansion boxes its own body the same way.
    pub(crate) boxed: bool,
}

impl Function {
    /// True for an `async fn` (one rewritten by `#[async_trait]` included).
    pub(crate) fn is_async(&self) -> bool {
        self.boxed || self.item.sig.asyncness.is_some()
    }
}

/// The output `R` and the `async` block's body of a method `#[async_trait]` rewrote (see
/// [`Function::boxed`]); `None` for any other function.
fn async_trait_shape(item: &RawFn) -> Option<(Type, Group)> {
    if item.sig.asyncness.is_some() {
        return None;
    }
    let ReturnType::Type(_, output) = &item.sig.output else {
        return None;
    };
    let only_type = |ty: &Type, name: &str| -> Option<Type> {
        let Type::Path(path) = ungroup(ty) else {
            return None;
        };
        let last = path.path.segments.last()?;
        let PathArguments::AngleBracketed(arguments) = &last.arguments else {
            return None;
        };
        match (
            last.ident == name,
            arguments.args.first(),
            arguments.args.len(),
        ) {
            (true, Some(GenericArgument::Type(ty)), 1) => Some(ty.clone()),
            _ => None,
        }
    };
    let boxed = only_type(output, "Pin")?;
    let Type::TraitObject(object) = ungroup(&only_type(&boxed, "Box")?).clone() else {
        return None;
    };
    let output = object.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(arguments) = &last.arguments else {
            return None;
        };
        if last.ident != "Future" {
            return None;
        }
        arguments.args.iter().find_map(|argument| match argument {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(assoc.ty.clone()),
            _ => None,
        })
    })?;
    // `{ Box::pin(async move { … }) }`.
    let tokens: Vec<TokenTree> = item.body.stream().into_iter().collect();
    let [.., TokenTree::Ident(pin), TokenTree::Group(call)] = tokens.as_slice() else {
        return None;
    };
    if pin != "pin" || call.delimiter() != Delimiter::Parenthesis {
        return None;
    }
    let inner: Vec<TokenTree> = call.stream().into_iter().collect();
    match inner.as_slice() {
        [
            TokenTree::Ident(async_token),
            TokenTree::Ident(move_token),
            TokenTree::Group(body),
        ] if async_token == "async"
            && move_token == "move"
            && body.delimiter() == Delimiter::Brace =>
        {
            let mut unbound = Group::new(Delimiter::Brace, without_rebindings(body.stream()));
            unbound.set_span(body.span());
            Some((output, unbound))
        }
        _ => None,
    }
}

/// `tokens` without the statements `let name = name;` (and the attributes before them) by which
/// `#[async_trait]` moves each parameter into its `async` block: the expansion's own `async`
/// block borrows the parameters (to retry, or to hand them to a fallback), which such a move
/// would forbid; the outer `async move` block owns them either way.
fn without_rebindings(tokens: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::with_capacity(tokens.len());
    let mut attributes_from = None;
    let mut i = 0;
    while i < tokens.len() {
        if let [
            TokenTree::Ident(let_token),
            TokenTree::Ident(name),
            TokenTree::Punct(eq),
            TokenTree::Ident(value),
            TokenTree::Punct(semi),
            ..,
        ] = &tokens[i..]
            && let_token == "let"
            && eq.as_char() == '='
            && semi.as_char() == ';'
            && name == value
            && name != "mut"
        {
            if let Some(from) = attributes_from.take() {
                out.truncate(from);
            }
            i += 5;
            continue;
        }
        let attribute = matches!(
            &tokens[i..],
            [TokenTree::Punct(hash), TokenTree::Group(group), ..]
                if hash.as_char() == '#' && group.delimiter() == Delimiter::Bracket
        );
        if attribute {
            attributes_from.get_or_insert(out.len());
            out.extend(tokens[i..i + 2].iter().cloned());
            i += 2;
            continue;
        }
        attributes_from = None;
        out.push(tokens[i].clone());
        i += 1;
    }
    out.into_iter().collect()
}

/// Parses the annotated item and checks that the attribute can go on it.
///
/// `fallback` says whether the parameters must be plain names, to be passed to a fallback;
/// `attempts` lists the attempt arguments written (`timeout`, `retry`, …), which need an
/// `async fn` whose parameters every attempt can borrow again.
pub(crate) fn parse(
    tokens: TokenStream,
    fallback: bool,
    attempts: &[Ident],
) -> syn::Result<Function> {
    let mut item: RawFn = match syn::parse2(tokens.clone()) {
        Ok(item) => item,
        Err(_) => return Err(not_a_function(tokens)),
    };
    let boxed = match async_trait_shape(&item) {
        Some((output, body)) => {
            item.body = body;
            Some(output)
        }
        None => None,
    };
    let mut errors = Errors::default();
    let sig = &item.sig;
    let is_async = sig.asyncness.is_some() || boxed.is_some();
    qualifier_errors(&mut errors, sig);
    let output = checked_output(&mut errors, sig, boxed.as_ref());
    let params = if fallback {
        errors.ok(fallback_params(&item.sig))
    } else {
        Some(Params::default())
    };
    let mut conditional = Vec::new();
    let attempts_ok = check_attempts(&mut errors, &item.sig, attempts, is_async, &mut conditional);
    errors.finish()?;
    match (output, params, attempts_ok) {
        (Some(output), Some(params), Some(())) => Ok(Function {
            item,
            output,
            params,
            conditional,
            boxed: boxed.is_some(),
        }),
        // Both cases pushed an error, so `finish` returned it.
        _ => Err(syn::Error::new(Span::call_site(), "unsupported function")),
    }
}

/// The qualifiers a breaker cannot go with: `const` and `extern`.
fn qualifier_errors(errors: &mut Errors, sig: &Signature) {
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new(
            constness.span,
            "`#[circuit_breaker]` cannot go on a `const fn`: a breaker decides at run time; \
             remove `const`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "`#[circuit_breaker]` does not support `extern` functions; annotate a plain `fn` \
             that calls this one instead",
        ));
    }
}

/// The return type, when it is a `Result` (or may be an alias of one): as written, or the
/// `Output` of the future `#[async_trait]` boxed (`boxed`).
fn checked_output(errors: &mut Errors, sig: &Signature, boxed: Option<&Type>) -> Option<Type> {
    let written = match (boxed, &sig.output) {
        (Some(output), _) => Some(output),
        (None, ReturnType::Type(_, ty)) => Some(&**ty),
        (None, ReturnType::Default) => None,
    };
    match written {
        Some(ty) => match not_a_result(ty) {
            Some(what) => {
                errors.push(syn::Error::new_spanned(
                    ty,
                    format!(
                        "`#[circuit_breaker]` needs a function returning `Result<T, E>`, but `{}` \
                         returns {what}; the breaker counts `Err` values, so return a \
                         `Result` (or an alias of it) with this type as `T`, like \
                         `-> Result<T, MyError>`",
                        sig.ident,
                    ),
                ));
                None
            }
            None => Some(ty.clone()),
        },
        None => {
            errors.push(syn::Error::new(
                sig.ident.span(),
                format!(
                    "`#[circuit_breaker]` needs a function returning `Result<T, E>`, but `{}` \
                     returns `()`; add a return type like `-> Result<(), MyError>`",
                    sig.ident
                ),
            ));
            None
        }
    }
}

/// What the return type is, when it is visibly not a `Result`: a primitive, `String`, `Option`,
/// `()`, a tuple, a reference, a pointer, an array, a slice, `!`, a function pointer, `impl Trait`
/// or `dyn Trait`. A path that could name an alias of `Result` is not judged here.
fn not_a_result(ty: &Type) -> Option<&'static str> {
    const PRIMITIVES: [&str; 18] = [
        "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64", "String",
    ];
    match ungroup(ty) {
        Type::Tuple(tuple) if tuple.elems.is_empty() => Some("`()`"),
        Type::Tuple(_) => Some("a tuple"),
        Type::Reference(_) => Some("a reference"),
        Type::Ptr(_) => Some("a raw pointer"),
        Type::Array(_) => Some("an array"),
        Type::Slice(_) => Some("a slice"),
        Type::Never(_) => Some("`!`"),
        Type::FnPtr(_) => Some("a function pointer"),
        Type::ImplTrait(_) => Some("an `impl Trait`"),
        Type::TraitObject(_) => Some("a trait object"),
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            if last.ident == "Option" {
                Some("an `Option`")
            } else if path.path.segments.len() == 1
                && last.arguments.is_none()
                && PRIMITIVES.iter().any(|name| last.ident == name)
            {
                Some("a plain value")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The error for an attribute on anything but a function with a body.
fn not_a_function(tokens: TokenStream) -> syn::Error {
    const FIX: &str = "put it on the `fn` whose calls go to the protected dependency";
    if let Ok(declaration) = syn::parse2::<TraitItemFn>(tokens.clone()) {
        return syn::Error::new(
            declaration.sig.ident.span(),
            format!(
                "`#[circuit_breaker]` needs a function with a body; put it on the implementations \
                 of `{}`, not on its declaration",
                declaration.sig.ident
            ),
        );
    }
    let Ok(item) = syn::parse2::<Item>(tokens) else {
        return syn::Error::new(
            Span::call_site(),
            format!("`#[circuit_breaker]` goes on a function; {FIX}"),
        );
    };
    let (what, ident) = match &item {
        Item::Struct(item) => ("a struct", Some(&item.ident)),
        Item::Enum(item) => ("an enum", Some(&item.ident)),
        Item::Union(item) => ("a union", Some(&item.ident)),
        Item::Trait(item) => ("a trait", Some(&item.ident)),
        Item::Type(item) => ("a type alias", Some(&item.ident)),
        Item::Const(item) => ("a constant", Some(&item.ident)),
        Item::Static(item) => ("a static", Some(&item.ident)),
        Item::Mod(item) => ("a module", Some(&item.ident)),
        _ => ("", None),
    };
    match ident {
        Some(ident) => syn::Error::new(
            ident.span(),
            format!("`#[circuit_breaker]` goes on a function, but `{ident}` is {what}; {FIX}"),
        ),
        None => syn::Error::new(
            Span::call_site(),
            format!("`#[circuit_breaker]` goes on a function; {FIX}"),
        ),
    }
}
