//! Token helpers shared by the expansion and the setter calls it emits: [`respan`] locates
//! generated tokens where the argument they come from was written, so an error about them is
//! reported there.

use proc_macro2::{Group, Span, TokenStream, TokenTree};

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
