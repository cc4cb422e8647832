//! Reading stored values back into keel types. Every read is checked: a value that does not
//! parse is a reason string (the caller names the tree and row), never a panic.

use keel::json::Digest;
use keel::kernel::commit::{CheckpointKind, CommitRecordKind, EffectBoundaryKind};
use keel::kernel::ids::{EffectId, IncarnationId, ProcessId};
use rusqlite::types::ValueRef;
use rusqlite::Row;

pub(crate) type Reason = String;

/// A column as text, refusing NULL and other types.
pub(crate) fn text(row: &Row<'_>, column: &str) -> Result<String, Reason> {
    match row.get_ref(column).map_err(|e| format!("column {column}: {e}"))? {
        ValueRef::Text(bytes) => String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("column {column} is not UTF-8 text")),
        other => Err(format!("column {column} holds {:?}, not text", other.data_type())),
    }
}

/// A nullable text column.
pub(crate) fn optional_text(row: &Row<'_>, column: &str) -> Result<Option<String>, Reason> {
    match row.get_ref(column).map_err(|e| format!("column {column}: {e}"))? {
        ValueRef::Null => Ok(None),
        _ => text(row, column).map(Some),
    }
}

/// A non-negative integer column.
pub(crate) fn count(row: &Row<'_>, column: &str) -> Result<u64, Reason> {
    match row.get_ref(column).map_err(|e| format!("column {column}: {e}"))? {
        ValueRef::Integer(n) => {
            u64::try_from(n).map_err(|_| format!("column {column} holds the negative number {n}"))
        }
        other => Err(format!("column {column} holds {:?}, not an integer", other.data_type())),
    }
}

/// A blob column.
pub(crate) fn blob(row: &Row<'_>, column: &str) -> Result<Vec<u8>, Reason> {
    match row.get_ref(column).map_err(|e| format!("column {column}: {e}"))? {
        ValueRef::Blob(bytes) => Ok(bytes.to_vec()),
        other => Err(format!("column {column} holds {:?}, not a blob", other.data_type())),
    }
}

pub(crate) fn digest(row: &Row<'_>, column: &str) -> Result<Digest, Reason> {
    let t = text(row, column)?;
    Digest::parse(&t).map_err(|e| format!("column {column}: `{t}` is not a digest ({e})"))
}

pub(crate) fn incarnation(row: &Row<'_>, column: &str) -> Result<IncarnationId, Reason> {
    let t = text(row, column)?;
    IncarnationId::parse(&t).map_err(|e| format!("column {column}: {e}"))
}

pub(crate) fn process(row: &Row<'_>, column: &str) -> Result<ProcessId, Reason> {
    let t = text(row, column)?;
    ProcessId::parse(&t).map_err(|e| format!("column {column}: {e}"))
}

/// The stored kind columns of a commit row.
pub(crate) fn record_kind(row: &Row<'_>) -> Result<CommitRecordKind, Reason> {
    let commit = text(row, "commit_kind")?;
    let kind = optional_text(row, "kind")?;
    let required = |column: &str| -> Result<String, Reason> {
        optional_text(row, column)?.ok_or_else(|| format!("a {commit} row needs column {column}"))
    };
    match commit.as_str() {
        "checkpoint" => {
            let kind = kind.ok_or("a checkpoint row needs column kind")?;
            CheckpointKind::from_name(&kind)
                .map(CommitRecordKind::Checkpoint)
                .ok_or_else(|| format!("unknown checkpoint kind `{kind}`"))
        }
        "effect" => {
            let kind = kind.ok_or("an effect row needs column kind")?;
            let kind = EffectBoundaryKind::from_name(&kind)
                .ok_or_else(|| format!("unknown boundary kind `{kind}`"))?;
            let process_id = ProcessId::parse(&required("process_id")?)
                .map_err(|e| format!("column process_id: {e}"))?;
            let effect_id = EffectId::parse(&required("effect_id")?)
                .map_err(|e| format!("column effect_id: {e}"))?;
            Ok(CommitRecordKind::Effect { process_id, effect_id, kind })
        }
        "activation" => {
            let previous = IncarnationId::parse(&required("previous_incarnation")?)
                .map_err(|e| format!("column previous_incarnation: {e}"))?;
            Ok(CommitRecordKind::Activation { previous_incarnation: previous })
        }
        other => Err(format!("unknown commit kind `{other}`")),
    }
}

/// The kind columns for a record kind: (commit_kind, kind, process_id, effect_id,
/// previous_incarnation).
pub(crate) fn kind_columns(
    kind: &CommitRecordKind,
) -> (&'static str, Option<&'static str>, Option<&str>, Option<&str>, Option<&str>) {
    match kind {
        CommitRecordKind::Checkpoint(k) => ("checkpoint", Some(k.as_str()), None, None, None),
        CommitRecordKind::Effect { process_id, effect_id, kind } => (
            "effect",
            Some(kind.as_str()),
            Some(process_id.as_str()),
            Some(effect_id.as_str()),
            None,
        ),
        CommitRecordKind::Activation { previous_incarnation } => {
            ("activation", None, None, None, Some(previous_incarnation.as_str()))
        }
    }
}
