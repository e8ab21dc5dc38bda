//! How a process writes its table, resolved once: the command line's
//! overrides over the mapping's `[writer]` section. The full load, the
//! follow after it and a `follow` started on its own all write with a
//! [`WriterSettings`] resolved by [`WriterSettings::resolve`], so no phase
//! falls back to a default the user overrode.

use std::time::Duration;

use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_mapping::Plan;

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
    /// The retries of every write: the policy given, with the mapping's
    /// `max_attempts`.
    #[serde(skip)]
    pub retry: RetryPolicy,
    /// How long an item may be retried (the mapping's `retry_seconds`);
    /// `None` = attempts only.
    #[serde(skip)]
    pub retry_deadline: Option<Duration>,
}

impl WriterSettings {
    /// `flags` over `plan`'s `[writer]`, with `retry`'s backoff and the
    /// mapping's retry budget. The one place these are resolved.
    pub fn resolve(plan: &Plan, flags: &WriterFlags, retry: RetryPolicy) -> WriterSettings {
        let w = &plan.writer;
        WriterSettings {
            concurrency: flags.concurrency.unwrap_or(w.concurrency).max(1),
            adaptive: w.adaptive && !flags.fixed_concurrency,
            max_wcu: flags.max_wcu.or(w.max_wcu).filter(|c| *c > 0),
            retry: RetryPolicy {
                max_attempts: w.max_attempts,
                ..retry
            },
            retry_deadline: w.retry_seconds.map(Duration::from_secs),
        }
    }

    /// The settings in words, for a progress note: calls in flight and the cap.
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
            "at most {} calls in flight ({mode}), {cap}",
            self.concurrency
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
    fn flags_override_the_mapping_and_the_retry_budget_is_the_mappings() {
        let plan = plan("concurrency = 4\nmax_wcu = 500\nmax_attempts = 3\nretry_seconds = 60");
        let mapping =
            WriterSettings::resolve(&plan, &WriterFlags::default(), RetryPolicy::default());
        assert_eq!(
            (mapping.concurrency, mapping.adaptive, mapping.max_wcu),
            (4, true, Some(500))
        );
        assert_eq!(mapping.retry.max_attempts, 3);
        assert_eq!(mapping.retry_deadline, Some(Duration::from_secs(60)));
        let flags = WriterFlags {
            concurrency: Some(16),
            fixed_concurrency: true,
            max_wcu: Some(100),
        };
        let given = WriterSettings::resolve(&plan, &flags, RetryPolicy::default());
        assert_eq!(
            (given.concurrency, given.adaptive, given.max_wcu),
            (16, false, Some(100))
        );
        assert_eq!(given.retry.max_attempts, 3);
    }
}
