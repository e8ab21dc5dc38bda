//! How a process writes its table, resolved once: the command line's
//! overrides over the mapping's `[writer]` section, and the retry budget
//! every job that writes (or reads back) a table retries throttling within. The full load, the
//! follow after it and a `follow` started on its own all write with a
//! [`WriterSettings`] resolved by [`WriterSettings::resolve`], so no phase
//! falls back to a default the user overrode.

use std::time::Duration;

use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_mapping::Plan;

pub use sql2ddb_aws::DEFAULT_RETRY_BUDGET;

/// How long throttling is retried: `--retry-budget` over the mapping's
/// `[writer] retry_seconds` (when the job has a mapping) over
/// [`DEFAULT_RETRY_BUDGET`]. The one place the budget is resolved.
pub fn retry_budget(flag: Option<Duration>, mapping_seconds: Option<u64>) -> Duration {
    flag.or(mapping_seconds.map(Duration::from_secs))
        .unwrap_or(DEFAULT_RETRY_BUDGET)
}

/// The write-capacity cap of a process: the command line's over the
/// mapping's `[writer] max_wcu`; `None` (or 0, from either) is no cap. The
/// one rule every job (run, worker, follow, update, plan, export) caps with.
pub fn max_wcu(flag: Option<u64>, mapping: Option<u64>) -> Option<u64> {
    flag.or(mapping).filter(|c| *c > 0)
}

/// What the command line says about writing, over the mapping's
/// `[writer]`: each `None` (or `false`) leaves the mapping's setting.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterFlags {
    /// Most `BatchWriteItem` calls in flight (`--concurrency`).
    pub concurrency: Option<usize>,
    /// Keep concurrency at its maximum instead of adapting to throttling
    /// (`--fixed-concurrency`).
    pub fixed_concurrency: bool,
    /// Write units per second for this process (`--max-wcu`).
    pub max_wcu: Option<u64>,
    /// How long an item the table throttles is retried (`--retry-budget`).
    pub retry_budget: Option<Duration>,
}

impl WriterFlags {
    /// The flags over `plan`'s `[writer]`, with the default backoff (a
    /// command whose retries are not otherwise set, as `follow`).
    pub fn resolve(&self, plan: &Plan) -> WriterSettings {
        WriterSettings::resolve(plan, self, RetryPolicy::default())
    }
}

/// The resolved writer settings of a process: what every phase of a job
/// writes with.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WriterSettings {
    /// Most `BatchWriteItem` calls in flight (at least 1).
    pub concurrency: usize,
    /// Whether concurrency adapts to throttling within `[1, concurrency]`.
    pub adaptive: bool,
    /// Write units per second for this process; `None` = uncapped.
    pub max_wcu: Option<u64>,
    /// The retries of every write (items, pointers, updates): the policy
    /// given, with the mapping's `max_attempts` for failures other than
    /// throttling, and the retry budget (see [`retry_budget`]) for
    /// throttling.
    #[serde(skip)]
    pub retry: RetryPolicy,
}

impl WriterSettings {
    /// `flags` over `plan`'s `[writer]`, with `retry`'s backoff, the
    /// mapping's attempts and the retry budget. The one place these are
    /// resolved.
    pub fn resolve(plan: &Plan, flags: &WriterFlags, retry: RetryPolicy) -> WriterSettings {
        let w = &plan.writer;
        WriterSettings {
            concurrency: flags.concurrency.unwrap_or(w.concurrency).max(1),
            adaptive: w.adaptive && !flags.fixed_concurrency,
            max_wcu: max_wcu(flags.max_wcu, w.max_wcu),
            retry: RetryPolicy {
                max_attempts: w.max_attempts,
                ..retry
            }
            .with_throttle_budget(retry_budget(flags.retry_budget, w.retry_seconds)),
        }
    }

    /// How long throttling is retried.
    pub fn retry_budget(&self) -> Duration {
        self.retry.throttle_budget.unwrap_or(DEFAULT_RETRY_BUDGET)
    }

    /// The settings in words, for a progress note: calls in flight, the cap
    /// and the retry budget.
    pub fn describe(&self) -> String {
        let mode = match self.adaptive {
            true => "adapting to throttling",
            false => "fixed",
        };
        let cap = match self.max_wcu {
            Some(c) => format!("capped at {c} write units per second"),
            None => "no write-capacity cap".to_string(),
        };
        format!(
            "at most {} calls in flight ({mode}), {cap}, throttling retried for up to {}",
            self.concurrency,
            sql2ddb_core::duration_text(self.retry_budget())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(writer: &str) -> Plan {
        let text = format!("version = 1\n[source]\nurl = \"sqlite://unused.db\"\n[target]\ntable = \"shop\"\npk = {{ name = \"PK\", type = \"S\" }}\n[writer]\n{writer}\n[[entity]]\nname = \"customer\"\nfrom = \"customers\"\npk = \"C#{{id}}\"\n");
        Plan::parse(&text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    #[test]
    fn the_flags_cap_is_over_the_mappings_and_zero_is_no_cap() {
        assert_eq!(max_wcu(Some(100), Some(500)), Some(100));
        assert_eq!(max_wcu(None, Some(500)), Some(500));
        assert_eq!(max_wcu(Some(100), None), Some(100));
        assert_eq!(max_wcu(None, None), None);
        // 0 is no cap, from either side; a flag of 0 lifts the mapping's.
        assert_eq!(max_wcu(Some(0), Some(500)), None);
        assert_eq!(max_wcu(None, Some(0)), None);
    }

    #[test]
    fn every_job_resolves_the_cap_by_the_one_rule() {
        let capped = plan("max_wcu = 500");
        for (flag, want) in [(None, Some(500)), (Some(100), Some(100)), (Some(0), None)] {
            let flags = WriterFlags {
                max_wcu: flag,
                ..WriterFlags::default()
            };
            assert_eq!(flags.resolve(&capped).max_wcu, want, "--max-wcu {flag:?}");
        }
        let uncapped = plan("concurrency = 4");
        assert_eq!(WriterFlags::default().resolve(&uncapped).max_wcu, None);
    }

    #[test]
    fn the_retry_budget_is_the_flags_over_the_mappings_over_ten_minutes() {
        let none = WriterSettings::resolve(
            &plan("concurrency = 4"),
            &WriterFlags::default(),
            RetryPolicy::default(),
        );
        assert_eq!(none.retry_budget(), Duration::from_secs(600));
        let mapping = plan("retry_seconds = 60");
        let flags = WriterFlags {
            retry_budget: Some(Duration::from_secs(90)),
            ..WriterFlags::default()
        };
        let given = WriterSettings::resolve(&mapping, &flags, RetryPolicy::default());
        assert_eq!(given.retry.throttle_budget, Some(Duration::from_secs(90)));
        let from_mapping = flags_default_resolve(&mapping);
        assert_eq!(from_mapping.retry_budget(), Duration::from_secs(60));
    }

    fn flags_default_resolve(plan: &Plan) -> WriterSettings {
        WriterFlags::default().resolve(plan)
    }

    #[test]
    fn flags_override_the_mapping_and_the_retry_budget_is_the_mappings() {
        let plan = plan("concurrency = 4\nmax_wcu = 500\nmax_attempts = 3\nretry_seconds = 60");
        let mapping =
            WriterSettings::resolve(&plan, &WriterFlags::default(), RetryPolicy::default());
        assert_eq!(
            (mapping.concurrency, mapping.adaptive, mapping.max_wcu),
            (4, true, Some(500))
        );
        assert_eq!(mapping.retry.max_attempts, 3);
        assert_eq!(mapping.retry_budget(), Duration::from_secs(60));
        let flags = WriterFlags {
            concurrency: Some(16),
            fixed_concurrency: true,
            max_wcu: Some(100),
            retry_budget: None,
        };
        let given = WriterSettings::resolve(&plan, &flags, RetryPolicy::default());
        assert_eq!(
            (given.concurrency, given.adaptive, given.max_wcu),
            (16, false, Some(100))
        );
        assert_eq!(given.retry.max_attempts, 3);
    }
}
