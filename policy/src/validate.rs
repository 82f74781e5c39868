//! [`Policy::validate`]: every field within its limits, and the rules between fields.

use std::time::Duration;

use crate::limits::{
    MAX_CONCURRENT, MAX_HALF_OPEN, MAX_OPEN_BACKOFF, MAX_PHASES, MAX_QUORUM, MAX_RETRY_FLOOR,
    MAX_RETRY_PERCENT, MAX_THROTTLE, MAX_TIME_WINDOW, MAX_WINDOW, MIN_TIME_WINDOW,
};
use crate::{Knob, Policy, PolicyError, Quorum, Recovery, Window, in_ms_range};

impl Policy {
    /// Checks every field; the first invalid one is reported with its allowed range.
    ///
    /// # Errors
    ///
    /// The first field outside its allowed range, in the order of the type's table.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.validate_rates()?;
        self.validate_open()?;
        self.validate_recovery()?;
        self.validate_concurrency()?;
        self.validate_retry_budget()?;
        self.validate_quorum()?;
        self.validate_group()?;
        self.validate_shadow()
    }

    /// Checks every field as [`validate`](Policy::validate) does, for the breaker `key`: the
    /// error names it.
    ///
    /// ```
    /// # use fusebox_policy as fusebox;
    /// use fusebox::Policy;
    ///
    /// let error = Policy::new().half_open(0).validate_for("payment").unwrap_err();
    /// assert_eq!(error.key(), Some("payment"));
    /// assert!(error.to_string().starts_with("breaker `payment`: invalid `half_open` = 0"));
    /// ```
    ///
    /// # Errors
    ///
    /// The first field outside its allowed range, naming `key`.
    pub fn validate_for(&self, key: &str) -> Result<(), PolicyError> {
        self.validate().map_err(|e| e.for_key(key))
    }

    /// `window`, `min_calls`, `failure_rate`, `slow`, `slow_rate`, `consecutive`, `failure_count`,
    /// `throttle`.
    fn validate_rates(&self) -> Result<(), PolicyError> {
        self.validate_window()?;
        self.validate_rules()
    }

    /// `window` and `min_calls`.
    fn validate_window(&self) -> Result<(), PolicyError> {
        let range =
            |field, allowed: &str, found: String| Err(PolicyError::new(field, allowed, found));
        match self.window {
            Window::Count(n) if n == 0 || n > MAX_WINDOW => {
                return range("window", &format!("1..={MAX_WINDOW} calls"), n.to_string());
            }
            Window::Time(span) if span < MIN_TIME_WINDOW || span > MAX_TIME_WINDOW => {
                return range(
                    "window",
                    "\"10ms\"..=\"2h\" for a time window",
                    format!("{span:?}"),
                );
            }
            _ => {}
        }
        if let Window::Count(n) = self.window
            && (self.min_calls == 0 || self.min_calls > n)
        {
            return range(
                "min_calls",
                &format!("1..={n} (at most `window`)"),
                self.min_calls.to_string(),
            );
        }
        if self.min_calls == 0 {
            return range("min_calls", "at least 1", "0".into());
        }
        Ok(())
    }

    /// `failure_rate`, `slow`, `slow_rate`, `consecutive`, `failure_count`, `throttle`, and that
    /// one rule trips.
    fn validate_rules(&self) -> Result<(), PolicyError> {
        let range =
            |field, allowed: &str, found: String| Err(PolicyError::new(field, allowed, found));
        if self.failure_rate > 100 {
            return range(
                "failure_rate",
                "1..=100 percent",
                self.failure_rate.to_string(),
            );
        }
        if (self.slow_nanos != 0 || self.is_explicit(Knob::slow)) && !in_ms_range(self.slow_nanos) {
            return range(
                "slow",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", Duration::from_nanos(self.slow_nanos)),
            );
        }
        if self.slow_rate == 0 || self.slow_rate > 100 {
            return range("slow_rate", "1..=100 percent", self.slow_rate.to_string());
        }
        if self.consecutive > MAX_WINDOW {
            return range(
                "consecutive",
                &format!("1..={MAX_WINDOW} failures"),
                self.consecutive.to_string(),
            );
        }
        if self.failure_count > MAX_WINDOW {
            return range(
                "failure_count",
                &format!("1..={MAX_WINDOW} failures"),
                self.failure_count.to_string(),
            );
        }
        if let Window::Count(n) = self.window
            && self.failure_count > n
        {
            return range(
                "failure_count",
                &format!("1..={n} (at most a count `window`)"),
                self.failure_count.to_string(),
            );
        }
        if self.throttle_milli != 0
            && (self.throttle_milli < 1000
                || f64::from(self.throttle_milli) > MAX_THROTTLE * 1000.0)
        {
            return range(
                "throttle",
                "1..=100 (the factor on accepts: 2 sheds nothing while half the calls succeed; 0 turns throttling off)",
                format!("{}", f64::from(self.throttle_milli) / 1000.0),
            );
        }
        if self.failure_rate == 0
            && self.consecutive == 0
            && self.failure_count == 0
            && self.slow_nanos == 0
        {
            return range(
                "failure_rate",
                "1..=100 percent (or set `consecutive`, `failure_count` or `slow`: a policy needs a rule that trips)",
                "off".into(),
            );
        }
        Ok(())
    }

    /// `open_for`, `open_backoff`, `open_max`, `open_for_fn`, `open_jitter`.
    fn validate_open(&self) -> Result<(), PolicyError> {
        let range =
            |field, allowed: &str, found: String| Err(PolicyError::new(field, allowed, found));
        if !in_ms_range(self.open_for_nanos) {
            return range(
                "open_for",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", self.settings().open_for),
            );
        }
        if self.open_backoff_milli < 1000
            || f64::from(self.open_backoff_milli) > MAX_OPEN_BACKOFF * 1000.0
        {
            return range(
                "open_backoff",
                "1..=100 (a multiplier; 1 means no backoff)",
                format!("{}", f64::from(self.open_backoff_milli) / 1000.0),
            );
        }
        if !in_ms_range(self.open_max_nanos) {
            return range(
                "open_max",
                "\"1ms\"..=\"24h\" (and at least `open_for` with `open_backoff`)",
                format!("{:?}", Duration::from_nanos(self.open_max_nanos)),
            );
        }
        if self.open_fn.is_some() && self.open_backoff_milli != 1000 {
            return range(
                "open_backoff",
                "1 (no backoff) with an `open_for` function, which is given the failed recoveries and grows the wait itself",
                format!("{}", f64::from(self.open_backoff_milli) / 1000.0),
            );
        }
        if self.hedge_budget == 0 || self.hedge_budget > 100 {
            return range(
                "hedge_budget",
                "1..=100 percent more calls (remove `hedge` to send no hedges)",
                self.hedge_budget.to_string(),
            );
        }
        if self.open_jitter > 100 {
            return range(
                "open_jitter",
                "0..=100 percent of the open wait (0: no spread)",
                self.open_jitter.to_string(),
            );
        }
        if self.open_backoff_milli > 1000 && self.open_max_nanos < self.open_for_nanos {
            return range(
                "open_max",
                &format!("at least `open_for` ({:?})", self.settings().open_for),
                format!("{:?}", Duration::from_nanos(self.open_max_nanos)),
            );
        }
        Ok(())
    }

    /// `half_open`, `half_open_lease`, `recovery`.
    fn validate_recovery(&self) -> Result<(), PolicyError> {
        let range =
            |field, allowed: &str, found: String| Err(PolicyError::new(field, allowed, found));
        if self.half_open == 0 || self.half_open > MAX_HALF_OPEN {
            return range(
                "half_open",
                &format!("1..={MAX_HALF_OPEN} probes"),
                self.half_open.to_string(),
            );
        }
        if (self.half_open_lease_nanos != 0 || self.is_explicit(Knob::half_open_lease))
            && !in_ms_range(self.half_open_lease_nanos)
        {
            return range(
                "half_open_lease",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", Duration::from_nanos(self.half_open_lease_nanos)),
            );
        }
        if let Recovery::Progressive { phases, min_passes } = self.recovery {
            if phases == 0 || phases > MAX_PHASES {
                return range("phases", &format!("1..={MAX_PHASES}"), phases.to_string());
            }
            if min_passes == 0 || min_passes > MAX_WINDOW {
                return range(
                    "min_passes",
                    &format!("1..={MAX_WINDOW}"),
                    min_passes.to_string(),
                );
            }
        }
        Ok(())
    }

    /// `max_concurrent` when adaptive: `1 <= floor <= ceiling <= MAX_CONCURRENT`.
    fn validate_concurrency(&self) -> Result<(), PolicyError> {
        // Read from the fields: an adaptive limit with a ceiling of 0 reads as no bulkhead.
        let (floor, ceiling) = (self.concurrency_floor.wrapping_sub(1), self.max_concurrent);
        if self.concurrency_floor != 0
            && (floor == 0 || floor > ceiling || ceiling > MAX_CONCURRENT)
        {
            return Err(PolicyError::new(
                "max_concurrent",
                format!(
                    "\"adaptive(floor..ceiling)\" with 1 <= floor <= ceiling <= {MAX_CONCURRENT}, like \"adaptive(2..200)\""
                ),
                format!("\"adaptive({floor}..{ceiling})\""),
            ));
        }
        Ok(())
    }

    /// `retry_budget`.
    fn validate_retry_budget(&self) -> Result<(), PolicyError> {
        match self.retry_budget.map(|b| (b, b.problem())) {
            Some((budget, Some(problem))) => Err(PolicyError::new(
                "retry_budget",
                format!(
                    "0..={MAX_RETRY_PERCENT}% with a floor of 0..={MAX_RETRY_FLOOR}/s, not both zero ({problem})"
                ),
                format!("\"{budget}\""),
            )),
            _ => Ok(()),
        }
    }

    /// `quorum`: 2..=`MAX_QUORUM` replicas or 1..=100 %.
    fn validate_quorum(&self) -> Result<(), PolicyError> {
        match Quorum::decode(self.quorum).map(|q| (q, q.problem())) {
            Some((quorum, Some(problem))) => Err(PolicyError::new(
                "quorum",
                format!("2..={MAX_QUORUM} replicas or 1..=100% of them ({problem})"),
                quorum.to_string(),
            )),
            _ => Ok(()),
        }
    }

    /// `group`: a name of 1 to 64 bytes of ASCII letters, digits, `-`, `_`, `.` or `:`.
    fn validate_group(&self) -> Result<(), PolicyError> {
        self.group.map_or(Ok(()), Policy::validate_group_name)
    }

    /// `shadow`: a text [`shadows_of_text`](crate::text::shadows_of_text) reads, each shadow
    /// valid. The error names the shadow and its field: `invalid `shadow` = `tight`:
    /// `failure_rate` …`.
    fn validate_shadow(&self) -> Result<(), PolicyError> {
        let Some(text) = self.shadow else {
            return Ok(());
        };
        crate::text::shadows_of_text(text)
            .map(|_| ())
            .map_err(|e| PolicyError::shadow(e.shadow.as_deref(), &e.error))
    }

    /// Checks a group's name as [`validate`](Policy::validate) checks the name given to
    /// [`Policy::group`]: 1 to 64 bytes of ASCII letters, digits, `-`, `_`, `.` or `:`. For a
    /// name read at run time, before it is kept as the `&'static str` a policy holds.
    ///
    /// ```
    /// # use fusebox_policy as fusebox;
    /// use fusebox::Policy;
    ///
    /// assert!(Policy::validate_group_name("search-eu").is_ok());
    /// let error = Policy::validate_group_name("two words").unwrap_err();
    /// assert_eq!(error.field(), "group");
    /// ```
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] for the field `group` when the name is not one a policy can name.
    pub fn validate_group_name(name: &str) -> Result<(), PolicyError> {
        match crate::group_name_problem(name) {
            Some(_) => {
                let mut chars = name.chars();
                let head: String = chars.by_ref().take(40).collect();
                let more = if chars.next().is_some() { "…" } else { "" };
                Err(PolicyError::new(
                    "group",
                    "1..=64 characters among ASCII letters, digits, `-`, `_`, `.`, `:` (like \"search-eu\")",
                    format!("{head:?}{more}"),
                ))
            }
            None => Ok(()),
        }
    }
}
