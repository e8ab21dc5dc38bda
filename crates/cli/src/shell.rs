//! `sql2ddb completions SHELL` and `sql2ddb man`: what a shell and `man`
//! need, generated from the same definition as `--help`, so they never drift.

use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use sql2ddb_engine::EngineError;

use crate::failure::{fail_job, EXIT_IOERR};

pub(crate) const COMPLETIONS_EXIT_CODES: &str =
    "Exit codes: 0 the script was printed (or its reader stopped early, as `| head` does); 64 usage error (a shell not listed); 74 the script could not be written.";

pub(crate) const MAN_EXIT_CODES: &str =
    "Exit codes: 0 the pages were written; 64 usage error; 74 the page or the directory could not be written.";

#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Args)]
pub(crate) struct ManArgs {
    /// Write one page per command (sql2ddb.1, sql2ddb-run.1, …) into this
    /// directory, created if missing. Without it, sql2ddb(1) goes to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub(crate) fn completions(args: CompletionsArgs) -> u8 {
    let mut cmd = crate::Cli::command();
    // clap_complete panics on a failed write; the script is written here
    // instead, so `sql2ddb completions bash | head` ends quietly as `man` does.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "sql2ddb", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("error: writing the completion script: {e}");
            EXIT_IOERR
        }
    }
}

pub(crate) fn man(args: ManArgs) -> u8 {
    let cmd = crate::Cli::command();
    let Some(dir) = args.dir else {
        let mut out = std::io::stdout().lock();
        return match clap_mangen::Man::new(cmd).render(&mut out) {
            Ok(()) => 0,
            // `sql2ddb man | head`: the reader had enough.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
            Err(e) => {
                eprintln!("error: writing the man page: {e}");
                EXIT_IOERR
            }
        };
    };
    let io = |source| {
        fail_job(&EngineError::Io {
            path: dir.clone(),
            source,
        })
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return io(e);
    }
    match clap_mangen::generate_to(cmd, &dir) {
        Ok(()) => {
            println!("man pages written to {}", dir.display());
            0
        }
        Err(e) => io(e),
    }
}
