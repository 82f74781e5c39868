//! [`Quorum`]: how many replicas' failures a shared circuit needs before it opens for the whole
//! fleet, and its text form (`2`, `"50%"`) that the attribute and configuration files share.

use std::fmt;

use crate::limits::MAX_QUORUM;

/// How many replicas must have failed calls in a shared circuit's window before the circuit
/// opens for every replica ([`Policy::quorum`](crate::Policy::quorum)).
///
/// Until the quorum is met, a replica whose own outcomes reach the policy's rules opens its own
/// view alone ("open here only") and the others keep calling: one replica's bad network path,
/// CPU starvation or burst does not stop the fleet. Written `2` (replicas) or `"50%"` (a share
/// of the replicas that recorded an outcome in the window, rounded up).
///
/// ```
/// # use fusebox_policy as fusebox;
/// use fusebox::Quorum;
///
/// assert_eq!("2".parse::<Quorum>(), Ok(Quorum::Replicas(2)));
/// assert_eq!("50%".parse::<Quorum>(), Ok(Quorum::Share(50)));
/// assert_eq!(Quorum::Share(50).to_string(), "50%");
/// assert_eq!(Quorum::Share(50).of(4), 2);
/// assert_eq!(Quorum::Share(50).of(3), 2);
/// assert!("1".parse::<Quorum>().unwrap().problem().is_some());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Quorum {
    /// At least this many replicas (2..=[`MAX_QUORUM`]).
    Replicas(u32),
    /// At least this share, in percent (1..=100), of the replicas that recorded an outcome in
    /// the window (rounded up, at least one).
    Share(u8),
}

/// The form every message names: how a quorum is written.
pub const QUORUM_FORM: &str =
    "a number of replicas like 2, or a share of the replicas like \"50%\"";

/// A quorum as a policy keeps it, in two bytes (a breaker holds its policy inline): 0 none,
/// `1 + replicas` up to `REPLICAS_ABOVE` (more than any valid quorum), then `SHARE + percent`.
const REPLICAS_ABOVE: u16 = 60_000;
const SHARE: u16 = REPLICAS_ABOVE + 1;

impl Quorum {
    /// The policy's code of a quorum of `replicas`.
    #[doc(hidden)]
    #[must_use]
    pub const fn encode_replicas(replicas: u32) -> u16 {
        if replicas >= REPLICAS_ABOVE as u32 {
            REPLICAS_ABOVE
        } else {
            replicas as u16 + 1
        }
    }

    /// The policy's code of a quorum of `percent` % of the replicas.
    #[doc(hidden)]
    #[must_use]
    pub const fn encode_share(percent: u8) -> u16 {
        SHARE + percent as u16
    }

    /// The quorum of a policy's code (`None`: no quorum).
    #[doc(hidden)]
    #[must_use]
    pub const fn decode(code: u16) -> Option<Quorum> {
        match code {
            0 => None,
            n if n <= REPLICAS_ABOVE => Some(Quorum::Replicas(n as u32 - 1)),
            n => Some(Quorum::Share((n - SHARE) as u8)),
        }
    }

    /// The replicas that must have failed when `active` replicas recorded an outcome in the
    /// window.
    #[must_use]
    pub fn of(self, active: u32) -> u32 {
        match self {
            Quorum::Replicas(n) => n,
            Quorum::Share(percent) => (u64::from(active) * u64::from(percent))
                .div_ceil(100)
                .max(1) as u32,
        }
    }

    /// What is wrong with this quorum, when something is (`None`: valid).
    #[must_use]
    pub fn problem(self) -> Option<String> {
        match self {
            Quorum::Replicas(n) if n < 2 => Some(format!(
                "a quorum of {n} replicas is what a shared circuit does without one; give 2 or \
                 more, or leave `quorum` out"
            )),
            Quorum::Replicas(n) if n > MAX_QUORUM => {
                Some(format!("{n} replicas is above {MAX_QUORUM}"))
            }
            Quorum::Share(p) if p == 0 || p > 100 => Some(format!("{p}% is not within 1..=100%")),
            _ => None,
        }
    }
}

impl std::str::FromStr for Quorum {
    type Err = String;

    /// Reads `2` or `"50%"` (spaces allowed); the error says what is expected.
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let wrong = || format!("expected {QUORUM_FORM}");
        match text.strip_suffix('%') {
            Some(share) => share
                .trim()
                .parse::<u8>()
                .map(Quorum::Share)
                .map_err(|_| wrong()),
            None => text
                .parse::<u32>()
                .map(Quorum::Replicas)
                .map_err(|_| wrong()),
        }
    }
}

impl fmt::Display for Quorum {
    /// The text form: `2` or `50%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quorum::Replicas(n) => write!(f, "{n}"),
            Quorum::Share(p) => write!(f, "{p}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_reads_what_it_writes_and_refuses_the_rest() {
        for text in ["2", "1000", "50%", "100%", "1%"] {
            let quorum: Quorum = text.parse().unwrap();
            assert_eq!(quorum.to_string().parse::<Quorum>(), Ok(quorum));
            assert_eq!(quorum.problem(), None, "{text}");
        }
        for bad in ["", "two", "50 %%", "-2", "2.5", "300%"] {
            assert!(bad.parse::<Quorum>().is_err(), "{bad}");
        }
        for invalid in ["0", "1", "1001", "0%", "101%"] {
            assert!(
                invalid.parse::<Quorum>().unwrap().problem().is_some(),
                "{invalid}"
            );
        }
    }

    #[test]
    fn a_policy_keeps_every_quorum_it_is_given() {
        for quorum in [0, 1, 2, 1000, 1001, 59_998, 59_999, u32::MAX] {
            let kept = Quorum::decode(Quorum::encode_replicas(quorum));
            assert_eq!(kept, Some(Quorum::Replicas(quorum.min(59_999))), "{quorum}");
            assert_eq!(
                kept.unwrap().problem().is_none(),
                (2..=1000).contains(&quorum)
            );
        }
        for percent in [0, 1, 50, 100, 101, 255] {
            let kept = Quorum::decode(Quorum::encode_share(percent));
            assert_eq!(kept, Some(Quorum::Share(percent)));
        }
        assert_eq!(Quorum::decode(0), None);
    }

    #[test]
    fn a_share_rounds_up_and_asks_for_one_replica_at_least() {
        assert_eq!(Quorum::Share(50).of(4), 2);
        assert_eq!(Quorum::Share(50).of(5), 3);
        assert_eq!(Quorum::Share(1).of(1), 1);
        assert_eq!(Quorum::Share(100).of(0), 1);
        assert_eq!(Quorum::Replicas(3).of(100), 3);
    }
}
