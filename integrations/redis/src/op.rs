//! The jobs a replica queues for `breaker.lua`, and their wire encoding: [`Op::encode`] is the one
//! place an operation becomes the script's op name (`ARGV[1]`) and an outcome its digit in a
//! `report`'s `ARGV[16]` (summed successes are a `count`'s number there); [`Op::decode`] reads
//! such a digit back.

use fusebox::Verdict;

/// What a queued job asks of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Records the outcome of one call (`slow`: slow-call timing found it slow); the records of
    /// one key, generation and call site are merged into one `report`.
    Record { outcome: Verdict, slow: bool },
    /// Reads the shared state (`state`) instead of reporting.
    Learn,
    /// Asks for an admission (`admit`) for a caller waiting on its thread; never sent twice.
    Admit,
    /// Gives back the half-open probe an admission may hold (`cancel`), when its answer never
    /// reached the replica (the job's `sequence`: the admission's number); never sent twice.
    Cancel,
    /// Sends a link's summed outcomes (`fold`, aggregated mode) once its flush interval passed.
    Fold,
    /// Takes the successes summed on its link (the job's `sequence`: the epoch of the sum it was
    /// queued for); sent as one `count` of them.
    Summed,
    /// Carries the job's `sequence` successes, taken from the link's sum ahead of a record that
    /// is not summed; sent as one `count` of them.
    Successes,
    /// Tells the script this replica opened its own view alone (a key with a quorum), so it
    /// counts toward the quorum: the digit `5` of a `report`, merged with the records.
    Alone,
}

impl Op {
    /// The outcome of a record (ignored for a job of another kind).
    pub(super) fn outcome(self) -> Verdict {
        match self {
            Op::Record { outcome, .. } => outcome,
            _ => Verdict::Ignored,
        }
    }

    /// True for a job that stands for summed successes ([`Op::Summed`], [`Op::Successes`]).
    pub(super) fn sums(self) -> bool {
        matches!(self, Op::Summed | Op::Successes)
    }

    /// True when the job carries outcomes (sent again when the store does not answer).
    pub(super) fn carries_outcomes(self) -> bool {
        matches!(
            self,
            Op::Record { .. } | Op::Fold | Op::Summed | Op::Successes | Op::Alone
        )
    }

    /// The script's op name (`ARGV[1]`) and, for a record, its outcome's digit in the `report`
    /// op's `ARGV[16]` (see `breaker.lua`): `0` ignored, `1` success, `2` failure, `3` slow
    /// success, `4` slow failure. Summed successes are one `count` (their number in `ARGV[16]`).
    pub(super) fn encode(self) -> (&'static str, Option<u8>) {
        match self {
            Op::Record { outcome, slow } => {
                let digit = match (outcome, slow) {
                    (Verdict::Ignored, _) => b'0',
                    (Verdict::Success, false) => b'1',
                    (Verdict::Failure, false) => b'2',
                    (Verdict::Success, true) => b'3',
                    (Verdict::Failure, true) => b'4',
                };
                ("report", Some(digit))
            }
            Op::Alone => ("report", Some(b'5')),
            Op::Summed | Op::Successes => ("count", None),
            Op::Learn => ("state", None),
            Op::Admit => ("admit", None),
            Op::Cancel => ("cancel", None),
            Op::Fold => ("fold", None),
        }
    }

    /// The record a `report` digit of [`Op::encode`] stands for (an unknown digit: ignored).
    pub(super) fn decode(digit: u8) -> Op {
        if digit == b'5' {
            return Op::Alone;
        }
        let (outcome, slow) = match digit {
            b'1' => (Verdict::Success, false),
            b'2' => (Verdict::Failure, false),
            b'3' => (Verdict::Success, true),
            b'4' => (Verdict::Failure, true),
            _ => (Verdict::Ignored, false),
        };
        Op::Record { outcome, slow }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: Verdict, slow: bool) -> Op {
        Op::Record { outcome, slow }
    }

    #[test]
    fn each_op_encodes_to_the_argv_the_script_expects() {
        let expected = [
            (record(Verdict::Ignored, false), ("report", Some(b'0'))),
            (record(Verdict::Ignored, true), ("report", Some(b'0'))),
            (record(Verdict::Success, false), ("report", Some(b'1'))),
            (record(Verdict::Failure, false), ("report", Some(b'2'))),
            (record(Verdict::Success, true), ("report", Some(b'3'))),
            (record(Verdict::Failure, true), ("report", Some(b'4'))),
            (Op::Summed, ("count", None)),
            (Op::Successes, ("count", None)),
            (Op::Learn, ("state", None)),
            (Op::Admit, ("admit", None)),
            (Op::Cancel, ("cancel", None)),
            (Op::Fold, ("fold", None)),
            (Op::Alone, ("report", Some(b'5'))),
        ];
        for (op, wire) in expected {
            assert_eq!(op.encode(), wire, "{op:?}");
        }
    }

    #[test]
    fn a_digit_decodes_to_the_record_it_encodes() {
        for digit in b'1'..=b'4' {
            assert_eq!(Op::decode(digit).encode(), ("report", Some(digit)));
        }
        assert_eq!(Op::decode(b'0'), record(Verdict::Ignored, false));
    }
}
