//! Trip and recovery rules: the [`Policy`] of a breaker, built in `const` context and validated.
//!
//! `lib.rs` holds the [`Policy`] type and its [`PolicySettings`], both generated from the knob table
//! (`knobs.rs`), and the rules between fields; validation, patches, errors and limits have their
//! own files.
//!
//! This crate is the one definition of the policy knobs, their limits and their validation: the
//! `#[circuit_breaker]` attribute runs this validation when it expands, and the `fusebox` runtime
//! re-exports its policy items (`fusebox::Policy`, `fusebox::limits`, …; not [`KNOBS`]) and runs
//! it when a policy is registered, configured or loaded. Use it through the `fusebox` crate.
//!
//! Adding a knob is one row in the knob table (`knobs.rs`: its fields and defaults, its
//! setting, its setters, its attribute argument and its configuration field), from which
//! `Policy`'s fields, setters and [`PolicySettings`], [`PolicyPatch`], [`KNOBS`], the attribute's
//! argument and the configuration field are generated; plus its reader where its value is of a
//! type no other knob has (`fusebox-macros`' `args/values.rs`, `fusebox`'s `config.rs`), its
//! check in `validate.rs`, and its row and an example in the attribute reference (`fusebox`'s
//! `doc/circuit_breaker.md`).
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use crate::limits::{MAX_OPEN_BACKOFF, MAX_OPEN_FOR, MIN_OPEN_FOR};

mod budget;
mod duration;
mod error;
mod knobs;
pub mod limits;
mod open;
mod patch;
mod quorum;
#[cfg(test)]
mod tests;
pub mod text;
mod validate;

pub use budget::{RETRY_BUDGET_FORM, RetryBudget};
pub use duration::{DURATION_UNITS, DurationError, parse_duration};
pub use error::PolicyError;
pub use open::{OpenContext, OpenForFn};
pub use patch::PolicyPatch;
pub use quorum::{QUORUM_FORM, Quorum};

/// True when `nanos` is within `MIN_OPEN_FOR..=MAX_OPEN_FOR`.
const fn in_ms_range(nanos: u64) -> bool {
    nanos >= duration_to_nanos(MIN_OPEN_FOR) && nanos <= duration_to_nanos(MAX_OPEN_FOR)
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (about 584 years).
const fn duration_to_nanos(d: Duration) -> u64 {
    let n = d.as_nanos();
    if n > u64::MAX as u128 {
        u64::MAX
    } else {
        n as u64
    }
}

/// An `open_backoff` factor in thousandths, rounded, saturating at 0 and `u32::MAX`.
const fn factor_to_milli(factor: f64) -> u32 {
    if factor <= 0.0 {
        0
    } else if factor >= MAX_OPEN_BACKOFF * 10.0 {
        u32::MAX
    } else {
        (factor * 1000.0 + 0.5) as u32
    }
}

/// A `throttle` factor in thousandths, rounded: 0 only for 0 (off); any other value that rounds
/// to 0 (a negative, a NaN, a tiny factor) becomes 1, which validation refuses.
const fn throttle_to_milli(k: f64) -> u32 {
    if k == 0.0 {
        0
    } else if k >= crate::limits::MAX_THROTTLE * 10.0 {
        u32::MAX
    } else if k > 0.0005 {
        (k * 1000.0 + 0.5) as u32
    } else {
        1
    }
}

/// What is wrong with a group name, or `None` when it is valid: 1 to 64 bytes of ASCII letters,
/// digits, `-`, `_`, `.` or `:`.
fn group_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty")
    } else if name.len() > 64 {
        Some("longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        Some("a character other than ASCII letters, digits, `-`, `_`, `.` or `:`")
    } else {
        None
    }
}

/// `None` for 0 (a rule that is off), else the count.
const fn unless_zero(count: u32) -> Option<u32> {
    if count == 0 { None } else { Some(count) }
}

const DEFAULT_OPEN_MAX_NANOS: u64 = 5 * 60 * 1_000_000_000;
const DEFAULT_MIN_CALLS: u32 = 10;
const DEFAULT_FAILURE_RATE: u8 = 50;

/// Which outcomes the failure and slow-call rates are computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Window {
    /// The last N recorded calls.
    Count(u32),
    /// The calls of the last span of time, kept in [`TIME_BUCKETS`](limits::TIME_BUCKETS) buckets rotated on the request path.
    Time(Duration),
}

/// How a circuit leaves half-open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// Admit `half_open` probes; all must succeed to close, any failure reopens (the default).
    Probes,
    /// Admit 1/phases of the traffic, then 2/phases, … Each phase needs `min_passes` recorded calls
    /// with a failure rate under the threshold to advance; otherwise the circuit reopens.
    Progressive {
        /// Number of phases (1..=100); the last one admits all traffic.
        phases: u32,
        /// Calls a phase must record before it is judged (at least 1).
        min_passes: u32,
    },
}

/// What an error that the classification does not count as a failure (an error not listed in
/// `failure = [...]`, or one its predicate rejects) does to the window.
///
/// fusebox's default is [`Others::Ignore`]: such an error (a declined card, a 404) passes through
/// and does not affect the circuit at all. Resilience4j, Polly, gobreaker, Sentinel and
/// tower-resilience count it as a success instead, which dilutes the failure rate;
/// [`Others::Success`] does the same. Either way the error passes through untouched, is not
/// retried and never reaches the fallback. A cancelled call, and an error converted from the
/// rejection of an inner fusebox breaker (see "Nested breakers" in `fusebox::guide::semantics`), count
/// as neither.
///
/// ```
/// # use fusebox_policy as fusebox;
/// use fusebox::{Others, Policy};
///
/// const LIKE_RESILIENCE4J: Policy = Policy::new().others(Others::Success);
/// assert_eq!(LIKE_RESILIENCE4J.settings().others, Others::Success);
/// assert_eq!(Policy::new().settings().others, Others::Ignore);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Others {
    /// Not counted: the call leaves the window, the failure run and a half-open probe's
    /// verdict as they were (a probe's slot is given back). The default.
    #[default]
    Ignore,
    /// Counted as a success: the window records a successful call, a run of consecutive
    /// failures ends, and a half-open probe passes.
    Success,
}

impl Others {
    /// The name written in the attribute and in configuration (`"ignore"`, `"success"`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Others::Ignore => "ignore",
            Others::Success => "success",
        }
    }

    /// The value named `name` (`"ignore"` or `"success"`, as [`name`](Others::name) writes
    /// them); `None` for any other name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Others> {
        match name {
            "ignore" => Some(Others::Ignore),
            "success" => Some(Others::Success),
            _ => None,
        }
    }
}

impl fmt::Display for Others {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bulkhead of a key: how many of its calls may be in flight at once
/// ([`PolicySettings::max_concurrent`]; `None` there when unlimited).
///
/// Written `max_concurrent = 10` (a fixed limit) or `max_concurrent = "adaptive"` /
/// `"adaptive(2..200)"` (an adaptive one, with its floor and ceiling) in the attribute and in
/// configuration; [`Concurrency::from_text`] reads the second form.
///
/// ```
/// # use fusebox_policy as fusebox;
/// use fusebox::{Concurrency, Policy};
///
/// assert_eq!(Policy::new().max_concurrent(8).settings().max_concurrent, Some(Concurrency::Fixed(8)));
/// assert_eq!(Concurrency::from_text("adaptive(2..200)"), Ok(Concurrency::Adaptive { floor: 2, ceiling: 200 }));
/// assert_eq!(Concurrency::from_text("adaptive").unwrap().to_string(), "adaptive(1..1000)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Concurrency {
    /// At most this many calls in flight ([`Policy::max_concurrent`]).
    Fixed(u32),
    /// A limit found from latency ([`Policy::adaptive_concurrency`]), by additive increase and
    /// multiplicative decrease (AIMD, as Netflix's concurrency-limits and TCP do). The calls
    /// a breaker reports are taken in rounds of as many calls as the limit (at least
    /// [`ADAPTIVE_ROUND`](limits::ADAPTIVE_ROUND)); at the end of each round:
    ///
    /// - a tenth or more of the round's calls were counted failures, or the round's mean
    ///   latency is more than [`ADAPTIVE_TOLERANCE`](limits::ADAPTIVE_TOLERANCE) times the
    ///   no-load latency: the limit is multiplied by
    ///   [`ADAPTIVE_BACKOFF`](limits::ADAPTIVE_BACKOFF) (0.9), down to `floor`;
    /// - otherwise, when at least half the round's calls found the limit at least half used,
    ///   it grows by one, up to `ceiling`.
    ///
    /// The no-load latency is the lowest round mean seen; after
    /// [`ADAPTIVE_REBASE_ROUNDS`](limits::ADAPTIVE_REBASE_ROUNDS) (32) slow rounds in a row at
    /// the floor, it becomes the last round's (the backend got slower for good).
    /// The limit starts at [`ADAPTIVE_START`](limits::ADAPTIVE_START) (20) within
    /// `floor..=ceiling`.
    Adaptive {
        /// The lowest limit (at least 1).
        floor: u32,
        /// The highest limit (at least `floor`).
        ceiling: u32,
    },
}

impl Concurrency {
    /// The setting of the fields of a [`Policy`]'s `max_concurrent` row: the limit (the
    /// ceiling, when adaptive; 0: no bulkhead) and the adaptive floor plus one (0: a fixed
    /// limit). A breaker without a bulkhead reads the limit only.
    const fn of(limit: u32, floor_plus_one: u32) -> Option<Concurrency> {
        if limit == 0 {
            None
        } else if floor_plus_one == 0 {
            Some(Concurrency::Fixed(limit))
        } else {
            Some(Concurrency::Adaptive {
                floor: floor_plus_one - 1,
                ceiling: limit,
            })
        }
    }

    /// The adaptive limit written as `"adaptive"` (floor
    /// [`ADAPTIVE_FLOOR`](limits::ADAPTIVE_FLOOR), ceiling
    /// [`ADAPTIVE_CEILING`](limits::ADAPTIVE_CEILING)), `"adaptive(2..200)"` or
    /// `"adaptive(2..=200)"` (both bounds included either way). The bounds are not checked here
    /// ([`Policy::validate`] does).
    ///
    /// # Errors
    ///
    /// A message saying what to write, for any other text.
    pub fn from_text(text: &str) -> Result<Concurrency, String> {
        const SHAPE: &str = "write `\"adaptive\"` or `\"adaptive(floor..ceiling)\"`, like \
                             `\"adaptive(2..200)\"`, or a whole number for a fixed limit";
        let text = text.trim();
        if text == "adaptive" {
            return Ok(Concurrency::Adaptive {
                floor: limits::ADAPTIVE_FLOOR,
                ceiling: limits::ADAPTIVE_CEILING,
            });
        }
        let range = text
            .strip_prefix("adaptive")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('('))
            .and_then(|rest| rest.strip_suffix(')'));
        let Some(range) = range else {
            return Err(format!("unknown bulkhead {text:?}; {SHAPE}"));
        };
        let (floor, ceiling) = range
            .split_once("..=")
            .or_else(|| range.split_once(".."))
            .ok_or_else(|| format!("`{text}` has no range; {SHAPE}"))?;
        let bound = |b: &str| {
            b.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{}` in `{text}` is not a whole number; {SHAPE}", b.trim()))
        };
        Ok(Concurrency::Adaptive {
            floor: bound(floor)?,
            ceiling: bound(ceiling)?,
        })
    }
}

impl fmt::Display for Concurrency {
    /// `8` for a fixed limit, `adaptive(2..200)` for an adaptive one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Concurrency::Fixed(calls) => write!(f, "{calls}"),
            Concurrency::Adaptive { floor, ceiling } => write!(f, "adaptive({floor}..{ceiling})"),
        }
    }
}

/// Makes, from the knob table: [`Knob`], [`KNOBS`], [`Policy`] (its fields, `DEFAULT`, its
/// setters and [`Policy::settings`]), [`PolicySettings`], and `Policy`'s `PartialEq` and `Debug`.
macro_rules! policy {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            fields { $($field:ident: $fty:ty = $default:expr),+ }
            setting { $sty:ty = |$p:ident| $get:expr }
            setters {
                $($(#[$sdoc:meta])* fn $setter:ident($($arg:ident: $aty:ty),*) {
                    $($sfield:ident: $sval:expr),+
                })*
            }
            $(patch $patch:tt)?
            $(attr $attr:tt)?
            config $config:tt
        }
    )*) => {
        /// A knob of the table; its bit in [`Policy::explicit`] says whether it was set.
        // One variant per row of the knob table, named as the knob is written.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        enum Knob {
            $($name,)*
        }

        /// The name of every policy knob, as written in the attribute and in configuration
        /// files, in the order of the knob table.
        ///
        /// `window` covers both the count and the time window; `recovery` covers progressive
        /// recovery; `stuck_open` is two fields in configuration files
        /// (`stuck_after_recoveries`, `stuck_after`) and no attribute argument.
        pub const KNOBS: &[&str] = &[$(stringify!($name)),*];

        /// When a circuit opens and how it recovers.
        ///
        /// Built with `const fn` setters, so a policy can be a `const` shared by many functions and
        /// named in the attribute (`policy = PAYMENT`):
        ///
        /// ```
        /// use std::time::Duration;
        /// # use fusebox_policy as fusebox;
        /// use fusebox::Policy;
        ///
        /// const PAYMENT: Policy = Policy::new()
        ///     .window(20)
        ///     .min_calls(10)
        ///     .failure_rate(50)
        ///     .open_for(Duration::from_secs(30));
        /// assert!(PAYMENT.validate().is_ok());
        /// assert_eq!(PAYMENT.settings().min_calls, 10);
        /// ```
        ///
        /// | field | default | |
        /// |---|---|---|
        /// | `window` | 100 calls | [`Policy::window`], [`Policy::time_window`] |
        /// | `min_calls` | 10, or a smaller count window | no decision below this many recorded calls |
        /// | `failure_rate` | 50 %, off with `consecutive` or `failure_count` alone | [`Policy::failure_rate`]; [`Policy::rate_off`] disables the rule |
        /// | `failure_count` | off | [`Policy::failure_count`] |
        /// | `slow`, `slow_rate` | off, 100 % | [`Policy::slow`], [`Policy::slow_rate`] |
        /// | `consecutive` | off | [`Policy::consecutive`] |
        /// | `open_for` | 10 s | [`Policy::open_for`] |
        /// | `open_backoff`, `open_max` | 1 (none), 5 min | [`Policy::open_backoff`], [`Policy::open_max`] |
        /// | `open_for_fn` | none | [`Policy::open_for_fn`]: the wait from a function of the failed recoveries and the window |
        /// | `open_jitter` | 0 % (off) | [`Policy::open_jitter`]: each wait spread by up to this share |
        /// | `half_open`, `half_open_lease` | 1 probe, = `open_for` | [`Policy::half_open`], [`Policy::half_open_lease`] |
        /// | `recovery` | probes | [`Policy::progressive`] |
        /// | `max_concurrent` | unlimited | [`Policy::max_concurrent`], [`Policy::adaptive_concurrency`] |
        /// | `stuck_open` | 3 failed recoveries or 5 min | [`Policy::stuck_open`] (the `circuit_stuck_open` event) |
        /// | `others` | ignore | [`Policy::others`]: uncounted errors ignored, or counted as successes |
        /// | `retry_budget` | off | [`Policy::retry_budget`]: retries allowed as a share of first attempts, plus a floor |
        /// | `group` | none | [`Policy::group`]: the key is a member of a group, judged against its siblings too |
        /// | `shadow` | none | [`Policy::shadow`]: candidate policies judging the same outcomes without acting |
        ///
        /// Two rules connect fields, and they are decided here once for every way a policy is set (the
        /// attribute, this builder, [`Registry::configure`](https://docs.rs/fusebox/latest/fusebox/struct.Registry.html#method.configure) and the
        /// configuration files all go through these setters):
        ///
        /// - **`min_calls` never exceeds the count window.** While `min_calls` is not set explicitly it is
        ///   10, or the count window when that is smaller: `Policy::new().window(5)` decides after 5 calls.
        ///   Setting a count window lowers a larger explicit `min_calls` to it (`BASE.window(2)` of a
        ///   `BASE` with `min_calls(4)` decides after 2 calls); setting `min_calls` above the window is
        ///   invalid.
        /// - **`consecutive` or `failure_count` alone replaces the rate rule.** While `failure_rate` is
        ///   not set explicitly (by [`Policy::failure_rate`] or [`Policy::rate_off`]) it is 50 %, or off
        ///   when `consecutive` or `failure_count` is set: `Policy::new().consecutive(5)` opens on 5
        ///   failures in a row only. With `failure_rate` set too, every rule set applies and any may trip.
        ///
        /// Two policies are equal
        /// when every field has the same value, whichever fields were set explicitly.
        ///
        /// Read a policy through [`Policy::settings`]: the value of every knob, as in the table above.
        #[derive(Clone, Copy)]
        pub struct Policy {
            $($($field: $fty,)+)*
            /// The knobs whose setter was called (bits of [`Knob`]); the others follow the
            /// rules of the type's documentation. The call path never reads it (it is read
            /// when a policy is built, patched or compared on reconfiguration).
            explicit: u32,
        }

        /// The value of every knob of a [`Policy`], as [`Policy::settings`] reads it.
        ///
        /// More knobs may come: the struct cannot be built or matched exhaustively outside
        /// this crate.
        ///
        /// ```
        /// # use fusebox_policy as fusebox;
        /// use std::time::Duration;
        /// use fusebox::{Policy, Window};
        ///
        /// let settings = Policy::new().window(20).consecutive(5).settings();
        /// assert_eq!(settings.window, Window::Count(20));
        /// assert_eq!(settings.consecutive, Some(5));
        /// assert_eq!(settings.failure_rate, None, "`consecutive` alone replaces the rate");
        /// assert_eq!(settings.half_open_lease, Duration::from_secs(10), "`open_for` unless set");
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq)]
        #[non_exhaustive]
        pub struct PolicySettings {
            $($(#[$doc])* pub $name: $sty,)*
        }

        impl Policy {
            /// The default policy (see the type's documentation).
            pub const DEFAULT: Policy = Policy {
                $($($field: $default,)+)*
                explicit: 0,
            };

            $($(
                $(#[$sdoc])*
                #[must_use = "a setter returns the changed policy and leaves `self` as it was"]
                pub const fn $setter(mut self, $($arg: $aty),*) -> Self {
                    $(self.$sfield = $sval;)+
                    self.mark(Knob::$name)
                }
            )*)*

            /// The value of every knob (what the type's table calls its fields), with the
            /// rules between them applied.
            #[must_use]
            #[inline]
            pub const fn settings(&self) -> PolicySettings {
                PolicySettings {
                    $($name: {
                        let $p = self;
                        $get
                    },)*
                }
            }
        }

        impl PartialEq for Policy {
            /// Equal when every field has the same value (which fields were set explicitly is
            /// not compared).
            fn eq(&self, other: &Self) -> bool {
                true $($(&& self.$field == other.$field)+)*
            }
        }

        impl fmt::Debug for Policy {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let settings = self.settings();
                f.debug_struct("Policy")
                    $(.field(stringify!($name), &settings.$name))*
                    .finish()
            }
        }
    };
}
crate::with_knobs!(policy);

// Every knob has its bit in `Policy::explicit`.
const _: () = assert!(
    KNOBS.len() <= u32::BITS as usize,
    "`Policy::explicit` has no bit left for another knob; widen it"
);

impl Knob {
    /// This knob's bit in [`Policy::explicit`].
    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl Policy {
    /// The default policy.
    #[must_use]
    pub const fn new() -> Self {
        Self::DEFAULT
    }

    /// Records that `knob` was set explicitly and recomputes the fields that follow the rules in
    /// the type's documentation: a count window lowers a larger `min_calls` to it, and the
    /// fields not set explicitly take their rule's value.
    const fn mark(mut self, knob: Knob) -> Self {
        self.explicit |= knob.bit();
        if matches!(knob, Knob::open_for) {
            // `open_for` replaced the function (its setter cleared it): a patch made of this
            // policy clears it too.
            self.explicit |= Knob::open_for_fn.bit();
        }
        if matches!(knob, Knob::window)
            && let Window::Count(calls) = self.window
            && self.min_calls > calls
        {
            self.min_calls = calls;
        }
        if !self.is_explicit(Knob::min_calls) {
            self.min_calls = match self.window {
                Window::Count(n) if n < DEFAULT_MIN_CALLS => n,
                _ => DEFAULT_MIN_CALLS,
            };
        }
        if !self.is_explicit(Knob::failure_rate) {
            self.failure_rate = if self.consecutive != 0 || self.failure_count != 0 {
                0
            } else {
                DEFAULT_FAILURE_RATE
            };
        }
        self
    }

    /// True when `knob` was set explicitly.
    const fn is_explicit(&self, knob: Knob) -> bool {
        self.explicit & knob.bit() != 0
    }

    /// The half-open lease in nanoseconds (`open_for` unless set).
    const fn lease_nanos(&self) -> u64 {
        if self.half_open_lease_nanos == 0 {
            self.open_for_nanos
        } else {
            self.half_open_lease_nanos
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Eq for Policy {}
