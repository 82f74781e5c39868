//! The arguments of `#[circuit_breaker(...)]`: parsed as `name = value` pairs, then checked one by
//! one, each value keeping its span so an error points at the token that caused it. Checks that
//! involve two arguments (`slow_rate` needs `slow`, `open_max` is at least `open_for`, `backoff`
//! needs `retry`, …) run once every argument is read.

use std::collections::{HashMap, HashSet};

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path, Token};

use crate::duration::{self, DurationError, UNIT_LIST};
use crate::errors::Errors;

/// Every argument name the attribute accepts, in the order the error messages list them.
pub(crate) const NAMES: [&str; 24] = [
    "key",
    "failure",
    "fallback",
    "registry",
    "crate",
    "policy",
    "window",
    "min_calls",
    "failure_rate",
    "consecutive",
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

/// The default count window of `fusebox::Policy`.
pub(crate) const DEFAULT_WINDOW: u64 = 100;
/// The default `open_for` of `fusebox::Policy`, in nanoseconds.
pub(crate) const DEFAULT_OPEN_FOR_NANOS: u64 = 10_000_000_000;
/// The default `open_max` of `fusebox::Policy`, in nanoseconds.
pub(crate) const DEFAULT_OPEN_MAX_NANOS: u64 = 5 * 60 * 1_000_000_000;
/// The largest count window (`fusebox::MAX_WINDOW`), also the largest `consecutive` and
/// `min_passes`.
pub(crate) const MAX_WINDOW: u64 = 1_000_000;
/// The most half-open probes (`fusebox::MAX_HALF_OPEN`).
pub(crate) const MAX_HALF_OPEN: u64 = 127;
/// The most phases of progressive recovery (`fusebox::MAX_PHASES`).
pub(crate) const MAX_PHASES: u64 = 100;
/// The largest `open_backoff` factor (`fusebox::MAX_OPEN_BACKOFF`).
pub(crate) const MAX_OPEN_BACKOFF: f64 = 100.0;
/// The largest `max_concurrent`.
pub(crate) const MAX_CONCURRENT: u64 = 1_000_000;
/// The most attempts `retry` allows.
pub(crate) const MAX_RETRY: u64 = 100;

/// The allowed durations of one argument, in nanoseconds, and how messages spell the bounds.
#[derive(Clone, Copy)]
struct DurationRange {
    min: u128,
    max: u128,
    text: &'static str,
}

/// `open_for`, `slow`, `open_max`, `half_open_lease`, `timeout`, `deadline`
/// (`fusebox::MIN_OPEN_FOR..=fusebox::MAX_OPEN_FOR`).
const MS_TO_DAY: DurationRange = DurationRange {
    min: 1_000_000,
    max: 24 * 60 * 60 * 1_000_000_000,
    text: "from \"1ms\" to \"24h\"",
};

/// A time window (`fusebox::MIN_TIME_WINDOW..=fusebox::MAX_TIME_WINDOW`).
const TIME_WINDOW: DurationRange = DurationRange {
    min: 10_000_000,
    max: 60 * 60 * 1_000_000_000,
    text: "from \"10ms\" to \"1h\" for a time window",
};

/// The base delay of `backoff` (the longest single delay is `fusebox::MAX_BACKOFF`).
const BACKOFF: DurationRange = DurationRange {
    min: 1_000_000,
    max: 30 * 1_000_000_000,
    text: "from \"1ms\" to \"30s\"",
};

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

/// Parses and checks the attribute's arguments, reporting every problem at once.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    let raw = parse_raw.parse2(tokens)?;
    check(raw)
}

/// The attempt arguments written in `tokens`, whatever their values: used to check the function
/// even when some argument is invalid.
pub(crate) fn attempt_names(tokens: TokenStream) -> Vec<Ident> {
    parse_raw
        .parse2(tokens)
        .map(|raw| {
            raw.into_iter()
                .map(|arg| arg.name)
                .filter(|name| ATTEMPT_NAMES.contains(&name.to_string().as_str()))
                .collect()
        })
        .unwrap_or_default()
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
    // Every argument written, with the span of its name.
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut key = None;
    let mut failure = None;
    let mut fallback = None;
    let mut registry = None;
    let mut krate = None;
    let mut policy = PolicyArgs::default();
    let mut attempts = AttemptArgs::default();
    let mut min_calls_raw = None;

    for RawArg { name, value } in raw {
        let text = name.to_string();
        if !NAMES.contains(&text.as_str()) {
            errors.push(unknown_argument(&name));
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
            attempts.written.push(name.clone());
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
            "window" => policy.window = errors.ok(window_arg(&name, &value)),
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
            "consecutive" => {
                policy.consecutive = errors
                    .ok(int_in_range(
                        &name,
                        &value,
                        "5",
                        1,
                        MAX_WINDOW,
                        "counted failures in a row",
                    ))
                    .map(narrow)
            }
            "slow" => policy.slow = errors.ok(duration_arg(&name, &value, "2s", MS_TO_DAY)),
            "slow_rate" => {
                policy.slow_rate = errors
                    .ok(int_in_range(&name, &value, "80", 1, 100, "percent"))
                    .map(narrow)
            }
            "open_for" => {
                policy.open_for = errors.ok(duration_arg(&name, &value, "10s", MS_TO_DAY))
            }
            "open_backoff" => policy.open_backoff = errors.ok(open_backoff_arg(&name, &value)),
            "open_max" => {
                policy.open_max = errors.ok(duration_arg(&name, &value, "5m", MS_TO_DAY))
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
            "half_open_lease" => {
                policy.half_open_lease = errors.ok(duration_arg(&name, &value, "30s", MS_TO_DAY))
            }
            "recovery" => policy.recovery = errors.ok(recovery_arg(&value)),
            "max_concurrent" => {
                policy.max_concurrent = errors
                    .ok(int_in_range(
                        &name,
                        &value,
                        "10",
                        1,
                        MAX_CONCURRENT,
                        "calls in flight",
                    ))
                    .map(narrow)
            }
            "shared" => {
                policy.shared = match literal(&value) {
                    Some(Lit::Bool(b)) => Some(Spanned {
                        value: b.value,
                        span: b.span,
                    }),
                    _ => errors.ok(Err(syn::Error::new_spanned(
                        &value,
                        "`shared` takes `true` or `false`, like `shared = false`",
                    ))),
                }
            }
            "timeout" => {
                attempts.timeout = errors.ok(duration_arg(&name, &value, "800ms", MS_TO_DAY))
            }
            "retry" => {
                attempts.retry = errors
                    .ok(int_in_range(
                        &name,
                        &value,
                        "3",
                        1,
                        MAX_RETRY,
                        "attempts in total, the first one included",
                    ))
                    .map(narrow)
            }
            "backoff" => {
                attempts.backoff = errors.ok(duration_arg(&name, &value, "100ms", BACKOFF))
            }
            "deadline" => {
                attempts.deadline = errors.ok(duration_arg(&name, &value, "2s", MS_TO_DAY))
            }
            // Every other name was reported as unknown above.
            _ => {}
        }
    }

    check_min_calls(&mut errors, &policy, min_calls_raw);
    policy.min_calls = min_calls_raw.map(narrow);
    check_policy(&mut errors, &policy, &seen);
    check_attempts(&mut errors, &attempts, &seen);

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
        fallback,
        registry,
        krate,
        policy,
        attempts,
    })
}

/// `min_calls` is at most a count window (a time window has no upper bound).
fn check_min_calls(errors: &mut Errors, policy: &PolicyArgs, min_calls: Option<Spanned<u64>>) {
    let Some(min_calls) = min_calls else { return };
    let (window, which) = match (policy.window, &policy.base) {
        (Some(WindowArg::Count(window)), _) => (Some(u64::from(window.value)), ""),
        (Some(WindowArg::Time(_)), _) => (None, ""),
        (None, None) => (Some(DEFAULT_WINDOW), ", the default"),
        // The window of a `policy = CONST` is only known when the program runs.
        (None, Some(_)) => (None, ""),
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

/// Checks between policy arguments. With `policy = CONST` the base's fields are only known when
/// the program runs, so a check that needs one of them is left to the runtime's validation.
fn check_policy(errors: &mut Errors, policy: &PolicyArgs, seen: &HashMap<String, Span>) {
    let based = policy.base.is_some();
    if let (Some(&span), false, false) = (seen.get("slow_rate"), seen.contains_key("slow"), based) {
        errors.push(syn::Error::new(
            span,
            "`slow_rate` has no effect without `slow`; add `slow = \"2s\"` to say which calls \
             are slow, or remove `slow_rate`",
        ));
    }
    // The wait the circuit starts with: written, the default, or unknown (the base's).
    let open_for = match (policy.open_for, based) {
        (Some(open_for), _) => Some((open_for.value, "")),
        (None, false) => Some((DEFAULT_OPEN_FOR_NANOS, ", the default")),
        (None, true) => None,
    };
    if let (Some(open_max), Some((open_for, which))) = (policy.open_max, open_for)
        && open_max.value < open_for
    {
        errors.push(syn::Error::new(
            open_max.span,
            format!(
                "`open_max` ({}) is shorter than `open_for` ({}{which}); `open_max` caps the \
                 wait that `open_backoff` grows from `open_for`: raise `open_max` or lower \
                 `open_for`",
                duration::show(open_max.value),
                duration::show(open_for),
            ),
        ));
    }
    if let (Some(backoff), None, Some((open_for, _))) =
        (policy.open_backoff, policy.open_max, open_for)
        && open_for > DEFAULT_OPEN_MAX_NANOS
    {
        errors.push(syn::Error::new(
            backoff.span,
            format!(
                "`open_backoff` grows the wait up to `open_max` (\"5m\", the default), which is \
                 shorter than `open_for` ({}); add `open_max` of at least `open_for`",
                duration::show(open_for),
            ),
        ));
    }
    if let (Some(&span), Some(RecoveryArg::Probes), true) =
        (seen.get("recovery"), policy.recovery, based)
    {
        errors.push(syn::Error::new(
            span,
            "`recovery = probes` cannot override the recovery of `policy = …`; build the \
             `const` policy without `.progressive(…)` instead",
        ));
    }
}

/// `backoff` and `deadline` only act between attempts, so they need `retry` above 1.
fn check_attempts(errors: &mut Errors, attempts: &AttemptArgs, seen: &HashMap<String, Span>) {
    let retried = match attempts.retry {
        Some(retry) => retry.value > 1,
        // `retry` was written but refused: already reported.
        None => seen.contains_key("retry"),
    };
    if retried {
        return;
    }
    let without = match attempts.retry {
        Some(_) => "with `retry = 1`",
        None => "without `retry`",
    };
    if let Some(&span) = seen.get("backoff") {
        errors.push(syn::Error::new(
            span,
            format!(
                "`backoff` has no effect {without}: it is the wait between attempts; add \
                 `retry = 3` (attempts in total) or remove `backoff`"
            ),
        ));
    }
    if let Some(&span) = seen.get("deadline") {
        errors.push(syn::Error::new(
            span,
            format!(
                "`deadline` has no effect {without}: it is the budget checked before each \
                 retry; add `retry = 3` (attempts in total), or bound the single attempt with \
                 `timeout` instead"
            ),
        ));
    }
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

/// `window = 100` (a count window) or `window = "30s"` (a time window).
fn window_arg(name: &Ident, value: &Expr) -> syn::Result<WindowArg> {
    match literal(value) {
        Some(Lit::Int(_)) => {
            let calls = int_in_range(name, value, "100", 1, MAX_WINDOW, "calls")?;
            Ok(WindowArg::Count(narrow(calls)))
        }
        Some(Lit::Str(_)) => Ok(WindowArg::Time(duration_arg(
            name,
            value,
            "30s",
            TIME_WINDOW,
        )?)),
        _ => Err(syn::Error::new_spanned(
            value,
            "`window` takes an integer literal for a count window, like `window = 100`, or a \
             duration string for a time window, like `window = \"30s\"`; to share settings \
             between functions, use a `const` `fusebox::Policy` with `policy = NAME`",
        )),
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

fn duration_arg(
    name: &Ident,
    value: &Expr,
    example: &str,
    range: DurationRange,
) -> syn::Result<Spanned<u64>> {
    let Some(Lit::Str(text)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes a duration string literal like `{name} = \"{example}\"`"),
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
                     units {UNIT_LIST}, like `{name} = \"{example}\"` or `{name} = \"250ms\"`"
                ),
            ));
        }
    };
    match nanos.filter(|nanos| (range.min..=range.max).contains(nanos)) {
        Some(nanos) => Ok(Spanned {
            value: u64::try_from(nanos).unwrap_or(u64::MAX),
            span: text.span(),
        }),
        None => Err(syn::Error::new(
            text.span(),
            format!(
                "`{name} = \"{written}\"` is out of range; use a duration {}",
                range.text
            ),
        )),
    }
}

/// `open_backoff = 2` or `open_backoff = 2.5`: a factor in 1..=100.
fn open_backoff_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<f64>> {
    let (factor, digits, span) = match literal(value) {
        Some(Lit::Int(int)) => (
            int.base10_parse::<u64>().map(|n| n as f64).ok(),
            int.base10_digits().to_owned(),
            int.span(),
        ),
        Some(Lit::Float(float)) => (
            float.base10_parse::<f64>().ok(),
            float.base10_digits().to_owned(),
            float.span(),
        ),
        _ => {
            return Err(syn::Error::new_spanned(
                value,
                format!(
                    "`{name}` takes a number literal like `{name} = 2` or `{name} = 1.5`: the \
                     factor the open wait grows by after each failed recovery"
                ),
            ));
        }
    };
    match factor {
        Some(factor) if factor < 1.0 => Err(syn::Error::new(
            span,
            format!(
                "`{name} = {digits}` is below 1: the open wait would shrink after each failed \
                 recovery; use a factor from 1 (no backoff) to 100, like `{name} = 2`"
            ),
        )),
        Some(factor) if factor <= MAX_OPEN_BACKOFF => Ok(Spanned {
            value: factor,
            span,
        }),
        _ => Err(syn::Error::new(
            span,
            format!(
                "`{name} = {digits}` is out of range; use a factor from 1 (no backoff) to 100, \
                 and cap the wait with `open_max`"
            ),
        )),
    }
}

/// `recovery = probes` or `recovery = progressive(phases = 3, min_passes = 5)`.
fn recovery_arg(value: &Expr) -> syn::Result<RecoveryArg> {
    const SHAPE: &str = "`recovery` takes `probes` (the default: `half_open` probes) or \
                         `progressive(phases = 3, min_passes = 5)`";
    let (callee, args) = match value {
        Expr::Path(path) if path.path.is_ident("probes") && path.attrs.is_empty() => {
            return Ok(RecoveryArg::Probes);
        }
        Expr::Path(path) if path.path.is_ident("progressive") => {
            return Err(syn::Error::new_spanned(
                value,
                "`progressive` needs its settings: write \
                 `recovery = progressive(phases = 3, min_passes = 5)`",
            ));
        }
        Expr::Call(call) if call.attrs.is_empty() => match &*call.func {
            Expr::Path(path) if path.path.is_ident("progressive") => (path, &call.args),
            _ => return Err(syn::Error::new_spanned(&call.func, SHAPE)),
        },
        _ => return Err(syn::Error::new_spanned(value, SHAPE)),
    };
    let mut errors = Errors::default();
    let mut phases = None;
    let mut min_passes = None;
    let mut given = HashSet::new();
    let mut malformed = false;
    for arg in args {
        let Expr::Assign(assign) = arg else {
            errors.push(syn::Error::new_spanned(
                arg,
                "expected `phases = N` or `min_passes = N`, like \
                 `progressive(phases = 3, min_passes = 5)`",
            ));
            malformed = true;
            continue;
        };
        let name = match &*assign.left {
            Expr::Path(path) if path.attrs.is_empty() => path.path.get_ident().cloned(),
            _ => None,
        };
        let Some(name) = name else {
            errors.push(syn::Error::new_spanned(
                &assign.left,
                "expected `phases = N` or `min_passes = N`",
            ));
            malformed = true;
            continue;
        };
        let text = name.to_string();
        if !given.insert(text.clone()) {
            errors.push(syn::Error::new(
                name.span(),
                format!("duplicate `{name}` in `progressive(…)`; remove one"),
            ));
            continue;
        }
        match text.as_str() {
            "phases" => {
                phases = errors
                    .ok(int_in_range(
                        &name,
                        &assign.right,
                        "3",
                        1,
                        MAX_PHASES,
                        "phases, the last one admits all traffic",
                    ))
                    .map(narrow)
            }
            "min_passes" => {
                min_passes = errors
                    .ok(int_in_range(
                        &name,
                        &assign.right,
                        "5",
                        1,
                        MAX_WINDOW,
                        "calls a phase records before it is judged",
                    ))
                    .map(narrow)
            }
            _ => errors.push(syn::Error::new(
                name.span(),
                format!(
                    "unknown setting `{name}` of `progressive`; expected `phases` or `min_passes`"
                ),
            )),
        }
    }
    for (missing, example) in [("phases", "3"), ("min_passes", "5")] {
        if !malformed && !given.contains(missing) {
            errors.push(syn::Error::new_spanned(
                callee,
                format!("`progressive` needs `{missing}`; add `{missing} = {example}`"),
            ));
        }
    }
    errors.finish()?;
    match (phases, min_passes) {
        (Some(phases), Some(min_passes)) => Ok(RecoveryArg::Progressive { phases, min_passes }),
        // Both were given and checked: `finish` reported any refusal.
        _ => Err(syn::Error::new_spanned(value, SHAPE)),
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
        assert!(matches!(policy.window, Some(WindowArg::Count(w)) if w.value == 20));
        assert_eq!(policy.min_calls.map(|w| w.value), Some(5));
        assert_eq!(policy.failure_rate.map(|w| w.value), Some(40));
        assert_eq!(policy.open_for.map(|w| w.value), Some(30_000_000_000));
        assert_eq!(policy.half_open.map(|w| w.value), Some(3));
    }

    #[test]
    fn every_new_argument() {
        let parsed = args(quote!(
            key = "k",
            window = "30s",
            min_calls = 500,
            consecutive = 5,
            slow = "2s",
            slow_rate = 80,
            open_backoff = 2.5,
            open_max = "5m",
            half_open_lease = "30s",
            recovery = progressive(phases = 3, min_passes = 5),
            max_concurrent = 10,
            timeout = "800ms",
            retry = 3,
            backoff = "100ms",
            deadline = "2s",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let policy = &parsed.policy;
        assert!(matches!(policy.window, Some(WindowArg::Time(w)) if w.value == 30_000_000_000));
        assert_eq!(policy.min_calls.map(|w| w.value), Some(500));
        assert_eq!(policy.consecutive.map(|w| w.value), Some(5));
        assert_eq!(policy.slow.map(|w| w.value), Some(2_000_000_000));
        assert_eq!(policy.slow_rate.map(|w| w.value), Some(80));
        assert_eq!(policy.open_backoff.map(|w| w.value), Some(2.5));
        assert_eq!(policy.open_max.map(|w| w.value), Some(300_000_000_000));
        assert_eq!(
            policy.half_open_lease.map(|w| w.value),
            Some(30_000_000_000)
        );
        assert!(matches!(
            policy.recovery,
            Some(RecoveryArg::Progressive { phases, min_passes })
                if phases.value == 3 && min_passes.value == 5
        ));
        assert_eq!(policy.max_concurrent.map(|w| w.value), Some(10));
        let attempts = &parsed.attempts;
        assert!(attempts.any());
        assert_eq!(attempts.timeout.map(|w| w.value), Some(800_000_000));
        assert_eq!(attempts.retry.map(|w| w.value), Some(3));
        assert_eq!(attempts.backoff.map(|w| w.value), Some(100_000_000));
        assert_eq!(attempts.deadline.map(|w| w.value), Some(2_000_000_000));
        assert_eq!(attempts.written.len(), 4);
        assert!(matches!(
            args(quote!(key = "k", recovery = probes, open_backoff = 2))
                .unwrap()
                .policy,
            PolicyArgs {
                recovery: Some(RecoveryArg::Probes),
                open_backoff: Some(Spanned { value: 2.0, .. }),
                ..
            }
        ));
        assert!(
            !args(quote!(key = "k", max_concurrent = 1))
                .unwrap()
                .attempts
                .any()
        );
        assert_eq!(
            attempt_names(quote!(key = "k", retry = 0, timeout = x, window = 3))
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
            ["retry", "timeout"]
        );
    }

    /// The single error of `tokens`, which must start with `expected`.
    fn one_error(tokens: TokenStream, expected: &str) {
        let found = messages(tokens.clone());
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{tokens}: {found:?}"
        );
    }

    #[test]
    fn new_ranges() {
        for (tokens, expected) in [
            (
                quote!(key = "k", window = "0s"),
                "`window = \"0s\"` is out of range; use a duration from \"10ms\" to \"1h\" for a time window",
            ),
            (
                quote!(key = "k", window = "2h"),
                "`window = \"2h\"` is out of range",
            ),
            (
                quote!(key = "k", window = 2.5),
                "`window` takes an integer literal for a count window",
            ),
            (
                quote!(key = "k", slow = "0ms"),
                "`slow = \"0ms\"` is out of range",
            ),
            (
                quote!(key = "k", slow = "2s", slow_rate = 0),
                "`slow_rate = 0` is out of range",
            ),
            (
                quote!(key = "k", slow = "2s", slow_rate = 101),
                "`slow_rate = 101`",
            ),
            (
                quote!(key = "k", consecutive = 0),
                "`consecutive = 0` is out of range",
            ),
            (
                quote!(key = "k", consecutive = 1000001),
                "`consecutive = 1000001`",
            ),
            (
                quote!(key = "k", open_backoff = 0.5),
                "`open_backoff = 0.5` is below 1",
            ),
            (
                quote!(key = "k", open_backoff = 0),
                "`open_backoff = 0` is below 1",
            ),
            (
                quote!(key = "k", open_backoff = 101),
                "`open_backoff = 101` is out of range",
            ),
            (
                quote!(key = "k", open_backoff = "2"),
                "`open_backoff` takes a number literal",
            ),
            (
                quote!(key = "k", open_max = "25h"),
                "`open_max = \"25h\"` is out of range",
            ),
            (
                quote!(key = "k", half_open_lease = "0s"),
                "`half_open_lease = \"0s\"`",
            ),
            (
                quote!(key = "k", max_concurrent = 0),
                "`max_concurrent = 0` is out of range",
            ),
            (
                quote!(key = "k", timeout = "0s"),
                "`timeout = \"0s\"` is out of range",
            ),
            (
                quote!(key = "k", timeout = 800),
                "`timeout` takes a duration string literal",
            ),
            (
                quote!(key = "k", retry = 0),
                "`retry = 0` is out of range; use a value in 1..=100",
            ),
            (quote!(key = "k", retry = 101), "`retry = 101`"),
            (
                quote!(key = "k", retry = 3, backoff = "31s"),
                "`backoff = \"31s\"` is out of range",
            ),
            (
                quote!(key = "k", retry = 3, deadline = "0s"),
                "`deadline = \"0s\"`",
            ),
        ] {
            one_error(tokens, expected);
        }
        for ok in [
            quote!(key = "k", window = "10ms"),
            quote!(key = "k", window = "1h", min_calls = 5000),
            quote!(key = "k", open_backoff = 1),
            quote!(key = "k", open_backoff = 100.0),
            quote!(key = "k", open_for = "1s", open_max = "1s"),
            quote!(key = "k", retry = 1),
            quote!(key = "k", timeout = "1ms"),
            quote!(key = "k", retry = 100, backoff = "30s", deadline = "24h"),
            quote!(key = "k", slow_rate = 50, policy = SLOW),
            quote!(key = "k", open_max = "1s", policy = BASE),
        ] {
            assert!(args(ok.clone()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn conflicts() {
        for (tokens, expected) in [
            (
                quote!(key = "k", slow_rate = 80),
                "`slow_rate` has no effect without `slow`; add `slow = \"2s\"`",
            ),
            (
                quote!(key = "k", open_max = "5s"),
                "`open_max` (\"5s\") is shorter than `open_for` (\"10s\", the default)",
            ),
            (
                quote!(key = "k", open_for = "2m", open_max = "90s"),
                "`open_max` (\"90s\") is shorter than `open_for` (\"2m\")",
            ),
            (
                quote!(key = "k", open_for = "10m", open_backoff = 2),
                "`open_backoff` grows the wait up to `open_max` (\"5m\", the default), which is \
                 shorter than `open_for` (\"10m\")",
            ),
            (
                quote!(key = "k", backoff = "100ms"),
                "`backoff` has no effect without `retry`",
            ),
            (
                quote!(key = "k", retry = 1, backoff = "100ms"),
                "`backoff` has no effect with `retry = 1`",
            ),
            (
                quote!(key = "k", timeout = "1s", deadline = "2s"),
                "`deadline` has no effect without `retry`",
            ),
            (
                quote!(key = "k", policy = BASE, recovery = probes),
                "`recovery = probes` cannot override",
            ),
            (
                quote!(key = "k", window = 10, min_calls = 11),
                "`min_calls` (11)",
            ),
        ] {
            one_error(tokens, expected);
        }
        // A time window sets no bound on `min_calls`; a refused `retry` is not reported twice.
        assert!(args(quote!(key = "k", window = "1s", min_calls = 1000)).is_ok());
        assert_eq!(
            messages(quote!(key = "k", retry = 0, backoff = "1s")).len(),
            1
        );
    }

    #[test]
    fn recovery_shapes() {
        for (tokens, expected) in [
            (
                quote!(
                    key = "k",
                    recovery = progressive(phases = 0, min_passes = 5)
                ),
                "`phases = 0` is out of range; use a value in 1..=100",
            ),
            (
                quote!(
                    key = "k",
                    recovery = progressive(phases = 101, min_passes = 5)
                ),
                "`phases = 101` is out of range",
            ),
            (
                quote!(
                    key = "k",
                    recovery = progressive(phases = 3, min_passes = 0)
                ),
                "`min_passes = 0` is out of range",
            ),
            (
                quote!(key = "k", recovery = progressive(phases = 3)),
                "`progressive` needs `min_passes`; add `min_passes = 5`",
            ),
            (
                quote!(
                    key = "k",
                    recovery = progressive(phases = 3, min_passes = 5, phase = 2)
                ),
                "unknown setting `phase` of `progressive`; expected `phases` or `min_passes`",
            ),
            (
                quote!(
                    key = "k",
                    recovery = progressive(phases = 3, phases = 4, min_passes = 5)
                ),
                "duplicate `phases`",
            ),
            (
                quote!(key = "k", recovery = progressive(3)),
                "expected `phases = N` or `min_passes = N`",
            ),
            (
                quote!(key = "k", recovery = progressive),
                "`progressive` needs its settings",
            ),
            (
                quote!(key = "k", recovery = gradual(phases = 3)),
                "`recovery` takes `probes`",
            ),
            (
                quote!(key = "k", recovery = "probes"),
                "`recovery` takes `probes`",
            ),
        ] {
            one_error(tokens, expected);
        }
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
        assert!(found[1].starts_with("`window` takes an integer literal for a count window"));
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
        assert_eq!(closest("retries"), None);
        assert_eq!(closest("rety"), Some("retry"));
        assert_eq!(closest("consecutiv"), Some("consecutive"));
        assert_eq!(closest("max_concurent"), Some("max_concurrent"));
        assert_eq!(closest("slow_rat"), Some("slow_rate"));
    }
}
