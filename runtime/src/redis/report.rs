//! Outcomes sent to the script off the call path: a permit's settling queues a `Report`, one
//! task per store sends them in order, pipelining what queued meanwhile, and applies the answers
//! (or, when Redis does not answer, records them on the local breaker).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Degrade;
use super::link::{Client, Link, Report};
use super::script::{Answer, answer_of, apply, call, degrade_event};
use crate::breaker::{FnName, generation_of};
use crate::state::Word;

/// Sends the outcome of a call the store admitted under `word` (called when its permit settles;
/// `slow` when slow-call timing found it slow).
pub(super) fn report(
    link: &Arc<Link>,
    word: Word,
    slow: bool,
    site: FnName,
    failure: Option<bool>,
) {
    let outcome = match failure {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    let slow = u8::from(failure.is_some() && slow);
    send(link, generation_of(word), outcome, slow, site);
}

/// The `outcome` of a job that reads the shared state instead of reporting.
pub(super) const LEARN: u8 = 3;

/// The `outcome` of a job that asks the script for an admission (for a caller waiting on its
/// thread; never sent twice).
pub(super) const ADMIT: u8 = 4;

/// The most reports waiting to be sent again; past it the oldest are given up (counted).
pub(super) const RESEND_QUEUE: usize = 4096;

/// How many times a report the store did not answer is sent again before it is given up.
pub(super) const RESENDS: u16 = 8;

/// Hands a job to the reporting task (or, when it is gone, applies it locally).
pub(super) fn send(link: &Arc<Link>, generation: u64, outcome: u8, slow: u8, site: FnName) {
    enqueue(link, generation, outcome, slow, site, 0, None);
}

/// Asks the reporting task for an admission; the answer goes to `reply`.
pub(super) fn send_admit(
    link: &Arc<Link>,
    seed: u64,
    remaining: u64,
    site: FnName,
    reply: std::sync::mpsc::SyncSender<Result<Answer, ()>>,
) {
    enqueue(link, remaining, ADMIT, 0, site, seed, Some(Box::new(reply)));
}

fn enqueue(
    link: &Arc<Link>,
    generation: u64,
    outcome: u8,
    slow: u8,
    site: FnName,
    sequence: u64,
    reply: Option<Box<std::sync::mpsc::SyncSender<Result<Answer, ()>>>>,
) {
    let failure = failure_of(outcome);
    link.pending.fetch_add(1, Ordering::AcqRel);
    let Some(owner) = link.core.upgrade() else {
        link.applied.fetch_add(1, Ordering::AcqRel);
        return;
    };
    let job = Report {
        link: link.clone(),
        core: owner,
        generation,
        outcome,
        slow,
        site,
        sequence,
        misses: 0,
        reply,
    };
    if let Err(failed) = link.store.reports.send(job) {
        let job = failed.0;
        job.core.report_locally(failure, site);
        job.link.applied.fetch_add(1, Ordering::AcqRel);
        job.link.done.notify_waiters();
    }
}

/// The most reports sent in one round trip.
const BATCH: usize = 256;

/// Sends reports in order: one script call each, and the reports queued meanwhile (up to
/// [`BATCH`]) pipelined in one round trip.
///
/// A report the store does not answer is recorded on the local breaker (the first time) and
/// sent again, before any later report, up to [`RESENDS`] times; the script records each report
/// at most once (its sequence number), so a report whose answer was lost, though the script ran,
/// is not counted twice. At most [`RESEND_QUEUE`] reports wait to be sent again; what is given
/// up is counted ([`RedisStore::dropped_reports`](super::RedisStore::dropped_reports)) and
/// announced with a WARN event.
pub(super) async fn worker(
    client: Arc<Client>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Report>,
) {
    let mut batch: Vec<Report> = Vec::with_capacity(BATCH);
    let mut again: std::collections::VecDeque<Report> = std::collections::VecDeque::new();
    loop {
        if again.is_empty() {
            match rx.recv().await {
                Some(job) => batch.push(numbered(&client, job)),
                None => return,
            }
        } else {
            // Waits a little before sending again, so a store that stopped answering is not
            // asked in a loop.
            tokio::time::sleep(client.timeout().min(Duration::from_millis(100))).await;
            while batch.len() < BATCH {
                match again.pop_front() {
                    Some(job) => batch.push(job),
                    None => break,
                }
            }
        }
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(numbered(&client, job)),
                Err(_) => break,
            }
        }
        let answers = if batch.len() == 1 {
            let job = &batch[0];
            let (op, extra) = op_of(&client, job);
            vec![call(&client, &job.link, op, &extra).await]
        } else {
            pipelined(&client, &batch).await
        };
        for (mut job, answer) in batch.drain(..).zip(answers) {
            match answer {
                Ok(answer) => {
                    apply(&job.link, &job.core, &answer, job.site);
                    if let Some(reply) = job.reply.take() {
                        let _ = reply.try_send(Ok(answer));
                    }
                }
                Err(()) => {
                    if job.outcome <= 2 {
                        if job.misses == 0 && client.degrade == Degrade::Local {
                            job.core.report_locally(failure_of(job.outcome), job.site);
                        }
                        job.misses += 1;
                        if job.misses <= RESENDS {
                            again.push_back(job);
                            continue;
                        }
                        give_up(&client, &job, 1);
                    }
                    if let Some(reply) = job.reply.take() {
                        let _ = reply.try_send(Err(()));
                    }
                }
            }
            finished(&job);
        }
        if again.len() > RESEND_QUEUE {
            let over = again.len() - RESEND_QUEUE;
            for job in again.drain(..over) {
                give_up(&client, &job, 1);
                finished(&job);
            }
        }
    }
}

/// Numbers a report as it is first sent (sent again, it keeps its number), and counts it in the
/// metrics and this replica's calls ([`Core::count_shared`](crate::breaker::Core)). The reporting task
/// numbers reports in the order it sends them, so the script, which takes a replica's numbers
/// only in increasing order, never mistakes a report for a copy because callers on other threads
/// queued theirs out of order.
fn numbered(client: &Client, mut job: Report) -> Report {
    if job.outcome <= 2 {
        job.sequence = client.sequence.fetch_add(1, Ordering::Relaxed) + 1;
    }
    job
}

/// The failure flag of a report's outcome (`None`: released).
fn failure_of(outcome: u8) -> Option<bool> {
    match outcome {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

/// A job is done (answered, or given up).
fn finished(job: &Report) {
    if job.outcome == LEARN {
        job.link.learning.store(false, Ordering::Release);
    }
    job.link.applied.fetch_add(1, Ordering::AcqRel);
    job.link.done.notify_waiters();
}

/// Counts a report given up, with a WARN event the first time and every 1,024th after.
fn give_up(client: &Client, job: &Report, count: u64) {
    let before = client.dropped.fetch_add(count, Ordering::AcqRel);
    if before == 0 || before / 1024 != (before + count) / 1024 {
        tracing::warn!(
            target: "fusebox",
            key = job.link.hash.as_str(),
            dropped = before + count,
            "redis store did not record {} outcome(s) after {RESENDS} attempts or past the resend queue of {RESEND_QUEUE}; they count on this replica's local breaker only (check the store's latency and `RedisStoreBuilder::timeout`)",
            before + count
        );
    }
}

/// The script's op and its extra arguments for `job`.
fn op_of(client: &Client, job: &Report) -> (&'static str, Vec<u64>) {
    match job.outcome {
        LEARN => ("state", Vec::new()),
        ADMIT => ("admit", vec![job.sequence, job.generation]),
        _ => (
            "report",
            vec![
                job.generation,
                u64::from(job.outcome),
                u64::from(job.slow),
                client.replica,
                job.sequence,
            ],
        ),
    }
}

/// The script's call for `job`, as an `EVALSHA` command.
fn report_command(client: &Client, job: &Report) -> redis::Cmd {
    let (op, extra) = op_of(client, job);
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(client.script.get_hash())
        .arg(1)
        .arg(&job.link.hash)
        .arg(op);
    match &client.time {
        Some(clock) => cmd.arg(clock.now_nanos() / 1_000_000),
        None => cmd.arg(""),
    };
    for value in job.link.args.iter().chain(&extra) {
        cmd.arg(*value);
    }
    cmd
}

/// Sends `batch` in one pipeline (loading the script once when Redis answers `NOSCRIPT`), bounded
/// by the store's timeout; one answer per report, in order.
async fn pipelined(client: &Client, batch: &[Report]) -> Vec<Result<Answer, ()>> {
    let mut pipe = redis::pipe();
    for job in batch {
        pipe.add_command(report_command(client, job));
    }
    let mut conn = client.conn.clone();
    let bound = client.timeout();
    let started = std::time::Instant::now();
    let mut result =
        tokio::time::timeout(bound, pipe.query_async::<Vec<Vec<i64>>>(&mut conn)).await;
    if let Ok(Ok(_)) = &result {
        client.bound.observe(started.elapsed());
    }
    if let Ok(Err(error)) = &result
        && error.code() == Some("NOSCRIPT")
    {
        let reload = async {
            client
                .script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .ok()?;
            Some(pipe.query_async::<Vec<Vec<i64>>>(&mut conn).await)
        };
        if let Ok(Some(again)) = tokio::time::timeout(bound, reload).await {
            result = Ok(again);
        }
    }
    let first = &batch[0].link;
    match result {
        Ok(Ok(answers)) if answers.len() == batch.len() => batch
            .iter()
            .zip(answers)
            .map(|(job, values)| answer_of(client, &job.link, values))
            .collect(),
        Ok(Ok(answers)) => {
            degrade_event(client, first, &format!("{} answers", answers.len()));
            batch.iter().map(|_| Err(())).collect()
        }
        Ok(Err(error)) => {
            degrade_event(client, first, &error.to_string());
            batch.iter().map(|_| Err(())).collect()
        }
        Err(_) => {
            client.bound.missed();
            degrade_event(client, first, &format!("no answer within {bound:?}"));
            batch.iter().map(|_| Err(())).collect()
        }
    }
}
