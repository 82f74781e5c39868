//! Outcomes sent to the script off the call path: a permit's settling queues a `Report` (or sums
//! it, in cached and aggregated modes), and wakes the store's reporting task (`task.rs`), which
//! sends them in order.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Degrade;
use super::link::{Asker, Client, Delta, Held, Report, Rounds, Sent, SharedKey, Summed};
use super::op::Op;
use super::script::Answer;
use super::view::{CONFIRMED, view_generation, view_state};
use super::{ANY_GENERATION, generation_of};
use fusebox::Verdict;
use fusebox::store::{Outcome, Site, Ticket};

/// Sends the outcome of a call the store admitted with `ticket` (called when its permit
/// settles).
pub(super) fn report(link: &Arc<SharedKey>, ticket: Ticket, site: Site, outcome: Outcome) {
    let Outcome {
        verdict: outcome,
        slow,
        ..
    } = outcome;
    let generation = generation_of(ticket);
    if outcome == Verdict::Failure {
        link.unconfirmed.fetch_add(1, Ordering::Relaxed);
    }
    let client = &link.store.client;
    if client.flush.is_some() && fold(link, generation, outcome, slow, site) {
        return;
    }
    // Cached mode, and both cached modes while the store does not answer: a success is summed
    // on the link, and one queued job carries the sum as one `count` (no queueing and waking per
    // success), so a key's waiting successes cost memory by key, not by call; a failure, or any
    // report that is not summed, sends the sum ahead of itself, so the script sees the outcomes
    // in their order.
    let away = !client.healthy.load(Ordering::Acquire);
    let summed = away || (client.flush.is_none() && link.caches() && !link.gated());
    if client.cached
        && summed
        && outcome == Verdict::Success
        && !slow
        && sum(link, generation, site)
    {
        return;
    }
    send(link, generation, Op::Record { outcome, slow }, site);
}

/// Aggregated mode: sums the outcome of a call the replica's closed view admitted under
/// `generation` into the link's delta, and queues one fold job per flush interval. False when
/// the call was not admitted by the current closed view (a probe, a degraded call, an older
/// generation): it is reported as in cached mode.
fn fold(link: &Arc<SharedKey>, generation: u64, outcome: Verdict, slow: bool, site: Site) -> bool {
    let view = link.view.load(Ordering::Acquire);
    let closed = view & CONFIRMED != 0 && matches!(view_state(view), 0 | 4);
    if generation == ANY_GENERATION
        || !closed
        || !link.caches()
        || view_generation(view) & (ANY_GENERATION - 1) != generation
    {
        return false;
    }
    // Released: a closed circuit's window does not count it.
    if outcome == Verdict::Ignored {
        return true;
    }
    let queue = {
        let mut delta = link
            .delta
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if delta.calls > 0 && delta.generation != generation {
            // Outcomes of an older generation: the script would change nothing with them.
            link.confirmed(delta.failures);
            *delta = Delta {
                since: delta.since,
                ..Delta::default()
            };
        }
        delta.generation = generation;
        delta.add(outcome == Verdict::Failure, slow);
        // The first outcome since the last fold queues a fold job; its interval starts now,
        // whenever the reporting task takes the job.
        let first = delta.since.is_none();
        if first {
            delta.since = Some(tokio::time::Instant::now());
        }
        first
    };
    if queue {
        enqueue(link, generation, Op::Fold, site, 0, None);
    }
    true
}

/// Adds a success admitted under `generation` to the link's sum, queueing the job that will
/// take the sum when it is the first one; false when the sum holds another generation's
/// successes (the success is then sent on its own, after them).
fn sum(link: &Arc<SharedKey>, generation: u64, site: Site) -> bool {
    let added = link
        .successes
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
            let seen = Summed(word);
            if seen.count() == 0 {
                Some(Summed::new(seen.epoch(), generation, 1).0)
            } else if seen.generation() == generation && seen.count() < Summed::MAX_COUNT {
                Some(seen.plus_one().0)
            } else {
                None
            }
        });
    match added {
        Ok(before) => {
            let seen = Summed(before);
            if seen.count() == 0 {
                enqueue(link, generation, Op::Summed, site, seen.epoch(), None);
            }
            true
        }
        Err(_) => false,
    }
}

/// Takes the link's summed successes ahead of a report that is not summed: they are queued
/// before it, and a job queued for them earlier finds nothing (the epoch moved on).
fn seal(link: &Arc<SharedKey>, site: Site) {
    let taken = link
        .successes
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
            let seen = Summed(word);
            (seen.count() != 0).then(|| Summed::new(seen.epoch() + 1, seen.generation(), 0).0)
        });
    if let Ok(before) = taken {
        let seen = Summed(before);
        enqueue(
            link,
            seen.generation(),
            Op::Successes,
            site,
            seen.count(),
            None,
        );
    }
}

/// The successes an [`Op::Summed`] or [`Op::Successes`] job stands for, and their generation; a summed
/// job takes the link's sum if it is still of the epoch the job was queued in.
pub(super) fn successes_of(job: &Report) -> (u64, u64) {
    if job.op == Op::Successes {
        return (job.sequence, job.generation);
    }
    let taken = job
        .link
        .successes
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
            let seen = Summed(word);
            (seen.count() != 0 && seen.of_epoch(job.sequence))
                .then(|| Summed::new(seen.epoch(), seen.generation(), 0).0)
        });
    match taken {
        Ok(before) => (Summed(before).count(), Summed(before).generation()),
        Err(_) => (0, 0),
    }
}

/// Starts a background read of the shared state, unless one is on its way.
pub(super) fn learn_later(link: &Arc<SharedKey>, site: Site) {
    if !link.learning.swap(true, Ordering::AcqRel) {
        send(link, 0, Op::Learn, site);
    }
}

/// A fold job's `sequence` that makes every waiting fold due now ([`RedisStore::flush`]).
///
/// [`RedisStore::flush`]: super::RedisStore::flush
pub(super) const NOW: u64 = 1;

/// Makes every fold waiting for its interval due now (and wakes the reporting task).
pub(super) fn send_flush_now(link: &Arc<SharedKey>) {
    enqueue(link, 0, Op::Fold, Site::new(&"flush"), NOW, None);
}

/// The most outcomes waiting to be sent again one by one (a key's summed successes, or a fold,
/// count one whatever they sum); past it the oldest are given up (counted).
pub(super) const RESEND_QUEUE: usize = 4096;

/// How many times a report the store did not answer is sent again before it is given up.
pub(super) const RESENDS: u16 = 8;

/// Holds `successes` of `job`'s key until the earlier count of it is answered; the store did
/// not answer that one, so with `Degrade::Local` they are recorded on the local breaker now.
pub(super) fn hold(held: &mut Held, job: Report, successes: u64) {
    let local = job.link.store.client.degrade == Degrade::Local;
    if local {
        for _ in 0..successes {
            job.core.get().record_locally(Verdict::Success, job.site);
        }
    }
    let key = (Arc::as_ptr(&job.link) as usize, job.generation);
    match held.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut entry) => {
            // A count is at most `Summed::MAX_COUNT` successes: the rest is given up (counted).
            let held = entry.get_mut();
            let taken = successes.min(Summed::MAX_COUNT - held.count);
            held.count += taken;
            if taken < successes {
                give_up(&job.link.store.client, &job, successes - taken);
                job.link
                    .applied
                    .fetch_add(successes - taken, Ordering::AcqRel);
                job.link.done.notify_waiters();
            }
        }
        std::collections::hash_map::Entry::Vacant(entry) => {
            let mut sent = Sent::counting(job, successes);
            sent.local = local;
            entry.insert(sent);
        }
    }
}

/// Moves the held counts whose earlier count is no longer waiting (answered, or given up) to the
/// calls to send again, each with a new sequence number (after every number sent so far).
pub(super) fn release_held(client: &Client, rounds: &mut Rounds) {
    let waiting: Vec<(usize, u64)> = rounds.again.iter().filter_map(Sent::counted).collect();
    let ready: Vec<(usize, u64)> = rounds
        .held
        .keys()
        .filter(|key| !waiting.contains(key))
        .copied()
        .collect();
    for key in ready {
        if let Some(mut sent) = rounds.held.remove(&key) {
            sent.job.sequence = client.sequence.fetch_add(1, Ordering::Relaxed) + 1;
            rounds.again.push_back(sent);
        }
    }
}

/// Counts `count` outcomes of `job`'s key given up, in the store's total, the key's
/// `fusebox_store_dropped_total` and a WARN event naming the key, once per key per outage.
pub(super) fn give_up(client: &Client, job: &Report, count: u64) {
    client.dropped.fetch_add(count, Ordering::AcqRel);
    let link = &job.link;
    let dropped = link.dropped.fetch_add(count, Ordering::AcqRel) + count;
    job.core.get().dropped(count);
    let outage = client.outages.load(Ordering::Acquire) + 1;
    if link.warned.swap(outage, Ordering::AcqRel) != outage {
        tracing::warn!(
            target: "fusebox",
            key = link.hash.as_str(),
            dropped,
            "redis store did not record {count} outcome(s) of this key after {RESENDS} attempts or past the resend queue of {RESEND_QUEUE} ({dropped} so far); with `Degrade::Local` they counted on this replica's local breaker only; more in this outage are counted in `fusebox_store_dropped_total` only (check the store's latency and `RedisStoreBuilder::timeout`)"
        );
    }
}

/// Tells the script that this replica opened its own view alone (a key with a quorum): counted
/// toward the quorum while the shared circuit is closed.
pub(super) fn alone(link: &Arc<SharedKey>, site: Site) {
    send(link, ANY_GENERATION, Op::Alone, site);
}

/// Hands a job to the reporting task (or, when it is gone, applies it locally).
pub(super) fn send(link: &Arc<SharedKey>, generation: u64, op: Op, site: Site) {
    enqueue(link, generation, op, site, 0, None);
}

/// Gives back the half-open probe admission number `token` of this replica holds, if the script
/// granted one: its `admit` was sent, but its answer never arrived (the call timed out, failed,
/// or its caller stopped waiting). Sent on the store's one connection after that `admit`, so
/// Redis runs it after the admission whenever both arrive.
pub(super) fn send_cancel(link: &Arc<SharedKey>, token: u64, site: Site) {
    enqueue(link, 0, Op::Cancel, site, token, None);
}

/// Asks the reporting task for an admission; the answer goes to `reply`.
pub(super) fn send_admit(
    link: &Arc<SharedKey>,
    seed: u64,
    remaining: u64,
    site: Site,
    reply: std::sync::mpsc::SyncSender<Result<Answer, ()>>,
) {
    let token = link.store.client.admissions.fetch_add(1, Ordering::Relaxed) + 1;
    let asker = Asker { reply, token };
    enqueue(
        link,
        remaining,
        Op::Admit,
        site,
        seed,
        Some(Box::new(asker)),
    );
}

fn enqueue(
    link: &Arc<SharedKey>,
    generation: u64,
    op: Op,
    site: Site,
    sequence: u64,
    asker: Option<Box<Asker>>,
) {
    if matches!(op, Op::Record { .. }) {
        seal(link, site);
    }
    link.pending.fetch_add(1, Ordering::AcqRel);
    let Some(owner) = link.circuit() else {
        link.applied.fetch_add(1, Ordering::AcqRel);
        return;
    };
    let job = Report {
        link: link.clone(),
        core: owner,
        generation,
        op,
        site,
        sequence,
        misses: 0,
        asker,
    };
    match link.store.reports.send(job) {
        Ok(()) => link.store.client.work.notify_one(),
        Err(failed) => {
            let job = failed.0;
            if job.op.sums() {
                let (successes, _) = successes_of(&job);
                for _ in 0..successes {
                    job.core.get().record_locally(Verdict::Success, site);
                }
            } else {
                let outcome = job.op.outcome();
                job.link.confirmed(u64::from(outcome == Verdict::Failure));
                job.core.get().record_locally(outcome, site);
            }
            job.link.applied.fetch_add(1, Ordering::AcqRel);
            job.link.done.notify_waiters();
        }
    }
}
