//! Recording: a `tracing-subscriber` [`Layer`] that writes fusebox's per-call outcome events as
//! trace lines, off the call path.
//!
//! fusebox emits one `TRACE` event (target [`fusebox::OUTCOME_TARGET`]) per reported or rejected
//! call. [`RecordLayer`] turns each into a [`Call`] and hands it to a writer thread through a
//! bounded channel: the calling thread never waits for the disk. When the channel is full the
//! call is dropped and counted ([`Recorder::dropped`]), never blocked on.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//!
//! let file = std::fs::File::create("trace.jsonl").unwrap();
//! let (layer, recorder) = fusebox_replay::record::RecordLayer::new(file, 65_536);
//! tracing_subscriber::registry()
//!     .with(layer.with_filter(fusebox_replay::record::outcomes()))
//!     .init();
//! // … run the service; at shutdown:
//! recorder.flush().unwrap();
//! eprintln!("{} calls dropped", recorder.dropped());
//! ```

use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

use crate::trace::{Call, Outcome};

/// What the writer thread receives.
enum Message {
    Call(Call),
    Flush(SyncSender<()>),
}

/// Counters and the last write error, shared by the layer, its writer thread and the [`Recorder`].
#[derive(Default)]
struct Shared {
    dropped: AtomicU64,
    written: AtomicU64,
    error: Mutex<Option<io::Error>>,
}

/// A `tracing-subscriber` layer that records fusebox's outcome events as trace lines.
///
/// Add it to a subscriber with the [`outcomes`] filter so it sees nothing else.
pub struct RecordLayer {
    sender: SyncSender<Message>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RecordLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordLayer").finish_non_exhaustive()
    }
}

/// The handle that tells how recording went: calls written, calls dropped, write errors.
#[derive(Clone)]
pub struct Recorder {
    sender: SyncSender<Message>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// The per-layer filter that lets only fusebox's outcome events through, at `TRACE` level.
#[must_use]
pub fn outcomes() -> Targets {
    Targets::new().with_target(fusebox::OUTCOME_TARGET, tracing_core::Level::TRACE)
}

impl RecordLayer {
    /// A layer writing trace lines to `writer` from a thread of its own, with room for `capacity`
    /// calls between the calling threads and the writer (at least 1).
    ///
    /// # Panics
    ///
    /// When the operating system refuses to start the writer thread.
    #[must_use]
    pub fn new<W: Write + Send + 'static>(writer: W, capacity: usize) -> (RecordLayer, Recorder) {
        let (sender, receiver) = sync_channel(capacity.max(1));
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("fusebox-record".into())
            .spawn(move || write_loop(receiver, BufWriter::new(writer), &thread_shared))
            .expect("spawning the recording thread");
        let recorder = Recorder {
            sender: sender.clone(),
            shared: shared.clone(),
        };
        (RecordLayer { sender, shared }, recorder)
    }
}

/// Calls from several threads reach the writer slightly out of time order; it holds each call
/// this long (on the trace's clock) so the file lists them in order. A call later than that is
/// written with the time of the line before it.
pub const REORDER_SLACK_NS: u64 = 1_000_000_000;

/// A call waiting to be written, ordered by time then arrival.
struct Pending(u64, u64, Call);

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.0, other.1).cmp(&(self.0, self.1)) // a min-heap
    }
}

fn write_loop<W: Write>(receiver: Receiver<Message>, mut out: BufWriter<W>, shared: &Shared) {
    let fail = |e: io::Error| {
        *shared.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    };
    let mut pending = std::collections::BinaryHeap::new();
    let (mut seq, mut newest, mut last) = (0u64, 0u64, 0u64);
    let write = |call: Call, out: &mut BufWriter<W>, last: &mut u64| {
        let mut call = call;
        call.at_ns = call.at_ns.max(*last);
        *last = call.at_ns;
        let mut line = call.to_line();
        line.push('\n');
        match out.write_all(line.as_bytes()) {
            Ok(()) => {
                shared.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => fail(e),
        }
    };
    while let Ok(message) = receiver.recv() {
        match message {
            Message::Call(call) => {
                newest = newest.max(call.at_ns);
                seq += 1;
                pending.push(Pending(call.at_ns, seq, call));
                while pending
                    .peek()
                    .is_some_and(|p: &Pending| p.0.saturating_add(REORDER_SLACK_NS) <= newest)
                {
                    if let Some(Pending(_, _, call)) = pending.pop() {
                        write(call, &mut out, &mut last);
                    }
                }
            }
            Message::Flush(done) => {
                while let Some(Pending(_, _, call)) = pending.pop() {
                    write(call, &mut out, &mut last);
                }
                if let Err(e) = out.flush() {
                    fail(e);
                }
                let _ = done.send(());
            }
        }
    }
    while let Some(Pending(_, _, call)) = pending.pop() {
        write(call, &mut out, &mut last);
    }
    if let Err(e) = out.flush() {
        fail(e);
    }
}

impl Recorder {
    /// Calls dropped because the channel was full.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Trace lines written so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// Waits until every call sent before this one is written and flushed; returns the last write
    /// error, if any. (Waits for room in the channel: call it off the hot path, e.g. at shutdown.)
    ///
    /// # Errors
    ///
    /// The last error the writer thread met, if any.
    pub fn flush(&self) -> io::Result<()> {
        let (done, wait) = sync_channel(1);
        if self.sender.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
        match self
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Collects an outcome event's fields.
#[derive(Default)]
struct Fields {
    key: Option<String>,
    at_ns: Option<u64>,
    latency_ns: Option<u64>,
    outcome: Option<Outcome>,
    reason: Option<String>,
    function: Option<String>,
    shadow: Option<String>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "at_ns" => self.at_ns = Some(value),
            "latency_ns" => self.latency_ns = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "key" => self.key = Some(value.to_owned()),
            "outcome" => self.outcome = Outcome::parse(value),
            "reason" => self.reason = Some(value.to_owned()),
            "function" if !value.is_empty() => self.function = Some(value.to_owned()),
            "shadow" => self.shadow = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for RecordLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != fusebox::OUTCOME_TARGET {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let (Some(key), Some(at_ns), Some(outcome)) = (fields.key, fields.at_ns, fields.outcome)
        else {
            return;
        };
        let call = Call {
            at_ns,
            key,
            outcome,
            latency_ns: fields.latency_ns,
            reason: fields.reason,
            function: fields.function,
            shadow: fields.shadow,
        };
        match self.sender.try_send(Message::Call(call)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
