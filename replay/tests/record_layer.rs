//! The recording layer: a full buffer drops and counts, never blocks; recording a breaker in
//! `metrics_only` mode captures every call's real outcome.

use std::io::Write;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Policy, Registry};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::record::{RecordLayer, outcomes};
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::trace::{self, Outcome};
use tracing_subscriber::prelude::*;

/// A writer that waits for a go-ahead before its first write, then writes into memory.
struct Gated {
    gate: Option<Receiver<()>>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(gate) = self.gate.take() {
            let _ = gate.recv();
        }
        self.out.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.write(&[]).map(|_| ())
    }
}

#[test]
fn a_full_buffer_drops_and_counts_and_never_blocks() {
    let (open, gate) = channel();
    let out = Arc::new(Mutex::new(Vec::new()));
    let writer = Gated {
        gate: Some(gate),
        out: out.clone(),
    };
    let (layer, recorder) = RecordLayer::new(writer, 4);
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(layer.with_filter(outcomes())),
    );
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let breaker = registry.breaker("k", Policy::new()).unwrap();
    for _ in 0..2_000 {
        clock.advance(Duration::from_millis(1));
        breaker.try_acquire().unwrap().success();
    }
    // The writer is stuck on its first write and the channel holds 4: everything else was dropped
    // without blocking the calls above (the writer thread holds its pending calls for one second
    // of trace time before writing, so a few more may sit there).
    let dropped = recorder.dropped();
    assert!(dropped >= 2_000 - 4 - 1_001, "dropped {dropped}");
    assert!(dropped < 2_000);
    open.send(()).unwrap();
    recorder.flush().unwrap();
    assert_eq!(recorder.written() + dropped, 2_000);
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let calls = trace::parse(&text).unwrap();
    assert_eq!(calls.len() as u64, recorder.written());
}

#[test]
fn metrics_only_records_real_outcomes_that_a_replay_then_judges() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let writer = Gated {
        gate: None,
        out: out.clone(),
    };
    let (layer, recorder) = RecordLayer::new(writer, 10_000);
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(layer.with_filter(outcomes())),
    );
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .window(10)
        .min_calls(5)
        .open_for(Duration::from_secs(5));
    let breaker = registry.breaker("shadow", policy).unwrap();
    breaker.metrics_only();
    for i in 0..300u64 {
        clock.advance(Duration::from_millis(100));
        let permit = breaker.try_acquire().expect("metrics_only never rejects");
        clock.advance(Duration::from_millis(3));
        if (100..150).contains(&i) {
            permit.failure();
        } else {
            permit.success();
        }
    }
    assert!(
        breaker.snapshot().rejected > 0,
        "the policy would have rejected calls"
    );
    recorder.flush().unwrap();
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let calls = trace::parse(&text).unwrap();
    assert_eq!(calls.len(), 300);
    assert!(calls.iter().all(|c| c.outcome != Outcome::Rejected));
    assert!(calls.iter().all(|c| c.latency_ns == Some(3_000_000)));
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.outcome == Outcome::Failure)
            .count(),
        50
    );
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    assert_eq!(outages.len(), 1);
    let candidate = parse_policy_arg("window=10,min_calls=5,open_for=5s", "same").unwrap();
    let run = replay(&refs, &candidate, &outages);
    assert_eq!(run.assumed, 0);
    assert_eq!(
        run.detection,
        vec![Some(4 * 103_000_000)],
        "opens on the 5th failure (5 of 10 failed), calls 103 ms apart"
    );
    assert!(
        run.wrongly_rejected > 0,
        "it rejects successes after the outage"
    );
}

/// A clock that counts its reads.
#[derive(Clone, Default)]
struct Counting(Arc<std::sync::atomic::AtomicU64>);

impl fusebox::clock::Clock for Counting {
    fn now_nanos(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        0
    }
}

#[test]
fn with_nothing_recording_the_closed_path_reads_no_clock() {
    let clock = Counting::default();
    let registry = Registry::with_clock(clock.clone());
    let breaker = registry.breaker("quiet", Policy::new()).unwrap();
    for i in 0..1_000 {
        let permit = breaker.try_acquire().unwrap();
        if i % 10 == 0 {
            permit.failure();
        } else {
            permit.success();
        }
    }
    assert_eq!(clock.0.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn calls_reaching_the_writer_out_of_order_are_written_in_time_order() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let writer = Gated {
        gate: None,
        out: out.clone(),
    };
    let (layer, recorder) = RecordLayer::new(writer, 16);
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(layer.with_filter(outcomes())),
    );
    let s = 1_000_000_000u64;
    for at_ns in [2 * s, 3 * s / 2, 3 * s, s / 2] {
        tracing::trace!(target: "fusebox::outcome", key = "k", at_ns, outcome = "success", "call_outcome");
    }
    recorder.flush().unwrap();
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let times: Vec<u64> = trace::parse(&text)
        .unwrap()
        .iter()
        .map(|c| c.at_ns)
        .collect();
    // 1.5 s and 2 s are put in order; 0.5 s came more than a second late and takes the time of
    // the line before it.
    assert_eq!(times, [3 * s / 2, 2 * s, 2 * s, 3 * s]);
}
