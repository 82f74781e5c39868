//! `failure = [Timeout, Connect]` (variants of the error type, each listed once) or
//! `failure = path::to::predicate` (a `fn(&E) -> bool`).

use std::collections::HashSet;

use syn::Expr;

use super::{Failure, Variant};
use crate::errors::Errors;

/// Which errors count as failures, as written after `failure =`.
pub(super) fn failure_arg(value: &Expr) -> syn::Result<Failure> {
    const SHAPE: &str = "`failure` takes a list of variants of the error type, like \
                         `failure = [Timeout, Connect]`, or a predicate `fn(&E) -> bool`, like \
                         `failure = is_transient`";
    match value {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => {
            Ok(Failure::Predicate(path.path.clone()))
        }
        Expr::Array(array) if array.attrs.is_empty() => {
            if array.elems.is_empty() {
                return Err(syn::Error::new(
                    array.bracket_token.span.join(),
                    "`failure = []` lists no variant; list the ones that count, like \
                     `failure = [Timeout]`, or remove `failure` to count every error",
                ));
            }
            let mut errors = Errors::default();
            let mut variants = Vec::new();
            let mut listed = HashSet::new();
            for element in &array.elems {
                let path = match element {
                    Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => &path.path,
                    _ => {
                        errors.push(syn::Error::new_spanned(
                            element,
                            "expected a variant name like `Timeout` or a path like \
                             `MyError::Timeout`; write the name only, without fields",
                        ));
                        continue;
                    }
                };
                let written = quote::ToTokens::to_token_stream(path).to_string();
                if !listed.insert(written.clone()) {
                    errors.push(syn::Error::new_spanned(
                        path,
                        format!("`{written}` is listed twice in `failure`; remove one"),
                    ));
                    continue;
                }
                variants.push(match path.get_ident() {
                    Some(ident) if path.leading_colon.is_none() => Variant::Bare(ident.clone()),
                    _ => Variant::Path(path.clone()),
                });
            }
            errors.finish()?;
            Ok(Failure::Variants(variants))
        }
        _ => Err(syn::Error::new_spanned(value, SHAPE)),
    }
}
