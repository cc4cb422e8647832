//! Retired children: what a parent's record keeps of a finished child once the parent has
//! consumed the child's Result (compaction).
//!
//! A retired child leaves the cut. Its parent keeps, per child, exactly what the contract
//! still needs, and one aggregate:
//!
//! * `process_id` — identity: a retired id is never reused and never appears in the tree
//!   again, and the cut can still prove which children existed;
//! * `child_key` — a key stays used for the parent's whole life (a later start under the same
//!   key is an identity conflict, compacted or not);
//! * `result_digest` — the SHA-256 of the child's canonical Result, the evidence that the Result
//!   the parent consumed is the one the child ended with;
//! * `debits` — the sum of the retired children's grants: grants are permanent debits, so the
//!   parent's `allocated_resources` must still equal present debits plus this sum.
//!
//! A child that ended with unresolved Unknown Effects is never retired: its whole record stays,
//! so every Unknown surface (the Unknown itself, its diagnostic, its frozen request, the
//! termination's unresolved ids) stays in every later cut.

use super::ids::{ChildKey, ProcessId};
use super::process::Process;
use super::resource::Allocation;
use crate::json::{DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// One retired child's residue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetiredChild {
    pub process_id: ProcessId,
    pub child_key: ChildKey,
    pub result_digest: Digest,
}

/// Every child a parent retired, in retirement order, and the sum of their debits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetiredChildren {
    pub children: Vec<RetiredChild>,
    pub debits: Allocation,
}

impl RetiredChildren {
    pub fn is_empty(&self) -> bool {
        self.children.is_empty() && self.debits == Allocation::ZERO
    }
    pub fn len(&self) -> u64 {
        self.children.len() as u64
    }
    pub fn contains(&self, id: &ProcessId) -> bool {
        self.children.iter().any(|c| &c.process_id == id)
    }
    pub fn has_key(&self, key: &ChildKey) -> bool {
        self.children.iter().any(|c| &c.child_key == key)
    }
}

/// The digest a retired child's residue keeps: SHA-256 of its canonical Result.
pub fn result_digest(result: &super::result::ProcessResult) -> Digest {
    Digest::of_json(&result.to_json())
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

impl ToJson for RetiredChild {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("process_id", &self.process_id)
            .field("child_key", &self.child_key)
            .value("result_digest", Json::String(self.result_digest.to_string()))
            .build()
    }
}

impl FromJson for RetiredChild {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let out = RetiredChild {
            process_id: r.required("process_id")?,
            child_key: r.required("child_key")?,
            result_digest: r.required_with("result_digest", |v| {
                let text = String::from_json(v)?;
                Digest::parse(&text).map_err(|e| DecodeError::invalid(e.to_string()))
            })?,
        };
        r.finish()?;
        Ok(out)
    }
}

/// Wire: `{"children":[…],"debits":{steps,effects,signals}}`; the member holding it is
/// omitted while nothing was retired, so an uncompacted cut keeps its old bytes.
impl ToJson for RetiredChildren {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("children", &self.children).field("debits", &self.debits).build()
    }
}

impl FromJson for RetiredChildren {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let out = RetiredChildren { children: r.required("children")?, debits: r.required("debits")? };
        r.finish()?;
        if out.children.is_empty() {
            return Err(DecodeError::invalid("retired_children is omitted when no child was retired"));
        }
        Ok(out)
    }
}
