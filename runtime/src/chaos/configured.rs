//! The faults configuration declares (`chaos = { … }` in a key's table, features `chaos` and
//! `config`): resolved into [`Fault`]s before a load is accepted, then injected, each load from
//! a source replacing the faults that source's previous load injected.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Fault, Injections};
use crate::config::{ConfigError, Source};
use crate::config::{Declared, What};

impl Injections {
    /// The faults `declared` by key, resolved: a `registered` name must be one
    /// [`register`](Injections::register) knows.
    ///
    /// # Errors
    /// [`ConfigError::Field`] naming the key, for a name no fault is registered under.
    pub(crate) fn resolve(
        &self,
        declared: &BTreeMap<String, Declared>,
    ) -> Result<Vec<(String, Fault)>, ConfigError> {
        let named = self
            .named
            .read()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut faults = Vec::with_capacity(declared.len());
        for (key, declared) in declared {
            let mut fault = match &declared.what {
                What::Rejection => Fault::rejection(),
                What::Latency(delay) => Fault::latency(*delay),
                What::Registered(name) => match named.get(name) {
                    Some((_, fault)) => fault.clone(),
                    None => {
                        return Err(ConfigError::Field {
                            key: crate::config::echo(key),
                            message: format!(
                                "`chaos`: no fault is registered as `{}`; register it in code \
                                 (`Injections::register`) before loading, or declare \
                                 `fault = \"rejection\"` or `\"latency\"`",
                                crate::config::echo(name)
                            ),
                        });
                    }
                },
            };
            if let Some(rate) = declared.rate {
                fault = fault.rate(rate);
            }
            if let Some(seed) = declared.seed {
                fault = fault.seed(seed);
            }
            faults.push((key.clone(), fault));
        }
        Ok(faults)
    }

    /// Injects `faults`, the ones a load from `source` declares, after clearing the faults the
    /// previous load from `source` injected that are still in place (a key the new load does
    /// not name returns to no fault, unless code or an operator injected another since). Each
    /// injection and each clearing is a WARN event `chaos_switched` named `configuration`.
    pub(crate) fn configure(&self, source: Source, faults: Vec<(String, Fault)>) {
        let mut configured = self
            .configured
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let previous = std::mem::take(match source {
            Source::File => &mut configured.0,
            Source::Env => &mut configured.1,
        });
        for (key, injected) in previous {
            if faults.iter().any(|(k, _)| *k == key) {
                continue;
            }
            if let Some(kind) = self.remove_if_same(&key, &injected) {
                super::switched(&key, kind, Some(CONFIGURATION), false);
            }
        }
        let mut made = BTreeMap::new();
        for (key, fault) in faults {
            let kind = fault.kind();
            let injection = self.install(key.clone(), fault);
            super::switched(&key, kind, Some(CONFIGURATION), true);
            made.insert(key, Arc::downgrade(&injection));
        }
        match source {
            Source::File => configured.0 = made,
            Source::Env => configured.1 = made,
        }
    }
}

/// The name the events of configuration's switches carry.
const CONFIGURATION: &str = "configuration";

#[cfg(test)]
mod tests {
    //! A reload clearing its source's fault never clears one code injected meanwhile.

    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use super::super::{Fault, FaultKind, Injections};
    use crate::config::Source;

    #[test]
    fn a_reload_racing_an_injection_from_code_leaves_code_s_fault_in_place() {
        let chaos = Arc::new(Injections::new());
        let start = Arc::new(Barrier::new(2));
        let code = {
            let (chaos, start) = (Arc::clone(&chaos), Arc::clone(&start));
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    start.wait();
                    chaos.inject("search", Fault::latency(Duration::from_millis(5)));
                    start.wait();
                }
            })
        };
        for round in 0..ROUNDS {
            chaos.configure(
                Source::File,
                vec![("search".to_owned(), Fault::rejection())],
            );
            start.wait();
            chaos.configure(Source::File, Vec::new());
            start.wait();
            assert_eq!(
                chaos.injected(),
                vec![("search".to_owned(), FaultKind::Latency)],
                "round {round}: the reload cleared the fault code injected after the load"
            );
        }
        code.join().unwrap();
    }

    /// How many reloads race an injection.
    const ROUNDS: usize = 20_000;
}
