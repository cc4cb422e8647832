//! Where a Process sits in its tree.

use super::ids::{ChildKey, ProcessId};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson, WriteJson};

/// A Process's tree location. Root: depth 0, no parent or key. Child: parent and key present.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Relation {
    pub parent_id: Option<ProcessId>,
    pub root_id: ProcessId,
    pub child_key: Option<ChildKey>,
    pub depth: u32,
}

impl Relation {
    pub fn root(root_id: ProcessId) -> Relation {
        Relation { parent_id: None, root_id, child_key: None, depth: 0 }
    }
    pub fn is_root(&self) -> bool {
        self.parent_id.is_none()
    }
    /// Structural consistency for a Process with identity `id`.
    pub fn validate(&self, id: &ProcessId) -> Result<(), DecodeError> {
        match (&self.parent_id, &self.child_key) {
            (None, None) if self.depth == 0 && *id == self.root_id => Ok(()),
            (Some(parent), Some(_)) if self.depth > 0 && id != parent && *id != self.root_id => Ok(()),
            _ => Err(DecodeError::invalid("inconsistent process relation")),
        }
    }
}

impl ToJson for Relation {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .opt_field("parent_id", self.parent_id.as_ref())
            .field("root_id", &self.root_id)
            .opt_field("child_key", self.child_key.as_ref())
            .field("depth", &self.depth)
            .build()
    }
}

impl WriteJson for Relation {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.opt_write("child_key", self.child_key.as_ref())
            .write("depth", &self.depth)
            .opt_write("parent_id", self.parent_id.as_ref())
            .write("root_id", &self.root_id);
        w.finish();
    }
}

impl FromJson for Relation {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let rel = Relation {
            parent_id: r.optional("parent_id")?,
            root_id: r.required("root_id")?,
            child_key: r.optional("child_key")?,
            depth: r.required("depth")?,
        };
        r.finish()?;
        Ok(rel)
    }
}
