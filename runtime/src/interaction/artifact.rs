//! Delegate Artifacts: each successful Delegate child's output, recorded in the parent state
//! (`artifact_records`) in the order of the calls that produced them.

use super::error::{ErrorKind, InteractionError};
use super::wire::{read_any_payload, Wire};
use crate::chat::{validate_call_id, validate_tool_name};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};
use crate::kernel::failure::codes::OUTPUT_INVALID;

/// One successful, schema-validated Delegate output, identified by the model tool call that
/// produced it. Immutable: fields are private and validated at construction, so there is no
/// zero or invalid Artifact. It never carries a ProcessId, a ChildKey or host identity.
///
/// Wire form (one `artifact_records` entry): `{"model_call_sequence":u32,
/// "tool_call_index":u32,"tool_call_id":S,"delegate_name":S,"output":J}`; `output` is the
/// child's Output value (any JSON value, `null` included).
///
/// Valid when the sequence is ≥ 1, the call id is a valid call id, and the delegate name is a
/// valid tool name. Whether the name is a configured Delegate and the output satisfies its
/// schema depends on the Definition ([`super::state::StateRules`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    model_call_sequence: u32,
    tool_call_index: u32,
    tool_call_id: String,
    delegate_name: String,
    output: Payload,
}

impl Artifact {
    pub fn new(
        model_call_sequence: u32,
        tool_call_index: u32,
        tool_call_id: impl Into<String>,
        delegate_name: impl Into<String>,
        output: Payload,
    ) -> Result<Artifact, InteractionError> {
        let artifact = Artifact {
            model_call_sequence,
            tool_call_index,
            tool_call_id: tool_call_id.into(),
            delegate_name: delegate_name.into(),
            output,
        };
        artifact.validate()?;
        Ok(artifact)
    }

    /// The one-based model call whose response requested the Delegate.
    pub fn model_call_sequence(&self) -> u32 {
        self.model_call_sequence
    }
    /// The zero-based position of the call in that response.
    pub fn tool_call_index(&self) -> u32 {
        self.tool_call_index
    }
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }
    /// The exact model-facing Delegate name.
    pub fn delegate_name(&self) -> &str {
        &self.delegate_name
    }
    /// The schema-validated child output (immutable and cheap to clone).
    pub fn output(&self) -> &Payload {
        &self.output
    }

    /// Strictly decodes the output into `T`. A mismatch is [`ErrorKind::InvalidArtifact`]
    /// naming the kernel's `execution.output.invalid` code, so it reads like any invalid output.
    pub fn decode<T: FromJson>(&self) -> Result<T, InteractionError> {
        T::from_json(self.output.value()).map_err(|e| {
            InteractionError::decode(
                ErrorKind::InvalidArtifact,
                &format!("artifact of delegate `{}`: {}", self.delegate_name, OUTPUT_INVALID.name()),
                e,
            )
        })
    }
}

impl Wire for Artifact {
    const INVALID: ErrorKind = ErrorKind::InvalidArtifact;
    const WHAT: &'static str = "artifact";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidArtifact, detail);
        if self.model_call_sequence == 0 {
            return Err(invalid("model_call_sequence must be ≥ 1".into()));
        }
        validate_call_id(&self.tool_call_id).map_err(|e| invalid(e.to_string()))?;
        validate_tool_name(&self.delegate_name).map_err(|e| invalid(format!("delegate name: {e}")))
    }
}

impl ToJson for Artifact {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("model_call_sequence", &self.model_call_sequence)
            .field("tool_call_index", &self.tool_call_index)
            .field("tool_call_id", &self.tool_call_id)
            .field("delegate_name", &self.delegate_name)
            .value("output", self.output.value().clone())
            .build()
    }
}

impl FromJson for Artifact {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let artifact = Artifact {
            model_call_sequence: r.required("model_call_sequence")?,
            tool_call_index: r.required("tool_call_index")?,
            tool_call_id: r.required("tool_call_id")?,
            delegate_name: r.required("delegate_name")?,
            output: read_any_payload(&mut r, "output")?,
        };
        r.finish()?;
        artifact.validate()?;
        Ok(artifact)
    }
}

/// An immutable, ordered snapshot of the Artifacts accumulated so far, in original tool-call
/// order across model calls. Values are immutable, so borrowing is already safe; [`all`]
/// returns an owned copy for callers that keep them.
///
/// [`all`]: Artifacts::all
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Artifacts {
    items: Vec<Artifact>,
}

impl Artifacts {
    pub fn new(items: Vec<Artifact>) -> Artifacts {
        Artifacts { items }
    }
    /// An owned copy of every Artifact, in order.
    pub fn all(&self) -> Vec<Artifact> {
        self.items.clone()
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn get(&self, index: usize) -> Option<&Artifact> {
        self.items.get(index)
    }
    pub fn iter(&self) -> std::slice::Iter<'_, Artifact> {
        self.items.iter()
    }
    /// The Artifacts of one Delegate, in order.
    pub fn by_delegate<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Artifact> + 'a {
        self.items.iter().filter(move |a| a.delegate_name == name)
    }
}

impl<'a> IntoIterator for &'a Artifacts {
    type Item = &'a Artifact;
    type IntoIter = std::slice::Iter<'a, Artifact>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
