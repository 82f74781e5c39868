//! "Did you mean" suggestions for unknown argument names: by meaning, for the names other
//! breakers give the same setting (`wait_duration`, `sliding_window_size`, `failure_ratio`, …),
//! then by spelling.

use syn::Ident;

use super::NAMES;

/// Each argument with the names other circuit breakers (Resilience4j, Polly, Failsafe, Hystrix,
/// Sentinel, gobreaker, Envoy, …) give the same setting, and what to write instead.
pub(super) const MEANINGS: [(&str, &[&str], &str); 20] = [
    (
        "open_for",
        &[
            "wait_duration",
            "wait_duration_in_open_state",
            "break_duration",
            "duration_of_break",
            "open_duration",
            "open_timeout",
            "reset_timeout",
            "sleep_window",
            "cooldown",
            "retry_timeout",
            "recovery_timeout",
        ],
        "the wait before probes, like `open_for = \"30s\"`",
    ),
    (
        "open_max",
        &[
            "max_wait_duration_in_open_state",
            "max_break_duration",
            "max_open_duration",
        ],
        "the longest open wait, like `open_max = \"5m\"`",
    ),
    (
        "open_backoff",
        &[
            "exponential_backoff_multiplier",
            "break_duration_multiplier",
            "backoff_multiplier",
        ],
        "the factor each failed recovery multiplies the open wait by, like `open_backoff = 2`",
    ),
    (
        "window",
        &[
            "sliding_window_size",
            "sliding_window",
            "window_size",
            "rolling_window",
            "sampling_duration",
            "sliding_window_duration",
            "rolling_stats_window",
            "stat_interval",
            "interval",
        ],
        "a count (`window = 100`) or a span (`window = \"30s\"`) of calls",
    ),
    (
        "min_calls",
        &[
            "minimum_number_of_calls",
            "minimum_throughput",
            "min_throughput",
            "request_volume_threshold",
            "min_request_amount",
            "minimum_calls",
            "min_requests",
            "volume_threshold",
        ],
        "the calls a window needs before its rate decides, like `min_calls = 10`",
    ),
    (
        "failure_rate",
        &[
            "failure_rate_threshold",
            "failure_ratio",
            "failure_threshold",
            "error_threshold_percentage",
            "error_rate",
            "error_ratio",
            "failure_percentage",
        ],
        "a whole percentage: `failure_ratio = 0.5` is `failure_rate = 50`",
    ),
    (
        "consecutive",
        &[
            "consecutive_failures",
            "max_failures",
            "failure_count_threshold",
            "consecutive_failure_threshold",
            "open_after",
            "trip_after",
        ],
        "opens after that many counted failures in a row, like `consecutive = 5`",
    ),
    (
        "half_open",
        &[
            "permitted_calls_in_half_open",
            "permitted_number_of_calls_in_half_open_state",
            "half_open_max_calls",
            "max_requests",
            "success_threshold",
            "half_open_calls",
        ],
        "the probes admitted when the wait is over, like `half_open = 3`",
    ),
    (
        "slow",
        &[
            "slow_call_duration_threshold",
            "slow_call_threshold",
            "slow_threshold",
            "slow_call_duration",
            "max_rt",
        ],
        "a call slower than this is slow, like `slow = \"2s\"`",
    ),
    (
        "slow_rate",
        &[
            "slow_call_rate_threshold",
            "slow_ratio_threshold",
            "slow_call_rate",
            "slow_ratio",
        ],
        "a whole percentage of slow calls, like `slow_rate = 80`",
    ),
    (
        "timeout",
        &[
            "timeout_duration",
            "call_timeout",
            "execution_timeout",
            "time_limit",
        ],
        "a duration string, like `timeout = \"800ms\"`",
    ),
    (
        "retry",
        &[
            "max_retries",
            "retries",
            "max_attempts",
            "attempts",
            "retry_count",
            "retry_attempts",
        ],
        "counts attempts, the first included: `max_retries = 2` is `retry = 3`",
    ),
    (
        "hedge",
        &[
            "hedging",
            "hedge_delay",
            "hedging_delay",
            "backup_request",
            "backup_requests",
            "speculative_retry",
        ],
        "a delay or a latency percentile, like `hedge = \"50ms\"` or `hedge = \"p95\"`",
    ),
    (
        "chaos",
        &[
            "fault_injection",
            "inject_faults",
            "chaos_strategy",
            "simmy",
            "fault",
            "faults",
        ],
        "opts the function in to `fusebox::chaos`'s injected faults: `chaos = true`",
    ),
    (
        "hedge_max",
        &["max_hedged_attempts", "max_hedges", "hedge_count"],
        "counts attempts in flight, the first included: `max_hedged_attempts = 1` is `hedge_max = 2`",
    ),
    (
        "backoff",
        &[
            "retry_delay",
            "wait_between_retries",
            "retry_interval",
            "delay",
        ],
        "the base of the jittered exponential backoff between attempts, like `backoff = \"100ms\"`",
    ),
    (
        "deadline",
        &[
            "total_timeout",
            "overall_timeout",
            "max_duration",
            "max_elapsed_time",
        ],
        "a budget shared by all attempts, like `deadline = \"2s\"`",
    ),
    (
        "max_concurrent",
        &[
            "max_concurrent_calls",
            "max_concurrency",
            "concurrency_limit",
            "max_in_flight",
            "bulkhead",
            "max_parallelization",
        ],
        "at most that many calls in flight, like `max_concurrent = 10`",
    ),
    (
        "failure",
        &[
            "record_exceptions",
            "record_errors",
            "record_failure_predicate",
            "should_handle",
            "handle",
            "is_failure",
            "errors",
        ],
        "the error variants that count, like `failure = [Timeout, Connect]`, or a `fn(&E) -> bool`",
    ),
    (
        "key",
        &["name", "id", "breaker", "circuit", "circuit_name"],
        "the breaker's name, like `key = \"payment\"`",
    ),
];

/// Unit suffixes other breakers put on a duration's name (`timeout_ms`), where fusebox takes a
/// duration string.
const UNIT_SUFFIXES: [(&str, &str); 8] = [
    ("_in_milliseconds", "ms"),
    ("_in_millis", "ms"),
    ("_millis", "ms"),
    ("_ms", "ms"),
    ("_in_seconds", "s"),
    ("_seconds", "s"),
    ("_secs", "s"),
    ("_s", "s"),
];

/// The arguments that take a duration string.
const DURATIONS: [&str; 7] = [
    "open_for", "open_max", "window", "slow", "timeout", "backoff", "deadline",
];

pub(super) fn unknown_argument(name: &Ident) -> syn::Error {
    let list = NAMES
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let written = name.to_string();
    let mut message = format!("unknown argument `{written}`; expected one of {list}");
    if let Some(hint) = by_meaning(&written) {
        message.push_str(&format!("; {hint}"));
    } else if let Some(close) = closest(&written) {
        message.push_str(&format!("; did you mean `{close}`?"));
    }
    syn::Error::new(name.span(), message)
}

/// The argument another breaker's name for a setting means, with how to write it: `written`
/// compared without case and underscores (`waitDurationInOpenState` too), and a duration's name
/// with a unit suffix (`timeout_ms`, `wait_duration_in_millis`) as the name without it.
pub(super) fn by_meaning(written: &str) -> Option<String> {
    let folded = |name: &str| -> String {
        name.chars()
            .filter(|&c| c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let find = |name: &str| {
        let name = folded(name);
        MEANINGS.iter().find(|(argument, aliases, _)| {
            folded(argument) == name || aliases.iter().any(|alias| folded(alias) == name)
        })
    };
    if let Some((argument, _, how)) = find(written) {
        return Some(format!(
            "did you mean `{argument}`? fusebox's name for it: {how}"
        ));
    }
    let snake = to_snake(written);
    UNIT_SUFFIXES.iter().find_map(|(suffix, unit)| {
        let stem = snake.strip_suffix(suffix)?;
        let (argument, ..) = find(stem).filter(|(argument, ..)| DURATIONS.contains(argument))?;
        Some(format!(
            "did you mean `{argument}`? it takes a duration string with its unit, like \
             `{argument} = \"800{unit}\"`"
        ))
    })
}

/// `timeoutMs` as `timeout_ms`; snake case as it is.
fn to_snake(name: &str) -> String {
    let mut snake = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    snake
}

/// The known argument name closest to `written`, when it is plausibly a typo of it.
pub(super) fn closest(written: &str) -> Option<&'static str> {
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
