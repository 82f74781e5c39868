//! Rejections of inner breakers: an error converted from a fusebox rejection is marked on its thread
//! and tokio task, so the breaker of an enclosing annotated function does not count it.
//!
//! When an annotated function's call is rejected and the rejection becomes the function's error
//! (`E::from(fusebox::Error)`, the expansion's conversion, or [`Cause::into_error`] of a
//! [`Cause::Rejected`]), that error is marked: a flag in a thread-local, with the id of the
//! tokio task it was converted in ([`tokio::task::try_id`]; `None` outside a task). An
//! annotated function that classifies an error while the mark is set, on the same thread and in
//! the same task, takes the error for that rejection and does not count it (unless its own
//! `failure = [...]` or predicate counts it). Every admission of an annotated function clears
//! the mark, so a mark never outlives the next call that starts on its thread: the mark a
//! caller reads was set after its own admission, inside its call.
//!
//! The mark costs one thread-local store per admission and nothing else on the admitted path;
//! a conversion reads the task id. It never allocates and takes no lock.
//!
//! Limits (the error is then counted as before, or, in the last case, not counted):
//! - the inner call runs on another thread or in another task (`spawn`, `spawn_blocking`, a
//!   thread pool) than the enclosing function's classification;
//! - an `async fn` on an executor other than tokio: its tasks have no id, so with no tokio
//!   runtime on the thread a mark is honoured by sync functions only (a sync body cannot
//!   interleave with other tasks; an `async` one can);
//! - concurrent calls within one task (`join!`, `select!`, `FuturesUnordered`) share its id: an
//!   inner rejection in one branch, while another branch's call waits, can be taken for that
//!   call's error if the waiting call ends with an error before any other admission on the
//!   thread;
//! - the rejection reaches the enclosing function as an error the function builds itself from a
//!   `fusebox::Error` (not through the attribute's conversion or `Cause::into_error`);
//! - a body that handles an inner rejection and then returns another error, with no annotated call
//!   between them, has that error taken for the rejection: it is not counted.
//!
//! The same cell holds a second mark: the attempt driver sets it when a key's retry budget
//! rejected a retry and the call ends with its last attempt's outcome, for
//! [`Cause::retry_rejected`](crate::Cause::retry_rejected). It follows the same rules: set in a
//! task, cleared by the next admission on the thread.
//!
//! [`Cause::into_error`]: crate::Cause::into_error
//! [`Cause::Rejected`]: crate::Cause::Rejected

use std::cell::Cell;

use tokio::task::Id;

/// [`MARKS`]: the last error converted from a rejection may be the error being classified.
const REJECTION: usize = 1;
/// [`MARKS`]: the attempt driver's call that ended last ended because the retry budget rejected
/// a retry ([`Cause::retry_rejected`](crate::Cause::retry_rejected)).
const BUDGET: usize = 2;
/// [`MARKS`]' bits that are marks (the rest is the address of the circuit admitted last).
const MARK_BITS: usize = REJECTION | BUDGET;

thread_local! {
    /// The marks ([`REJECTION`], [`BUDGET`]) set on this thread since the last admission of an
    /// annotated function on it, and above them the address of the circuit that admission asked
    /// ([`last_entered`]). One cell, so an admission clears both marks with one store.
    static MARKS: Cell<usize> = const { Cell::new(0) };
    /// The tokio task [`MARKS`] were set in (`None`: outside a task).
    static TASK: Cell<Option<Id>> = const { Cell::new(None) };
}

/// Clears the marks: an annotated function was admitted (or rejected) on this thread.
#[inline(always)]
pub(crate) fn clear() {
    MARKS.set(0);
}

/// Clears the marks and keeps `circuit`'s address: an annotated function asked it for admission
/// on this thread (the store that clears the marks, with another value).
#[inline(always)]
pub(crate) fn enter<T>(circuit: &T) {
    MARKS.set(std::ptr::from_ref(circuit).addr());
}

/// The address of the circuit the last annotated function admitted on this thread asked (0:
/// none, or one that cleared the marks without saying). A circuit's address is aligned far
/// beyond the mark bits. A hint only: that call may be over, or in another task.
pub(crate) fn last_entered() -> usize {
    MARKS.get() & !MARK_BITS
}

/// Sets `mark` in this task: a mark of another task is dropped first.
#[inline]
fn set(mark: usize) {
    let task = tokio::task::try_id();
    let marks = MARKS.get();
    let kept = if TASK.get() == task {
        marks
    } else {
        marks & !MARK_BITS
    };
    TASK.set(task);
    MARKS.set(kept | mark);
}

/// Marks the error being converted from a rejection on this thread and task.
#[inline]
pub(crate) fn mark() {
    set(REJECTION);
}

/// Marks the end of a call whose retry the retry budget rejected, on this thread and task.
#[cold]
pub(crate) fn mark_budget() {
    set(BUDGET);
}

/// True when the last call through the attempt driver on this thread and task, since the last
/// admission, ended because the retry budget rejected its retry.
pub(crate) fn budget_rejected() -> bool {
    MARKS.get() & BUDGET != 0 && TASK.get() == tokio::task::try_id()
}

/// True when the error being classified was converted from an inner breaker's rejection: the
/// mark is set, in this task. `ASYNC`: the classifier is an `async fn`, which honours a mark
/// made outside any task only inside a tokio runtime (the future `block_on` runs, such as a
/// `#[tokio::main]` body, whose thread runs only tokio tasks besides it, and those have ids);
/// with no tokio runtime, futures of other executors may have run on this thread since.
#[cold]
pub(crate) fn rejected_inside<const ASYNC: bool>() -> bool {
    if MARKS.get() & REJECTION == 0 {
        return false;
    }
    let task = tokio::task::try_id();
    TASK.get() == task
        && (task.is_some() || !ASYNC || tokio::runtime::Handle::try_current().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_read_until_the_next_admission() {
        clear();
        assert!(!rejected_inside::<false>());
        mark();
        assert!(rejected_inside::<false>());
        assert!(rejected_inside::<false>(), "reading does not clear it");
        assert!(
            !rejected_inside::<true>(),
            "outside a tokio runtime an `async fn` does not trust it"
        );
        clear();
        assert!(!rejected_inside::<false>());
    }

    #[test]
    fn a_mark_belongs_to_its_task() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            clear();
            mark();
            assert!(
                rejected_inside::<true>(),
                "the future `block_on` runs trusts its own"
            );
            // A current-thread runtime: both tasks run on this thread.
            tokio::spawn(async {
                clear();
                mark();
            })
            .await
            .unwrap();
            assert!(
                MARKS.get() & REJECTION != 0,
                "the other task's mark is on this thread"
            );
            tokio::spawn(async {
                assert!(!rejected_inside::<true>(), "another task's mark");
                assert!(!rejected_inside::<false>(), "another task's mark");
                mark();
                assert!(rejected_inside::<true>(), "this task's mark");
            })
            .await
            .unwrap();
            assert!(
                !rejected_inside::<true>(),
                "a task's mark, not `block_on`'s"
            );
        });
    }
}
