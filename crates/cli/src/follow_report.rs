//! What a follow reports: its summary when it stops (changes applied, the
//! position, how to go on or cut over) and where a followed run stands, as
//! `status` shows it.

use sql2ddb_core::redact_url;
// Times of a follow to the millisecond: the lag is read from them.
use sql2ddb_core::shown::{count, thousands, time_ms as time};
use sql2ddb_engine::WriterFlags;

use crate::table::bytes;
use sql2ddb_engine::follow::{
    follow_status, FollowEnd, FollowReport, FollowState, FollowStatus, RecordTarget,
};

/// Where a follow's final summary goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SummaryTo {
    /// The summary on stdout (`follow … > summary.txt` keeps it).
    Stdout,
    /// `follow --json`: the report as one JSON object on stdout, the
    /// summary on stderr.
    Json,
    /// `run --follow --json`: stdout holds the run's report alone, so the
    /// follow's summary goes to stderr.
    Stderr,
}

impl SummaryTo {
    /// Prints a line of the summary where it goes.
    pub(crate) fn say(self, text: &str) {
        match self {
            SummaryTo::Stdout => println!("{text}"),
            SummaryTo::Json | SummaryTo::Stderr => eprintln!("{text}"),
        }
    }
}

/// How a follow is named on the command line: by slot (PostgreSQL) or by
/// run (MySQL/MariaDB, whose position is in the run's directory).
pub(crate) enum FollowedBy<'a> {
    Slot(&'a str),
    Run(&'a str),
}

/// The summary of a follow that ended: what it applied, where it stopped,
/// and what to run next (with `flags`, the writer flags it was given, so
/// the next follow writes as this one did).
pub(crate) fn summary(r: &FollowReport, by: &FollowedBy<'_>, head: &str, flags: &str) -> String {
    let c = &r.counts;
    let mut out = format!(
        "follow of {}: {} applied ({}, {}, {} folded into later ones), {} rejected{}; applied to {}\n",
        r.slot,
        count(c.changes, "change", "changes"),
        count(c.puts, "put", "puts"),
        count(c.deletes, "delete", "deletes"),
        thousands(c.folded),
        thousands(c.rejected),
        match c.rejected {
            0 => String::new(),
            _ => format!(" (see {})", r.rejects.display()),
        },
        r.position
    );
    let at = &r.position;
    out.push_str(&match (r.end, by) {
        (FollowEnd::CutOver, FollowedBy::Slot(_)) => format!(
            "cut over at {at}: every change committed before the cutover is applied"
        ),
        (FollowEnd::CutOver, FollowedBy::Run(_)) => format!(
            "cut over at {at}: every change the binary log held at the cutover is applied"
        ),
        (_, FollowedBy::Slot(slot)) => format!(
            "stopped at {at}; replication slot {slot} is kept (it holds the source's WAL from there): go on with `{head} --slot {slot}{flags}`, cut over with `{head} --slot {slot}{flags} --cutover`, or drop it with `--drop-slot`"
        ),
        (_, FollowedBy::Run(run)) => format!(
            "stopped at {at}: follow again to go on from there (`{head} --run {run}{flags}`) while the source still keeps that binary log file, or cut over with `{head} --run {run}{flags} --cutover`"
        ),
    });
    out
}

/// A warning when a slot keeps more than
/// [`RETAINED_WARNING_BYTES`](sql2ddb_engine::follow::RETAINED_WARNING_BYTES)
/// of WAL: the source's disk fills while nobody follows, or while the
/// follower cannot confirm a position.
pub(crate) fn retained_warning(retained_bytes: u64) -> Option<String> {
    (retained_bytes > sql2ddb_engine::follow::RETAINED_WARNING_BYTES).then(|| format!(
        "warning: the replication slot keeps {} of WAL on the source's disk, and more as the source writes: follow it (`sql2ddb follow MAPPING --slot SLOT`), cut over, or drop it with --drop-slot before the disk fills",
        bytes(retained_bytes)
    ))
}

/// A followed run's standing, as `status` prints it.
pub(crate) fn render_status(s: &FollowStatus) -> String {
    let r = &s.record;
    let mut out = format!(
        "follow: {}  (recorded {} ago in {})\n",
        r.state.text(),
        duration(s.record_age_seconds),
        s.recorded_in
    );
    if let Some(slot) = &r.slot {
        out.push_str(&format!("  replication slot {slot}\n"));
    }
    let applied_at = r
        .applied_at
        .map(|t| format!(" (moved there at {})", time(t)))
        .unwrap_or_default();
    out.push_str(&format!("  applied to {}{applied_at}\n", s.applied));
    if let Some(gtid) = &s.applied_gtid {
        out.push_str(&format!("  GTID position {gtid}\n"));
    }
    let c = &r.counts;
    out.push_str(&format!(
        "  {} applied since {} ({}, {}, {} rejected)\n",
        count(c.changes, "change", "changes"),
        time(r.started_at),
        count(c.puts, "put", "puts"),
        count(c.deletes, "delete", "deletes"),
        thousands(c.rejected)
    ));
    if let Some(at) = r.last_commit_at {
        out.push_str(&format!(
            "  the last applied transaction committed at {}\n",
            time(at)
        ));
    }
    if let Some(e) = &r.error {
        out.push_str(&format!("  error: {e}\n"));
    }
    match (&s.source, &s.source_error) {
        (Some(now), _) => {
            out.push_str(&format!("  source at {}", now.position));
            if now.slot_missing {
                out.push_str(&match r.state {
                    FollowState::CutOver => "; the slot is dropped".to_string(),
                    _ => "; the replication slot no longer exists: the changes since the applied position cannot be followed (run the full load again, with --if-not-empty truncate)".to_string(),
                });
            }
            if let Some(past) = now.wal_behind_bytes {
                out.push_str(&format!(
                    ", {} of WAL past the applied position",
                    bytes(past)
                ));
            }
            if let Some(kept) = now.retained_bytes {
                out.push_str(&format!(
                    "; the slot keeps {} of WAL on the source's disk",
                    bytes(kept)
                ));
            }
            out.push('\n');
            if let Some(warning) = now.retained_bytes.and_then(retained_warning) {
                out.push_str(&format!("  {warning}\n"));
            }
        }
        (None, Some(why)) => out.push_str(&format!(
            "  source not reachable ({why}): the above is what the record holds\n"
        )),
        (None, None) => {}
    }
    if let Some(behind) = behind(s) {
        out.push_str(&format!("  behind: {behind}\n"));
    }
    if s.silent() {
        out.push_str(&format!(
            "  warning: no record from the follower for {}: it may have been killed; following again goes on from its checkpoint\n",
            duration(s.record_age_seconds)
        ));
    }
    out.pop();
    out
}

/// How far behind the source the follow is, in time; `None` once cut over.
fn behind(s: &FollowStatus) -> Option<String> {
    Some(match s.behind_seconds {
        Some(0.0) => "nothing, the source is at the applied position".to_string(),
        Some(b) => format!(
            "at most {} (the first change not applied came after the last applied commit or the last time the follower found nothing to apply)",
            duration(b)
        ),
        None if s.record.state == FollowState::CutOver => return None,
        None => "unknown".to_string(),
    })
}

/// `follow --status`: the follow's state and how far behind it is in
/// time, from the run's record in its directory, when there is one.
pub(crate) async fn record_line(target: Option<RecordTarget>, source: &str) -> Option<String> {
    let t = target?;
    match follow_status(&t.run_id, &t.run_dir, None, Some(source)).await {
        Ok(Some(s)) => Some(format!(
            "run {}: {}{}",
            t.run_id,
            s.record.state.text(),
            behind(&s)
                .map(|b| format!(", behind: {b}"))
                .unwrap_or_default()
        )),
        Ok(None) => None,
        Err(e) => {
            eprintln!(
                "warning: the run's follow record cannot be read: {}",
                sql2ddb_core::redact_secrets(&e.to_string())
            );
            None
        }
    }
}

/// Seconds as people read them: `0.4 s`, `12 s`, `3 min 20 s`, `2 h 5 min`.
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 10.0 {
        return format!("{s:.1} s");
    }
    let whole = s.round() as u64;
    match whole {
        0..=59 => format!("{whole} s"),
        60..=3599 => format!("{} min {} s", whole / 60, whole % 60),
        _ => format!("{} h {} min", whole / 3600, whole % 3600 / 60),
    }
}

/// `sql2ddb follow MAPPING` and the options that say where a follow reads
/// and writes (`--endpoint`, `--region`, `--runs-dir` when not the
/// default), quoted for a POSIX shell, a password in a URL masked: the head
/// of every command printed to go on, so it can be pasted as it is.
pub(crate) fn command_head(
    mapping: &str,
    endpoint: Option<&str>,
    region: Option<&str>,
    runs_dir: &std::path::Path,
) -> String {
    use crate::run::resume::shell_word;
    let mut words = vec![
        "sql2ddb".to_string(),
        "follow".to_string(),
        shell_word(mapping),
    ];
    if let Some(e) = endpoint {
        words.push(format!("--endpoint {}", shell_word(&redact_url(e))));
    }
    if let Some(r) = region {
        words.push(format!("--region {}", shell_word(r)));
    }
    if runs_dir != std::path::Path::new(crate::run_ref::DEFAULT_RUNS_DIR) {
        words.push(format!(
            "--runs-dir {}",
            shell_word(&runs_dir.display().to_string())
        ));
    }
    words.join(" ")
}

/// The writer flags given, as they are written on the command line (each
/// with a space before it), for the `follow` commands printed to go on.
pub(crate) fn flag_words(flags: &WriterFlags) -> String {
    let mut words = String::new();
    if let Some(c) = flags.concurrency {
        words.push_str(&format!(" --concurrency {c}"));
    }
    if flags.fixed_concurrency {
        words.push_str(" --fixed-concurrency");
    }
    if let Some(w) = flags.max_wcu {
        words.push_str(&format!(" --max-wcu {w}"));
    }
    words.push_str(&crate::budget::words(flags.retry_budget));
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(0.44), "0.4 s");
        assert_eq!(duration(12.4), "12 s");
        assert_eq!(duration(200.0), "3 min 20 s");
        assert_eq!(duration(7_500.0), "2 h 5 min");
    }

    #[test]
    fn a_slot_that_keeps_much_wal_is_warned_of() {
        let limit = sql2ddb_engine::follow::RETAINED_WARNING_BYTES;
        assert_eq!(retained_warning(limit), None);
        let warning = retained_warning(limit + 1).unwrap();
        assert!(
            warning.starts_with("warning: the replication slot keeps "),
            "{warning}"
        );
    }

    #[test]
    fn the_command_to_go_on_names_the_mapping_and_where_it_writes() {
        let runs = std::path::Path::new(crate::run_ref::DEFAULT_RUNS_DIR);
        assert_eq!(
            command_head("shop.toml", None, None, runs),
            "sql2ddb follow shop.toml"
        );
        assert_eq!(
            command_head(
                "my maps/shop.toml",
                Some("http://user:secret@127.0.0.1:8000"),
                Some("eu-west-1"),
                std::path::Path::new("/var/runs")
            ),
            "sql2ddb follow 'my maps/shop.toml' --endpoint 'http://user:***@127.0.0.1:8000' --region eu-west-1 --runs-dir /var/runs"
        );
    }

    #[test]
    fn the_writer_flags_given_are_printed_as_given() {
        assert_eq!(flag_words(&WriterFlags::default()), "");
        let flags = WriterFlags {
            concurrency: Some(4),
            fixed_concurrency: true,
            max_wcu: Some(100),
            retry_budget: Some(std::time::Duration::from_secs(90)),
        };
        assert_eq!(
            flag_words(&flags),
            " --concurrency 4 --fixed-concurrency --max-wcu 100 --retry-budget 1m30s"
        );
    }
}
