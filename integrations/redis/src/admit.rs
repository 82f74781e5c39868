//! The admission awaited from the script, the admission of a call while the store does not
//! answer, and the wait for an outcome's recording (strict mode): what a shared key's side of the
//! store does when the breaker awaits it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Degrade;
use super::link::SharedKey;
use super::report::{learn_later, send_cancel};
use super::script::{Answer, apply, call};
use super::seed;
use super::view::{CONFIRMED, view_generation, view_state};
use fusebox::Reason;
use fusebox::State;
use fusebox::store::{Admission, BoxFuture, CircuitRef, Site, Ticket};

/// The store's answer to the admission of a call of `site` on `core` (shared through `link`),
/// awaited from the script.
pub(super) fn admit<'a>(
    link: &'a Arc<SharedKey>,
    core: CircuitRef<'a>,
    site: Site,
) -> BoxFuture<'a, Admission> {
    Box::pin(async move {
        let client = &link.store.client;
        let (seed, remaining) = seed(core);
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
                if apply(link, core, &answer, site) {
                    learn_later(link, site);
                }
                permit_of(&answer)
            }
            Err(()) => degraded(core, link),
        }
    })
}

/// An admission asked of the script whose answer has not been read: dropped armed, it gives back
/// the probe the script may have granted ([`send_cancel`]).
struct Unheard<'a> {
    link: &'a Arc<SharedKey>,
    token: u64,
    site: Site,
    armed: bool,
}

impl Drop for Unheard<'_> {
    fn drop(&mut self) {
        if self.armed {
            send_cancel(self.link, self.token, self.site);
        }
    }
}

/// The admission of the script's answer to an `admit`.
pub(super) fn permit_of(answer: &Answer) -> Admission {
    match answer.code {
        1 | 2 => Admission::Admitted(Ticket::generation(answer.generation)),
        3 => Admission::rejected(Reason::HalfOpenFull, None),
        4 => Admission::rejected(Reason::ForcedOpen, None),
        5 => Admission::rejected(Reason::Recovering, None),
        _ => Admission::rejected(
            Reason::Open,
            Some(Duration::from_millis(answer.remaining_ms)),
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
pub(super) fn degraded(core: CircuitRef<'_>, link: &SharedKey) -> Admission {
    let client = &link.store.client;
    match client.degrade {
        Degrade::FailOpen => return Admission::Unrecorded,
        Degrade::FailClosed => return Admission::rejected(Reason::Open, None),
        Degrade::Local => {}
    }
    let view = link.view.load(Ordering::Acquire);
    let local = core.state();
    let closed_view = view & CONFIRMED != 0 && matches!(view_state(view), 0 | 4);
    match local {
        State::Closed | State::Disabled if closed_view => {
            Admission::Admitted(Ticket::generation(view_generation(view)))
        }
        // No confirmed view of this key (the replica's first calls, or its views were forgotten
        // when the subscription dropped, or only a message announced the state): the outcome is
        // sent all the same, and the script counts it if the circuit is closed when it arrives.
        State::Closed | State::Disabled if view & CONFIRMED == 0 => {
            Admission::Admitted(Ticket::unknown())
        }
        State::Open | State::HalfOpen if !client.recovers_locally() => {
            let (_, remaining) = seed(core);
            let wait = (remaining > 0).then(|| Duration::from_millis(remaining));
            Admission::rejected(Reason::Open, wait)
        }
        _ => Admission::Local,
    }
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
                if super::task::send_own(client).await {
                    continue;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(client.timeout().saturating_mul(2), wait).await;
    })
}
