//! `run --follow`: the engine's one job (what anchors the changes, the
//! full load, the follow from its position), its events printed as they
//! happen and its outcome mapped to an exit code.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sql2ddb_engine::follow::{
    Anchor, FollowAfterLoad, FollowOptions, RunFollowEvent, RunFollowOutcome,
};
use sql2ddb_engine::{EngineError, RunOptions, RunProgress};
use sql2ddb_mapping::Plan;
use tokio::task::JoinHandle;

use super::{loaded, RunArgs};
use crate::failure::fail_job;
use crate::follow::{ended, kept, on_event, stop_on_signals, Target};
use crate::follow_report::{command_head, flag_words, SummaryTo};

/// Runs `run --follow` as one engine job: prints the full load's report
/// when it ends (after `end_load_display` stopped its signals' handler and
/// progress bars), then the follow's events (`notes` prints the progress
/// notes until the follow's summary); sets `following` once the follow
/// starts. Its exit code: the follow's failure or stop wins over the
/// full load's rejects (2), so no code of a kind is masked.
pub(super) async fn run_and_follow(
    args: &RunArgs,
    plan: &Plan,
    opts: &RunOptions,
    progress: Arc<RunProgress>,
    following: &AtomicBool,
    notes: &JoinHandle<()>,
    end_load_display: impl Fn() + Sync,
) -> u8 {
    let stop_args = &args.follow.stop;
    let after = FollowAfterLoad {
        server_id: args.follow.server_id,
        until_idle: stop_args.follow_until_idle.map(Duration::from_secs),
        cutover: stop_args.cutover,
        compare: !stop_args.no_verify,
    };
    let flags = flag_words(&opts.sink_options().flags());
    let load_code = Mutex::new(None);
    let target: Mutex<Option<Target<'_>>> = Mutex::new(None);
    let follow_signals = Mutex::new(None);
    let make_target = |follow| Target {
        plan,
        follow,
        runs_dir: args.runs_dir.clone(),
        summary_to: match args.json {
            true => SummaryTo::Stderr,
            false => SummaryTo::Stdout,
        },
        flags: flags.clone(),
    };
    let on = |event: RunFollowEvent<'_>| match event {
        RunFollowEvent::Loaded(report) => {
            end_load_display();
            *load_code.lock().expect("code lock") = Some(loaded(args, report));
        }
        RunFollowEvent::Following(follow) => {
            following.store(true, Ordering::Relaxed);
            if let Some(stop) = &opts.stop {
                *follow_signals.lock().expect("signals lock") =
                    Some(tokio::spawn(stop_on_signals(stop.clone())));
            }
            *target.lock().expect("target lock") = Some(make_target(follow.clone()));
        }
        RunFollowEvent::Follow(event) => {
            if let Some(t) = target.lock().expect("target lock").as_ref() {
                on_event(t, event, notes);
            }
        }
    };
    let outcome = sql2ddb_engine::follow::run_and_follow(plan, opts, &after, progress, &on).await;
    if let Some(signals) = follow_signals.lock().expect("signals lock").take() {
        signals.abort();
    }
    let load_code = load_code.lock().expect("code lock").take();
    let target = target.lock().expect("target lock").take();
    finish(args, plan, outcome, load_code, target, make_target, &flags)
}

/// The exit code of `run --follow`'s outcome once its events are printed
/// (`load_code`: the full load's, when its report was printed; `target`:
/// the follow's printer, when it started): says what is kept when the
/// follow did not run, and prints how the follow ended.
fn finish<'a>(
    args: &RunArgs,
    plan: &Plan,
    outcome: Result<RunFollowOutcome, EngineError>,
    load_code: Option<u8>,
    target: Option<Target<'a>>,
    make_target: impl Fn(FollowOptions) -> Target<'a>,
    flags: &str,
) -> u8 {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        // Refused: nothing was created.
        Err(e) => return fail_job(&e),
    };
    let head = command_head(
        plan.file(),
        args.endpoint.as_deref(),
        args.region.as_deref(),
        &args.runs_dir,
    );
    let report = match outcome.load {
        Ok(report) => report,
        Err(e) => {
            if let Anchor::Slot(slot) = &outcome.anchor {
                eprintln!(
                    "replication slot {slot} is kept: drop it with `{head} --slot {slot} --drop-slot`"
                );
            }
            return fail_job(&e);
        }
    };
    let code = load_code.unwrap_or_else(|| crate::failure::run_ended(&report));
    let Some((follow, followed)) = outcome.follow else {
        eprintln!("{}", kept(&outcome.anchor, &report.run_id, &head, flags));
        return code;
    };
    let target = target.unwrap_or_else(|| make_target(follow));
    match ended(&target, followed) {
        0 => code,
        followed => followed,
    }
}
