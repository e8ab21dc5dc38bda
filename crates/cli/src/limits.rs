//! The ranges numeric options are checked against while the command line is
//! parsed, shared by every subcommand that takes the option. A value out of
//! range is a usage error that names the option and the range; nothing is
//! clamped behind the user's back.
//!
//! The bounds are the mapping's own where the mapping has the same setting
//! (`[writer] concurrency`, `read_parallelism`, `max_wcu`), and SQS's limits
//! for queue settings.

use clap::builder::RangedU64ValueParser;
use sql2ddb_engine::queues::MAX_WAIT;
use sql2ddb_mapping::{MAX_CONCURRENCY, MAX_READ_PARALLELISM, MAX_WCU};

/// Longest visibility timeout SQS accepts, in seconds (12 hours).
pub const MAX_VISIBILITY_SECONDS: u64 = 43_200;
/// Most receives SQS accepts in a redrive policy before dead-lettering.
pub const MAX_RECEIVE_COUNT: u64 = 1_000;

/// A DynamoDB table name (`init --single-table`), refused at the command
/// line as `check` would refuse it in the mapping.
pub fn table_name(text: &str) -> Result<String, String> {
    match sql2ddb_mapping::is_table_name(text) {
        true => Ok(text.to_string()),
        false => Err(format!(
            "{text:?} is not a DynamoDB table name: 3 to 255 of a-z, A-Z, 0-9, _ . - (no spaces), e.g. {:?}",
            suggested_table_name(text)
        )),
    }
}

/// `text` with every character a table name cannot hold made `-`.
fn suggested_table_name(text: &str) -> String {
    let mut name: String = text
        .trim()
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                true => c,
                false => '-',
            },
        )
        .take(255)
        .collect();
    while name.len() < 3 {
        name.push_str("-db");
    }
    name
}

/// `--concurrency`: 1..=[`MAX_CONCURRENCY`], as `[writer] concurrency`.
pub fn concurrency() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=MAX_CONCURRENCY as u64)
}

/// `--read-parallelism`: 1..=[`MAX_READ_PARALLELISM`], as the mapping's.
pub fn read_parallelism() -> RangedU64ValueParser<u32> {
    RangedU64ValueParser::new().range(1..=u64::from(MAX_READ_PARALLELISM))
}

/// `--max-wcu`: 1..=[`MAX_WCU`], as `[writer] max_wcu`.
pub fn max_wcu() -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(1..=MAX_WCU)
}

/// `--poll`: a long poll of 1..=20 seconds (SQS's longest). A zero-second
/// poll would turn an idle worker into a loop of paid, empty receives.
pub fn poll() -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(1..=MAX_WAIT.as_secs())
}

/// `queue create --visibility-timeout`: 1..=[`MAX_VISIBILITY_SECONDS`]; at
/// zero every batch would be handed to a second worker at once.
pub fn visibility_timeout() -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(1..=MAX_VISIBILITY_SECONDS)
}

/// `queue create --max-receive-count`: 1..=[`MAX_RECEIVE_COUNT`].
pub fn max_receive_count() -> RangedU64ValueParser<u32> {
    RangedU64ValueParser::new().range(1..=MAX_RECEIVE_COUNT)
}

/// A count or a number of seconds that means nothing at zero and has no
/// upper bound of its own (`--page-size`, `--source-connections`,
/// `--max-queued`, `--interval`, `--timeout`). Zero stays valid where it
/// means something: `--idle-exit 0` drains the queue and stops,
/// `--shutdown-grace 0` releases the batches at once.
pub fn positive<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    let n: u64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of 1 or more"))?;
    if n == 0 {
        return Err("must be at least 1, not 0".into());
    }
    T::try_from(n).map_err(|_| format!("{n} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_refuses_zero_and_garbage_and_overflow() {
        assert_eq!(positive::<u32>("7"), Ok(7));
        assert_eq!(
            positive::<u32>("0"),
            Err("must be at least 1, not 0".into())
        );
        assert!(positive::<u32>("-1").is_err());
        assert!(positive::<u32>("x").is_err());
        assert_eq!(
            positive::<u32>("4294967296"),
            Err("4294967296 is too large".into())
        );
    }
}
