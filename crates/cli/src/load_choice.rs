//! The choices `run` and `export` share, as the command line spells them:
//! `--snapshot` and `--if-not-empty`, each resolved once into the engine's
//! type.

use sql2ddb_engine::{IfNotEmpty, SnapshotMode};

/// `--snapshot`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SnapshotArg {
    Consistent,
    None,
}

/// `--if-not-empty` (of `run` and `export`).
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum IfNotEmptyArg {
    Append,
    Truncate,
    Fail,
}

impl IfNotEmptyArg {
    /// The choice, `fail` when not given.
    pub(crate) fn resolve(arg: Option<IfNotEmptyArg>) -> IfNotEmpty {
        match arg {
            Some(IfNotEmptyArg::Append) => IfNotEmpty::Append,
            Some(IfNotEmptyArg::Truncate) => IfNotEmpty::Truncate,
            Some(IfNotEmptyArg::Fail) | None => IfNotEmpty::Fail,
        }
    }
}

impl SnapshotArg {
    /// The engine's snapshot mode.
    pub(crate) fn resolve(self) -> SnapshotMode {
        match self {
            SnapshotArg::Consistent => SnapshotMode::Consistent,
            SnapshotArg::None => SnapshotMode::None,
        }
    }
}
