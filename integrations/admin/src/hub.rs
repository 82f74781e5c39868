//! A router's shared state: its history, the one board every event-stream connection reads, the
//! connection count, and the one task that samples and publishes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use axum::body::Bytes;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::board;
use crate::config::AdminConfig;
use crate::history::{Act, Entry, History, now_ms};
use fusebox::Registry;
use fusebox::Snapshot;

thread_local! {
    /// The operator of the control running on this thread: the transition hook, which runs on
    /// the thread that made the transition, names them in the transition it records.
    static OPERATOR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The board every connection sends: computed once per change, and held as the whole event
/// (`event: board`, `data: <json>`), which every connection sends without a copy.
#[derive(Debug, Clone)]
pub(super) struct Board {
    pub(super) event: Bytes,
    /// When it was computed (`None`: never).
    at: Option<Instant>,
}

/// What precedes a board's JSON in its event (a compact JSON document has no line break).
const EVENT_HEAD: &str = "event: board\ndata: ";

impl Board {
    fn event(json: &str) -> Bytes {
        Bytes::from(format!("{EVENT_HEAD}{json}\n\n"))
    }

    /// The board's JSON.
    pub(super) fn json(&self) -> &str {
        let event = std::str::from_utf8(&self.event).unwrap_or_default();
        event
            .strip_prefix(EVENT_HEAD)
            .and_then(|e| e.strip_suffix("\n\n"))
            .unwrap_or_default()
    }
}

/// A router's state.
pub(super) struct Hub {
    pub(super) registry: &'static Registry,
    pub(super) config: AdminConfig,
    history: Mutex<History>,
    board: watch::Sender<Board>,
    /// Serialises board computations, so concurrent connects compute at most one.
    publishing: Mutex<()>,
    wake: Arc<Notify>,
    /// Set by a transition: the task takes a sample at its next turn.
    transitioned: AtomicBool,
    connections: AtomicUsize,
    started: AtomicBool,
    /// How many times the task panicked and was started again.
    restarts: AtomicUsize,
    /// Makes the task panic at its next turn (how the tests see a panic handled).
    #[cfg(test)]
    pub(super) panic_next: AtomicBool,
}

/// One event-stream connection: counted until dropped.
pub(super) struct Connection(Arc<Hub>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connection {
    /// The board channel.
    pub(super) fn boards(&self) -> watch::Receiver<Board> {
        self.0.board.subscribe()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        // The task holds only a weak reference: wake it so it sees the router is gone.
        self.wake.notify_one();
    }
}

impl Hub {
    /// The state of a new router: registers its transition hook and starts its task when a
    /// tokio runtime is current (otherwise on the first request).
    pub(super) fn start(registry: &'static Registry, config: AdminConfig) -> Arc<Hub> {
        let history = History::new(config.max_keys, config.samples, config.transitions);
        let hub = Arc::new(Hub {
            registry,
            history: Mutex::new(history),
            board: watch::Sender::new(Board {
                event: Board::event("{}"),
                at: None,
            }),
            publishing: Mutex::new(()),
            wake: Arc::new(Notify::new()),
            transitioned: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            started: AtomicBool::new(false),
            restarts: AtomicUsize::new(0),
            #[cfg(test)]
            panic_next: AtomicBool::new(false),
            config,
        });
        let weak = Arc::downgrade(&hub);
        registry.on_transition(move |t| {
            let Some(hub) = weak.upgrade() else { return };
            let by = OPERATOR.with(|o| o.borrow().clone());
            hub.history().transition(t.key, Entry::of(t, by));
            hub.transitioned.store(true, Ordering::Release);
            hub.wake.notify_one();
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            hub.ensure_task();
        }
        hub
    }

    pub(super) fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawns the task on the current runtime, once (called by every handler), under a
    /// supervisor that starts it again after a panic.
    pub(super) fn ensure_task(self: &Arc<Self>) {
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(supervise(Arc::downgrade(self), self.wake.clone()));
        }
    }

    /// How many times the task panicked and was started again.
    #[cfg(test)]
    pub(super) fn restarts(&self) -> usize {
        self.restarts.load(Ordering::Acquire)
    }

    /// Runs `control` as `operator` (named in the transition it makes) and records the action.
    pub(super) fn act(
        &self,
        key: &str,
        action: &'static str,
        operator: &str,
        control: impl FnOnce(),
    ) {
        self.history().action(
            key,
            Act {
                at_ms: now_ms(),
                action,
                by: operator.to_owned(),
            },
        );
        OPERATOR.with(|o| *o.borrow_mut() = Some(operator.to_owned()));
        control();
        OPERATOR.with(|o| *o.borrow_mut() = None);
        self.wake.notify_one();
    }

    /// A new event-stream connection, or `None` past the cap. The board it starts with is at
    /// most `refresh` old.
    pub(super) fn connect(self: &Arc<Self>) -> Option<Connection> {
        let max = self.config.max_connections;
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        let connection = Connection(self.clone());
        let stale = self
            .board
            .borrow()
            .at
            .is_none_or(|at| at.elapsed() >= self.config.refresh);
        if stale {
            self.publish();
        }
        self.wake.notify_one();
        Some(connection)
    }

    /// The connections open now.
    pub(super) fn connections(&self) -> usize {
        self.connections.load(Ordering::Acquire)
    }

    /// Every breaker's snapshot.
    fn snapshots(&self) -> Vec<Snapshot> {
        self.registry.snapshot()
    }

    /// Samples every shown key's window into the history ring.
    fn sample(&self) {
        let all = self.snapshots();
        let shown = board::shown(&all, &self.config);
        self.history().sample(&shown, now_ms());
    }

    /// Computes the board and hands it to the connections when it changed.
    pub(super) fn publish(&self) {
        let _one = self.publishing.lock().unwrap_or_else(|p| p.into_inner());
        let all = self.snapshots();
        let shown = board::shown(&all, &self.config);
        let groups = self.registry.groups();
        let json = board::board(
            &shown,
            all.len(),
            &groups,
            &self.history(),
            &self.config,
            self.registry,
        );
        let now = Instant::now();
        self.board.send_if_modified(|board| {
            board.at = Some(now);
            if board.json() == json {
                return false;
            }
            board.event = Board::event(&json);
            true
        });
    }

    /// `GET /breakers`.
    pub(super) fn breakers(&self) -> serde_json::Value {
        board::breakers(
            &self.snapshots(),
            &self.registry.groups(),
            &self.history(),
            &self.config,
            self.registry,
        )
    }
}

/// How long the supervisor waits before it starts a task that panicked again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs the router's task and starts it again after a panic (an ERROR event, `admin_task_panicked`,
/// names the panic), so that the event streams never stop silently. Ends with the router.
async fn supervise(hub: Weak<Hub>, wake: Arc<Notify>) {
    loop {
        let Err(ended) = tokio::spawn(run(hub.clone(), wake.clone())).await else {
            return;
        };
        // Cancelled: the runtime is shutting down.
        let Ok(panic) = ended.try_into_panic() else {
            return;
        };
        let Some(strong) = hub.upgrade() else { return };
        let restarts = strong.restarts.fetch_add(1, Ordering::AcqRel) + 1;
        drop(strong);
        let panic = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(
            target: "fusebox",
            event = "admin_task_panicked",
            restarts,
            panic = ?panic,
            "the admin router's task panicked; it starts again in 1 s"
        );
        tokio::time::sleep(RESTART_AFTER).await;
    }
}

/// The router's task: samples every `sample_every` (and after transitions) and, while someone
/// watches, publishes after each change and every `refresh`, never twice within `min_interval`.
/// Ends when the router is dropped.
async fn run(hub: Weak<Hub>, wake: Arc<Notify>) {
    let mut next_sample = Instant::now();
    loop {
        let Some(strong) = hub.upgrade() else { return };
        #[cfg(test)]
        if strong.panic_next.swap(false, Ordering::AcqRel) {
            panic!("a panic the tests asked for");
        }
        let config = &strong.config;
        let (every, refresh, min_interval) = (
            config.sample_every,
            config.refresh.max(config.min_interval),
            config.min_interval,
        );
        let now = Instant::now();
        if now >= next_sample || strong.transitioned.swap(false, Ordering::AcqRel) {
            strong.sample();
            if now >= next_sample {
                next_sample = later(now, every);
            }
        }
        let watched = strong.board.receiver_count() > 0;
        if watched {
            strong.publish();
        }
        drop(strong);
        let deadline = if watched {
            next_sample.min(later(now, refresh))
        } else {
            next_sample
        };
        // Changes during `min_interval` wait for the next turn: one board for all of them.
        tokio::time::sleep(min_interval).await;
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// `now + after`, or a day from now when that overflows (the settings are bounded; this holds
/// whatever they are).
fn later(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(86_400))
}
