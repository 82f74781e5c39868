//! [`RetryBudget`]: how many retries a key allows, as a share of its first attempts plus a floor,
//! and its text form (`"20%"`, `"20%, 10/s"`) that the attribute and configuration files share.

use std::fmt;

use crate::limits::{MAX_RETRY_FLOOR, MAX_RETRY_PERCENT};

/// A retry budget: over the last [`RETRY_BUDGET_SPAN`](crate::limits::RETRY_BUDGET_SPAN)
/// (10 s), a key allows `percent` % of its first attempts as retries, plus `floor` retries per
/// second whatever the ratio (Finagle's `percentCanRetry` and `minRetriesPerSec`).
///
/// Written `"20%"` (the floor is then [`RetryBudget::DEFAULT_FLOOR`], 10 retries per second) or
/// `"20%, 10/s"`; `"20%, 0/s"` has no floor. Set with
/// [`Policy::retry_budget`](crate::Policy::retry_budget).
///
/// ```
/// # use fusebox_policy as fusebox;
/// use fusebox::RetryBudget;
///
/// let budget: RetryBudget = "20%".parse().unwrap();
/// assert_eq!((budget.percent, budget.floor), (20, 10));
/// assert_eq!("5%, 2/s".parse::<RetryBudget>().unwrap(), RetryBudget { percent: 5, floor: 2 });
/// assert_eq!(RetryBudget { percent: 5, floor: 2 }.to_string(), "5%, 2/s");
/// assert!("20".parse::<RetryBudget>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryBudget {
    /// Retries allowed per 100 first attempts (0..=1000).
    pub percent: u16,
    /// Retries per second allowed whatever the ratio (0..=100000).
    pub floor: u32,
}

impl RetryBudget {
    /// The floor of a budget written without one: 10 retries per second (Finagle's default).
    pub const DEFAULT_FLOOR: u32 = 10;

    /// `percent` % of first attempts, with the default floor.
    #[must_use]
    pub const fn percent(percent: u16) -> Self {
        RetryBudget {
            percent,
            floor: Self::DEFAULT_FLOOR,
        }
    }

    /// What is wrong with this budget, when something is (`None`: valid).
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        if self.percent > MAX_RETRY_PERCENT {
            Some(format!(
                "the ratio {}% is above {MAX_RETRY_PERCENT}%",
                self.percent
            ))
        } else if self.floor > MAX_RETRY_FLOOR {
            Some(format!(
                "the floor {}/s is above {MAX_RETRY_FLOOR}/s",
                self.floor
            ))
        } else if self.percent == 0 && self.floor == 0 {
            Some("`0%, 0/s` rejects every retry (use one attempt: no `retry`)".into())
        } else {
            None
        }
    }
}

/// The form every message names: how a retry budget is written.
pub const RETRY_BUDGET_FORM: &str = "a percentage of first attempts and an optional floor in retries per second, like \"20%\" or \"20%, 10/s\"";

impl std::str::FromStr for RetryBudget {
    type Err = String;

    /// Reads `"20%"` or `"20%, 10/s"` (spaces allowed around each part); the error says what
    /// is expected.
    fn from_str(text: &str) -> Result<Self, String> {
        let wrong = || format!("expected {RETRY_BUDGET_FORM}");
        let (ratio, floor) = match text.split_once(',') {
            Some((ratio, floor)) => (ratio, Some(floor)),
            None => (text, None),
        };
        let percent = ratio
            .trim()
            .strip_suffix('%')
            .and_then(|n| n.trim().parse::<u16>().ok())
            .ok_or_else(wrong)?;
        let floor = match floor {
            None => RetryBudget::DEFAULT_FLOOR,
            Some(floor) => floor
                .trim()
                .strip_suffix("/s")
                .and_then(|n| n.trim().parse::<u32>().ok())
                .ok_or_else(wrong)?,
        };
        Ok(RetryBudget { percent, floor })
    }
}

impl fmt::Display for RetryBudget {
    /// The text form: `20%, 10/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%, {}/s", self.percent, self.floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_round_trips_and_refuses_other_shapes() {
        for (text, percent, floor) in [
            ("20%", 20, 10),
            (" 20 % ", 20, 10),
            ("0%, 5/s", 0, 5),
            ("150%,0/s", 150, 0),
        ] {
            let budget: RetryBudget = text.parse().unwrap();
            assert_eq!((budget.percent, budget.floor), (percent, floor), "{text}");
            assert_eq!(budget.to_string().parse::<RetryBudget>(), Ok(budget));
        }
        for bad in ["20", "20%, 10", "x%", "-1%", "20%, 10/m", "", "20%,"] {
            assert!(bad.parse::<RetryBudget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn problems_name_the_limit() {
        assert_eq!(RetryBudget::percent(20).problem(), None);
        assert!(
            RetryBudget {
                percent: 1001,
                floor: 0
            }
            .problem()
            .unwrap()
            .contains("1000%")
        );
        assert!(
            RetryBudget {
                percent: 1,
                floor: 100_001
            }
            .problem()
            .unwrap()
            .contains("100000/s")
        );
        assert!(
            RetryBudget {
                percent: 0,
                floor: 0
            }
            .problem()
            .unwrap()
            .contains("every retry")
        );
    }
}
