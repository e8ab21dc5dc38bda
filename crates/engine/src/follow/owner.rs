//! Which mapping a follow's slot and run belong to. A slot (PostgreSQL) or
//! a run's binary log checkpoint (MySQL/MariaDB) holds the changes one
//! mapping has not applied yet: followed with another mapping, the
//! checkpoint would move past them and they would be written as the other
//! mapping's items. So `run --follow` records the mapping's name and the
//! digest of what decides its items (as a resumable run does, see
//! docs/operations.md "Resume and the mapping") with the slot — as the
//! comment of its publication, on the server, where every follower of that
//! slot looks — or in the run's directory ([`FOLLOW_MAPPING`]), beside the
//! checkpoint; `follow` refuses a slot or run recorded for another mapping
//! before it reads or moves anything.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sql2ddb_mapping::{ItemDigest, Plan};
use sql2ddb_source::Source;

use crate::error::EngineError;

/// The file in a MySQL/MariaDB run's directory naming the mapping its
/// follow belongs to (JSON).
pub const FOLLOW_MAPPING: &str = "follow-mapping.json";

/// The mapping a slot or run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingOwner {
    /// The mapping's name: its file, as `run --follow` was given it.
    pub mapping: String,
    /// One hash of everything in the mapping that decides its items.
    pub digest: String,
    /// The digest part by part, so a refusal can name what differs.
    pub parts: BTreeMap<String, String>,
}

impl MappingOwner {
    /// `plan`, named by its file: whole when it can be found, so that
    /// another directory's `mapping.toml` is told apart.
    pub fn of(plan: &Plan) -> MappingOwner {
        let digest = plan.item_digest();
        let file = Path::new(plan.file());
        MappingOwner {
            mapping: std::fs::canonicalize(file)
                .map_or_else(|_| plan.file().to_string(), |p| p.display().to_string()),
            digest: digest.hash(),
            parts: digest.parts().clone(),
        }
    }

    fn json(&self) -> String {
        serde_json::to_string(self).expect("a mapping owner serialises")
    }

    /// Refuses to follow `what` (recorded for `self`) with `given`; `follow`
    /// is the command line that follows it with its own mapping.
    fn admits(&self, given: &MappingOwner, what: &str, follow: &str) -> Result<(), EngineError> {
        if self.digest == given.digest {
            return Ok(());
        }
        let changes = ItemDigest::from_parts(given.parts.clone())
            .changes_since(&ItemDigest::from_parts(self.parts.clone()));
        Err(EngineError::Config(format!(
            "{what} belongs to mapping {theirs} (items digest {their_digest}), not to mapping {ours} (items digest {our_digest}): \
             following it with {ours} would move {theirs}'s checkpoint past changes it has not applied and write them as other items. \
             The mappings differ in: {list}. Nothing was read or moved. Follow it with its own mapping (`{follow}`), \
             or start a run of {ours} (`sql2ddb run {ours} --follow`).",
            theirs = self.mapping,
            their_digest = self.digest,
            ours = given.mapping,
            our_digest = given.digest,
            list = changes.join("; "),
        )))
    }
}

/// Records, as the comment of publication `slot`, that the slot belongs to
/// `owner`.
pub(super) async fn record_slot(
    source: &Source,
    slot: &str,
    owner: &MappingOwner,
) -> Result<(), EngineError> {
    Ok(source.comment_publication(slot, &owner.json()).await?)
}

/// Refuses slot `slot` when it was recorded for another mapping than
/// `given` (a slot recorded for none is followed).
pub(super) async fn check_slot(
    source: &Source,
    slot: &str,
    given: &MappingOwner,
) -> Result<(), EngineError> {
    let comment = source.publication_comment(slot).await?;
    let Some(recorded) = comment.and_then(|c| serde_json::from_str::<MappingOwner>(&c).ok()) else {
        return Ok(());
    };
    let follow = format!("sql2ddb follow {} --slot {slot}", recorded.mapping);
    recorded.admits(given, &format!("replication slot {slot}"), &follow)
}

/// Records in `run_dir` that the run's follow belongs to `owner`.
pub(super) fn record_run(run_dir: &Path, owner: &MappingOwner) -> Result<(), EngineError> {
    std::fs::create_dir_all(run_dir).map_err(|e| EngineError::io(run_dir, e))?;
    let path = run_dir.join(FOLLOW_MAPPING);
    std::fs::write(&path, owner.json()).map_err(|e| EngineError::io(path, e))
}

/// Refuses the run of `run_dir` when it was recorded for another mapping
/// than `given` (a run recorded for none is followed).
pub(super) fn check_run(run_dir: &Path, given: &MappingOwner) -> Result<(), EngineError> {
    let path = run_dir.join(FOLLOW_MAPPING);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EngineError::io(path, e)),
    };
    let recorded: MappingOwner = serde_json::from_str(&text).map_err(|e| {
        EngineError::Config(format!(
            "{} does not say which mapping the run belongs to: {e}",
            path.display()
        ))
    })?;
    let run = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let follow = format!("sql2ddb follow {} --run {run}", recorded.mapping);
    recorded.admits(given, &format!("run {run}"), &follow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(mapping: &str, pk: &str) -> MappingOwner {
        let parts = BTreeMap::from([
            ("entity item: pk template".to_string(), pk.to_string()),
            ("target table".to_string(), "t".to_string()),
        ]);
        MappingOwner {
            mapping: mapping.into(),
            digest: ItemDigest::from_parts(parts.clone()).hash(),
            parts,
        }
    }

    #[test]
    fn a_run_is_followed_by_its_own_mapping_only() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("20240501T100000Z-3f2a1c");
        // A run recorded for no mapping (an older one) is followed.
        check_run(&run_dir, &owner("a.toml", "1")).unwrap();
        record_run(&run_dir, &owner("b.toml", "2")).unwrap();
        // The same items under another file name: the same mapping.
        check_run(&run_dir, &owner("copy-of-b.toml", "2")).unwrap();
        let err = check_run(&run_dir, &owner("a.toml", "1")).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, EngineError::Config(_)), "{err:?}");
        assert!(
            text.contains("run 20240501T100000Z-3f2a1c belongs to mapping b.toml")
                && text.contains("not to mapping a.toml")
                && text.contains("entity item: pk template")
                && text.contains("sql2ddb follow b.toml --run 20240501T100000Z-3f2a1c"),
            "{text}"
        );
    }
}
