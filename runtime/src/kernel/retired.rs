//! Retired children: what a cut keeps of a finished child once its parent consumed the
//! child's Result (compaction).
//!
//! A retired child's Process record leaves the cut and a **residue record** takes its place,
//! under the same key (the child's id). It is written once and never changes, so every later
//! commit carries it as kept (key and digest only). It holds exactly what the contract still
//! needs per child:
//!
//! * `process_id` — identity: a retired id is never reused and never appears in the tree
//!   again, and the cut can still prove which children existed;
//! * `parent_id` — whose child it was (its key is used under that parent);
//! * `child_key` — a key stays used for the parent's whole life (a later start under the same
//!   key is an identity conflict, compacted or not);
//! * `result_digest` — the SHA-256 of the child's canonical Result, the evidence that the Result
//!   the parent consumed is the one the child ended with;
//! * `retired: true` — the discriminator: a Process record never has a `retired` member, and a
//!   record that has one decodes as a residue or not at all.
//!
//! The parent's own record keeps only what must be summed or counted, so it stays the same
//! size however many children it retires ([`RetiredChildren`]):
//!
//! * `count` — how many residue records name it as parent (validation requires exactly that
//!   many, so a lost or extra residue record is detected) — lifetime children count them;
//! * `debits` — the sum of the retired children's grants: grants are permanent debits, so the
//!   parent's `allocated_resources` must still equal present debits plus this sum.
//!
//! When a parent is itself retired, its residue records leave the cut with it (its own
//! residue under its parent replaces all of them). That is safe: a retired parent is terminal
//! and gone for good, so it can never start another child, and only it could reuse one of its
//! child keys or derive one of its children's ids (child ids derive from the parent's Effect
//! ids, which derive from the parent's id and its monotone step sequence).
//!
//! A child that ended with unresolved Unknown Effects is never retired: its whole record stays,
//! so every Unknown surface (the Unknown itself, its diagnostic, its frozen request, the
//! termination's unresolved ids) stays in every later cut.

use super::ids::{ChildKey, ProcessId};
use super::process::Process;
use super::resource::Allocation;
use crate::json::{DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// The member that marks a cut record as a residue (never a member of a Process record).
pub const RESIDUE_MARKER: &str = "retired";

/// One retired child's residue: an immutable cut record of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetiredChild {
    pub parent_id: ProcessId,
    pub process_id: ProcessId,
    pub child_key: ChildKey,
    pub result_digest: Digest,
}

/// What a parent's record keeps of the children it retired: how many, and the sum of their
/// debits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetiredChildren {
    pub count: u64,
    pub debits: Allocation,
}

impl RetiredChildren {
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.debits == Allocation::ZERO
    }
    pub fn len(&self) -> u64 {
        self.count
    }
}

impl RetiredChild {
    /// The record's canonical bytes.
    pub fn canonical(&self) -> Vec<u8> {
        self.to_json().to_canonical_bytes()
    }
}

/// Whether a cut record is a residue record (it has the marker member). A record that has it
/// must decode as a [`RetiredChild`]; one without it must decode as a Process.
pub fn is_residue(record: &Json) -> bool {
    record.get(RESIDUE_MARKER).is_some()
}

/// The digest a retired child's residue keeps: SHA-256 of its canonical Result.
pub fn result_digest(result: &super::result::ProcessResult) -> Digest {
    Digest::of_written(result)
}

/// Whether a finished child may be retired, seen from the child alone: it is terminal and
/// holds no unresolved Unknown. (The caller also requires that the parent consumed its
/// Result, that it has no children of its own left and no work in flight.)
pub fn retirable(child: &Process) -> bool {
    let Some(finish) = &child.finish else { return false };
    let unknowns_free = finish.termination.unresolved_effect_ids.is_empty() && child.unknown_effect_ids().is_empty();
    #[cfg(feature = "mutations")]
    if crate::mutation::active(crate::mutation::Mutation::DropUnknownOnCompaction) {
        return true;
    }
    unknowns_free
}

/// Wire: `{"child_key":…,"parent_id":…,"process_id":…,"result_digest":"sha256:…","retired":true}`.
impl ToJson for RetiredChild {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("parent_id", &self.parent_id)
            .field("process_id", &self.process_id)
            .field("child_key", &self.child_key)
            .value("result_digest", Json::String(self.result_digest.to_string()))
            .value(RESIDUE_MARKER, Json::Bool(true))
            .build()
    }
}

impl FromJson for RetiredChild {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let out = RetiredChild {
            parent_id: r.required("parent_id")?,
            process_id: r.required("process_id")?,
            child_key: r.required("child_key")?,
            result_digest: r.required_with("result_digest", |v| {
                let text = String::from_json(v)?;
                Digest::parse(&text).map_err(|e| DecodeError::invalid(e.to_string()))
            })?,
        };
        if !r.required::<bool>(RESIDUE_MARKER)? {
            return Err(DecodeError::invalid("a residue record is marked \"retired\":true"));
        }
        r.finish()?;
        if out.parent_id == out.process_id {
            return Err(DecodeError::invalid("a retired child is not its own parent"));
        }
        Ok(out)
    }
}

/// Wire: `{"count":n,"debits":{steps,effects,signals}}`; the member holding it is omitted
/// while nothing was retired, so an uncompacted cut keeps its old bytes.
impl ToJson for RetiredChildren {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("count", &self.count).field("debits", &self.debits).build()
    }
}

impl FromJson for RetiredChildren {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let out = RetiredChildren { count: r.required("count")?, debits: r.required("debits")? };
        r.finish()?;
        if out.count == 0 {
            return Err(DecodeError::invalid("retired_children is omitted when no child was retired"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn residue() -> RetiredChild {
        RetiredChild {
            parent_id: ProcessId::parse("process:root").unwrap(),
            process_id: ProcessId::parse("process:child").unwrap(),
            child_key: ChildKey::parse("k").unwrap(),
            result_digest: Digest::of(b"result"),
        }
    }

    #[test]
    fn a_residue_round_trips_and_is_told_apart_from_a_process_record() {
        let r = residue();
        let json = r.to_json();
        assert!(is_residue(&json));
        assert_eq!(RetiredChild::from_json(&json).unwrap(), r);
        let text = String::from_utf8(r.canonical()).unwrap();
        assert!(text.starts_with("{\"child_key\":\"k\",\"parent_id\":\"process:root\",\"process_id\":\"process:child\""), "{text}");
        assert!(text.ends_with(",\"retired\":true}"), "{text}");
        // A residue never decodes as a Process, nor a marked record with anything else.
        assert!(Process::from_json(&json).is_err());
        let mut extra = json.clone();
        if let Json::Object(o) = &mut extra {
            o.insert("status".into(), Json::String("completed".into()));
        }
        assert!(RetiredChild::from_json(&extra).is_err());
        let mut unmarked = json.clone();
        if let Json::Object(o) = &mut unmarked {
            o.insert(RESIDUE_MARKER.into(), Json::Bool(false));
        }
        assert!(RetiredChild::from_json(&unmarked).is_err());
    }

    #[test]
    fn the_parent_aggregate_is_omitted_while_empty() {
        let zero = RetiredChildren::default();
        assert!(zero.is_empty());
        assert!(RetiredChildren::from_json(&zero.to_json()).is_err());
        let one = RetiredChildren { count: 1, debits: Allocation { steps: 1, effects: 2, signals: 3 } };
        assert_eq!(RetiredChildren::from_json(&one.to_json()).unwrap(), one);
    }
}
