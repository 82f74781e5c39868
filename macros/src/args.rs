//! The arguments of `#[circuit_breaker(...)]`: parsed once as `name = value` pairs, then checked
//! one by one, each value keeping its span so an error points at the token that caused it.
//!
//! This file holds the argument table, the checked types and the reading loop; the value parsers
//! are in `args/values.rs`, the checks between arguments (`slow_rate` needs `slow`, `open_max` is
//! at least `open_for`, `backoff` needs `retry`, …) in `args/rules.rs`, the suggestions for
//! misspelled names in `args/suggest.rs`. The runtime's own `Policy::validate` then judges the
//! policy the arguments build (`validate.rs`, called by `expand`).

mod rules;
mod suggest;
#[cfg(test)]
mod tests;
mod values;

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, LitStr, Path, Token};

use crate::errors::Errors;
use values::{
    BACKOFF, MAX_CONCURRENT, MAX_HALF_OPEN, MAX_RETRY, MAX_WINDOW, MS_TO_DAY, duration_arg,
    failure_arg, int_in_range, key_arg, narrow, open_backoff_arg, path_arg, recovery_arg,
    window_arg,
};

/// Every argument name the attribute accepts, in the order the error messages list them.
pub(crate) const NAMES: [&str; 26] = [
    "key",
    "failure",
    "failure_if",
    "fallback",
    "registry",
    "crate",
    "policy",
    "window",
    "min_calls",
    "failure_rate",
    "consecutive",
    "failure_count",
    "slow",
    "slow_rate",
    "open_for",
    "open_backoff",
    "open_max",
    "half_open",
    "half_open_lease",
    "recovery",
    "max_concurrent",
    "shared",
    "timeout",
    "retry",
    "backoff",
    "deadline",
];

/// The arguments that bound or repeat attempts; they need an `async fn`.
pub(crate) const ATTEMPT_NAMES: [&str; 4] = ["timeout", "retry", "backoff", "deadline"];

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

/// `window = ...`.
#[derive(Clone, Copy)]
pub(crate) enum WindowArg {
    /// `window = 100`: the last N calls.
    Count(Spanned<u32>),
    /// `window = "30s"`: the calls of the last span, in nanoseconds.
    Time(Spanned<u64>),
}

/// `recovery = ...`.
#[derive(Clone, Copy)]
pub(crate) enum RecoveryArg {
    /// `recovery = probes`: `half_open` probes, the default.
    Probes,
    /// `recovery = progressive(phases = 3, min_passes = 5)`.
    Progressive {
        /// `phases = N`.
        phases: Spanned<u32>,
        /// `min_passes = N`.
        min_passes: Spanned<u32>,
    },
}

/// The policy arguments; `None` keeps the base policy's value.
#[derive(Default)]
pub(crate) struct PolicyArgs {
    /// `policy = CONST`: the base the other knobs override.
    pub(crate) base: Option<Path>,
    /// `window = N` or `window = "30s"`.
    pub(crate) window: Option<WindowArg>,
    /// `min_calls = N`.
    pub(crate) min_calls: Option<Spanned<u32>>,
    /// `failure_rate = N`, in percent.
    pub(crate) failure_rate: Option<Spanned<u8>>,
    /// `consecutive = N`.
    pub(crate) consecutive: Option<Spanned<u32>>,
    /// `failure_count = N`.
    pub(crate) failure_count: Option<Spanned<u32>>,
    /// `slow = "2s"`, in nanoseconds.
    pub(crate) slow: Option<Spanned<u64>>,
    /// `slow_rate = N`, in percent.
    pub(crate) slow_rate: Option<Spanned<u8>>,
    /// `open_for = "10s"`, in nanoseconds.
    pub(crate) open_for: Option<Spanned<u64>>,
    /// `open_backoff = 2` or `2.5`.
    pub(crate) open_backoff: Option<Spanned<f64>>,
    /// `open_max = "5m"`, in nanoseconds.
    pub(crate) open_max: Option<Spanned<u64>>,
    /// `half_open = N`.
    pub(crate) half_open: Option<Spanned<u32>>,
    /// `half_open_lease = "30s"`, in nanoseconds.
    pub(crate) half_open_lease: Option<Spanned<u64>>,
    /// `recovery = ...`.
    pub(crate) recovery: Option<RecoveryArg>,
    /// `max_concurrent = N`.
    pub(crate) max_concurrent: Option<Spanned<u32>>,
    /// `shared = false`: the key stays local on a registry shared across replicas.
    pub(crate) shared: Option<Spanned<bool>>,
}

/// The attempt arguments (`async fn` only).
#[derive(Default)]
pub(crate) struct AttemptArgs {
    /// `timeout = "800ms"`, in nanoseconds.
    pub(crate) timeout: Option<Spanned<u64>>,
    /// `retry = N`: attempts in total.
    pub(crate) retry: Option<Spanned<u32>>,
    /// `backoff = "100ms"`, in nanoseconds.
    pub(crate) backoff: Option<Spanned<u64>>,
    /// `deadline = "2s"`, in nanoseconds.
    pub(crate) deadline: Option<Spanned<u64>>,
    /// The attempt arguments as written, for errors about the function they are put on.
    pub(crate) written: Vec<Ident>,
}

impl AttemptArgs {
    /// True when calls go through the attempt driver.
    pub(crate) fn any(&self) -> bool {
        !self.written.is_empty()
    }
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
    /// `failure_if = path::to::pred`, a `fn(&T) -> bool` on the `Ok` value; `None` counts no
    /// `Ok` value.
    pub(crate) failure_if: Option<Path>,
    /// `fallback = name`.
    pub(crate) fallback: Option<Path>,
    /// `registry = STATIC`.
    pub(crate) registry: Option<Path>,
    /// `crate = path`.
    pub(crate) krate: Option<Path>,
    /// The policy knobs.
    pub(crate) policy: PolicyArgs,
    /// `timeout`, `retry`, `backoff`, `deadline`.
    pub(crate) attempts: AttemptArgs,
}

/// One `name = value` pair as written.
struct RawArg {
    name: Ident,
    value: Expr,
}

/// The attribute's arguments, parsed once.
pub(crate) struct Parsed {
    /// The attempt arguments written, whatever their values: used to check the function even
    /// when some argument is invalid.
    pub(crate) attempt_names: Vec<Ident>,
    /// The checked arguments, or every problem at once.
    pub(crate) args: syn::Result<Args>,
}

/// Parses and checks the attribute's arguments.
pub(crate) fn parse(tokens: TokenStream) -> Parsed {
    match parse_raw.parse2(tokens) {
        Ok(raw) => Parsed {
            attempt_names: raw
                .iter()
                .map(|arg| arg.name.clone())
                .filter(|name| ATTEMPT_NAMES.contains(&name.to_string().as_str()))
                .collect(),
            args: check(raw),
        },
        Err(error) => Parsed {
            attempt_names: Vec::new(),
            args: Err(error),
        },
    }
}

/// The `name = value` pairs, in order.
fn parse_raw(input: ParseStream<'_>) -> syn::Result<Vec<RawArg>> {
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

/// What the reading loop has collected so far.
#[derive(Default)]
struct Reading {
    key: Option<Key>,
    failure: Option<Failure>,
    failure_if: Option<Path>,
    fallback: Option<Path>,
    registry: Option<Path>,
    krate: Option<Path>,
    policy: PolicyArgs,
    attempts: AttemptArgs,
    /// `min_calls` before it is checked against the window.
    min_calls: Option<Spanned<u64>>,
}

/// Checks every argument, then the rules between them, reporting every problem at once.
fn check(raw: Vec<RawArg>) -> syn::Result<Args> {
    let mut errors = Errors::default();
    // Every argument written, with the span of its name.
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut reading = Reading::default();
    for RawArg { name, value } in raw {
        let text = name.to_string();
        if !NAMES.contains(&text.as_str()) {
            errors.push(suggest::unknown_argument(&name));
            continue;
        }
        if seen.contains_key(&text) {
            errors.push(syn::Error::new(
                name.span(),
                format!("duplicate argument `{name}`; remove one"),
            ));
            continue;
        }
        seen.insert(text.clone(), name.span());
        if ATTEMPT_NAMES.contains(&text.as_str()) {
            reading.attempts.written.push(name.clone());
        }
        read_arg(&mut errors, &mut reading, &name, &value);
    }
    let Reading {
        key,
        failure,
        failure_if,
        fallback,
        registry,
        krate,
        mut policy,
        attempts,
        min_calls,
    } = reading;
    rules::check_min_calls(&mut errors, &policy, min_calls);
    policy.min_calls = min_calls.map(narrow);
    rules::check_all(&mut errors, &policy, &attempts, &seen);
    rules::check_failure_if(&mut errors, &attempts, &seen);

    let missing_key = || {
        syn::Error::new(
            Span::call_site(),
            "missing `key`; add `key = \"name\"` to name the breaker \
             (calls with the same key share one circuit)",
        )
    };
    if !seen.contains_key("key") {
        errors.push(missing_key());
    }
    errors.finish()?;
    // A `key` that was written but refused has been reported above.
    let key = key.ok_or_else(missing_key)?;
    Ok(Args {
        key,
        failure,
        failure_if,
        fallback,
        registry,
        krate,
        policy,
        attempts,
    })
}

/// Reads one argument whose name is known and not a duplicate.
fn read_arg(errors: &mut Errors, reading: &mut Reading, name: &Ident, value: &Expr) {
    match name.to_string().as_str() {
        "key" => reading.key = errors.ok(key_arg(value.clone())),
        "failure" => reading.failure = errors.ok(failure_arg(value)),
        "failure_if" => {
            reading.failure_if = errors.ok(path_arg(
                value,
                "`failure_if` takes the path of a `fn(&T) -> bool` on the `Ok` value, like \
                 `failure_if = is_unavailable`",
            ));
        }
        "fallback" => {
            reading.fallback = errors.ok(path_arg(
                value,
                "`fallback` takes the name of a function, like `fallback = use_cached`",
            ));
        }
        "registry" => {
            reading.registry = errors.ok(path_arg(
                value,
                "`registry` takes the path of a `static` registry, like `registry = REGISTRY`",
            ));
        }
        "crate" => {
            reading.krate = errors.ok(path_arg(
                value,
                "`crate` takes the path of the fusebox crate, like `crate = ::fusebox`",
            ));
        }
        "policy" => {
            reading.policy.base = errors.ok(path_arg(
                value,
                "`policy` takes the path of a `const` `fusebox::Policy`, like `policy = PAYMENT_POLICY`",
            ));
        }
        "min_calls" => {
            reading.min_calls = errors.ok(int_in_range(
                name,
                value,
                "10",
                1,
                u64::from(u32::MAX),
                "calls, at most `window`",
            ));
        }
        "timeout" | "retry" | "backoff" | "deadline" => {
            read_attempt_arg(errors, &mut reading.attempts, name, value);
        }
        _ => read_policy_arg(errors, &mut reading.policy, name, value),
    }
}

/// Reads one policy knob (other than `policy` and `min_calls`).
fn read_policy_arg(errors: &mut Errors, policy: &mut PolicyArgs, name: &Ident, value: &Expr) {
    let int = |errors: &mut Errors, example, max, unit| {
        errors.ok(int_in_range(name, value, example, 1, max, unit))
    };
    let duration =
        |errors: &mut Errors, example| errors.ok(duration_arg(name, value, example, MS_TO_DAY));
    match name.to_string().as_str() {
        "window" => policy.window = errors.ok(window_arg(name, value)),
        "failure_rate" => policy.failure_rate = int(errors, "50", 100, "percent").map(narrow),
        "consecutive" => {
            policy.consecutive =
                int(errors, "5", MAX_WINDOW, "counted failures in a row").map(narrow);
        }
        "failure_count" => {
            policy.failure_count =
                int(errors, "50", MAX_WINDOW, "counted failures in the window").map(narrow);
        }
        "slow" => policy.slow = duration(errors, "2s"),
        "slow_rate" => policy.slow_rate = int(errors, "80", 100, "percent").map(narrow),
        "open_for" => policy.open_for = duration(errors, "10s"),
        "open_backoff" => policy.open_backoff = errors.ok(open_backoff_arg(name, value)),
        "open_max" => policy.open_max = duration(errors, "5m"),
        "half_open" => policy.half_open = int(errors, "1", MAX_HALF_OPEN, "probes").map(narrow),
        "half_open_lease" => policy.half_open_lease = duration(errors, "30s"),
        "recovery" => policy.recovery = errors.ok(recovery_arg(value)),
        "max_concurrent" => {
            policy.max_concurrent =
                int(errors, "10", MAX_CONCURRENT, "calls in flight").map(narrow);
        }
        "shared" => {
            policy.shared = match value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Bool(b),
                    ..
                }) => Some(Spanned {
                    value: b.value,
                    span: b.span,
                }),
                _ => errors.ok(Err(syn::Error::new_spanned(
                    value,
                    "`shared` takes `true` or `false`, like `shared = false`",
                ))),
            };
        }
        // Every other name was reported as unknown or read by `read_arg`.
        _ => {}
    }
}

/// Reads one attempt argument.
fn read_attempt_arg(errors: &mut Errors, attempts: &mut AttemptArgs, name: &Ident, value: &Expr) {
    match name.to_string().as_str() {
        "timeout" => attempts.timeout = errors.ok(duration_arg(name, value, "800ms", MS_TO_DAY)),
        "retry" => {
            attempts.retry = errors
                .ok(int_in_range(
                    name,
                    value,
                    "3",
                    1,
                    MAX_RETRY,
                    "attempts in total, the first one included",
                ))
                .map(narrow);
        }
        "backoff" => attempts.backoff = errors.ok(duration_arg(name, value, "100ms", BACKOFF)),
        "deadline" => attempts.deadline = errors.ok(duration_arg(name, value, "2s", MS_TO_DAY)),
        _ => {}
    }
}
