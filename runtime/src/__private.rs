//! Items the `#[circuit_breaker]` expansion names. Not a public API: no stability promise.

use std::future::Future;
use std::sync::LazyLock;

use crate::error::Error;
use crate::registry::Registry;

use crate::breaker::FnName;
pub use crate::breaker::{Named, NamedPermit, Permitted, RawPermit, SitePermit};
pub use crate::call::attempts::{
    AttemptBudget, AttemptLimit, Attempts, NoDeadline, Settled, Unbounded, run as run_attempts,
};
pub use crate::call::hedge::run as run_hedged;
pub use crate::call::site::{DynSite, LocalBreaker, MethodName, Site, SiteBreaker};
pub use crate::declared::{Declared, DeclaredSite};
pub use crate::error::Cause;
pub use crate::load::hedge::{Hedge, HedgeDelay};
pub use crate::load::pushback::{NoPushback, PushbackOf};
pub use crate::policy::{OpenContext, Others, Policy};
pub use crate::registry::GLOBAL;
pub use ::inventory;
pub use std::io::ErrorKind as IoErrorKind;

/// The kind of a `std::io::Error`, which `failure = [TimedOut, ConnectionRefused]` on a function
/// returning `io::Result<T>` classifies by.
#[inline]
#[must_use]
pub fn io_error_kind(error: &std::io::Error) -> IoErrorKind {
    error.kind()
}

// The entry points below are `inline(always)` only without `debug_assertions`: ARCHITECTURE.md,
// "Inlining".

/// Reports the call `permit` admitted as a success (the expansion's form of
/// [`Permit::success`](crate::Permit::success)); `name` is the function's path.
///
/// The functions that report take the permit (a literal key's [`SitePermit`], or a
/// [`NamedPermit`] named by a path: [`Permitted`]) and the name: they are compiled once per crate
/// and kind of permit, not once per annotated function.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn permit_succeeded<P: Permitted>(permit: &mut P, name: FnName) {
    permit.take_raw().succeeded(name);
}

/// Reports the call `permit` admitted as a counted failure.
#[inline]
pub fn permit_failed<P: Permitted>(permit: &mut P, name: FnName) {
    permit.take_raw().failed(name);
}

/// Reports the call `permit` admitted as a counted failure that carries `wait`, the pushback
/// its error asked for (read by `(&PushbackOf(&error)).pushback()`: `None` for an error type
/// that does not implement [`RetryAfter`](crate::RetryAfter)).
#[inline]
pub fn permit_failed_after<P: Permitted>(
    permit: &mut P,
    name: FnName,
    wait: Option<std::time::Duration>,
) {
    permit.take_raw().failed_after(wait, name);
}

/// Reports the call `permit` admitted, which ended with an error its classification does not
/// count: ignored when the error was converted from an inner breaker's rejection (see
/// `crate::nested`; `ASYNC`: the function is an `async fn`), otherwise what
/// [`Policy::others`](crate::Policy::others) says (ignored, or a success).
#[inline]
pub fn permit_ignored<const ASYNC: bool>(permit: &mut impl Permitted, name: FnName) {
    if crate::nested::rejected_inside::<ASYNC>() {
        permit.take_raw().ignored_outright(name);
    } else {
        permit.take_raw().ignored(name);
    }
}

/// Reports the call `permit` admitted as ignored whatever [`Policy::others`](crate::Policy::others)
/// says: its error was converted from an inner breaker's rejection ([`rejected_inside`]).
#[inline]
pub fn permit_ignored_outright<P: Permitted>(permit: &mut P, name: FnName) {
    permit.take_raw().ignored_outright(name);
}

/// True when the error being classified was converted from the rejection of an inner breaker, on
/// this thread and task since this call was admitted (`ASYNC`: the function is an `async fn`).
/// The default classification (every error counts) does not count it.
#[inline]
#[must_use]
pub fn rejected_inside<const ASYNC: bool>() -> bool {
    crate::nested::rejected_inside::<ASYNC>()
}

/// True when `permit` was rejected.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
#[must_use]
pub fn permit_rejected<P: Permitted>(permit: &P) -> bool {
    permit.raw().is_rejected()
}

/// The error of a rejected permit (only called when [`permit_rejected`] is true). Inlined: a
/// rejection returns at once, so building its error in place adds nothing to the function's future.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
#[must_use]
pub fn rejection_error<P: Permitted>(permit: &P) -> Error {
    permit.raw().rejection_or_open()
}

/// The error of a rejected permit (`None` when it was admitted).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
#[must_use]
pub fn permit_rejection(permit: &RawPermit<'_>) -> Option<Error> {
    permit.rejection()
}

/// The body of an `async fn` with `timeout` and no `retry`, `backoff` or `deadline`, bounded by
/// `limit`: the body's future and the timer side by side, awaited in place (no attempt driver).
#[inline]
pub fn timeout_body<F: Future>(limit: std::time::Duration, body: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(limit, body)
}

/// Reports the call `permit` admitted, which ran out of time, as a counted failure, and returns
/// its error (reason [`TimedOut`](crate::Reason::TimedOut): the call went out).
#[cold]
pub fn permit_timed_out<P: Permitted>(permit: &mut P, name: FnName) -> Error {
    let mut raw = permit.take_raw();
    let error = Error::new(raw.key(), crate::Reason::TimedOut, None);
    raw.failed(name);
    error
}

#[cfg(feature = "chaos")]
pub use crate::call::chaos::{
    Chaos, admit as chaos_admit, after_acquire as chaos_after_acquire, around_async as chaos_async,
    around_sync as chaos_sync, of_key as chaos_of,
};

#[cfg(feature = "store")]
pub use crate::breaker::{admit_shared, asks_store, flush_then, reports_to_store};

/// True for the global registry (the registration of a site without `registry = …`).
#[must_use]
pub fn in_global(registry: usize) -> bool {
    registry == GLOBAL.address()
}

/// True when `registry` is the one `registry = path` names (the registration of its sites): it
/// lies inside the `static` that `named` points to. Does not initialize a `LazyLock`, so a
/// registry still being built is not the one named. No trait bound: a wrong `registry = …` is
/// reported once, by [`registry_of`].
pub fn in_registry<R: ?Sized>(named: &R, registry: usize) -> bool {
    let start = std::ptr::from_ref(named).cast::<u8>() as usize;
    let end = start + std::mem::size_of_val(named);
    (start..end).contains(&registry)
}

/// What `registry = …` accepts: a `static` [`Registry`] or a `static LazyLock<Registry>`.
#[diagnostic::on_unimplemented(
    message = "`registry = …` must name a `static` of type `fusebox::Registry`, found `{Self}`",
    label = "not a `fusebox::Registry`",
    note = "declare it as `static REGISTRY: fusebox::Registry = fusebox::Registry::new();` or `static REGISTRY: LazyLock<fusebox::Registry> = …`"
)]
pub trait RegistryRef {
    /// The registry.
    fn registry(&'static self) -> &'static Registry;
}

impl RegistryRef for Registry {
    #[inline]
    fn registry(&'static self) -> &'static Registry {
        self
    }
}

impl<F: FnOnce() -> Registry> RegistryRef for LazyLock<Registry, F> {
    #[inline]
    fn registry(&'static self) -> &'static Registry {
        self
    }
}

/// Resolves a `registry = …` argument.
#[inline]
pub fn registry_of<R: RegistryRef + ?Sized>(registry: &'static R) -> &'static Registry {
    registry.registry()
}

/// The return type of an annotated function: a `Result`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` needs a function that returns `Result<T, E>`, found `{Self}`",
    label = "not a `Result`",
    note = "the breaker counts `Err` values; return `Result<T, E>` (a type alias of it works too)"
)]
pub trait Outcome {
    /// The error type.
    type Error;
}

impl<T, E> Outcome for Result<T, E> {
    type Error = E;
}

/// Pins the output type of the wrapped async body so `?` inside it infers the function's error type.
#[inline(always)]
pub fn async_body<R: Outcome, F: Future<Output = R>>(body: F) -> F {
    body
}

/// Pins the type of an `async fn`'s body run in place (a block with no `return`, `?` or macro
/// call, awaited as part of the function's own future) to the function's return type.
#[inline(always)]
pub fn in_place_body<R: Outcome>(value: R) -> R {
    value
}

/// Boxes the body of a method that `#[async_trait]` rewrote, as that attribute did: the
/// method's return type, `Pin<Box<dyn Future<Output = R> + Send + …>>`, is this, unsized.
#[inline(always)]
pub fn box_pin<F: Future>(body: F) -> std::pin::Pin<Box<F>> {
    Box::pin(body)
}

/// Runs the wrapped body of a sync function; the closure keeps `return` and `?` inside it.
#[inline(always)]
pub fn sync_body<R: Outcome, F: FnOnce() -> R>(body: F) -> R {
    body()
}

/// An error type that can carry a rejected call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry a rejected call, and `#[circuit_breaker]` has no `fallback`",
    label = "`{Self}` does not implement `From<fusebox::Error>`",
    note = "when the circuit is open the call returns `Err(E::from(fusebox::Error))`, so the error type needs `From<fusebox::Error>`",
    note = "fix it one of three ways: add `fallback = name` to `#[circuit_breaker]`; or, when `{Self}` is your own type, implement `From<fusebox::Error>` for it; or, when `{Self}` comes from another crate (the orphan rule forbids that impl), return your own error enum with one variant wrapping `{Self}` and one wrapping `fusebox::Error`"
)]
pub trait FromRejection {
    /// Converts the rejection.
    fn from_rejection(error: Error) -> Self;
}

impl<E: From<Error>> FromRejection for E {
    #[inline]
    fn from_rejection(error: Error) -> Self {
        E::from(error)
    }
}

/// Converts a rejection (or a timeout) into the function's error type; a rejection's error is
/// marked, so the breaker of an enclosing annotated function does not count it
/// (`crate::nested`).
#[inline]
#[must_use]
pub fn error_from_rejection<E: FromRejection>(error: Error) -> E {
    // Marked before the conversion, so the error is not kept across the call.
    if error.is_rejected() {
        crate::nested::mark();
    }
    E::from_rejection(error)
}

/// The rejection of `permit` as the function's error type, converted as [`error_from_rejection`]
/// converts it, or `None` when the call was admitted: how a function without a fallback checks
/// its admission, one call (generic over the error type only, so shared by every annotated
/// function with the same one).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
#[must_use]
pub fn rejection<E: FromRejection, P: Permitted>(permit: &P) -> Option<E> {
    let permit = permit.raw();
    if permit.is_rejected() {
        // A rejected permit's error is a rejection: marked first, so the error is built after the
        // mark's thread-local accesses and goes from its fields to the caller's error without a
        // round trip through the stack.
        crate::nested::mark();
        Some(E::from_rejection(permit.rejection_or_open()))
    } else {
        None
    }
}

/// A fallback called with the annotated function's arguments and the cause, given as one tuple:
/// a fallback whose parameters do not match is one error that shows both signatures.
///
/// Two impls per arity, told apart by `Via`, which the call leaves to inference: one for a
/// function of the right parameters ([`ViaFn`]) and one that never holds ([`NoFallback`]). With
/// two candidates rustc judges each, and when neither holds it reports this trait's own message
/// below (with a single impl it would report the `FnOnce` bound behind it, with its advice to wrap
/// the fallback in a closure, which `fallback = …` does not take).
#[diagnostic::on_unimplemented(
    message = "this fallback cannot be called with the function's arguments and the cause, `{Args}`",
    label = "wrong parameters for a fallback",
    note = "a fallback takes the function's own parameters, in order and of the same types, then `cause: fusebox::Cause<E>`: change its signature to match (`fallback = …` takes the name of a function, not a closure)"
)]
pub trait FallbackFn<Args, Returns, Via> {
    /// Calls the fallback.
    fn call_with(self, args: Args) -> Returns;
}

/// The [`FallbackFn`] impl of a function whose parameters match.
#[derive(Debug)]
pub enum ViaFn {}

/// The [`FallbackFn`] impl that never holds (see there).
#[derive(Debug)]
pub enum NoFallback {}

/// Implemented by nothing: the bound of the [`FallbackFn`] impl that never holds.
pub trait NotAFallback {}

macro_rules! fallback_fn {
    ($($arg:ident)*) => {
        impl<Fallback, Returns, $($arg,)*> FallbackFn<($($arg,)*), Returns, ViaFn> for Fallback
        where
            Fallback: FnOnce($($arg),*) -> Returns,
        {
            #[inline(always)]
            #[allow(non_snake_case)]
            fn call_with(self, ($($arg,)*): ($($arg,)*)) -> Returns {
                self($($arg),*)
            }
        }

        impl<Fallback, Returns, $($arg,)*> FallbackFn<($($arg,)*), Returns, NoFallback> for Fallback
        where
            Fallback: NotAFallback,
        {
            #[inline(always)]
            fn call_with(self, _: ($($arg,)*)) -> Returns {
                unreachable!("no type implements `NotAFallback`")
            }
        }
    };
}

fallback_fn!(A1);
fallback_fn!(A1 A2);
fallback_fn!(A1 A2 A3);
fallback_fn!(A1 A2 A3 A4);
fallback_fn!(A1 A2 A3 A4 A5);
fallback_fn!(A1 A2 A3 A4 A5 A6);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7 A8);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7 A8 A9);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7 A8 A9 A10);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11);
fallback_fn!(A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11 A12);

/// Calls `fallback` with `args` (the function's arguments, then the cause; at most 12, the
/// expansion calls longer lists directly). The arguments come first, so their types are known
/// before the fallback is checked against them.
#[inline(always)]
pub fn call_fallback<Args, Returns, Via, F: FallbackFn<Args, Returns, Via>>(
    args: Args,
    fallback: F,
) -> Returns {
    fallback.call_with(args)
}

/// A tuple of a fallback's arguments that takes one more in front: how the expansion builds the
/// arguments of a function with parameters under `#[cfg(...)]`, one `let` per parameter, each
/// under its parameter's attributes.
pub trait Prepend<A> {
    /// The tuple with `A` in front.
    type Out;
    /// Puts `first` in front.
    fn prepend(self, first: A) -> Self::Out;
}

macro_rules! prepend {
    ($($arg:ident)*) => {
        impl<A, $($arg,)*> Prepend<A> for ($($arg,)*) {
            type Out = (A, $($arg,)*);
            #[inline(always)]
            #[allow(non_snake_case)]
            fn prepend(self, first: A) -> Self::Out {
                let ($($arg,)*) = self;
                (first, $($arg,)*)
            }
        }
    };
}

prepend!(A1);
prepend!(A1 A2);
prepend!(A1 A2 A3);
prepend!(A1 A2 A3 A4);
prepend!(A1 A2 A3 A4 A5);
prepend!(A1 A2 A3 A4 A5 A6);
prepend!(A1 A2 A3 A4 A5 A6 A7);
prepend!(A1 A2 A3 A4 A5 A6 A7 A8);
prepend!(A1 A2 A3 A4 A5 A6 A7 A8 A9);
prepend!(A1 A2 A3 A4 A5 A6 A7 A8 A9 A10);
prepend!(A1 A2 A3 A4 A5 A6 A7 A8 A9 A10 A11);

/// `args` with `first` in front (see [`Prepend`]).
#[inline(always)]
pub fn prepend_arg<Args: Prepend<A>, A>(args: Args, first: A) -> Args::Out {
    args.prepend(first)
}

/// The value an async function's fallback returns: a future (whose output must be the function's
/// return type, checked where it is awaited).
#[diagnostic::on_unimplemented(
    message = "the fallback of an `async fn` must be an `async fn`, but this one returns `{Self}`, not a future",
    label = "this fallback is not `async`",
    note = "declare it as `async fn name(<the function's parameters>, cause: fusebox::Cause<E>) -> {R}`"
)]
pub trait AsyncFallback<R>: Future {}

impl<R, F: Future> AsyncFallback<R> for F {}

/// What the fallback of an `async fn` returned, to be awaited through
/// [`AwaitFallback::fallback_future`]: a future is awaited as is; anything else (a sync
/// fallback) is one error, from [`AsyncFallback`], and never a second one at the `.await`.
#[derive(Debug)]
pub struct FallbackReturn<R, T>(T, core::marker::PhantomData<fn() -> R>);

impl<R, T> FallbackReturn<R, T> {
    /// Wraps what the fallback returned; `R` is the function's return type.
    #[inline(always)]
    pub fn new(returned: T) -> Self {
        FallbackReturn(returned, core::marker::PhantomData)
    }
}

/// A fallback that returned a future: awaited as is (a future of another output than the
/// function's return type is a type mismatch at the fallback).
pub trait AwaitFallback<R> {
    /// The fallback's future.
    type Future: Future;
    /// The fallback's future.
    fn fallback_future(self) -> Self::Future;
}

impl<R, F: Future> AwaitFallback<R> for FallbackReturn<R, F> {
    type Future = F;
    #[inline(always)]
    fn fallback_future(self) -> F {
        self.0
    }
}

/// A fallback that did not return a future (chosen only when [`AwaitFallback`] does not apply):
/// a compile error that says so, with a future of the right type so nothing else fails.
pub trait AwaitSyncFallback<R, T> {
    /// Never returns: the bound cannot hold when this method is chosen.
    fn fallback_future(self) -> core::future::Pending<R>
    where
        T: AsyncFallback<R>;
}

impl<R, T> AwaitSyncFallback<R, T> for &FallbackReturn<R, T> {
    #[inline(always)]
    fn fallback_future(self) -> core::future::Pending<R>
    where
        T: AsyncFallback<R>,
    {
        core::future::pending()
    }
}

#[cfg(test)]
mod tests {
    /// The functions the expansion calls, and those they call with the admission or the report
    /// path in their body, per file. Whatever an entry point always-inlines is copied into every
    /// annotated function that calls it: these stay out of line in debug builds.
    const ENTRY_POINTS: [(&str, &str, &[&str]); 5] = [
        (
            "__private.rs",
            include_str!("__private.rs"),
            &[
                "permit_succeeded",
                "permit_rejected",
                "rejection_error",
                "permit_rejection",
                "rejection",
            ],
        ),
        (
            "call/site.rs",
            include_str!("call/site.rs"),
            &["breaker", "enter", "get", "serves"],
        ),
        (
            "breaker/admission.rs",
            include_str!("breaker/admission.rs"),
            &["admission_for"],
        ),
        (
            "breaker/report.rs",
            include_str!("breaker/report.rs"),
            &["finish"],
        ),
        (
            "breaker/permit.rs",
            include_str!("breaker/permit.rs"),
            &[
                "error_for_rejection",
                "settle_admission",
                "error_of_admission",
            ],
        ),
    ];

    /// The name of the first `fn` at or after line `from`.
    fn next_fn(lines: &[&str], from: usize) -> Option<String> {
        lines[from..].iter().find_map(|line| {
            let (_, rest) = line.split_once("fn ")?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
    }

    /// None of the expansion's entry points, nor the admission and report paths under them, is
    /// always-inlined when `debug_assertions` are on (ARCHITECTURE.md, "Inlining").
    #[test]
    fn entry_points_are_not_always_inlined_in_debug_builds() {
        for (file, source, names) in ENTRY_POINTS {
            let lines: Vec<&str> = source.lines().collect();
            let mut checked = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                let attribute = line.trim();
                let conditional = attribute == "#[cfg_attr(not(debug_assertions), inline(always))]";
                if attribute != "#[inline(always)]" && !conditional {
                    continue;
                }
                let name = next_fn(&lines, i + 1).expect("an attribute before a function");
                if !names.contains(&name.as_str()) {
                    continue;
                }
                checked.push(name.clone());
                assert!(
                    conditional && lines[i - 1].trim() == "#[cfg_attr(debug_assertions, inline)]",
                    "{file}:{}: `{name}` is always inlined in debug builds; write \
                     `#[cfg_attr(debug_assertions, inline)]` and \
                     `#[cfg_attr(not(debug_assertions), inline(always))]`",
                    i + 1
                );
            }
            for name in names {
                assert!(
                    checked.iter().any(|found| found == name),
                    "{file}: no `fn {name}` marked `inline(always)` without `debug_assertions`"
                );
            }
        }
    }
}
