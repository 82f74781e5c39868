//! Outcomes sent to the script off the call path: a permit's settling queues a `Report`, one
//! task per store sends them in order, pipelining what queued meanwhile, and applies the answers
//! (or, when Redis does not answer, records them on the local breaker).

use std::sync::Arc;
use std::sync::atomic::Ordering;

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
    let slow = u64::from(failure.is_some() && slow);
    send(link, generation_of(word), outcome, slow, site);
}

/// The `outcome` of a job that reads the shared state instead of reporting.
pub(super) const LEARN: u64 = 3;

/// Hands a job to the reporting task (or, when it is gone, applies it locally).
pub(super) fn send(link: &Arc<Link>, generation: u64, outcome: u64, slow: u64, site: FnName) {
    let failure = match outcome {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    };
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
pub(super) async fn worker(
    client: Arc<Client>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Report>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(job) = rx.recv().await {
        batch.push(job);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let answers = if batch.len() == 1 {
            let job = &batch[0];
            if job.outcome == LEARN {
                vec![call(&client, &job.link, "state", &[]).await]
            } else {
                let extra = [job.generation, job.outcome, job.slow];
                vec![call(&client, &job.link, "report", &extra).await]
            }
        } else {
            pipelined(&client, &batch).await
        };
        for (job, answer) in batch.drain(..).zip(answers) {
            match answer {
                Ok(answer) => apply(&job.link, &job.core, &answer, job.site),
                Err(()) => {
                    if client.degrade == Degrade::Local {
                        let failure = match job.outcome {
                            1 => Some(false),
                            2 => Some(true),
                            _ => None,
                        };
                        job.core.report_locally(failure, job.site);
                    }
                }
            }
            if job.outcome == LEARN {
                job.link.learning.store(false, Ordering::Release);
            }
            job.link.applied.fetch_add(1, Ordering::AcqRel);
            job.link.done.notify_waiters();
        }
    }
}

/// The script's `report` for `job`, as an `EVALSHA` command.
fn report_command(client: &Client, job: &Report) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(client.script.get_hash())
        .arg(1)
        .arg(&job.link.hash)
        .arg(if job.outcome == LEARN {
            "state"
        } else {
            "report"
        });
    match &client.time {
        Some(clock) => cmd.arg(clock.now_nanos() / 1_000_000),
        None => cmd.arg(""),
    };
    for value in job.link.args.iter() {
        cmd.arg(*value);
    }
    if job.outcome != LEARN {
        cmd.arg(job.generation).arg(job.outcome).arg(job.slow);
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
    let mut result =
        tokio::time::timeout(client.timeout, pipe.query_async::<Vec<Vec<i64>>>(&mut conn)).await;
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
        if let Ok(Some(again)) = tokio::time::timeout(client.timeout, reload).await {
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
            degrade_event(
                client,
                first,
                &format!("no answer within {:?}", client.timeout),
            );
            batch.iter().map(|_| Err(())).collect()
        }
    }
}
