//! What the expansion calls on a shared key: whether a permit asks the store, the admission
//! awaited from the script, and the wait for an outcome's recording (strict mode). Each returns
//! a boxed future, so a local key's call does not carry a shared call's state in its own future.
//! The public functions reach the link through the breaker's `Store`; `admit` and `flush` are
//! what the link does for them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Degrade;
use super::link::{CONFIRMED, SharedKey, view_generation, view_state};
use super::report::send_cancel;
use super::script::{Answer, apply, call};
use crate::breaker::{
    BoxFuture, Circuit, FnName, Named, NamedPermit, RawPermit, shared_admission,
    unknown_shared_admission,
};
use crate::error::{Error, Reason};
use crate::state::{State, Word};

/// True when `permit` (rejected) asks the store for admission: its breaker is shared.
#[inline(always)]
#[must_use]
pub fn asks_store(permit: &RawPermit<'_>) -> bool {
    permit.asks_store().is_some()
}

/// True when `permit`'s breaker is shared in strict mode (or cached mode without its
/// subscription): the call awaits the recording of its outcome.
#[inline(always)]
#[must_use]
pub fn reports_to_store(permit: &RawPermit<'_>) -> bool {
    permit
        .core()
        .store
        .as_ref()
        .is_some_and(|store| store.awaits_recording())
}

/// Completes the admission of an `async fn` call on a shared registry (the function named
/// `name`): awaits the script's answer and turns `permit` into it. Returns the rejection, if any.
pub fn admit_shared<'p, 'a>(
    permit: &'p mut RawPermit<'a>,
    name: FnName,
) -> BoxFuture<'p, Option<Error>> {
    let Some((core, store)) = permit
        .asks_store()
        .and_then(|core| Some((core, core.store.as_ref()?)))
    else {
        return Box::pin(std::future::ready(None));
    };
    let answer = store.admit(core, name);
    Box::pin(async move {
        permit.replace(answer.await);
        permit.rejection()
    })
}

/// The attempt driver's admission: `Ok` with `admitted` as it is, or, when its permit asks the
/// store, `Err` with the wait for the store's answer (the permit admitted, or its rejection). Takes
/// `admitted` by value, so the driver never borrows it and does not keep it across the attempt.
#[allow(clippy::type_complexity)]
pub(crate) fn attempt_admission<'a, N: Named + 'a>(
    admitted: Result<NamedPermit<'a, N>, Error>,
) -> Result<
    Result<NamedPermit<'a, N>, Error>,
    std::pin::Pin<Box<impl std::future::Future<Output = Result<NamedPermit<'a, N>, Error>> + 'a>>,
> {
    match admitted {
        Ok(mut permit) if asks_store(&permit.raw) => Err(Box::pin(async move {
            let name = permit.site.name();
            match admit_shared(&mut permit.raw, name).await {
                None => Ok(permit),
                Some(rejected) => Err(rejected),
            }
        })),
        other => Ok(other),
    }
}

/// Gives back `out` once `recording` (when there is one) is done. One pointer in the caller's
/// future while it waits.
pub(crate) fn after_recording<'a, T: 'a>(
    recording: Option<BoxFuture<'a, ()>>,
    out: T,
) -> std::pin::Pin<Box<impl std::future::Future<Output = T> + 'a>> {
    Box::pin(async move {
        if let Some(recording) = recording {
            recording.await;
        }
        out
    })
}

/// The store's answer to the admission of a call of `site` on `core` (shared through `link`),
/// awaited from the script: the permit that replaces the one that asked.
pub(super) fn admit<'a>(
    link: &'a Arc<SharedKey>,
    core: &'a Circuit,
    site: FnName,
) -> BoxFuture<'a, NamedPermit<'a>> {
    Box::pin(async move {
        let client = &link.store.client;
        let (seed, remaining) = core.seed();
        let token = client.admissions.fetch_add(1, Ordering::Relaxed) + 1;
        // Until the answer is read, a probe the script grants is given back if this call times
        // out, fails, or is dropped (its caller cancelled): its slot is not held until the lease.
        let mut unheard = Unheard {
            link,
            token,
            site,
            armed: true,
        };
        let answer = call(
            client,
            link,
            "admit",
            &[seed, remaining, client.replica, token],
        )
        .await;
        client.probing.store(false, Ordering::Release);
        match answer {
            Ok(answer) => {
                unheard.armed = false;
                apply(link, core, &answer, site);
                permit_of(core, &answer, site)
            }
            Err(()) => degraded(core, link, site),
        }
    })
}

/// An admission asked of the script whose answer has not been read: dropped armed, it gives back
/// the probe the script may have granted ([`send_cancel`]).
struct Unheard<'a> {
    link: &'a Arc<SharedKey>,
    token: u64,
    site: FnName,
    armed: bool,
}

impl Drop for Unheard<'_> {
    fn drop(&mut self) {
        if self.armed {
            send_cancel(self.link, self.token, self.site);
        }
    }
}

/// The permit of the script's answer to an `admit`.
pub(super) fn permit_of<'c>(core: &'c Circuit, answer: &Answer, site: FnName) -> NamedPermit<'c> {
    match answer.code {
        1 | 2 => core.store_permit(shared_admission(answer.generation), site),
        3 => core.store_rejection(Reason::HalfOpenFull, None, site),
        4 => core.store_rejection(Reason::ForcedOpen, None, site),
        5 => core.store_rejection(Reason::Recovering, None, site),
        _ => core.store_rejection(
            Reason::Open,
            Some(Duration::from_millis(answer.remaining_ms)),
            site,
        ),
    }
}

/// The admission of a call on a shared key whose store did not answer, per the store's
/// [`Degrade`].
///
/// [`Degrade::Local`] never splits the circuit: a circuit the replica last knew closed (or
/// disabled) admits under that view's generation, so the outcome is sent to the store (again,
/// until it answers) and recorded on the local breaker too; a closed local breaker with no
/// confirmed view of the key (the replica's first calls, say) admits under no generation, and the
/// script counts the outcome if the circuit is closed when it arrives; an open circuit rejects while its wait
/// runs, and once the wait is over it stays open (reason `Open`, no probe) while the store has
/// been unreachable for less than [`RedisStoreBuilder::local_recovery_after`]: the store grants
/// probes, so a replica that cannot reach it runs no half-open of its own. Past that bound the
/// local breaker recovers alone, and announces its transitions with `shared = false`.
///
/// [`RedisStoreBuilder::local_recovery_after`]: super::RedisStoreBuilder::local_recovery_after
pub(super) fn degraded<'c>(core: &'c Circuit, link: &SharedKey, site: FnName) -> NamedPermit<'c> {
    let client = &link.store.client;
    match client.degrade {
        Degrade::FailOpen => return core.store_permit(Word::SETTLED, site),
        Degrade::FailClosed => return core.store_rejection(Reason::Open, None, site),
        Degrade::Local => {}
    }
    let view = link.view.load(Ordering::Acquire);
    let local = core.local_state();
    let closed_view = view & CONFIRMED != 0 && matches!(view_state(view), 0 | 4);
    match local {
        State::Closed | State::Disabled if closed_view => {
            core.store_permit(shared_admission(view_generation(view)), site)
        }
        // No confirmed view of this key (the replica's first calls, or its views were forgotten
        // when the subscription dropped, or only a message announced the state): the outcome is
        // sent all the same, and the script counts it if the circuit is closed when it arrives.
        State::Closed | State::Disabled if view & CONFIRMED == 0 => {
            core.store_permit(unknown_shared_admission(), site)
        }
        State::Open | State::HalfOpen if !client.recovers_locally() => {
            let (_, remaining) = core.seed();
            let wait = (remaining > 0).then(|| Duration::from_millis(remaining));
            core.store_rejection(Reason::Open, wait, site)
        }
        _ => core.admit_local(site),
    }
}

/// Waits until the outcome reported on `permit` is recorded in the store (strict mode, bounded by
/// the store's timeout), then gives back `out` (the call's result, moved into this boxed future so
/// the caller's own future holds nothing of it across the await).
pub fn flush_then<'p, T: 'p>(
    permit: &'p RawPermit<'_>,
    out: T,
) -> std::pin::Pin<Box<impl std::future::Future<Output = T> + 'p>> {
    after_recording(recording(permit.core()), out)
}

/// The wait for the recording of the outcomes reported so far on `core`, when its calls await it
/// (a breaker shared in strict mode); `None` otherwise.
pub(crate) fn recording(core: &Circuit) -> Option<BoxFuture<'_, ()>> {
    let store = core.store.as_ref()?;
    store.awaits_recording().then(|| store.flush())
}

/// Waits until the outcomes reported on `link` so far are recorded, bounded by the store's
/// timeout.
pub(super) fn flush(link: &SharedKey) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let target = link.pending.load(Ordering::Acquire);
        let client = &link.store.client;
        let wait = async {
            loop {
                let notified = link.done.notified();
                if link.applied.load(Ordering::Acquire) >= target {
                    return;
                }
                // No round on its way: this call sends the queued reports, its own among them,
                // itself (no hop through the reporting task).
                if super::report::send_own(client).await {
                    continue;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(client.timeout() * 2, wait).await;
    })
}
