//! The reporting task: takes what the call path queued ([`super::report`]), merges the reports
//! of one key, generation and call site into script calls, pipelines one round of them, applies
//! the answers, and, when Redis does not answer, sends them again or records them on the local
//! breaker. A call waiting for its own report may send a round itself ([`send_own`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Degrade;
use super::link::{Client, Folds, Held, Report, Rounds, Sent, SharedKey, Summed};
use super::op::Op;
use super::report::{
    NOW, RESEND_QUEUE, RESENDS, give_up, hold, learn_later, release_held, send, send_cancel,
    successes_of,
};
use super::script::{Answer, answer_of, apply, degrade_event};
use fusebox::Verdict;
use fusebox::store::Site;

/// The most script calls sent in one round trip.
const BATCH: usize = 256;

/// The most queued jobs taken for one round trip (merged into at most [`BATCH`] script calls).
const DRAIN: usize = 16 * 1024;

/// The most outcomes merged into one script call (the script applies them in one loop).
const MERGED: usize = 1024;

impl Sent {
    /// The jobs this call stands for (one for an admission, a read or a fold; a count's
    /// successes).
    fn reports(&self) -> u64 {
        if self.delta.is_some() {
            1
        } else if self.count > 0 {
            self.count
        } else {
            self.codes.len().max(1) as u64
        }
    }

    /// The outcomes this call carries.
    fn outcomes(&self) -> u64 {
        match &self.delta {
            Some(delta) => delta.calls,
            None if self.count > 0 => self.count,
            None => self.codes.len() as u64,
        }
    }

    /// The failures this call carries.
    fn failures(&self) -> u64 {
        match &self.delta {
            Some(delta) => delta.failures,
            // A merged call's head may be an `Alone` job: the records behind it are read too.
            None if matches!(self.job.op, Op::Record { .. } | Op::Alone) => {
                self.codes
                    .iter()
                    .filter(|&&code| Op::decode(code).outcome() == Verdict::Failure)
                    .count() as u64
            }
            None => 0,
        }
    }

    /// True when it carries outcomes (sent again when the store does not answer).
    fn carries_outcomes(&self) -> bool {
        self.job.op.carries_outcomes()
    }

    /// Records its outcomes on the local breaker (the store did not answer, `Degrade::Local`).
    fn record_locally(&self) {
        let job = &self.job;
        match &self.delta {
            Some(delta) => delta
                .outcomes()
                .for_each(|failure| job.core.get().record_locally(failure, job.site)),
            None if self.count > 0 => (0..self.count)
                .for_each(|_| job.core.get().record_locally(Verdict::Success, job.site)),
            None => self.codes.iter().for_each(|&code| {
                job.core
                    .get()
                    .record_locally(Op::decode(code).outcome(), job.site)
            }),
        }
    }
}

/// The digit of a record's outcome in the script's `report` op.
fn code_of(job: &Report) -> u8 {
    job.op.encode().1.unwrap_or(b'0')
}

/// Takes what is queued (up to [`DRAIN`] jobs) into `batch` after the jobs already there,
/// merging the reports of one key, generation and call site into one script call of at most [`MERGED`]
/// outcomes, so the store's load follows the round trips, not the calls: a fleet that settles
/// outcomes faster than one round trip per report is never behind by more than one round trip.
fn take(client: &Client, rounds: &mut Rounds) {
    let Rounds {
        rx,
        batch,
        folds,
        held,
        ..
    } = rounds;
    let resent = batch.len();
    // Merged per key, generation and call site: a transition's event names the function whose
    // outcome the script applied.
    let mut open: Open = std::collections::HashMap::new();
    let mut taken = 0;
    while taken < DRAIN && batch.len() < BATCH {
        let Ok(job) = rx.try_recv() else {
            break;
        };
        taken += 1;
        if job.op == Op::Fold {
            queue_fold(client, folds, job);
            continue;
        }
        if job.op.sums() {
            let (successes, generation) = successes_of(&job);
            if successes == 0 {
                finished_job(&job, 1);
                continue;
            }
            // The job stands for each of its successes from now on.
            job.link.pending.fetch_add(successes - 1, Ordering::AcqRel);
            push_count(held, batch, (resent, &mut open), job, generation, successes);
            continue;
        }
        if !matches!(job.op, Op::Record { .. } | Op::Alone) {
            batch.push(Sent::of(job, Vec::new()));
            continue;
        }
        merge_record(batch, &mut open, job);
    }
    take_due_folds(batch, folds);
    for sent in &mut batch[resent..] {
        if sent.carries_outcomes() {
            sent.job.sequence = client.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        }
    }
}

/// The script calls of one round open to more outcomes, by key, generation and call site.
type Open = std::collections::HashMap<(*const SharedKey, u64, Site), usize>;

/// Queues a fold job in `folds`, in deadline order (a flush-now job makes every fold due now).
fn queue_fold(client: &Client, folds: &mut Folds, job: Report) {
    let now = tokio::time::Instant::now();
    if job.sequence == NOW {
        folds.iter_mut().for_each(|(due, _)| *due = now);
        finished_job(&job, 1);
        return;
    }
    // Due one flush interval after the delta's first outcome, however late this task took its
    // job (a busy host may run it well after the outcome was summed), less tokio's timer tick: a
    // timer fires on the millisecond tick after its deadline, so a deadline one tick early lets
    // the fold leave within its interval.
    let since = job
        .link
        .delta
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .since
        .unwrap_or(now);
    let flush = client.flush.unwrap_or_default();
    let tick = Duration::from_millis(1).min(flush / 4);
    let due = since.checked_add(flush - tick).unwrap_or(since);
    // In deadline order: a caller held up between its first outcome and sending the job queues
    // it behind later ones, and the folds leave from the front.
    let at = folds.partition_point(|(other, _)| *other <= due);
    folds.insert(at, (due, job));
}

/// Adds a record job's outcome to the round's open call of its key, generation and call site,
/// or opens one.
fn merge_record(batch: &mut Vec<Sent>, open: &mut Open, job: Report) {
    let code = code_of(&job);
    let merge_key = (Arc::as_ptr(&job.link), job.generation, job.site);
    if let Some(&at) = open.get(&merge_key)
        && batch[at].count == 0
        && batch[at].codes.len() < MERGED
    {
        batch[at].codes.push(code);
        // The merged call stands for this report too: it is done with it.
        return;
    }
    open.insert(merge_key, batch.len());
    batch.push(Sent::of(job, vec![code]));
}

/// Moves the folds whose interval has passed into the round, while it has room.
fn take_due_folds(batch: &mut Vec<Sent>, folds: &mut Folds) {
    let now = tokio::time::Instant::now();
    while batch.len() < BATCH
        && let Some((due, _)) = folds.front()
        && *due <= now
    {
        let Some((_, mut job)) = folds.pop_front() else {
            break;
        };
        let delta = {
            let mut delta = job
                .link
                .delta
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            std::mem::take(&mut *delta)
        };
        if delta.calls == 0 {
            finished_job(&job, 1);
            continue;
        }
        job.generation = delta.generation;
        batch.push(Sent {
            delta: Some(delta),
            ..Sent::of(job, delta.argument().into_bytes())
        });
    }
}

/// Adds `successes` successes of `generation` (a summed job's, `job`) to the round: to the
/// successes held for their key while an earlier count of it waits for the store's answer (one
/// of the round's first `resent` calls), to the round's open `count` of their key, generation
/// and call site, or its open report (as digits, while the store answers), or as a new count.
fn push_count(
    held: &mut Held,
    batch: &mut Vec<Sent>,
    (resent, open): (usize, &mut Open),
    mut job: Report,
    generation: u64,
    successes: u64,
) {
    job.op = Op::Successes;
    job.generation = generation;
    let key = (Arc::as_ptr(&job.link) as usize, generation);
    if batch[..resent]
        .iter()
        .any(|sent| sent.counted() == Some(key))
    {
        hold(held, job, successes);
        return;
    }
    let merge_key = (Arc::as_ptr(&job.link), generation, job.site);
    if let Some(&at) = open.get(&merge_key) {
        let sent = &mut batch[at];
        if sent.count > 0 && sent.count + successes <= Summed::MAX_COUNT {
            sent.count += successes;
            return;
        }
        // Among records of the key (successes between failures), while the store answers: as
        // digits of that report, one script call for them all.
        if sent.count == 0
            && job.link.store.client.healthy.load(Ordering::Acquire)
            && sent.codes.len() as u64 + successes <= MERGED as u64
        {
            let success = Op::Record {
                outcome: Verdict::Success,
                slow: false,
            };
            let digit = success.encode().1.unwrap_or(b'1');
            sent.codes
                .extend(std::iter::repeat_n(digit, successes as usize));
            return;
        }
    }
    open.insert(merge_key, batch.len());
    batch.push(Sent::counting(job, successes));
}

impl Rounds {
    /// The reporting state of a store whose reports arrive on `rx`.
    pub(super) fn new(rx: tokio::sync::mpsc::UnboundedReceiver<Report>) -> Rounds {
        Rounds {
            rx,
            batch: Vec::with_capacity(BATCH),
            again: std::collections::VecDeque::new(),
            folds: Folds::new(),
            held: Held::new(),
        }
    }

    /// Sends one round: the calls waiting to be sent again, then what is queued (and the folds
    /// that are due), pipelined, and applies the answers. False when there was nothing to send.
    ///
    /// A report the store does not answer is recorded on the local breaker (the first time) and
    /// sent again, before any later report, up to [`RESENDS`] times; the script records each
    /// report at most once (its sequence number), so a report whose answer was lost, though the
    /// script ran, is not counted twice. At most [`RESEND_QUEUE`] outcomes wait to be sent
    /// again; what is given up is counted
    /// ([`RedisStore::dropped_reports`](super::RedisStore::dropped_reports)) and announced with
    /// a WARN event.
    pub(super) async fn round(&mut self, client: &Client) -> bool {
        while self.batch.len() < BATCH {
            match self.again.pop_front() {
                Some(sent) => self.batch.push(sent),
                None => break,
            }
        }
        take(client, self);
        if self.batch.is_empty() {
            return false;
        }
        let answers = pipelined(client, &self.batch).await;
        for (mut sent, answer) in self.batch.drain(..).zip(answers) {
            let job = &mut sent.job;
            match answer {
                // A give-back changes no state; on a missing key its answer says nothing of the
                // circuit (the key is not created): it is not applied.
                Ok(_) if job.op == Op::Cancel => {}
                Ok(answer) => {
                    if apply(&job.link, job.core.get(), &answer, job.site) {
                        if job.op == Op::Learn {
                            // This read's own mark is still set: the next read goes at once.
                            send(&job.link, 0, Op::Learn, job.site);
                        } else {
                            learn_later(&job.link, job.site);
                        }
                    }
                    if let Some(asker) = job.asker.take()
                        && asker.reply.try_send(Ok(answer)).is_err()
                        && matches!(answer.code, 1 | 2)
                    {
                        // The caller stopped waiting (its bound passed) and was decided without
                        // this admission: give it back, so a half-open probe's slot is not held
                        // until its lease runs out.
                        let give_back = Op::Record {
                            outcome: Verdict::Ignored,
                            slow: false,
                        };
                        send(&job.link, answer.generation & 1023, give_back, job.site);
                    }
                }
                Err(()) => {
                    if sent.carries_outcomes() {
                        if !sent.local && client.degrade == Degrade::Local {
                            sent.record_locally();
                            sent.local = true;
                        }
                        sent.job.misses = sent.job.misses.saturating_add(1);
                        // A count waits until the store answers or the queue overflows: it
                        // costs the queue one entry, whatever it sums.
                        if sent.job.misses <= RESENDS || sent.count > 0 {
                            self.again.push_back(sent);
                            continue;
                        }
                        give_up(client, &sent.job, sent.outcomes());
                    }
                    if let Some(asker) = sent.job.asker.take() {
                        // The script may have run the admission all the same (Redis busy past
                        // the bound): a probe it granted is given back.
                        send_cancel(&sent.job.link, asker.token, sent.job.site);
                        let _ = asker.reply.try_send(Err(()));
                    }
                }
            }
            finished(&sent);
        }
        self.trim(client);
        release_held(client, self);
        true
    }

    /// Gives up the oldest calls waiting to be sent again while they weigh more than
    /// [`RESEND_QUEUE`]: outcomes sent one by one first, then counts and folds (each of which
    /// stands for a key's summed outcomes, and weighs one).
    fn trim(&mut self, client: &Client) {
        let mut waiting: u64 = self.again.iter().map(Sent::weight).sum();
        for one_by_one in [true, false] {
            let mut at = 0;
            while waiting > RESEND_QUEUE as u64 && at < self.again.len() {
                if one_by_one && self.again[at].summed() {
                    at += 1;
                    continue;
                }
                let Some(sent) = self.again.remove(at) else {
                    break;
                };
                waiting -= sent.weight();
                give_up(client, &sent.job, sent.outcomes());
                finished(&sent);
            }
        }
    }
}

/// The reporting task: sends rounds ([`Rounds::round`]) while reports are queued, each script
/// call carrying the outcomes of one key and generation settled since the last round trip, and
/// the calls of one round (up to [`BATCH`]) pipelined; a fold is sent when its interval has
/// passed. A call waiting for its own report (strict mode) may send a round itself when no
/// round is on its way ([`send_own`]); the task then finds less to send.
pub(super) async fn worker(client: Arc<Client>) {
    loop {
        let (due, resending) = {
            let rounds = client.rounds.lock().await;
            if client.closing.load(Ordering::Acquire) && rounds.rx.is_empty() {
                return;
            }
            (
                rounds.folds.front().map(|&(due, _)| due),
                !rounds.again.is_empty() || !rounds.held.is_empty(),
            )
        };
        if resending {
            // Waits a little before sending again, so a store that stopped answering is not
            // asked in a loop.
            tokio::time::sleep(client.timeout().min(Duration::from_millis(100))).await;
        } else if let Some(due) = due {
            let _ = tokio::time::timeout_at(due, client.work.notified()).await;
        } else {
            client.work.notified().await;
        }
        let mut rounds = client.rounds.lock().await;
        // Sends while reports are queued; calls to send again wait for the next pass (after the
        // pause above).
        loop {
            rounds.round(&client).await;
            if rounds.rx.is_empty() || !rounds.again.is_empty() {
                break;
            }
        }
    }
}

/// A call waiting for the recording of its outcome (strict mode) sends the next round itself
/// when no round is on its way: its report then reaches the store without a hop through the
/// reporting task. False when a round is on its way (the call waits for it instead).
pub(super) async fn send_own(client: &Client) -> bool {
    /// Wakes the reporting task when the round ends with work left for it, or is cancelled
    /// (its calls stay in the round, to be sent again).
    struct Handover<'a>(&'a Client, bool);
    impl Drop for Handover<'_> {
        fn drop(&mut self) {
            if self.1 {
                self.0.work.notify_one();
            }
        }
    }
    let Ok(mut rounds) = client.rounds.try_lock() else {
        return false;
    };
    let mut handover = Handover(client, true);
    let sent = rounds.round(client).await;
    // What queued meanwhile, or waits to be sent again, is the task's.
    handover.1 = !rounds.rx.is_empty() || !rounds.again.is_empty();
    sent
}

/// A script call is done (answered, or given up), and with it every report it carries.
fn finished(sent: &Sent) {
    sent.job.link.confirmed(sent.failures());
    finished_job(&sent.job, sent.reports());
}

/// `reports` jobs merged into `job`'s script call are done.
fn finished_job(job: &Report, reports: u64) {
    if job.op == Op::Learn {
        job.link.learning.store(false, Ordering::Release);
    }
    job.link.applied.fetch_add(reports, Ordering::AcqRel);
    job.link.done.notify_waiters();
}

/// The script's call for `sent`, as an `EVALSHA` command.
fn report_command(client: &Client, sent: &Sent) -> redis::Cmd {
    let job = &sent.job;
    let (op, _) = job.op.encode();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(client.script.get_hash())
        .arg(1)
        .arg(&job.link.hash)
        .arg(op);
    match &client.time {
        Some(clock) => cmd.arg(clock.now_nanos() / 1_000_000),
        None => cmd.arg(""),
    };
    for value in job.link.args.iter() {
        cmd.arg(*value);
    }
    match job.op {
        Op::Learn => {}
        Op::Admit => {
            let token = job.asker.as_ref().map_or(0, |asker| asker.token);
            cmd.arg(job.sequence)
                .arg(job.generation)
                .arg(client.replica)
                .arg(token);
        }
        Op::Cancel => {
            cmd.arg(client.replica).arg(job.sequence);
        }
        _ if sent.count > 0 => {
            cmd.arg(job.generation)
                .arg(sent.count)
                .arg(client.replica)
                .arg(job.sequence);
        }
        _ => {
            cmd.arg(job.generation)
                .arg(&sent.codes[..])
                .arg(client.replica)
                .arg(job.sequence);
        }
    }
    cmd
}

/// Sends `batch` in one pipeline (on a cluster, one pipeline per key, at once: a pipeline holds
/// the commands of one slot), bounded by the store's timeout; one answer per script call, in
/// order.
async fn pipelined(client: &Client, batch: &[Sent]) -> Vec<Result<Answer, ()>> {
    if !client.conn.is_cluster() {
        let all: Vec<&Sent> = batch.iter().collect();
        return pipeline(client, &all).await;
    }
    let mut keys: Vec<&str> = Vec::new();
    let mut groups: Vec<Vec<(usize, &Sent)>> = Vec::new();
    for (i, sent) in batch.iter().enumerate() {
        let hash = sent.job.link.hash.as_str();
        match keys.iter().position(|key| *key == hash) {
            Some(at) => groups[at].push((i, sent)),
            None => {
                keys.push(hash);
                groups.push(vec![(i, sent)]);
            }
        }
    }
    let answered = futures_util::future::join_all(groups.iter().map(|group| async move {
        let sents: Vec<&Sent> = group.iter().map(|(_, sent)| *sent).collect();
        pipeline(client, &sents).await
    }))
    .await;
    let mut answers: Vec<Result<Answer, ()>> = vec![Err(()); batch.len()];
    for (group, answered) in groups.iter().zip(answered) {
        for ((i, _), answer) in group.iter().zip(answered) {
            answers[*i] = answer;
        }
    }
    answers
}

/// Sends `batch` in one pipeline (loading the script once when Redis answers `NOSCRIPT`), bounded
/// by the store's timeout; one answer per script call, in order.
async fn pipeline(client: &Client, batch: &[&Sent]) -> Vec<Result<Answer, ()>> {
    let mut pipe = redis::pipe();
    for sent in batch {
        pipe.add_command(report_command(client, sent));
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
    let first = &batch[0].job.link;
    match result {
        Ok(Ok(answers)) if answers.len() == batch.len() => batch
            .iter()
            .zip(answers)
            .map(|(sent, values)| answer_of(client, &sent.job.link, values))
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
