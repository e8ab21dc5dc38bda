//! `run --follow` and `follow`: after the full load, the source's changes
//! (PostgreSQL logical replication, the MySQL/MariaDB binary log) applied to
//! the table until a stop, an idle period or a cutover.

use std::path::PathBuf;
use std::time::Duration;

use tokio::task::JoinHandle;

use sql2ddb_engine::follow::lsn_text as format_lsn;
use sql2ddb_engine::follow::{
    is_binlog_source, replica_server_id, Anchor, BinlogFollow, Compared, FollowEnd, FollowEvent,
    FollowOptions, FollowOutcome, FollowReport, RecordTarget, SlotFate,
};
use sql2ddb_engine::{ResourceOptions, RunProgress, StopSignal, WriterFlags};
use sql2ddb_mapping::Plan;

use crate::failure::fail_job;
use crate::follow_report::{record_line, FollowedBy, SummaryTo};
use crate::live::{next_signal, print_notes};
use crate::outcome::Ended;
use crate::{fail, load};

pub const EXIT_CODES: &str = "\
Exit codes:
  0   followed until idle (--follow-until-idle), or cut over (--cutover) and
      the table equals the source (PostgreSQL: the slot is dropped);
      --status and --drop-slot: done
  1   items not written, no such slot, or cut over with differences
      (PostgreSQL: the slot is kept, at the cutover's position)
  64  usage error (MySQL/MariaDB: --slot or --drop-slot, which only a
      PostgreSQL slot has)
  65  the follower met a change it cannot carry (a schema change, a
      truncate, a statement-format event, a partial row image): it stopped
      before it, its position kept; the error says what to do
  69  the source or DynamoDB could not be reached, or refused
  74  a file could not be read or written (the mapping, the rejects file,
      the binary log position)
  75  DynamoDB kept throttling past the retry budget (--retry-budget):
      follow again later
  78  the mapping is invalid or cannot be followed, or does not fit its
      table, or the slot or run belongs to another mapping (nothing was
      read or moved)
  On a failure the slot, or MySQL/MariaDB's binary log position in the
  run's directory, stays where it was.
  130 stopped (Ctrl-C, SIGTERM) after the changes in hand were applied; the
      slot or the binary log position is kept: follow again to go on";

/// How a follow stops; shared by `run --follow` and `follow`.
#[derive(clap::Args, Clone, Default)]
pub struct StopArgs {
    /// Stop following once no change has come for SECONDS (the slot is
    /// kept; follow again to go on).
    #[arg(long, value_name = "SECONDS")]
    pub(crate) follow_until_idle: Option<u64>,
    /// Cut over: apply every change committed on the source now (stop the
    /// application's writes first), compare every item with the source
    /// (`verify --deep`) and say whether they are equal; PostgreSQL: the
    /// slot is dropped once they are, and kept when they are not.
    #[arg(long)]
    pub(crate) cutover: bool,
    /// With --cutover: skip the comparison (PostgreSQL: the slot is
    /// dropped at once).
    #[arg(long, requires = "cutover")]
    pub(crate) no_verify: bool,
}

impl StopArgs {
    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.follow_until_idle.is_some() || self.cutover || self.no_verify
    }
}

/// `run`'s flag.
#[derive(clap::Args, Clone, Default)]
pub struct RunFollowArgs {
    /// After the full load, follow the source's changes (PostgreSQL: a
    /// logical replication slot named after the run, created before the
    /// snapshot; MySQL/MariaDB: the binary log from the snapshot's position,
    /// kept in the run's directory) until Ctrl-C, --follow-until-idle or
    /// --cutover.
    #[arg(long, conflicts_with_all = ["dry_run", "queue", "resume", "only_rejects"])]
    pub follow: bool,
    /// MySQL/MariaDB: the server id to read the binary log as, a replica's
    /// (unique among the source's replicas, not the source's own). Default:
    /// one of the run's own, derived from its id.
    #[arg(long, requires = "follow")]
    pub server_id: Option<u32>,
    #[command(flatten)]
    pub stop: StopArgs,
}

/// `sql2ddb follow`.
#[derive(clap::Args)]
pub struct FollowArgs {
    /// The mapping spec (TOML) the full load used.
    mapping: PathBuf,
    /// PostgreSQL: the replication slot `run --follow` created (it printed
    /// its name).
    #[arg(long, required_unless_present = "run", conflicts_with = "run")]
    slot: Option<String>,
    /// The id of the `run --follow` to go on with. PostgreSQL: its slot is
    /// `sql2ddb_<run id>`, lower-cased. MySQL/MariaDB: its binary log
    /// position is in `<runs-dir>/<run id>/binlog-position`.
    #[arg(long, value_name = "RUN_ID")]
    run: Option<sql2ddb_engine::RunId>,
    /// MySQL/MariaDB: the server id to read the binary log as, a replica's
    /// (unique among the source's replicas, not the source's own). Default:
    /// the run's own, derived from its id, the same at every restart.
    #[arg(long)]
    server_id: Option<u32>,
    /// Source URL, overriding the mapping's.
    #[arg(long)]
    source: Option<String>,
    /// DynamoDB endpoint URL, overriding the mapping's.
    #[arg(long)]
    endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    region: Option<String>,
    /// The runs directory: the rejects file goes to
    /// `<runs-dir>/<slot>/rejects.jsonl` (MySQL/MariaDB:
    /// `<runs-dir>/<run id>/follow-rejects.jsonl`, beside the position);
    /// the follow's record for `status` to `<runs-dir>/<run id>/follow.json`
    /// (and the run's progress table, when its report names one).
    #[arg(long, default_value = "sql2ddb-runs")]
    runs_dir: PathBuf,
    /// Most BatchWriteItem calls in flight, 1..=256 (default: the mapping's
    /// [writer] concurrency, else 8). It adapts to throttling within [1, N]
    /// unless --fixed-concurrency is given.
    #[arg(long, value_parser = crate::limits::concurrency())]
    concurrency: Option<usize>,
    /// Keep concurrency at --concurrency instead of adapting to throttling.
    #[arg(long)]
    fixed_concurrency: bool,
    /// Cap on write units per second for this process, counted as DynamoDB
    /// bills them (1 KB rounding per item, each GSI counted);
    /// 1..=1000000000 (default: the mapping's max_wcu, else none).
    #[arg(long, value_parser = crate::limits::max_wcu())]
    max_wcu: Option<u64>,
    #[command(flatten)]
    budget: crate::budget::RetryBudgetArg,
    /// Print where the follow stands (applied position, the source's
    /// position; PostgreSQL: lag and WAL the slot keeps; with the run's
    /// record in the runs directory, its state and lag in time) and exit.
    /// `sql2ddb status MAPPING --run RUN_ID` shows more.
    #[arg(long, conflicts_with_all = ["drop_slot", "cutover", "follow_until_idle"])]
    status: bool,
    /// PostgreSQL: drop the slot and its publication without applying
    /// anything (MySQL/MariaDB keeps no slot on the server).
    #[arg(long, conflicts_with_all = ["cutover", "follow_until_idle"])]
    drop_slot: bool,
    /// Print the final report as one JSON object on stdout (the summary
    /// goes to stderr then).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stop: StopArgs,
}

/// What a follow needs besides its stop flags.
pub(crate) struct Target<'a> {
    pub plan: &'a Plan,
    /// The follow as the engine takes it (how it stops is set from the
    /// stop flags): for `run --follow`, the engine's hand-over from the
    /// full load ([`FollowOptions::after_full_load`]).
    pub follow: FollowOptions,
    pub runs_dir: PathBuf,
    /// Where the summary goes when the follow stops.
    pub summary_to: SummaryTo,
    /// The writer flags given, as words for the commands printed to go on.
    pub flags: String,
}

impl Target<'_> {
    /// The slot's name, or (MySQL/MariaDB) the run's id.
    fn name(&self) -> &str {
        &self.follow.slot
    }

    /// `sql2ddb follow` with this follow's mapping and where it reads and
    /// writes, as the commands printed to go on begin.
    pub(crate) fn command(&self) -> String {
        crate::follow_report::command_head(
            self.plan.file(),
            self.follow.resources.endpoint.as_deref(),
            self.follow.resources.region.as_deref(),
            &self.runs_dir,
        )
    }
}

/// What is kept when `run --follow`'s follow does not happen, and how to
/// go on (with `flags`, the writer flags the run was given).
pub(crate) fn kept(anchor: &Anchor, run_id: &str, head: &str, flags: &str) -> String {
    match anchor {
        Anchor::Slot(slot) => format!("replication slot {slot} is kept: follow the changes once the full load is complete (`{head} --slot {slot}{flags}`), or drop it (`--drop-slot`)"),
        Anchor::Binlog => format!("the snapshot's binary log position is in the run's report: follow the changes once the full load is complete (`{head} --run {run_id}{flags}`) while the source keeps that binary log file"),
    }
}

/// `sql2ddb follow`.
pub async fn follow(args: FollowArgs) -> Ended {
    let plan = load(&args.mapping, args.source.as_deref())?;
    let source = args.source.clone().unwrap_or(plan.source.url.clone());
    if is_binlog_source(&source) {
        return follow_binlog(&args, &plan, source).await;
    }
    let slot = match (&args.slot, &args.run) {
        (Some(slot), _) => slot.clone(),
        (None, Some(run)) => sql2ddb_engine::follow::slot_name(run),
        (None, None) => unreachable!("clap requires one"),
    };
    if args.drop_slot {
        sql2ddb_engine::follow::drop_slot(&plan, &source, &slot).await?;
        eprintln!("replication slot {slot} and its publication are dropped");
        return Ok(0);
    }
    let record = match &args.run {
        Some(run) => Some(RecordTarget::of_run(&args.runs_dir, run)),
        None => RecordTarget::find(&args.runs_dir, |run| {
            sql2ddb_engine::follow::slot_name(run) == slot
        }),
    };
    if args.status {
        return Ok(status(&source, &slot, record).await);
    }
    let mut follow = follow_options(&args, &plan, source, slot.clone(), None, record);
    follow.rejects = args.runs_dir.join(&slot).join("rejects.jsonl");
    let target = Target {
        plan: &plan,
        follow,
        runs_dir: args.runs_dir.clone(),
        summary_to: summary_to(args.json),
        flags: crate::follow_report::flag_words(&writer_flags(&args)),
    };
    Ok(run_follow(&target, &args.stop).await)
}

/// `sql2ddb follow` of a MySQL/MariaDB source: by run, from the position in
/// the run's directory.
async fn follow_binlog(args: &FollowArgs, plan: &Plan, source: String) -> Ended {
    let Some(run) = &args.run else {
        eprintln!("error: a MySQL/MariaDB source has no replication slot: follow it by run (`--run RUN_ID`, the id `run --follow` printed)");
        return Ok(crate::EXIT_USAGE);
    };
    let run_dir = args.runs_dir.join(run);
    if args.drop_slot {
        eprintln!(
            "error: a MySQL/MariaDB source keeps no slot, so there is nothing to drop: the follower's position is the file {} (the source keeps its binary log files for binlog_expire_logs_seconds whether followed or not)",
            run_dir.join(sql2ddb_engine::follow::BINLOG_CHECKPOINT).display()
        );
        return Ok(crate::EXIT_USAGE);
    }
    if args.status {
        let (applied, current) = sql2ddb_engine::follow::binlog_state(&source, &run_dir).await?;
        println!(
            "run {run}: applied to binary log position {}, source at {current}",
            applied.describe()
        );
        let record = RecordTarget::of_run(&args.runs_dir, run);
        if let Some(line) = record_line(Some(record), &source).await {
            println!("{line}");
        }
        return Ok(0);
    }
    let binlog = BinlogFollow {
        run_dir: run_dir.clone(),
        server_id: args.server_id.unwrap_or_else(|| replica_server_id(run)),
    };
    let record = Some(RecordTarget::of_run(&args.runs_dir, run));
    let mut follow = follow_options(args, plan, source, run.to_string(), Some(binlog), record);
    follow.rejects = run_dir.join(sql2ddb_engine::follow::FOLLOW_REJECTS);
    let target = Target {
        plan,
        follow,
        runs_dir: args.runs_dir.clone(),
        summary_to: summary_to(args.json),
        flags: crate::follow_report::flag_words(&writer_flags(args)),
    };
    Ok(run_follow(&target, &args.stop).await)
}

/// `follow`'s own options: its flags over the mapping (the rejects file
/// is the caller's to set).
fn follow_options(
    args: &FollowArgs,
    plan: &Plan,
    source: String,
    slot: String,
    binlog: Option<BinlogFollow>,
    record: Option<RecordTarget>,
) -> FollowOptions {
    FollowOptions {
        source,
        resources: ResourceOptions {
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            ..ResourceOptions::default()
        },
        writer: writer_flags(args).resolve(plan),
        slot,
        until_idle: None,
        cutover: false,
        stop: None,
        rejects: PathBuf::new(),
        batch_changes: sql2ddb_engine::follow::DEFAULT_BATCH_CHANGES,
        binlog,
        record,
    }
}

/// `follow`'s writer flags.
fn writer_flags(args: &FollowArgs) -> WriterFlags {
    WriterFlags {
        concurrency: args.concurrency,
        fixed_concurrency: args.fixed_concurrency,
        max_wcu: args.max_wcu,
        retry_budget: args.budget.retry_budget,
    }
}

fn summary_to(json: bool) -> SummaryTo {
    match json {
        true => SummaryTo::Json,
        false => SummaryTo::Stdout,
    }
}

async fn status(source: &str, slot: &str, record: Option<RecordTarget>) -> u8 {
    let state = sql2ddb_engine::follow::slot_state(source, slot).await;
    match state {
        Ok(Some(s)) => {
            println!(
                "slot {slot}: applied to {}, source at {}, {} bytes of WAL behind, {} MB of WAL kept on the source",
                format_lsn(s.confirmed),
                format_lsn(s.current),
                s.lag_bytes(),
                s.retained_bytes >> 20
            );
            if let Some(warning) = crate::follow_report::retained_warning(s.retained_bytes) {
                println!("{warning}");
            }
            if let Some(line) = record_line(record, source).await {
                println!("{line}");
            }
            0
        }
        Ok(None) => fail(&format!("replication slot {slot} does not exist")),
        Err(e) => fail_job(&e),
    }
}

/// The first Ctrl-C or SIGTERM stops the follow after the changes in hand;
/// the second exits at once (the slot has not moved past them: nothing is lost).
pub(crate) async fn stop_on_signals(stop: std::sync::Arc<StopSignal>) {
    next_signal().await;
    eprintln!("stopping: the changes in hand are being applied, then the slot is advanced past them (Ctrl-C again to exit at once)");
    stop.stop();
    next_signal().await;
    eprintln!("exiting at once: the slot stays before the changes not yet acknowledged");
    std::process::exit(crate::failure::EXIT_INTERRUPTED.into());
}

/// Follows until a stop, idle or cutover (then compares and drops the
/// slot: one engine job); prints what happens; its exit code.
pub(crate) async fn run_follow(target: &Target<'_>, stop_args: &StopArgs) -> u8 {
    let stop = StopSignal::new();
    let signals = tokio::spawn(stop_on_signals(stop.clone()));
    let progress = RunProgress::new();
    let notes = tokio::spawn(print_notes(progress.clone()));
    let opts = FollowOptions {
        until_idle: stop_args.follow_until_idle.map(Duration::from_secs),
        cutover: stop_args.cutover,
        stop: Some(stop.clone()),
        ..target.follow.clone()
    };
    let outcome = sql2ddb_engine::follow::follow_job(
        target.plan,
        &opts,
        !stop_args.no_verify,
        &target.runs_dir,
        &progress,
        &|event| on_event(target, event, &notes),
    )
    .await;
    signals.abort();
    notes.abort();
    ended(target, outcome)
}

/// Prints what a follow job says as it happens; `notes` prints the
/// progress notes (stopped before the summary).
pub(crate) fn on_event(target: &Target<'_>, event: FollowEvent<'_>, notes: &JoinHandle<()>) {
    match event {
        FollowEvent::Followed(report) => {
            // The last notes are printed before the summary.
            tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(50)));
            notes.abort();
            summary(report, target);
        }
        FollowEvent::Comparing => {
            eprintln!("comparing every item of the table with the source (verify --deep)…")
        }
        FollowEvent::Compared(report) => {
            let say = |text: &str| target.summary_to.say(text);
            say(crate::deep::render(report).trim_end());
            say(match report.clean() {
                true => "cut over: the table equals the source, item by item",
                false => "cut over, but the table differs from the source (see above)",
            });
        }
    }
}

/// What a follow job's outcome says once it ended; its exit code.
pub(crate) fn ended(target: &Target<'_>, outcome: FollowOutcome) -> u8 {
    let report = match outcome.follow {
        Ok(report) => report,
        Err(e) => {
            let code = fail_job(&e);
            match &target.follow.binlog {
                Some(_) => eprintln!(
                    "the binary log position stays at the last applied transaction: follow again with `{} --run {}{}`",
                    target.command(), target.name(), target.flags
                ),
                None => eprintln!(
                    "replication slot {} is kept at the last applied position: follow again with `{} --slot {}{}`, or drop it with --drop-slot",
                    target.name(), target.command(), target.name(), target.flags
                ),
            }
            return code;
        }
    };
    let code = match report.end {
        FollowEnd::CutOver | FollowEnd::Idle => 0,
        FollowEnd::Stopped => crate::failure::EXIT_INTERRUPTED,
    };
    let Some(cutover) = outcome.cutover else {
        return code;
    };
    let compared = match cutover.compared {
        Compared::Skipped => 0,
        Compared::Done(deep) => u8::from(!deep.clean()),
        Compared::Failed(e) => {
            eprintln!("cut over, but the comparison with the source failed:");
            fail_job(&e)
        }
    };
    code.max(compared)
        .max(slot_fate(target, &report, cutover.slot))
}

/// PostgreSQL, after a cutover: says whether the slot was dropped (the
/// table equals the source, or was not compared) or kept, so that a
/// cutover whose comparison failed can be made again from where it stopped.
fn slot_fate(target: &Target<'_>, report: &FollowReport, fate: SlotFate) -> u8 {
    let slot = &target.follow.slot;
    let (head, flags) = (target.command(), &target.flags);
    match fate {
        SlotFate::NoSlot => 0,
        SlotFate::Kept => {
            target.summary_to.say(&format!(
                "replication slot {slot} and its publication are kept at {}: once what differs (or what stopped the comparison) is fixed, cut over again (`{head} --slot {slot}{flags} --cutover`) to go on from there, or drop them with --drop-slot",
                report.position
            ));
            0
        }
        SlotFate::Dropped => {
            target.summary_to.say(&format!(
                "replication slot {slot} and its publication are dropped"
            ));
            0
        }
        SlotFate::DropFailed(e) => {
            eprintln!("cut over, but replication slot {slot} could not be dropped:");
            fail_job(&e)
        }
    }
}

/// Prints the follow's summary where it goes (and with `--json` the
/// report on stdout).
fn summary(r: &FollowReport, target: &Target<'_>) {
    let by = match &target.follow.binlog {
        Some(_) => FollowedBy::Run(target.name()),
        None => FollowedBy::Slot(target.name()),
    };
    target.summary_to.say(&crate::follow_report::summary(
        r,
        &by,
        &target.command(),
        &target.flags,
    ));
    if target.summary_to == SummaryTo::Json {
        println!("{}", serde_json::to_string(r).expect("report serialises"));
    }
}
