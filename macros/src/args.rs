//! The arguments of `#[circuit_breaker(...)]`: parsed as `name = value` pairs, then checked one by
//! one, each value keeping its span so an error points at the token that caused it.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path, Token};

use crate::duration::{self, DurationError, UNIT_LIST};
use crate::errors::Errors;

/// Every argument name the attribute accepts, in the order the error messages list them.
pub(crate) const NAMES: [&str; 11] = [
    "key",
    "failure",
    "fallback",
    "registry",
    "crate",
    "window",
    "min_calls",
    "failure_rate",
    "open_for",
    "half_open",
    "policy",
];

/// The default count window of `fusebox::Policy`.
pub(crate) const DEFAULT_WINDOW: u64 = 100;
/// The default `min_calls` of `fusebox::Policy`.
pub(crate) const DEFAULT_MIN_CALLS: u64 = 10;
/// The largest count window (`fusebox::MAX_WINDOW`).
pub(crate) const MAX_WINDOW: u64 = 1_000_000;
/// The most half-open probes (`fusebox::MAX_HALF_OPEN`).
pub(crate) const MAX_HALF_OPEN: u64 = 127;
/// The shortest `open_for`, in nanoseconds (`fusebox::MIN_OPEN_FOR`).
pub(crate) const MIN_OPEN_FOR_NANOS: u128 = 1_000_000;
/// The longest `open_for`, in nanoseconds (`fusebox::MAX_OPEN_FOR`).
pub(crate) const MAX_OPEN_FOR_NANOS: u128 = 24 * 60 * 60 * 1_000_000_000;

/// A checked value and the span of the token it was written as.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spanned<T> {
    /// The value.
    pub(crate) value: T,
    /// Where it was written.
    pub(crate) span: Span,
}

/// Which errors count as failures.
pub(crate) enum Failure {
    /// `failure = [Timeout, MyError::Connect]`.
    Variants(Vec<Variant>),
    /// `failure = path::to::predicate`, a `fn(&E) -> bool`.
    Predicate(Path),
}

/// One entry of `failure = [...]`.
pub(crate) enum Variant {
    /// A bare name, resolved against the function's error type.
    Bare(Ident),
    /// A path with `::`, used as written.
    Path(Path),
}

/// The policy arguments; `None` keeps the base policy's value.
#[derive(Default)]
pub(crate) struct PolicyArgs {
    /// `policy = CONST`: the base the other knobs override.
    pub(crate) base: Option<Path>,
    /// `window = N`.
    pub(crate) window: Option<Spanned<u32>>,
    /// `min_calls = N`.
    pub(crate) min_calls: Option<Spanned<u32>>,
    /// `failure_rate = N`, in percent.
    pub(crate) failure_rate: Option<Spanned<u8>>,
    /// `open_for = "10s"`, in nanoseconds.
    pub(crate) open_for: Option<Spanned<u64>>,
    /// `half_open = N`.
    pub(crate) half_open: Option<Spanned<u32>>,
}

/// Which breaker a call goes through.
pub(crate) enum Key {
    /// `key = "payment"`: one breaker, cached in the function's call site.
    Literal(LitStr),
    /// `key = expr` (a `&str` or `String`, evaluated on every call before the body): one breaker
    /// per distinct value, looked up per call.
    Dynamic(Expr),
}

/// The checked arguments of one attribute.
pub(crate) struct Args {
    /// `key = ...`.
    pub(crate) key: Key,
    /// `failure = ...`; `None` counts every error.
    pub(crate) failure: Option<Failure>,
    /// `fallback = name`.
    pub(crate) fallback: Option<Path>,
    /// `registry = STATIC`.
    pub(crate) registry: Option<Path>,
    /// `crate = path`.
    pub(crate) krate: Option<Path>,
    /// The policy knobs.
    pub(crate) policy: PolicyArgs,
}

/// One `name = value` pair as written.
struct RawArg {
    name: Ident,
    value: Expr,
}

/// Parses and checks the attribute's arguments, reporting every problem at once.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    let raw = parse_raw.parse2(tokens)?;
    check(raw)
}

fn parse_raw(input: ParseStream) -> syn::Result<Vec<RawArg>> {
    let mut args = Vec::new();
    while !input.is_empty() {
        if !input.peek(Ident::peek_any) {
            return Err(input.error("expected an argument like `key = \"payment\"`"));
        }
        let name = input.call(Ident::parse_any)?;
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                name.span(),
                format!("expected `=` after `{name}`; write `{name} = …`"),
            ));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        args.push(RawArg { name, value });
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(args)
}

fn check(raw: Vec<RawArg>) -> syn::Result<Args> {
    let mut errors = Errors::default();
    let mut seen = HashSet::new();
    let mut key = None;
    let mut failure = None;
    let mut fallback = None;
    let mut registry = None;
    let mut krate = None;
    let mut policy = PolicyArgs::default();
    let mut window_raw = None;
    let mut min_calls_raw = None;

    for RawArg { name, value } in raw {
        let text = name.to_string();
        if !NAMES.contains(&text.as_str()) {
            errors.push(unknown_argument(&name));
            continue;
        }
        if !seen.insert(text.clone()) {
            errors.push(syn::Error::new(
                name.span(),
                format!("duplicate argument `{name}`; remove one"),
            ));
            continue;
        }
        match text.as_str() {
            "key" => key = errors.ok(key_arg(value)),
            "failure" => failure = errors.ok(failure_arg(&value)),
            "fallback" => {
                fallback = errors.ok(path_arg(
                    &value,
                    "`fallback` takes the name of a function, like `fallback = use_cached`",
                ))
            }
            "registry" => {
                registry = errors.ok(path_arg(
                    &value,
                    "`registry` takes the path of a `static` registry, like `registry = REGISTRY`",
                ))
            }
            "crate" => {
                krate = errors.ok(path_arg(
                    &value,
                    "`crate` takes the path of the fusebox crate, like `crate = ::fusebox`",
                ))
            }
            "policy" => {
                policy.base = errors.ok(path_arg(
                    &value,
                    "`policy` takes the path of a `const` `fusebox::Policy`, like `policy = PAYMENT_POLICY`",
                ))
            }
            "window" => {
                window_raw = errors.ok(int_in_range(&name, &value, "100", 1, MAX_WINDOW, "calls"))
            }
            "min_calls" => {
                min_calls_raw = errors.ok(int_in_range(
                    &name,
                    &value,
                    "10",
                    1,
                    u64::from(u32::MAX),
                    "calls, at most `window`",
                ))
            }
            "failure_rate" => {
                policy.failure_rate = errors
                    .ok(int_in_range(&name, &value, "50", 1, 100, "percent"))
                    .map(narrow)
            }
            "half_open" => {
                policy.half_open = errors
                    .ok(int_in_range(
                        &name,
                        &value,
                        "1",
                        1,
                        MAX_HALF_OPEN,
                        "probes",
                    ))
                    .map(narrow)
            }
            "open_for" => policy.open_for = errors.ok(duration_arg(&name, &value)),
            // Every other name was reported as unknown above.
            _ => {}
        }
    }

    if let Some(min_calls) = min_calls_raw {
        let (window, which) = match (window_raw, &policy.base) {
            (Some(window), _) => (Some(window.value), String::new()),
            (None, None) => (Some(DEFAULT_WINDOW), ", the default".to_owned()),
            // The window of a `policy = CONST` is only known when the program runs.
            (None, Some(_)) => (None, String::new()),
        };
        if let Some(window) = window.filter(|&window| min_calls.value > window) {
            errors.push(syn::Error::new(
                min_calls.span,
                format!(
                    "`min_calls` ({}) is greater than `window` ({window}{which}); \
                     lower `min_calls` or raise `window`",
                    min_calls.value
                ),
            ));
        }
    }
    policy.window = window_raw.map(narrow);
    policy.min_calls = min_calls_raw.map(narrow);

    let missing_key = || {
        syn::Error::new(
            Span::call_site(),
            "missing `key`; add `key = \"name\"` to name the breaker \
             (calls with the same key share one circuit)",
        )
    };
    if !seen.contains("key") {
        errors.push(missing_key());
    }
    errors.finish()?;
    // A `key` that was written but refused has been reported above.
    let key = key.ok_or_else(missing_key)?;
    Ok(Args {
        key,
        failure,
        fallback,
        registry,
        krate,
        policy,
    })
}

/// Converts a value already checked to fit.
fn narrow<T: TryFrom<u64> + Default>(value: Spanned<u64>) -> Spanned<T> {
    Spanned {
        value: T::try_from(value.value).unwrap_or_default(),
        span: value.span,
    }
}

fn unknown_argument(name: &Ident) -> syn::Error {
    let list = NAMES
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut message = format!("unknown argument `{name}`; expected one of {list}");
    if let Some(close) = closest(&name.to_string()) {
        message.push_str(&format!("; did you mean `{close}`?"));
    }
    syn::Error::new(name.span(), message)
}

/// The known argument name closest to `written`, when it is plausibly a typo of it.
pub(crate) fn closest(written: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .map(|name| (edit_distance(written, name), *name))
        .filter(|&(distance, name)| distance > 0 && distance <= (name.len() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance between two short ASCII-ish strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The literal of `value` when it is a plain literal expression.
fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { attrs, lit }) if attrs.is_empty() => Some(lit),
        _ => None,
    }
}

fn key_arg(value: Expr) -> syn::Result<Key> {
    match literal(&value) {
        Some(Lit::Str(key)) if key.value().is_empty() => Err(syn::Error::new(
            key.span(),
            "`key` must not be empty; name the dependency, like `key = \"payment\"`",
        )),
        Some(Lit::Str(key)) => Ok(Key::Literal(key.clone())),
        Some(_) => Err(syn::Error::new_spanned(
            &value,
            "`key` takes a string literal like `key = \"payment\"`, or an expression that \
             yields a `&str` or `String`, like `key = host`",
        )),
        None => Ok(Key::Dynamic(value)),
    }
}

fn path_arg(value: &Expr, message: &str) -> syn::Result<Path> {
    match value {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => Ok(path.path.clone()),
        _ => Err(syn::Error::new_spanned(value, message)),
    }
}

fn failure_arg(value: &Expr) -> syn::Result<Failure> {
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

fn int_in_range(
    name: &Ident,
    value: &Expr,
    example: &str,
    min: u64,
    max: u64,
    unit: &str,
) -> syn::Result<Spanned<u64>> {
    let Some(Lit::Int(int)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes an integer literal like `{name} = {example}`; to share settings \
                 between functions, use a `const` `fusebox::Policy` with `policy = NAME`"
            ),
        ));
    };
    let out_of_range = || {
        syn::Error::new(
            int.span(),
            format!(
                "`{name} = {}` is out of range; use a value in {min}..={max} ({unit})",
                int.base10_digits()
            ),
        )
    };
    let parsed: u64 = int.base10_parse().map_err(|_| out_of_range())?;
    if !(min..=max).contains(&parsed) {
        return Err(out_of_range());
    }
    Ok(Spanned {
        value: parsed,
        span: int.span(),
    })
}

fn duration_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<u64>> {
    let Some(Lit::Str(text)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes a duration string literal like `{name} = \"10s\"`"),
        ));
    };
    let written = text.value();
    let nanos = match duration::parse_nanos(&written) {
        Ok(nanos) => Some(nanos),
        Err(DurationError::Overflow) => None,
        Err(DurationError::Syntax) => {
            return Err(syn::Error::new(
                text.span(),
                format!(
                    "invalid duration \"{written}\"; write an integer followed by one of the \
                     units {UNIT_LIST}, like `{name} = \"30s\"` or `{name} = \"250ms\"`"
                ),
            ));
        }
    };
    match nanos.filter(|nanos| (MIN_OPEN_FOR_NANOS..=MAX_OPEN_FOR_NANOS).contains(nanos)) {
        Some(nanos) => Ok(Spanned {
            value: u64::try_from(nanos).unwrap_or(u64::MAX),
            span: text.span(),
        }),
        None => Err(syn::Error::new(
            text.span(),
            format!(
                "`{name} = \"{written}\"` is out of range; use a duration from \"1ms\" to \"24h\""
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn args(tokens: TokenStream) -> syn::Result<Args> {
        parse(tokens)
    }

    fn messages(tokens: TokenStream) -> Vec<String> {
        match args(tokens) {
            Ok(_) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn every_argument() {
        let parsed = args(quote!(
            key = "payment",
            failure = [Timeout, PaymentError::Connect],
            fallback = Self::cached,
            registry = crate::REGISTRY,
            crate = ::fusebox,
            window = 20,
            min_calls = 5,
            failure_rate = 40,
            open_for = "30s",
            half_open = 3,
            policy = BASE,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(&parsed.key, Key::Literal(key) if key.value() == "payment"));
        let Some(Failure::Variants(variants)) = &parsed.failure else {
            panic!("variants")
        };
        assert!(matches!(&variants[0], Variant::Bare(id) if id == "Timeout"));
        assert!(matches!(&variants[1], Variant::Path(_)));
        assert!(parsed.fallback.is_some() && parsed.registry.is_some() && parsed.krate.is_some());
        let policy = &parsed.policy;
        assert!(policy.base.is_some());
        assert_eq!(policy.window.map(|w| w.value), Some(20));
        assert_eq!(policy.min_calls.map(|w| w.value), Some(5));
        assert_eq!(policy.failure_rate.map(|w| w.value), Some(40));
        assert_eq!(policy.open_for.map(|w| w.value), Some(30_000_000_000));
        assert_eq!(policy.half_open.map(|w| w.value), Some(3));
    }

    #[test]
    fn predicate() {
        let parsed = args(quote!(key = "k", failure = errors::is_transient)).unwrap();
        assert!(matches!(parsed.failure, Some(Failure::Predicate(_))));
    }

    #[test]
    fn ranges() {
        for (tokens, expected) in [
            (
                quote!(key = "k", window = 0),
                "`window = 0` is out of range",
            ),
            (quote!(key = "k", window = 1000001), "`window = 1000001`"),
            (quote!(key = "k", failure_rate = 0), "`failure_rate = 0`"),
            (
                quote!(key = "k", failure_rate = 150),
                "`failure_rate = 150`",
            ),
            (
                quote!(key = "k", failure_rate = 100000),
                "`failure_rate = 100000`",
            ),
            (quote!(key = "k", half_open = 0), "`half_open = 0`"),
            (quote!(key = "k", half_open = 128), "`half_open = 128`"),
            (quote!(key = "k", min_calls = 0), "`min_calls = 0`"),
            (
                quote!(key = "k", window = 10, min_calls = 11),
                "`min_calls` (11) is greater than `window` (10)",
            ),
            (
                quote!(key = "k", min_calls = 101),
                "`min_calls` (101) is greater than `window` (100, the default)",
            ),
        ] {
            let found = messages(tokens.clone());
            assert!(
                found.len() == 1 && found[0].starts_with(expected),
                "{tokens}: {found:?}"
            );
        }
        for ok in [
            quote!(key = "k", window = 1),
            quote!(key = "k", window = 1000000, min_calls = 1000000),
            quote!(key = "k", failure_rate = 100, half_open = 127),
            quote!(key = "k", min_calls = 500, policy = BIG),
        ] {
            assert!(args(ok.clone()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn durations() {
        let nanos = |tokens| args(tokens).unwrap().policy.open_for.unwrap().value;
        assert_eq!(nanos(quote!(key = "k", open_for = "1ms")), 1_000_000);
        assert_eq!(nanos(quote!(key = "k", open_for = "1500us")), 1_500_000);
        assert_eq!(
            nanos(quote!(key = "k", open_for = "24h")),
            86_400_000_000_000
        );
        for (tokens, expected) in [
            (
                quote!(key = "k", open_for = "10 parsecs"),
                "invalid duration \"10 parsecs\"",
            ),
            (
                quote!(key = "k", open_for = "999us"),
                "`open_for = \"999us\"` is out of range",
            ),
            (
                quote!(key = "k", open_for = "25h"),
                "`open_for = \"25h\"` is out of range",
            ),
            (
                quote!(key = "k", open_for = 10),
                "`open_for` takes a duration string",
            ),
        ] {
            let found = messages(tokens.clone());
            assert!(
                found.len() == 1 && found[0].starts_with(expected),
                "{tokens}: {found:?}"
            );
        }
    }

    #[test]
    fn collects_every_error() {
        let found = messages(quote!(
            falure = [Timeout],
            window = SIZE,
            window = 10,
            failure_rate = 0,
        ));
        assert_eq!(found.len(), 5, "{found:?}");
        assert!(found[0].starts_with("unknown argument `falure`; expected one of `key`, "));
        assert!(found[0].ends_with("did you mean `failure`?"));
        assert!(found[1].starts_with("`window` takes an integer literal like `window = 100`"));
        assert_eq!(found[2], "duplicate argument `window`; remove one");
        assert!(found[3].starts_with("`failure_rate = 0` is out of range"));
        assert!(found[4].starts_with("missing `key`"));
    }

    #[test]
    fn key_shapes() {
        assert!(matches!(
            args(quote!(key = url.host())).unwrap().key,
            Key::Dynamic(_)
        ));
        assert!(messages(quote!(key = 42))[0].starts_with("`key` takes a string literal"));
        assert!(messages(quote!(key = ""))[0].starts_with("`key` must not be empty"));
        assert!(messages(quote!(key))[0].starts_with("expected `=` after `key`"));
    }

    #[test]
    fn failure_shapes() {
        assert!(messages(quote!(key = "k", failure = []))[0].starts_with("`failure = []`"));
        assert!(
            messages(quote!(key = "k", failure = [Timeout, Timeout]))[0]
                .starts_with("`Timeout` is listed twice")
        );
        assert!(
            messages(quote!(key = "k", failure = [Timeout(_)]))[0]
                .starts_with("expected a variant name")
        );
        assert!(messages(quote!(key = "k", failure = "Timeout"))[0].starts_with("`failure` takes"));
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("falure"), Some("failure"));
        assert_eq!(closest("windw"), Some("window"));
        assert_eq!(closest("min_call"), Some("min_calls"));
        assert_eq!(closest("fallbak"), Some("fallback"));
        assert_eq!(closest("timeout"), None);
        assert_eq!(closest("retry"), None);
    }
}
