//! The breaker's state packed into one `u64`, and the pure decisions made on it.
//!
//! Layout, low bits first:
//!
//! | bits   | field    | meaning                                                        |
//! |--------|----------|----------------------------------------------------------------|
//! | 0..3   | mode     | closed, open, half-open, forced open, disabled                 |
//! | 3..14  | gen      | generation, bumped by every transition (wraps)                 |
//! | 14..21 | issued   | half-open: probes admitted and not yet given back              |
//! | 21..28 | passed   | half-open: probes that succeeded (progressive: current phase)  |
//! | 28..64 | time     | open: deadline; half-open: when probing was armed (ms, wraps)  |
//!
//! A permit remembers the word it was issued under; a report whose mode or generation no longer
//! matches is stale and changes nothing, so a late result from an older state is harmless.
//!
//! The word's time is milliseconds modulo 2^36 (about 795 days). Beside the word, a [`TimeStamp`]
//! keeps the same time at full width, written right after each transition that sets a time; a reader
//! takes the full time from it when its low bits match the word's field, so a circuit left open or
//! half-open for any length of time (a year, ten years) is judged by its true deadline. Only in the
//! instant between a transition and its stamp does a reader rebuild the time from the field, as the
//! time nearest to `now`: exact there, since the field was just set from `now` (policies cap waits at
//! one day).
//!
//! The unit tests that call those decisions directly are in `state/tests.rs`.

use std::time::Duration;

// `std`'s atomic even under loom: the stamp is a hint checked against the word (a stale or early
// reading falls back to the field), so it adds no interleaving worth exploring.
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Reason;
use crate::policy::Recovery;

/// A rejection's wait (in nanoseconds) when there is no probe to wait for.
pub(crate) const NO_WAIT: u64 = u64::MAX;

/// How a call ended, as far as the breaker is concerned: what a permit reports
/// ([`OwnedPermit::settle`](crate::OwnedPermit::settle)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The call succeeded (or was slow-call timed and found fast).
    Success,
    /// A counted failure.
    Failure,
    /// Ignored, neither a success nor a failure: an error the classification does not count (a
    /// business error), or a call that was cancelled before it finished.
    Ignored,
}

/// What a decision makes of the state word it was shown (see `Circuit::update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<T> {
    /// Leave the word as it is; the caller gets `T`.
    Keep(T),
    /// Replace the word with this one, unless another thread changed it first.
    Replace(Word),
}

/// What admission does with a word it keeps (see [`admission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Admit under the word as it is.
    Admit,
    /// Reject, with the wait before the next probe in nanoseconds ([`NO_WAIT`]: none).
    Reject(Reason, u64),
    /// Progressive recovery in a phase of `phases`: admit when the call's place in the phase's
    /// sequence falls in the admitted share ([`Word::in_share`]).
    Share(u32),
}

/// The admission decision on `word` for a circuit with this recovery, probe limit and probe lease.
///
/// `time` gives the clock's now and the full-width time of the word's field (its open deadline or
/// its arming); it is asked only where the decision depends on time: open, and half-open with every
/// probe slot taken.
pub(crate) fn admission(
    word: Word,
    recovery: Recovery,
    half_open: u32,
    lease_nanos: u64,
    time: impl Fn(Word) -> (u64, Option<u64>),
) -> Step<Admission> {
    match word.state() {
        State::Closed | State::Disabled => Step::Keep(Admission::Admit),
        State::ForcedOpen => Step::Keep(Admission::Reject(Reason::ForcedOpen, NO_WAIT)),
        State::Open => {
            let (now, deadline) = time(word);
            let remaining = word.open_remaining_nanos(now, deadline);
            if remaining != 0 {
                return Step::Keep(Admission::Reject(Reason::Open, remaining));
            }
            Step::Replace(match recovery {
                Recovery::Progressive { .. } => word.to_phase(1, now),
                // `Recovery::Probes` (the enum is non-exhaustive).
                _ => word.to_half_open(now),
            })
        }
        State::HalfOpen => match recovery {
            Recovery::Progressive { phases, .. } => Step::Keep(Admission::Share(phases)),
            _ if word.issued() < half_open => Step::Replace(word.with_issued(word.issued() + 1)),
            _ => {
                let (now, armed) = time(word);
                if word.lease_expired(now, lease_nanos, armed) {
                    // The probes never reported within their lease: re-arm.
                    Step::Replace(word.to_half_open(now))
                } else {
                    Step::Keep(Admission::Reject(Reason::HalfOpenFull, NO_WAIT))
                }
            }
        },
    }
}

/// The next word after a probe admitted under `issued` reports `verdict` (probe recovery with
/// `half_open` probes): `Keep` when the report is stale (the circuit left that half-open state),
/// else the word with the probe counted, closed after `half_open` passes, or `reopen(word)` after
/// a failure.
pub(crate) fn after_probe(
    word: Word,
    issued: Word,
    verdict: Verdict,
    half_open: u32,
    reopen: impl FnOnce(Word) -> Word,
) -> Step<()> {
    if word.state() != State::HalfOpen || !word.same_epoch(issued) {
        return Step::Keep(());
    }
    Step::Replace(match verdict {
        Verdict::Success if word.passed() + 1 >= half_open => word.to_closed(),
        Verdict::Success => word.with_passed(word.passed() + 1),
        Verdict::Failure => reopen(word),
        Verdict::Ignored => word.with_issued(word.issued().saturating_sub(1)),
    })
}

/// The state of a circuit as seen by callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Calls flow and their outcomes are recorded.
    Closed,
    /// Calls are rejected until the open wait has passed.
    Open,
    /// A limited number of probe calls decide whether to close or reopen.
    HalfOpen,
    /// Forced open by an operator: every call is rejected until [`reset`](crate::Breaker::reset).
    ForcedOpen,
    /// Disabled by an operator: every call is admitted and recorded, the circuit never opens.
    Disabled,
}

impl State {
    /// Lowercase name used in events and messages.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const MODE_BITS: u32 = 3;
const GEN_SHIFT: u32 = 3;
const GEN_BITS: u32 = 11;
const ISSUED_SHIFT: u32 = 14;
const COUNT_BITS: u32 = 7;
const PASSED_SHIFT: u32 = 21;
const TIME_SHIFT: u32 = 28;
const TIME_BITS: u32 = 36;

const MODE_MASK: u64 = (1 << MODE_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// The bits of mode and generation: what a permit must still match to report (a permit keeps
/// these of the word it was admitted under, and its own fields above them).
pub(crate) const EPOCH_BITS: u32 = GEN_SHIFT + GEN_BITS;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
/// The bits of a rejected permit's reason code, above the mode.
const REASON_MASK: u64 = 0b1111;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const FORCED_OPEN: u64 = 3;
const DISABLED: u64 = 4;
/// Not a circuit state: marks permits that are settled or rejected.
const INERT: u64 = 7;

const NANOS_PER_MS: u64 = 1_000_000;

/// The packed state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    /// The word of a fresh breaker: closed, generation 0.
    pub(crate) const INITIAL: Word = Word(CLOSED);

    /// The word given to calls admitted in metrics-only mode: an open word, whose reports are ignored.
    pub(crate) const SHADOW: Word = Word(OPEN);

    /// The word of a permit whose outcome was reported: its drop does nothing.
    pub(crate) const SETTLED: Word = Word(INERT);

    /// The word of a permit that was rejected, with the reason's number (`Reason::bits`,
    /// never 0, at most 15) in the four bits above the mode (a permit keeps its wait above them).
    pub(crate) const fn rejected(reason: u64) -> Word {
        Word(INERT | (reason & REASON_MASK) << MODE_BITS)
    }

    /// The mode and generation alone (the fields a permit keeps of the word it was admitted
    /// under).
    #[inline(always)]
    pub(crate) fn epoch(self) -> Word {
        Word(self.0 & EPOCH_MASK)
    }

    /// Progressive recovery: whether the call numbered `seq` in this phase falls in the share the
    /// phase admits (phase k of `phases` admits k out of every `phases` calls).
    pub(crate) fn in_share(self, seq: u64, phases: u32) -> bool {
        seq % u64::from(phases) < u64::from(self.passed())
    }

    /// True when the circuit is open (waiting for its deadline).
    #[inline(always)]
    pub(crate) fn is_open(self) -> bool {
        self.0 & MODE_MASK == OPEN
    }

    /// True for settled and rejected permits: nothing left to report.
    #[inline(always)]
    pub(crate) fn inert(self) -> bool {
        self.0 & MODE_MASK == INERT
    }

    /// The rejection reason code of a rejected permit (0 for every other word).
    #[inline(always)]
    pub(crate) fn rejection(self) -> u64 {
        if self.inert() {
            (self.0 >> MODE_BITS) & REASON_MASK
        } else {
            0
        }
    }

    /// True when the circuit admits calls without asking anything else (closed or disabled):
    /// one bit test, since those are the two modes whose low two bits are zero.
    #[inline(always)]
    pub(crate) fn admits(self) -> bool {
        self.0 & 0b011 == 0
    }

    /// True when outcomes are recorded into the window (closed or disabled).
    #[inline(always)]
    pub(crate) fn records(self) -> bool {
        self.admits()
    }

    #[inline]
    pub(crate) fn state(self) -> State {
        match self.0 & MODE_MASK {
            CLOSED => State::Closed,
            OPEN => State::Open,
            HALF_OPEN => State::HalfOpen,
            FORCED_OPEN => State::ForcedOpen,
            _ => State::Disabled,
        }
    }

    /// The generation (11 bits, wrapping).
    pub(crate) fn generation(self) -> u64 {
        (self.0 >> GEN_SHIFT) & GEN_MASK
    }

    pub(crate) fn issued(self) -> u32 {
        ((self.0 >> ISSUED_SHIFT) & COUNT_MASK) as u32
    }

    pub(crate) fn passed(self) -> u32 {
        ((self.0 >> PASSED_SHIFT) & COUNT_MASK) as u32
    }

    fn time_ms(self) -> u64 {
        self.0 >> TIME_SHIFT
    }

    /// True for the modes whose time field means something (open, half-open).
    fn has_time(self) -> bool {
        matches!(self.0 & MODE_MASK, OPEN | HALF_OPEN)
    }

    /// The full-width millisecond nearest to `now` whose low 36 bits are the word's time field.
    fn nearest_ms(self, now_nanos: u64) -> u64 {
        let now_ms = now_nanos / NANOS_PER_MS;
        let diff = self.time_ms().wrapping_sub(now_ms) & TIME_MASK;
        // Sign-extend the 36-bit difference.
        let diff = ((diff << (64 - TIME_BITS)) as i64) >> (64 - TIME_BITS);
        now_ms.saturating_add_signed(diff)
    }

    /// True when `other` has the same mode and generation (a permit of `self` may report to it).
    #[inline(always)]
    pub(crate) fn same_epoch(self, other: Word) -> bool {
        (self.0 ^ other.0) & EPOCH_MASK == 0
    }

    fn next(self, mode: u64, issued: u32, passed: u32, time_ms: u64) -> Word {
        let generation = (self.generation() + 1) & GEN_MASK;
        Word(
            mode | generation << GEN_SHIFT
                | (u64::from(issued) & COUNT_MASK) << ISSUED_SHIFT
                | (u64::from(passed) & COUNT_MASK) << PASSED_SHIFT
                | (time_ms & TIME_MASK) << TIME_SHIFT,
        )
    }

    /// The next generation, closed.
    pub(crate) fn to_closed(self) -> Word {
        self.next(CLOSED, 0, 0, 0)
    }

    /// The next generation, open until `now + wait` (rounded up to the millisecond).
    pub(crate) fn to_open(self, now_nanos: u64, wait_nanos: u64) -> Word {
        let deadline = now_nanos.saturating_add(wait_nanos).div_ceil(NANOS_PER_MS);
        self.next(OPEN, 0, 0, deadline)
    }

    /// The next generation, half-open, armed now, with one probe already admitted.
    pub(crate) fn to_half_open(self, now_nanos: u64) -> Word {
        self.next(HALF_OPEN, 1, 0, now_nanos / NANOS_PER_MS)
    }

    /// The next generation, half-open in progressive phase `phase`, armed now.
    pub(crate) fn to_phase(self, phase: u32, now_nanos: u64) -> Word {
        self.next(HALF_OPEN, 0, phase, now_nanos / NANOS_PER_MS)
    }

    /// The next generation, forced open.
    pub(crate) fn to_forced_open(self) -> Word {
        self.next(FORCED_OPEN, 0, 0, 0)
    }

    /// The next generation, disabled.
    pub(crate) fn to_disabled(self) -> Word {
        self.next(DISABLED, 0, 0, 0)
    }

    /// Same generation, one more probe admitted.
    pub(crate) fn with_issued(self, issued: u32) -> Word {
        Word(
            self.0 & !(COUNT_MASK << ISSUED_SHIFT)
                | (u64::from(issued) & COUNT_MASK) << ISSUED_SHIFT,
        )
    }

    /// Same generation, one more probe passed.
    pub(crate) fn with_passed(self, passed: u32) -> Word {
        Word(
            self.0 & !(COUNT_MASK << PASSED_SHIFT)
                | (u64::from(passed) & COUNT_MASK) << PASSED_SHIFT,
        )
    }

    /// Open: the time left before a probe is admitted; zero once the wait is over. `time_ms` is
    /// the word's full-width time from [`TimeStamp::time_of`] (`None`: the word is stale, and zero
    /// sends the caller to a compare-and-swap that fails and re-reads the state).
    pub(crate) fn open_remaining(self, now_nanos: u64, time_ms: Option<u64>) -> Duration {
        Duration::from_nanos(self.open_remaining_nanos(now_nanos, time_ms))
    }

    /// [`open_remaining`](Word::open_remaining) in nanoseconds.
    #[inline]
    pub(crate) fn open_remaining_nanos(self, now_nanos: u64, time_ms: Option<u64>) -> u64 {
        match time_ms {
            Some(deadline_ms) => deadline_ms
                .saturating_mul(NANOS_PER_MS)
                .saturating_sub(now_nanos),
            None => 0,
        }
    }

    /// Half-open: true when the probes were armed at least `lease` ago (`time_ms` as for
    /// [`open_remaining`](Word::open_remaining); a stale word counts as expired).
    pub(crate) fn lease_expired(
        self,
        now_nanos: u64,
        lease_nanos: u64,
        time_ms: Option<u64>,
    ) -> bool {
        match time_ms {
            Some(armed_ms) => {
                (now_nanos / NANOS_PER_MS)
                    .saturating_sub(armed_ms)
                    .saturating_mul(NANOS_PER_MS)
                    >= lease_nanos
            }
            None => true,
        }
    }
}

/// The full-width milliseconds of the state word's time field (see the module docs).
pub(crate) struct TimeStamp(AtomicU64);

impl TimeStamp {
    pub(crate) fn new() -> Self {
        TimeStamp(AtomicU64::new(0))
    }

    /// Records the time of `word`, just installed, from a clock reading taken at or after its
    /// transition. Words without a time leave the stamp as it is.
    #[inline]
    pub(crate) fn set(&self, word: Word, now_nanos: u64) {
        if word.has_time() {
            self.0.store(word.nearest_ms(now_nanos), Ordering::Release);
        }
    }

    /// Copies another breaker's stamp (a successor continuing its state).
    pub(crate) fn copy_from(&self, other: &TimeStamp) {
        self.0
            .store(other.0.load(Ordering::Acquire), Ordering::Release);
    }

    /// The full-width time of `word` (read from the state just before): the stamp when it matches
    /// the word's field; otherwise the word is either stale (`current()` differs: `None`) or so new
    /// that its stamp is not written yet (the time nearest to `now`, exact for a time just set).
    #[inline]
    pub(crate) fn time_of(
        &self,
        word: Word,
        now_nanos: u64,
        current: impl FnOnce() -> Word,
    ) -> Option<u64> {
        let stamp = self.0.load(Ordering::Acquire);
        if stamp & TIME_MASK == word.time_ms() {
            Some(stamp)
        } else if current() == word {
            Some(word.nearest_ms(now_nanos))
        } else {
            None
        }
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Word")
            .field("state", &self.state())
            .field("gen", &self.generation())
            .field("issued", &self.issued())
            .field("passed", &self.passed())
            .field("time_ms", &self.time_ms())
            .finish()
    }
}

#[cfg(test)]
mod tests;
