//! `--retry-budget`: how long an item (or a call) DynamoDB throttles is
//! retried, for every command that writes a table or reads one back.

use std::time::Duration;

/// The longest budget: a day, as the mapping's `[writer] retry_seconds`.
const MAX_RETRY_BUDGET: Duration = Duration::from_secs(86_400);

/// `--retry-budget`, for the commands that write.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct RetryBudgetArg {
    /// How long an item DynamoDB throttles (ProvisionedThroughputExceeded,
    /// ThrottlingException, RequestLimitExceeded, or returned unprocessed)
    /// is retried, from its first attempt: 90s, 10m, 1h30m (at most 24h).
    /// Past it the job stops with exit 75 (try again later), nothing
    /// counted as rejected, and says how to continue. Default: the
    /// mapping's [writer] retry_seconds, else 10m.
    #[arg(long, value_name = "DURATION", value_parser = retry_budget)]
    pub retry_budget: Option<Duration>,
}

/// A budget as `--retry-budget` takes it: more than zero, at most a day.
pub(crate) fn retry_budget(text: &str) -> Result<Duration, String> {
    let d = sql2ddb_core::parse_duration(text)?;
    if d.is_zero() {
        return Err("must be more than 0: give e.g. 90s or 10m".into());
    }
    if d > MAX_RETRY_BUDGET {
        return Err(format!(
            "{} is more than a day; give at most 24h",
            sql2ddb_core::duration_text(d)
        ));
    }
    Ok(d)
}

/// `--retry-budget D` as a command to paste shows it, or nothing.
pub(crate) fn words(budget: Option<Duration>) -> String {
    budget
        .map(|d| format!(" --retry-budget {}", sql2ddb_core::duration_text(d)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_a_duration_of_more_than_zero_up_to_a_day() {
        assert_eq!(retry_budget("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(retry_budget("10m"), Ok(Duration::from_secs(600)));
        assert!(retry_budget("0s").unwrap_err().contains("more than 0"));
        assert!(retry_budget("25h").unwrap_err().contains("at most 24h"));
        assert!(retry_budget("soon").unwrap_err().contains("90s, 10m"));
        assert_eq!(
            words(Some(Duration::from_secs(90))),
            " --retry-budget 1m30s"
        );
        assert_eq!(words(None), "");
    }
}
