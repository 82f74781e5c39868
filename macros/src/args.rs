//! The arguments of `#[circuit_breaker(...)]`: parsed once as `name = value` pairs, then checked
//! one by one, each value keeping its span so an error points at the token that caused it.
//!
//! This file holds the argument table, the checked types and the reading loop; the value parsers
//! are in `args/values.rs` (`failure = [...]` in `args/failure.rs`), their defaults and bounds in
//! `args/bounds.rs`, the checks between arguments (`slow_rate` needs `slow`, `open_max` is at
//! least `open_for`, `backoff` needs `retry`, …) in `args/rules.rs`, the suggestions for
//! misspelled names in `args/suggest.rs`. The runtime's own `Policy::validate` then judges the
//! policy the arguments build (`validate.rs`, called by the pipeline in `lib.rs`).

mod bounds;
mod failure;
mod hedge;
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

use fusebox_policy::{Others, RetryBudget};

use crate::errors::Errors;
use bounds::{BACKOFF, MAX_CALLS, MAX_HALF_OPEN, MAX_RETRY, MAX_WINDOW, MS_TO_DAY};
use failure::failure_arg;
pub(crate) use hedge::HedgeArg;
use values::{duration_arg, int_in_range, key_arg, narrow, path_arg};

/// Makes [`PolicyArgs`], [`KNOB_NAMES`] and `read_knob` from the attribute's arguments of the
/// knob table (`fusebox_policy::with_knobs!(@arguments …)`: the rows that have an `attr` column),
/// in the table's order (the order the expansion calls their setters). An argument's `name(type =
/// reader(arguments) => setter(s))` gives the checked value's type (a [`Kind`](crate::setters::Kind)), the function of
/// `args/values.rs` that checks the written value (called with the argument's name, its value
/// and the row's arguments), and the `Policy` setter(s) the value is passed to (`window` has two:
/// the count and the time window). `setters.rs` makes [`Setter`](crate::setters::Setter) from
/// the same rows.
macro_rules! policy_args {
    ($($name:ident($ty:ty = $read:ident($($arg:expr),*) => $($set:ident),+);)*) => {
        /// The policy arguments; `None` keeps the base policy's value.
        #[derive(Default)]
        pub(crate) struct PolicyArgs {
            /// `policy = CONST`: the base the other knobs override.
            pub(crate) base: Option<Path>,
            $(
                #[doc = concat!("`", stringify!($name), " = …`.")]
                pub(crate) $name: Option<$ty>,
            )*
        }

        /// The names of the knob table's rows that are arguments, in its order.
        pub(crate) const KNOB_NAMES: &[&str] = &[$(stringify!($name)),*];

        /// Reads the knob `name` into `policy`; false when `name` is no knob.
        fn read_knob(errors: &mut Errors, policy: &mut PolicyArgs, name: &Ident, value: &Expr) -> bool {
            $(if name == stringify!($name) {
                policy.$name = errors.ok(values::$read(name, value $(, $arg)*));
                return true;
            })*
            false
        }
    };
}
fusebox_policy::with_knobs!(@arguments policy_args);

/// The arguments that are neither knobs nor attempts.
const OTHER_NAMES: [&str; 8] = [
    "key",
    "failure",
    "failure_if",
    "fallback",
    "registry",
    "crate",
    "policy",
    "chaos",
];

/// The arguments that bound or repeat attempts; they need an `async fn`.
pub(crate) const ATTEMPT_NAMES: [&str; 6] = [
    "timeout",
    "retry",
    "backoff",
    "deadline",
    "hedge",
    "hedge_max",
];

/// Every argument name the attribute accepts, in the order the error messages list them.
pub(crate) const NAMES: &[&str] = &concat::<
    { OTHER_NAMES.len() + KNOB_NAMES.len() + ATTEMPT_NAMES.len() },
>([&OTHER_NAMES, KNOB_NAMES, &ATTEMPT_NAMES]);

/// `lists`, one after the other; `N` is their total length (checked when the constant is built).
const fn concat<const N: usize>(lists: [&[&'static str]; 3]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut at = 0;
    let mut list = 0;
    while list < lists.len() {
        let mut i = 0;
        while i < lists[list].len() {
            out[at] = lists[list][i];
            at += 1;
            i += 1;
        }
        list += 1;
    }
    assert!(at == N, "`N` is not the lists' total length");
    out
}

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

/// `open_for = ...`.
#[derive(Clone)]
pub(crate) enum OpenForArg {
    /// `open_for = "10s"`: a fixed wait, in nanoseconds.
    Wait(Spanned<u64>),
    /// `open_for = path::to::function`: a `fn(&fusebox::OpenContext) -> Duration`.
    Function(Path),
}

/// `max_concurrent = ...`.
#[derive(Clone, Copy)]
pub(crate) enum ConcurrencyArg {
    /// `max_concurrent = 10`: a fixed limit.
    Fixed(Spanned<u32>),
    /// `max_concurrent = "adaptive(2..200)"`: an adaptive limit's floor and ceiling, located at
    /// the string.
    Adaptive(Spanned<(u32, u32)>),
}

/// `quorum = ...`.
#[derive(Clone, Copy)]
pub(crate) enum QuorumArg {
    /// `quorum = 2`: a number of replicas.
    Replicas(Spanned<u32>),
    /// `quorum = "50%"`: a share of the replicas, in percent.
    Share(Spanned<u8>),
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
    /// `hedge = "50ms"` or `hedge = "p95"`.
    pub(crate) hedge: Option<Spanned<HedgeArg>>,
    /// `hedge_max = N`: attempts in flight at most.
    pub(crate) hedge_max: Option<Spanned<u32>>,
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
    /// `timeout`, `retry`, `backoff`, `deadline`, `hedge`, `hedge_max`.
    pub(crate) attempts: AttemptArgs,
    /// `chaos = true`: the body runs behind `fusebox::chaos`'s injection point (with the
    /// runtime's feature `chaos`; without it the argument changes nothing).
    pub(crate) chaos: bool,
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
        // `r#key` is `key`: a raw identifier names the same argument.
        let name = input.call(Ident::parse_any)?.unraw();
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
    chaos: bool,
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
        policy,
        attempts,
        chaos,
    } = reading;
    rules::check_min_calls(&mut errors, &policy);
    rules::check_all(&mut errors, &policy, &attempts, &seen);

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
        chaos,
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
        "chaos" => {
            reading.chaos = errors
                .ok(values::bool_arg(name, value, "chaos = true"))
                .unwrap_or(false)
        }
        "timeout" | "retry" | "backoff" | "deadline" | "hedge" | "hedge_max" => {
            read_attempt_arg(errors, &mut reading.attempts, name, value);
        }
        _ => {
            // Every name was checked against `NAMES`: what is left is a knob.
            read_knob(errors, &mut reading.policy, name, value);
        }
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
        "hedge" => attempts.hedge = errors.ok(hedge::hedge_arg(name, value)),
        "hedge_max" => attempts.hedge_max = errors.ok(hedge::hedge_max_arg(name, value)),
        _ => {}
    }
}
