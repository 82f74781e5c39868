//! Token and syntax helpers shared by the steps: [`respan`] locates generated tokens where the
//! argument they come from was written, so an error about them is reported there; [`ungroup`]
//! sees through the groups macros wrap around a type.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use syn::Type;

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

/// A type without the invisible groups and parentheses macros wrap around it.
pub(crate) fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => ungroup(&group.elem),
        Type::Paren(paren) => ungroup(&paren.elem),
        other => other,
    }
}
