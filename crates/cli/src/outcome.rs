//! How every command ends, written once: a command returns its exit code
//! or the error that ended it ([`Ended`]); [`exit`] prints such an error
//! with its hint and turns it into its kind's code. [`Output`] is where a
//! command's text and JSON go, and [`Live`] what a long job shows while it
//! runs and how it is stopped.

use std::sync::Arc;

use serde::Serialize;
use sql2ddb_engine::{Cause, EngineError, StopSignal};
use tokio::task::JoinHandle;

use crate::failure::{fail_job, report_error};

/// What a command returns: its exit code, or the error that ended it.
pub(crate) type Ended = Result<u8, EngineError>;

/// The exit code of a command that ended with `ended`: its own, or its
/// error's, printed on stderr with the hint of its kind.
pub(crate) fn exit(ended: Ended) -> u8 {
    ended.unwrap_or_else(|e| fail_job(&e))
}

/// Where a command's outcome goes: its text on stdout (`… > report.txt`
/// keeps it), progress and logs on stderr; with `--json`, stdout holds the
/// JSON alone and the text goes to stderr.
#[derive(Clone, Copy)]
pub(crate) struct Output {
    json: bool,
}

impl Output {
    /// The output of a command given `--json` or not.
    pub(crate) fn new(json: bool) -> Output {
        Output { json }
    }

    /// Whether stdout holds the JSON alone.
    pub(crate) fn is_json(self) -> bool {
        self.json
    }

    /// Prints text of the outcome.
    pub(crate) fn say(self, text: &str) {
        match self.json {
            true => eprintln!("{text}"),
            false => println!("{text}"),
        }
    }

    /// With `--json`, prints `outcome` as one line of JSON on stdout.
    pub(crate) fn json(self, outcome: &impl Serialize) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string(outcome).expect("an outcome serialises")
            );
        }
    }

    /// Prints a job's report: its text, the error it ended on (with the
    /// hint of its cause), what to do next, then its JSON.
    pub(crate) fn report(
        self,
        text: &str,
        error: Option<(&str, Option<Cause>)>,
        next: Option<String>,
        outcome: &impl Serialize,
    ) {
        self.say(text);
        if let Some((error, cause)) = error {
            report_error(error, cause);
        }
        if let Some(next) = next {
            self.say(&next);
        }
        self.json(outcome);
    }
}

/// A long job's display while it runs: the first Ctrl-C or SIGTERM asks
/// it to stop, and tasks (progress bars, notes) draw until it ends.
pub(crate) struct Live {
    signals: JoinHandle<()>,
    shown: Vec<JoinHandle<()>>,
}

impl Live {
    /// Starts listening for the signals that stop the job through `stop`,
    /// and the tasks that show it.
    pub(crate) fn start(stop: Arc<StopSignal>, shown: Vec<JoinHandle<()>>) -> Live {
        Live {
            signals: tokio::spawn(crate::live::stop_on_signals(stop)),
            shown,
        }
    }

    /// The job ended: stops listening and drawing, and waits until the
    /// bars are cleared, so that the report is printed below them.
    pub(crate) async fn end(self) {
        self.signals.abort();
        for task in self.shown {
            task.abort();
            let _ = task.await;
        }
    }
}
