//! What the store's pieces share: [`SharedKey`], a shared breaker's tie to the store (its Redis key,
//! its script arguments, its cached view, its reports in flight), the store every shared key
//! uses ([`SharedStore`], with its connection and script, [`Client`]), and the [`Report`] a
//! shared key queues. The types refer to
//! one another, so they live together; what is done with them is in the other files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::Degrade;
use super::op::Op;
use super::view::{Known, Verdict, on_answer, on_message};
use fusebox::clock::Clock;
use fusebox::store::{CircuitHandle, Site, WeakCircuit};

/// A shared key: one breaker's tie to the store (its Redis key, script arguments, cached view,
/// reports in flight).
pub(crate) struct SharedKey {
    pub(super) hash: String,
    pub(super) args: [u64; 12],
    /// This replica's failures sent (or summed) and not yet answered by the script.
    pub(super) unconfirmed: AtomicU64,
    /// The fewest failures that can open the circuit: while [`SharedKey::unconfirmed`] is at least
    /// this, the view admits nothing alone (the script admits, and the call awaits its
    /// recording), so a replica whose reports are slow to arrive cannot keep calling a backend
    /// the fleet's failures may already have tripped.
    pub(super) gate: u64,
    pub(super) store: Arc<SharedStore>,
    /// Reports handed to the reporting task, and reports it has finished.
    pub(super) pending: AtomicU64,
    pub(super) applied: AtomicU64,
    pub(super) done: tokio::sync::Notify,
    /// The breaker, for the reporting task to seed and to announce transitions on.
    pub(super) core: Option<WeakCircuit>,
    /// The newest shared state this replica knows (cached mode), as [`view_word`](super::view::view_word) packs it, or 0
    /// when unknown (the next call asks the script). Written only under [`SharedKey::known`].
    pub(super) view: AtomicU64,
    /// What the view was learnt from: the key's incarnation, and the newest generation the script
    /// itself answered with (a message may announce more). Not on any call's path.
    pub(super) known: std::sync::Mutex<Known>,
    /// A read of the shared state is on its way (cached mode, for a caller that cannot await).
    pub(super) learning: AtomicBool,
    /// The generation (+ 1; 0: none) of the last transition another replica committed that the
    /// local breaker was told ([`Last`]).
    pub(super) told: AtomicU64,
    /// The local breaker is forced open or disabled because Redis was: the next closed or open
    /// state learnt from Redis replaces it (a state forced on the handle alone stays).
    pub(super) forced: AtomicBool,
    /// The closed circuit's outcomes summed since the last fold ([`Mode::Aggregated`]).
    ///
    /// [`Mode::Aggregated`]: super::Mode::Aggregated
    pub(super) delta: std::sync::Mutex<Delta>,
    /// Cached mode: the successes of the closed view summed since the last job that took them
    /// ([`Summed`] packs them), sent by one job in the queue instead of one job each.
    pub(super) successes: AtomicU64,
    /// Outcomes of this key given up (not recorded in the store).
    pub(super) dropped: AtomicU64,
    /// The outage ([`Client::outages`], + 1) in which a WARN last named this key's dropped
    /// outcomes: one per outage.
    pub(super) warned: AtomicU64,
}

/// What [`SharedKey::successes`] packs: the generation the successes were admitted under (bits
/// 0..11, [`ANY_GENERATION`](super::ANY_GENERATION) included), the epoch (bits 11..32,
/// advanced each time a report that is not summed takes the sum ahead of itself, so an older
/// job does not take later successes) and the count (bits 32..64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Summed(pub(super) u64);

impl Summed {
    const GENERATION_BITS: u32 = 11;
    const EPOCH_BITS: u32 = 21;
    const COUNT_SHIFT: u32 = Self::GENERATION_BITS + Self::EPOCH_BITS;
    const GENERATION_MASK: u64 = (1 << Self::GENERATION_BITS) - 1;
    const EPOCH_MASK: u64 = (1 << Self::EPOCH_BITS) - 1;

    /// `count` successes of `generation` in `epoch`.
    pub(super) fn new(epoch: u64, generation: u64, count: u64) -> Summed {
        Summed(
            (generation & Self::GENERATION_MASK)
                | (epoch & Self::EPOCH_MASK) << Self::GENERATION_BITS
                | count << Self::COUNT_SHIFT,
        )
    }

    pub(super) fn generation(self) -> u64 {
        self.0 & Self::GENERATION_MASK
    }

    pub(super) fn epoch(self) -> u64 {
        (self.0 >> Self::GENERATION_BITS) & Self::EPOCH_MASK
    }

    pub(super) fn count(self) -> u64 {
        self.0 >> Self::COUNT_SHIFT
    }

    /// One more success of the same generation and epoch.
    pub(super) fn plus_one(self) -> Summed {
        Summed(self.0 + (1 << Self::COUNT_SHIFT))
    }

    /// True when this sum was started in the epoch `tag` (a job's record of the epoch it was
    /// queued in).
    pub(super) fn of_epoch(self, tag: u64) -> bool {
        self.epoch() == tag & Self::EPOCH_MASK
    }

    /// The largest count a sum holds.
    pub(super) const MAX_COUNT: u64 = u32::MAX as u64;
}

/// A closed circuit's outcomes of one generation, summed on the replica for one `fold`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Delta {
    /// The generation (modulo 2^10) its outcomes were admitted under.
    pub(super) generation: u64,
    pub(super) calls: u64,
    pub(super) failures: u64,
    pub(super) slow: u64,
    pub(super) slow_failures: u64,
    /// Failures before the first success.
    pub(super) lead: u64,
    /// The current run of failures (after the last success).
    pub(super) trail: u64,
    /// The longest run of failures.
    pub(super) peak: u64,
    pub(super) succeeded: bool,
    /// When its first outcome was summed (`None`: nothing summed since the last fold, so no fold
    /// job is queued): its fold is due one flush interval later, less the timer's tick.
    pub(super) since: Option<tokio::time::Instant>,
}

impl Delta {
    /// Adds one outcome (`failure`, `slow`).
    pub(super) fn add(&mut self, failure: bool, slow: bool) {
        self.calls += 1;
        self.slow += u64::from(slow);
        if failure {
            self.failures += 1;
            self.slow_failures += u64::from(slow);
            self.trail += 1;
            self.peak = self.peak.max(self.trail);
            if !self.succeeded {
                self.lead += 1;
            }
        } else {
            self.succeeded = true;
            self.trail = 0;
        }
    }

    /// The `fold` op's argument: `calls failures slow slow_failures lead trail peak`.
    pub(super) fn argument(&self) -> String {
        format!(
            "{} {} {} {} {} {} {}",
            self.calls,
            self.failures,
            self.slow,
            self.slow_failures,
            self.lead,
            self.trail,
            self.peak
        )
    }

    /// Its outcomes as the local breaker records them, successes first.
    pub(super) fn outcomes(&self) -> impl Iterator<Item = fusebox::Verdict> {
        use fusebox::Verdict::{Failure, Success};
        let successes = self.calls - self.failures;
        (0..self.calls).map(move |i| if i >= successes { Failure } else { Success })
    }
}

impl SharedKey {
    /// The breaker this key's link serves, while it lives (none for an operator's link).
    pub(super) fn circuit(&self) -> Option<CircuitHandle> {
        self.core.as_ref().and_then(WeakCircuit::upgrade)
    }

    /// Records that the script answered `state` under `generation` of the key's `incarnation`
    /// (see [`on_answer`]); true when the view took it (the local breaker should follow).
    pub(super) fn observe(&self, state: i64, generation: u64, incarnation: u64) -> bool {
        self.judge(|view, known| on_answer(view, known, state, generation, incarnation))
    }

    /// Records a message on the transitions channel announcing `state` under `generation` of the
    /// key's `incarnation` (see [`on_message`]); true when the view took it (the local breaker
    /// should follow).
    pub(super) fn hear(&self, state: i64, generation: u64, incarnation: u64) -> bool {
        self.judge(|view, known| on_message(view, known, state, generation, incarnation))
    }

    /// Applies `verdict` to the view, under [`SharedKey::known`]; true when it took the news.
    fn judge(&self, verdict: impl FnOnce(u64, Known) -> Verdict) -> bool {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match verdict(self.view.load(Ordering::Acquire), *known) {
            Verdict::Take(word, learnt) => {
                *known = learnt;
                self.view.store(word, Ordering::Release);
                true
            }
            Verdict::Keep => false,
            Verdict::Forget => {
                self.view.store(0, Ordering::Release);
                false
            }
        }
    }

    /// Forgets the view: the next call asks the script.
    pub(super) fn forget(&self) {
        let _known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        self.view.store(0, Ordering::Release);
    }

    /// True while too many of this replica's failures are unanswered for the view to admit
    /// alone ([`SharedKey::gate`]).
    pub(super) fn gated(&self) -> bool {
        self.unconfirmed.load(Ordering::Relaxed) >= self.gate
    }

    /// `failures` of this replica's failures were answered by the script (or given up).
    pub(super) fn confirmed(&self, failures: u64) {
        if failures > 0 {
            self.unconfirmed.fetch_sub(failures, Ordering::Relaxed);
        }
    }

    /// True when this link's calls use the cached path now.
    pub(super) fn caches(&self) -> bool {
        let client = &self.store.client;
        client.cached
            && client.subscribed.load(Ordering::Acquire)
            && client.healthy.load(Ordering::Acquire)
    }
}

/// The connection and the script, shared by the store and its reporting task.
pub(super) struct Client {
    pub(super) conn: super::conn::Conn,
    pub(super) script: redis::Script,
    /// The bound on each store call: fixed, or adapting to the observed round trip.
    pub(super) bound: Bound,
    pub(super) degrade: Degrade,
    pub(super) healthy: AtomicBool,
    /// When the store stopped answering (nanoseconds since [`epoch_nanos`]), 0 while it answers.
    pub(super) down_since: AtomicU64,
    /// How long a shared key's local breaker waits, while the store does not answer, before it
    /// runs a half-open of its own.
    pub(super) local_recovery_after: Duration,
    /// An `async` call is asking the store whether it answers again (see `cached_admit`).
    pub(super) probing: AtomicBool,
    /// This replica's id in the script's per-replica report sequence (at-most-once recording).
    pub(super) replica: u64,
    /// The sequence number of the last report the reporting task sent (it alone numbers them).
    pub(super) sequence: AtomicU64,
    /// The number of the last admission asked of the script: with [`Client::replica`], the token
    /// of a half-open probe it grants, which `cancel` gives back when the answer never arrived.
    pub(super) admissions: AtomicU64,
    /// Reports given up: not recorded in the store after every resend, or past the resend queue.
    pub(super) dropped: AtomicU64,
    /// Times the store stopped answering (each starts an outage).
    pub(super) outages: AtomicU64,
    pub(super) time: Option<Arc<dyn Clock>>,
    /// [`Mode::Cached`](super::Mode::Cached) or [`Mode::Aggregated`](super::Mode::Aggregated).
    pub(super) cached: bool,
    /// [`Mode::Aggregated`](super::Mode::Aggregated): its flush interval.
    pub(super) flush: Option<Duration>,
    /// The pub/sub subscription is up and every link's view was reset when it came up.
    pub(super) subscribed: AtomicBool,
    /// What the reporting task sends next (see [`Rounds`]); a call
    /// waiting for its own report may send a round itself.
    pub(super) rounds: tokio::sync::Mutex<Rounds>,
    /// Wakes the reporting task: a report was queued, or the store is closing.
    pub(super) work: tokio::sync::Notify,
    /// The store was dropped: the reporting task sends what is queued and ends.
    pub(super) closing: AtomicBool,
    /// Every shared breaker by Redis key (both modes), for the subscription to update and for
    /// [`RedisStore::force`](super::RedisStore::force) to announce its transition on.
    pub(super) links:
        std::sync::Mutex<std::collections::HashMap<String, Vec<std::sync::Weak<SharedKey>>>>,
}

impl Client {
    /// The bound on the next store call.
    pub(super) fn timeout(&self) -> Duration {
        self.bound.current()
    }

    /// True when the store has not answered for longer than `local_recovery_after`: a shared
    /// key's local breaker may then recover on its own.
    pub(super) fn recovers_locally(&self) -> bool {
        let since = self.down_since.load(Ordering::Acquire);
        since != 0
            && Duration::from_nanos(epoch_nanos().saturating_sub(since))
                >= self.local_recovery_after
    }

    /// Marks the store answering (true when it had not been).
    pub(super) fn answered(&self) -> bool {
        self.down_since.store(0, Ordering::Release);
        !self.healthy.swap(true, Ordering::AcqRel)
    }

    /// Marks the store not answering (true when it had been).
    pub(super) fn failed(&self) -> bool {
        let was = self.healthy.swap(false, Ordering::AcqRel);
        if was {
            self.outages.fetch_add(1, Ordering::AcqRel);
            self.down_since
                .store(epoch_nanos().max(1), Ordering::Release);
        }
        was
    }
}

/// Nanoseconds since the first call (a process-wide monotonic origin).
pub(super) fn epoch_nanos() -> u64 {
    static ORIGIN: std::sync::LazyLock<std::time::Instant> =
        std::sync::LazyLock::new(std::time::Instant::now);
    u64::try_from(ORIGIN.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The bound on each store call: a fixed timeout ([`RedisStoreBuilder::timeout`]), or one that
/// adapts to the round trips observed (the default): the smoothed round trip plus four times its
/// mean deviation (TCP's retransmission timeout, RFC 6298), kept between a floor and a ceiling.
///
/// [`RedisStoreBuilder::timeout`]: super::RedisStoreBuilder::timeout
pub(super) struct Bound {
    floor: Duration,
    ceiling: Duration,
    /// Smoothed round trip and its mean deviation, in microseconds (0: none observed yet).
    srtt: AtomicU64,
    rttvar: AtomicU64,
}

impl Bound {
    /// A bound that adapts between `floor` and `ceiling`.
    pub(super) fn adaptive(floor: Duration, ceiling: Duration) -> Bound {
        Bound {
            floor,
            ceiling: ceiling.max(floor),
            srtt: AtomicU64::new(0),
            rttvar: AtomicU64::new(0),
        }
    }

    /// The bound now.
    pub(super) fn current(&self) -> Duration {
        if self.floor == self.ceiling {
            return self.floor;
        }
        let srtt = self.srtt.load(Ordering::Relaxed);
        let rttvar = self.rttvar.load(Ordering::Relaxed);
        Duration::from_micros(srtt.saturating_add(rttvar.saturating_mul(4)))
            .clamp(self.floor, self.ceiling)
    }

    /// A call timed out: the bound doubles (up to its ceiling) until a round trip is observed
    /// again (RFC 6298's back-off).
    pub(super) fn missed(&self) {
        if self.floor == self.ceiling {
            return;
        }
        let now = u64::try_from(self.current().as_micros()).unwrap_or(u64::MAX);
        let ceiling = u64::try_from(self.ceiling.as_micros()).unwrap_or(u64::MAX);
        self.srtt
            .store(now.saturating_mul(2).min(ceiling), Ordering::Relaxed);
        self.rttvar.store(0, Ordering::Relaxed);
    }

    /// Folds in one observed round trip (RFC 6298's gains: 1/8 and 1/4). Concurrent updates may
    /// lose one another's sample, which only slows the smoothing.
    pub(super) fn observe(&self, rtt: Duration) {
        if self.floor == self.ceiling {
            return;
        }
        let sample = u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX).max(1);
        let srtt = self.srtt.load(Ordering::Relaxed);
        if srtt == 0 {
            self.srtt.store(sample, Ordering::Relaxed);
            self.rttvar.store(sample / 2, Ordering::Relaxed);
            return;
        }
        let rttvar = self.rttvar.load(Ordering::Relaxed);
        let deviation = srtt.abs_diff(sample);
        self.rttvar
            .store(rttvar - rttvar / 4 + deviation / 4, Ordering::Relaxed);
        self.srtt
            .store(srtt - srtt / 8 + sample / 8, Ordering::Relaxed);
    }
}

/// A store as its shared keys see it: the connection and script ([`Client`]), the key prefix,
/// the idle TTL, the keys kept local, and the queue of the reporting task.
pub(super) struct SharedStore {
    pub(super) client: Arc<Client>,
    pub(super) prefix: String,
    pub(super) ttl_ms: u64,
    pub(super) local: Vec<String>,
    pub(super) reports: tokio::sync::mpsc::UnboundedSender<Report>,
}

impl Drop for SharedStore {
    fn drop(&mut self) {
        // Its reports can no longer be queued: the reporting task sends the last ones and ends.
        self.client.closing.store(true, Ordering::Release);
        self.client.work.notify_one();
    }
}

/// An outcome on its way to the store (or a read of the shared state, or an admission asked by
/// a caller that cannot await it).
pub(super) struct Report {
    pub(super) link: Arc<SharedKey>,
    pub(super) core: CircuitHandle,
    pub(super) generation: u64,
    /// What the job asks of the script.
    pub(super) op: Op,
    /// Times the store did not answer this report.
    pub(super) misses: u16,
    pub(super) site: Site,
    /// An outcome's sequence number in this replica's reports (the script records each at most
    /// once, so a report whose answer was lost can be sent again); an admission's seed.
    pub(super) sequence: u64,
    /// The caller of an admission waiting on its thread; boxed, so a report (the common job)
    /// stays small in the queue.
    pub(super) asker: Option<Box<Asker>>,
}

/// A caller waiting on its thread for an admission the reporting task asks for.
pub(super) struct Asker {
    /// Where the answer goes.
    pub(super) reply: std::sync::mpsc::SyncSender<Result<Answer, ()>>,
    /// The admission's number ([`Client::admissions`]): its probe token.
    pub(super) token: u64,
}

/// One answer of the script.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer {
    pub(super) code: i64,
    pub(super) state: i64,
    pub(super) generation: u64,
    pub(super) remaining_ms: u64,
    pub(super) committed_from: i64,
    pub(super) calls: i64,
    pub(super) failures: i64,
    /// The script's code of the rule that committed the transition (0: no transition).
    pub(super) rule: i64,
    /// Slow calls in the window that decided the transition.
    pub(super) slow: i64,
    /// The key's incarnation, written when the script created it (0: `read` found no key).
    pub(super) incarnation: u64,
    /// The current window after this call, (calls, failures), when the script read it.
    pub(super) window: Option<(u32, u32)>,
    /// The key's last transition as the script keeps it (`state` and `read` answers only).
    pub(super) last: Option<Last>,
}

/// The last transition of a key as the script keeps it with the shared state (field `lt`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Last {
    pub(super) from: i64,
    pub(super) to: i64,
    pub(super) rule: i64,
    pub(super) calls: i64,
    pub(super) failures: i64,
    pub(super) slow: i64,
    /// How long before the answer it was committed (ms).
    pub(super) age_ms: u64,
    /// The id of the replica that committed it ([`Client::replica`]).
    pub(super) replica: u64,
    /// The generation it started.
    pub(super) generation: u64,
}

/// A script call as the reporting task sends it: a job, and for a report the outcomes merged
/// into it (one digit each, in the order they were settled; see `breaker.lua`).
pub(super) struct Sent {
    pub(super) job: Report,
    pub(super) codes: Vec<u8>,
    /// A fold's outcomes (its `codes` are the `fold` op's argument).
    pub(super) delta: Option<Delta>,
    /// The successes a `count` call carries (summed; 0 for any other call).
    pub(super) count: u64,
    /// Its outcomes were recorded on the local breaker (the store did not answer).
    pub(super) local: bool,
}

impl Sent {
    /// A script call for `job` carrying nothing summed.
    pub(super) fn of(job: Report, codes: Vec<u8>) -> Sent {
        Sent {
            job,
            codes,
            delta: None,
            count: 0,
            local: false,
        }
    }

    /// A `count` call for `job`: `count` successes of one key and generation.
    pub(super) fn counting(job: Report, count: u64) -> Sent {
        Sent {
            count,
            ..Sent::of(job, Vec::new())
        }
    }

    /// The key and generation of a `count` call (`None` for any other call).
    pub(super) fn counted(&self) -> Option<(usize, u64)> {
        (self.count > 0).then_some((Arc::as_ptr(&self.job.link) as usize, self.job.generation))
    }

    /// True for a count or a fold: a key's outcomes summed.
    pub(super) fn summed(&self) -> bool {
        self.delta.is_some() || self.count > 0
    }

    /// What it costs the resend queue (`RESEND_QUEUE`): one per outcome carried one by one,
    /// one for a count or a fold, whatever it sums.
    pub(super) fn weight(&self) -> u64 {
        if self.summed() {
            1
        } else {
            self.codes.len() as u64
        }
    }
}

/// Successes summed while an earlier `count` call of their key and generation waits for the
/// store's answer (by key, as [`Sent::counted`] names it): at most one waiting call per key
/// and generation, whatever the calls.
pub(super) type Held = std::collections::HashMap<(usize, u64), Sent>;

/// Folds waiting for their flush interval, in the order of their deadlines (each is due one
/// interval after its delta's first outcome, less the timer's tick).
pub(super) type Folds = std::collections::VecDeque<(tokio::time::Instant, Report)>;

/// What the reporting task sends next: the queue, the script calls of the round on its way, the
/// calls waiting to be sent again and the folds waiting for their interval. Behind
/// [`Client::rounds`]: one round at a time is sent, by the reporting task or by a call that
/// waits for its own report (strict mode), so every report leaves in the order it was numbered.
pub(super) struct Rounds {
    pub(super) rx: tokio::sync::mpsc::UnboundedReceiver<Report>,
    /// The round on its way; calls left here by a round that was cancelled (its caller stopped
    /// waiting) are sent again first, with their numbers.
    pub(super) batch: Vec<Sent>,
    pub(super) again: std::collections::VecDeque<Sent>,
    pub(super) folds: Folds,
    /// Summed successes waiting for an earlier count of their key to be answered.
    pub(super) held: Held,
}
