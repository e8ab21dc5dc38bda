//! `sql2ddb status` and `sql2ddb verify`: a run's counts from its progress
//! table, from any machine.

use std::time::{Duration, Instant};

use sql2ddb_core::redact_secrets;
use sql2ddb_core::shown::{count, thousands, time_text};
use sql2ddb_engine::follow::{follow_status, FollowStatus};
use sql2ddb_engine::verify::{inspect, RunState};
use sql2ddb_engine::{EngineError, Job, ResourceOptions, Resources, RunId};

use crate::load;
use crate::outcome::{Ended, Output};
pub use crate::run_ref::StatusArgs;

/// `verify`'s arguments: a run's counts, or with --deep its items.
#[derive(clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    status: StatusArgs,
    #[command(flatten)]
    deep: crate::deep::DeepArgs,
}

/// The exit codes of `sql2ddb status`, for its --help.
pub const STATUS_EXIT_CODES: &str = "\
Exit codes:
  0   the run's state was read (whatever it is)
  1   the run has no records
  64  usage error: unknown option, missing argument, value out of range
  69  DynamoDB or SQS could not be reached, or refused
  74  the mapping could not be read
  75  DynamoDB kept throttling past the retries: look again later
  78  the mapping is invalid, or the progress table cannot be named or does
      not exist";

/// The exit codes of `sql2ddb verify`, for its --help.
pub const VERIFY_EXIT_CODES: &str = "\
Exit codes:
  0  every row of the run is accounted for: written, or rejected with its
     reason in a rejects file; none failed
  1  rows are missing or pending, some failed, the run cannot move on
     (--watch: its only unwritten messages are in the dead-letter queue),
     --timeout passed, or the run has no records
  64 usage error: unknown option, missing argument, value out of range
  69 the source, DynamoDB or SQS could not be reached, or refused
  74 a file could not be read or written (the mapping, diff.jsonl)
  75 DynamoDB kept throttling past the retries (--deep: past its
     --retry-budget): verify again later
  78 the mapping is invalid or does not fit its source or its table, or
     the settings do not fit together
With --deep: 0 every item is exactly what the mapping makes of the source,
  1 an item is missing, extra, different or collapsed, or a pointer is
  wrong; 69, 74, 75, 78 as above: the comparison could not be made.";

/// The resources (progress store, queue) these arguments name for `run`,
/// and the source URL of the mapping when one is given. The progress table
/// is the one given, else the one the run's report names, else the
/// mapping's default.
async fn resources(
    args: &StatusArgs,
    run: &RunId,
) -> Result<(Resources, Option<String>), EngineError> {
    let run_dir = args.runs_dir.join(run);
    let recorded = sql2ddb_engine::runs::recorded(&args.runs_dir, run).progress_table;
    let progress_table = args.progress_table.clone().or(recorded);
    let plan = match &args.mapping {
        Some(path) => Some(load(path, None)?),
        None if progress_table.is_none() => {
            return Err(EngineError::Config(
                "name the run's progress table: give the mapping file or --progress-table".into(),
            ))
        }
        None => None,
    };
    let options = ResourceOptions {
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        progress_table,
        sqs_endpoint: args.sqs_endpoint.clone(),
        job_context: None,
    };
    let job = Job::Inspect { run_dir: &run_dir };
    let resources = Resources::open(plan.as_ref(), &options, job).await?;
    resources.progress_store()?;
    Ok((resources, plan.map(|p| p.source.url)))
}

/// `sql2ddb status`.
pub async fn status(args: StatusArgs) -> Ended {
    follow(args, false).await
}

/// `sql2ddb verify`.
pub async fn verify(args: VerifyArgs) -> Ended {
    match args.deep.deep {
        true => crate::deep::verify(&args.status, &args.deep).await,
        false => follow(args.status, true).await,
    }
}

/// Shows the run's state (and with `--watch` again until it ends); when
/// `verifying`, says whether every row is accounted for.
async fn follow(args: StatusArgs, verifying: bool) -> Ended {
    let run =
        crate::runs::chosen_run(args.run.as_deref(), &args.runs_dir, args.mapping.as_deref())?;
    let (resources, source) = resources(&args, &run).await?;
    // The state and the verdict on stdout (`status … > state.txt` keeps
    // them), logs on stderr; with --json, stdout holds the JSON alone.
    let output = Output::new(args.json);
    let mut watch = Watch {
        started: Instant::now(),
        stalled_before: false,
    };
    let run_dir = args.runs_dir.join(&run);
    loop {
        // `status` of a followed run shows where its follow stands too.
        let followed = match verifying {
            true => None,
            false => standing(&resources, &run, &run_dir, source.as_deref()).await,
        };
        let state = match inspect(&resources, &run).await {
            Ok(s) => s,
            // A follow without a progress table: its record is all there is.
            Err(e) if followed.is_some() => {
                eprintln!(
                    "note: no counts for this run: {}",
                    redact_secrets(&e.to_string())
                );
                show(None, &run, followed.as_ref(), args.json);
                return Ok(0);
            }
            Err(e) => return Err(e),
        };
        show(Some(&state), &run, followed.as_ref(), args.json);
        if let Some(code) = watch.ended(&args, &state, verifying, output) {
            return Ok(code);
        }
        tokio::time::sleep(Duration::from_secs(args.interval)).await;
    }
}

/// Looks at a run's state, once or (`--watch`) until it ends.
struct Watch {
    started: Instant,
    /// Whether the previous look found the run stalled.
    stalled_before: bool,
}

impl Watch {
    /// The exit code, with the verdict said, once the look at `state` ends
    /// the command: no `--watch`, the run done, stalled twice in a row, or
    /// `--timeout` passed.
    fn ended(
        &mut self,
        args: &StatusArgs,
        state: &RunState,
        verifying: bool,
        output: Output,
    ) -> Option<u8> {
        let done = match verifying {
            true => state.verified(),
            false => state.complete,
        };
        if !args.watch || done {
            if verifying {
                output.say(&verdict(state));
            }
            return Some(u8::from(verifying && !done));
        }
        // Seen twice in a row, as queue depths are approximate.
        let stalled = state.stalled() || (state.complete && state.failed() > 0);
        if stalled && self.stalled_before {
            output.say(&format!(
                "{}; nothing left in the queue can complete it",
                verdict(state)
            ));
            // status reports; only verify fails on it.
            return Some(u8::from(verifying));
        }
        self.stalled_before = stalled;
        if args
            .timeout
            .is_some_and(|t| self.started.elapsed() >= Duration::from_secs(t))
        {
            output.say(&format!(
                "gave up after {} s: {}",
                args.timeout.unwrap_or(0),
                verdict(state)
            ));
            return Some(1);
        }
        None
    }
}

/// Where run `run`'s follow stands, when it was followed; a record that
/// cannot be read is said on stderr and shown as none.
async fn standing(
    resources: &Resources,
    run: &RunId,
    run_dir: &std::path::Path,
    source: Option<&str>,
) -> Option<FollowStatus> {
    let store = resources.progress_store().ok();
    match follow_status(run, run_dir, store.as_ref(), source).await {
        Ok(followed) => followed,
        Err(e) => {
            eprintln!(
                "warning: the run's follow record cannot be read: {}",
                redact_secrets(&e.to_string())
            );
            None
        }
    }
}

/// The run's counts (when it has them) and its follow's standing (when it
/// was followed), as text or as one JSON object (`follow` holds the
/// follow's standing).
fn show(state: Option<&RunState>, run: &RunId, followed: Option<&FollowStatus>, json: bool) {
    if json {
        let mut value = match state {
            Some(s) => serde_json::to_value(s).expect("a run state serialises"),
            None => serde_json::json!({ "run_id": run }),
        };
        if let Some(f) = followed {
            value["follow"] = serde_json::to_value(f).expect("a follow status serialises");
        }
        println!("{value}");
        return;
    }
    if let Some(state) = state {
        println!("{}", render(state));
    }
    if let Some(f) = followed {
        println!("{}", crate::follow_report::render_status(f));
    }
}

fn verdict(state: &RunState) -> String {
    if state.verified() {
        let rejected = state.rejected();
        match rejected {
            0 => "verified: every row is written".to_string(),
            n => format!(
                "verified: every row is accounted for ({} rejected, see the rejects files)",
                thousands(n)
            ),
        }
    } else if state.complete {
        format!(
            "not verified: {} failed (see the rejects files)",
            count(state.failed(), "row", "rows")
        )
    } else {
        let mut why = Vec::new();
        if !state.unfinished.is_empty() {
            let n = state.unfinished.len() as u64;
            why.push(format!(
                "{} still being read",
                count(n, "segment", "segments")
            ));
        }
        if !state.missing.is_empty() {
            let pages: u64 = state.missing.iter().map(|m| m.last - m.first + 1).sum();
            why.push(format!("{} not written", count(pages, "page", "pages")));
        }
        if let Some(dead) = state
            .queue
            .as_ref()
            .and_then(|q| q.dead_letter)
            .filter(|d| *d > 0)
        {
            why.push(format!(
                "{} in the dead-letter queue",
                count(dead, "message", "messages")
            ));
        }
        if why.is_empty() {
            why.push("the counts do not add up".into());
        }
        format!("not verified: {}", why.join(", "))
    }
}

/// The state as a table for the terminal.
pub fn render(state: &RunState) -> String {
    let mut out = format!(
        "run {}  table {}  progress {}  started {}\n",
        state.run_id,
        state.table,
        state.progress_table,
        time_text(&state.started)
    );
    out.push_str(&format!(
        "{:<16} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7} {:>9}\n",
        "entity", "segments", "read", "recorded", "written", "rejected", "failed", "pending"
    ));
    let opt = |v: Option<u64>| v.map_or("…".to_string(), thousands);
    for e in &state.entities {
        out.push_str(&format!(
            "{:<16} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7} {:>9}\n",
            e.entity,
            format!("{}/{}", e.segments_finished, e.segments),
            opt(e.rows_read),
            thousands(e.rows_recorded),
            thousands(e.written),
            thousands(e.rejected),
            thousands(e.failed),
            opt(e.pending),
        ));
    }
    if let Some(q) = &state.queue {
        out.push_str(&format!(
            "queue {}: {} waiting, {} in flight, dead-letter {}\n",
            q.url,
            thousands(q.visible),
            thousands(q.in_flight),
            q.dead_letter.map_or("none".to_string(), thousands)
        ));
    }
    if let Some(e) = &state.queue_error {
        out.push_str(&format!("queue: {e}\n"));
    }
    for u in &state.unfinished {
        out.push_str(&format!(
            "still reading: {} segment {} ({} sent)\n",
            u.entity,
            u.segment,
            count(u.pages_sent, "page", "pages")
        ));
    }
    const SHOWN: usize = 20;
    for m in state.missing.iter().take(SHOWN) {
        let pages = match m.first == m.last {
            true => format!("page {}", m.first),
            false => format!("pages {}-{}", m.first, m.last),
        };
        out.push_str(&format!(
            "not written: {} segment {} {pages}\n",
            m.entity, m.segment
        ));
    }
    if state.missing.len() > SHOWN {
        out.push_str(&format!(
            "… and {} more (--json lists them all)\n",
            count((state.missing.len() - SHOWN) as u64, "range", "ranges")
        ));
    }
    out.push_str(if state.complete {
        "complete: every row is accounted for"
    } else {
        "incomplete"
    });
    out
}
