//! Parsing of one argument's value: integers and durations within their ranges (the bounds are in
//! `args/bounds.rs`), the key, paths, `window`, `open_backoff` and
//! `recovery = progressive(...)`.

use std::collections::HashSet;

use syn::{Expr, ExprLit, Ident, Lit, Path};

use fusebox_policy::{
    Concurrency, DURATION_UNITS, DurationError, Others, Quorum, RETRY_BUDGET_FORM, RetryBudget,
    limits, parse_duration,
};

use super::bounds::{
    DurationRange, MAX_CONCURRENT, MAX_OPEN_BACKOFF, MAX_PHASES, MAX_THROTTLE, MAX_WINDOW,
    TIME_WINDOW,
};
use super::{ConcurrencyArg, Key, OpenForArg, QuorumArg, RecoveryArg, Spanned, WindowArg};
use crate::errors::Errors;

/// The suffixes an integer literal may carry (`10u32`); any other suffix (`1f64`) is refused.
const INT_SUFFIXES: [&str; 12] = [
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
];

/// Converts a value already checked to fit.
pub(super) fn narrow<T: TryFrom<u64> + Default>(value: Spanned<u64>) -> Spanned<T> {
    Spanned {
        value: T::try_from(value.value).unwrap_or_default(),
        span: value.span,
    }
}

/// The literal of `value` when it is a plain literal expression.
pub(super) fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { attrs, lit }) if attrs.is_empty() => Some(lit),
        _ => None,
    }
}

pub(super) fn key_arg(value: Expr) -> syn::Result<Key> {
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

pub(super) fn path_arg(value: &Expr, message: &str) -> syn::Result<Path> {
    match value {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => Ok(path.path.clone()),
        _ => Err(syn::Error::new_spanned(value, message)),
    }
}

/// `open_for = "10s"` (a fixed wait) or `open_for = path::to::function` (an open-wait function,
/// `fn(&fusebox::OpenContext) -> Duration`, whose signature the expansion checks at the path).
pub(super) fn open_for_arg(
    name: &Ident,
    value: &Expr,
    example: &str,
    range: DurationRange,
) -> syn::Result<OpenForArg> {
    match value {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => {
            Ok(OpenForArg::Function(path.path.clone()))
        }
        Expr::Lit(_) => duration_arg(name, value, example, range).map(OpenForArg::Wait),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes a duration string literal, like `{name} = \"{example}\"`, or the \
                 path of a function `fn(&fusebox::OpenContext) -> Duration` that computes the \
                 wait, like `{name} = open_wait`"
            ),
        )),
    }
}

/// `window = 100` (a count window) or `window = "30s"` (a time window).
pub(super) fn window_arg(name: &Ident, value: &Expr) -> syn::Result<WindowArg> {
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

/// `max_concurrent = 10` (a fixed limit) or `max_concurrent = "adaptive"` /
/// `"adaptive(2..200)"` (an adaptive one, with its floor and ceiling).
pub(super) fn concurrency_arg(name: &Ident, value: &Expr) -> syn::Result<ConcurrencyArg> {
    const RANGE: &str = "the floor must be at least 1 and at most the ceiling, and the ceiling at \
                         most 1000000";
    const { assert!(MAX_CONCURRENT == 1_000_000, "update `RANGE`") };
    match literal(value) {
        // A float is refused by `int_in_range` as a count written with a fraction.
        Some(Lit::Int(_) | Lit::Float(_)) => {
            let calls = int_in_range(name, value, "10", 1, MAX_CONCURRENT, "calls in flight")?;
            Ok(ConcurrencyArg::Fixed(narrow(calls)))
        }
        Some(Lit::Str(text)) => match Concurrency::from_text(&text.value()) {
            Ok(Concurrency::Adaptive { floor, ceiling })
                if floor >= 1 && floor <= ceiling && u64::from(ceiling) <= MAX_CONCURRENT =>
            {
                Ok(ConcurrencyArg::Adaptive(Spanned {
                    value: (floor, ceiling),
                    span: text.span(),
                }))
            }
            Ok(_) => Err(syn::Error::new(
                text.span(),
                format!(
                    "`{name} = {:?}` is out of range; {RANGE}, like `{name} = \"adaptive(2..200)\"`",
                    text.value()
                ),
            )),
            Err(message) => Err(syn::Error::new(
                text.span(),
                format!("invalid `{name}`: {message}, like `{name} = 10`"),
            )),
        },
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes an integer literal for a fixed limit, like `{name} = 10`, or a \
                 string for a limit that adapts to latency, like `{name} = \"adaptive\"` or \
                 `{name} = \"adaptive(2..200)\"`; to share settings between functions, use a \
                 `const` `fusebox::Policy` with `policy = NAME`"
            ),
        )),
    }
}

pub(super) fn int_in_range(
    name: &Ident,
    value: &Expr,
    example: &str,
    min: u64,
    max: u64,
    unit: &str,
) -> syn::Result<Spanned<u64>> {
    let int = match literal(value) {
        Some(Lit::Int(int)) if int.suffix().is_empty() || INT_SUFFIXES.contains(&int.suffix()) => {
            int
        }
        // `1.0`, `1f64`, `1e3`: a count is a whole number.
        Some(Lit::Int(_) | Lit::Float(_)) => {
            return Err(syn::Error::new_spanned(
                value,
                format!(
                    "`{name}` takes an integer literal, not `{}`; write a whole number without \
                     a fraction, exponent or float suffix, like `{name} = {example}`",
                    quote::ToTokens::to_token_stream(value)
                ),
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                value,
                format!(
                    "`{name}` takes an integer literal like `{name} = {example}`; to share \
                     settings between functions, use a `const` `fusebox::Policy` with \
                     `policy = NAME`"
                ),
            ));
        }
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

pub(super) fn duration_arg(
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
    let nanos = match parse_duration(&written) {
        Ok(duration) => Some(duration.as_nanos()),
        Err(DurationError::Syntax) => {
            return Err(syn::Error::new(
                text.span(),
                format!(
                    "invalid duration \"{written}\"; write a whole number followed by a unit \
                     ({DURATION_UNITS}), like `{name} = \"{example}\"` or `{name} = \"1m 30s\"`"
                ),
            ));
        }
        Err(_) => None,
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

/// A count in `1..=max`, like `half_open = 2`; `unit` says what is counted.
pub(super) fn count_arg(
    name: &Ident,
    value: &Expr,
    example: &str,
    max: u64,
    unit: &str,
) -> syn::Result<Spanned<u32>> {
    int_in_range(name, value, example, 1, max, unit).map(narrow)
}

/// A percentage in `1..=100`, like `failure_rate = 50`.
pub(super) fn percent_arg(name: &Ident, value: &Expr, example: &str) -> syn::Result<Spanned<u8>> {
    int_in_range(name, value, example, 1, 100, "percent").map(narrow)
}

/// `true` or `false`, like `shared = false`.
pub(super) fn flag_arg(name: &Ident, value: &Expr, example: &str) -> syn::Result<Spanned<bool>> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(Spanned {
            value: b.value,
            span: b.span,
        }),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes `true` or `false`, like `{name} = {example}`"),
        )),
    }
}

/// `others = "ignore"` or `others = "success"`: what an error the classification does not
/// count does.
pub(super) fn others_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<Others>> {
    let accepted = format!(
        "write `{name} = \"ignore\"` (the default: errors `failure` does not count leave the \
         circuit as it was) or `{name} = \"success\"` (they count as successes in the window)"
    );
    match literal(value) {
        Some(Lit::Str(text)) => match Others::from_name(&text.value()) {
            Some(others) => Ok(Spanned {
                value: others,
                span: text.span(),
            }),
            None => Err(syn::Error::new(
                text.span(),
                format!("unknown `{name}` value {:?}; {accepted}", text.value()),
            )),
        },
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes a string; {accepted}"),
        )),
    }
}

/// `group = "search"`: the name of the group the key is a member of. Its characters are
/// checked by the policy's validation (at the same token); here, that it is a string.
pub(super) fn group_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<&'static str>> {
    match literal(value) {
        // A compile-time value of the attribute: leaked once per expansion, like the tokens.
        Some(Lit::Str(text)) => Ok(Spanned {
            value: Box::leak(text.value().into_boxed_str()),
            span: text.span(),
        }),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes the group's name as a string, like `{name} = \"search\"` \
                 (with a per-member key such as `key = host`)"
            ),
        )),
    }
}

/// `shadow = "window = 50, failure_rate = 30"` or `shadow = "tight: window = 20; loose:
/// window = 200"`: candidate policies in the policy text grammar (`fusebox_policy::text`), read
/// here as the runtime reads them; a bad one is an error at the string that names the shadow
/// and its field.
pub(super) fn shadow_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<&'static str>> {
    let example = format!("like `{name} = \"window = 50, failure_rate = 30\"`");
    let Some(Lit::Str(text)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes candidate policies as a string, {example}"),
        ));
    };
    let spec = text.value();
    if let Err(e) = fusebox_policy::text::shadows_of_text(&spec) {
        let which = e.shadow.map_or(String::new(), |s| format!(" `{s}`"));
        return Err(syn::Error::new(
            text.span(),
            format!(
                "invalid `{name}`{which}: {}; write policy fields, {example}",
                e.error
            ),
        ));
    }
    // A compile-time value of the attribute: leaked once per expansion, like the tokens.
    Ok(Spanned {
        value: Box::leak(spec.into_boxed_str()),
        span: text.span(),
    })
}

/// `retry_budget = "20%"` or `retry_budget = "20%, 10/s"`: a share of first attempts (0..=1000
/// percent) and a floor in retries per second (0..=100000; 10 when left out), not both zero.
pub(super) fn retry_budget_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<RetryBudget>> {
    let example = format!("like `{name} = \"20%\"` or `{name} = \"20%, 10/s\"`");
    match literal(value) {
        Some(Lit::Str(text)) => {
            let budget = text.value().parse::<RetryBudget>().map_err(|_| {
                syn::Error::new(
                    text.span(),
                    format!(
                        "invalid `{name}` {:?}: write {RETRY_BUDGET_FORM}",
                        text.value()
                    ),
                )
            })?;
            match budget.problem() {
                None => Ok(Spanned {
                    value: budget,
                    span: text.span(),
                }),
                Some(problem) => Err(syn::Error::new(
                    text.span(),
                    format!(
                        "invalid `{name}` {:?}: {problem}; the ratio is 0..={}% and the floor \
                         0..={}/s, {example}",
                        text.value(),
                        limits::MAX_RETRY_PERCENT,
                        limits::MAX_RETRY_FLOOR
                    ),
                )),
            }
        }
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes a string, {example}"),
        )),
    }
}

/// `quorum = 2` (replicas, 2..=1000) or `quorum = "50%"` (a share of the replicas, 1..=100 %).
pub(super) fn quorum_arg(name: &Ident, value: &Expr) -> syn::Result<QuorumArg> {
    match literal(value) {
        Some(Lit::Int(_) | Lit::Float(_)) => {
            let replicas = int_in_range(
                name,
                value,
                "2",
                2,
                u64::from(limits::MAX_QUORUM),
                "replicas; 1 is what a shared circuit does without a quorum: leave `quorum` out",
            )?;
            Ok(QuorumArg::Replicas(narrow(replicas)))
        }
        Some(Lit::Str(text)) => match text.value().parse::<Quorum>() {
            Ok(quorum @ Quorum::Share(percent)) if quorum.problem().is_none() => {
                Ok(QuorumArg::Share(Spanned {
                    value: percent,
                    span: text.span(),
                }))
            }
            _ => Err(syn::Error::new(
                text.span(),
                format!(
                    "invalid `{name}` {:?}: write a share of the replicas within 1%..=100%, like \
                     `{name} = \"50%\"`, or a number of replicas, like `{name} = 2`",
                    text.value()
                ),
            )),
        },
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes a number of replicas or a share of them: write `{name} = 2` or \
                 `{name} = \"50%\"`"
            ),
        )),
    }
}

/// An integer or float literal: its value (`None` when it does not parse), its digits as
/// written, and its span; `None` for any other expression.
fn number_literal(value: &Expr) -> Option<(Option<f64>, String, proc_macro2::Span)> {
    match literal(value)? {
        Lit::Int(int) => Some((
            int.base10_parse::<u64>().map(|n| n as f64).ok(),
            int.base10_digits().to_owned(),
            int.span(),
        )),
        Lit::Float(float) => Some((
            float.base10_parse::<f64>().ok(),
            float.base10_digits().to_owned(),
            float.span(),
        )),
        _ => None,
    }
}

/// `open_backoff = 2` or `open_backoff = 2.5`: a factor in 1..=100.
pub(super) fn factor_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<f64>> {
    let Some((factor, digits, span)) = number_literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes a number literal like `{name} = 2` or `{name} = 1.5`: the \
                 factor the open wait grows by after each failed recovery"
            ),
        ));
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

/// `throttle = 2` or `throttle = 1.5`: the factor on accepts in the rejection probability of
/// adaptive throttling, from 1 to 100.
pub(super) fn throttle_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<f64>> {
    const USE: &str = "use a factor from 1 (sheds the most) to 100, like `throttle = 2` (sheds \
                       nothing while half the calls succeed)";
    let Some((k, digits, span)) = number_literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`{name}` takes a number literal like `{name} = 2` or `{name} = 1.5`: the \
                 factor on accepts in the rejection probability \
                 `(requests - {name} * accepts) / (requests + 1)`"
            ),
        ));
    };
    match k {
        Some(k) if k < 1.0 => Err(syn::Error::new(
            span,
            format!(
                "`{name} = {digits}` is below 1: it would shed load while every call succeeds; \
                 {USE}"
            ),
        )),
        Some(k) if k <= MAX_THROTTLE => Ok(Spanned { value: k, span }),
        _ => Err(syn::Error::new(
            span,
            format!("`{name} = {digits}` is out of range; {USE}"),
        )),
    }
}

/// `recovery = probes` or `recovery = progressive(phases = 3, min_passes = 5)`.
pub(super) fn recovery_arg(_name: &Ident, value: &Expr) -> syn::Result<RecoveryArg> {
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
    let mut progressive = Progressive::default();
    for arg in args {
        progressive.read(&mut errors, arg);
    }
    for (missing, example) in [("phases", "3"), ("min_passes", "5")] {
        if !progressive.malformed && !progressive.given.contains(missing) {
            errors.push(syn::Error::new_spanned(
                callee,
                format!("`progressive` needs `{missing}`; add `{missing} = {example}`"),
            ));
        }
    }
    errors.finish()?;
    match (progressive.phases, progressive.min_passes) {
        (Some(phases), Some(min_passes)) => Ok(RecoveryArg::Progressive { phases, min_passes }),
        // Both were given and checked: `finish` reported any refusal.
        _ => Err(syn::Error::new_spanned(value, SHAPE)),
    }
}

/// The settings of `progressive(…)` read so far.
#[derive(Default)]
struct Progressive {
    phases: Option<Spanned<u32>>,
    min_passes: Option<Spanned<u32>>,
    /// The names written, each once.
    given: HashSet<String>,
    /// A setting was not `name = value`: no setting is reported missing.
    malformed: bool,
}

impl Progressive {
    /// Reads one setting, `phases = N` or `min_passes = N`, recording what is wrong with it.
    fn read(&mut self, errors: &mut Errors, arg: &Expr) {
        let Expr::Assign(assign) = arg else {
            errors.push(syn::Error::new_spanned(
                arg,
                "expected `phases = N` or `min_passes = N`, like \
                 `progressive(phases = 3, min_passes = 5)`",
            ));
            self.malformed = true;
            return;
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
            self.malformed = true;
            return;
        };
        let text = name.to_string();
        if !self.given.insert(text.clone()) {
            errors.push(syn::Error::new(
                name.span(),
                format!("duplicate `{name}` in `progressive(…)`; remove one"),
            ));
            return;
        }
        match text.as_str() {
            "phases" => {
                self.phases = errors
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
                self.min_passes = errors
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
}

/// Reads a flag written `true` or `false` (`example`: how to write it).
pub(super) fn bool_arg(name: &Ident, value: &Expr, example: &str) -> syn::Result<bool> {
    match literal(value) {
        Some(Lit::Bool(flag)) => Ok(flag.value),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes `true` or `false`, like `{example}`"),
        )),
    }
}
