//! Child specifications: what a parent asks the kernel to start, and what it waits for.

use super::capability::CapabilitySet;
use super::deployment::DeploymentRef;
use super::ids::{ChildKey, ProcessId, WaitKey};
use super::resource::Budget;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson};

/// A request to start one child Process under the requesting parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSpec {
    pub key: ChildKey,
    pub deployment_ref: DeploymentRef,
    pub input: Payload,
    pub budget: Budget,
    pub capabilities: CapabilitySet,
}

impl ToJson for ChildSpec {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("key", &self.key)
            .field("deployment_ref", &self.deployment_ref)
            .value("input", self.input.value().clone())
            .field("budget", &self.budget)
            .field("capabilities", &self.capabilities)
            .build()
    }
}

/// The same bytes as the tree of [`ToJson`], written straight: a child's request digest is
/// taken of them at its start and again by every cut validation that checks a settled start,
/// so no tree (with a copy of the child's input) is built for it.
impl WriteJson for ChildSpec {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("budget", &self.budget)
            .write("capabilities", &self.capabilities)
            .write("deployment_ref", &self.deployment_ref)
            .write("input", &self.input)
            .write("key", &self.key);
        w.finish();
    }
}

impl ChildSpec {
    /// The digest a started child records of the request that started it
    /// (`child_request_digest`): SHA-256 of the spec's canonical encoding.
    pub fn request_digest(&self) -> crate::json::Digest {
        crate::json::Digest::of_written(self)
    }
}

impl FromJson for ChildSpec {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let spec = ChildSpec {
            key: r.required("key")?,
            deployment_ref: r.required("deployment_ref")?,
            input: crate::kernel::signal::required_payload(&mut r, "input")?,
            budget: r.required("budget")?,
            capabilities: r.required("capabilities")?,
        };
        r.finish()?;
        Ok(spec)
    }
}

/// Which fact about a child counts toward a child wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Boundary {
    /// The child reached a terminal Result.
    TerminalResult,
    /// The child's whole subtree is terminal and quiet (no owned work left in this runtime).
    SubtreeDrained,
}

impl Boundary {
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::TerminalResult => "terminal_result",
            Boundary::SubtreeDrained => "subtree_drained",
        }
    }
}

impl ToJson for Boundary {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for Boundary {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match crate::json::decode_str(value)? {
            "terminal_result" => Ok(Boundary::TerminalResult),
            "subtree_drained" => Ok(Boundary::SubtreeDrained),
            other => Err(DecodeError::invalid(format!("unknown boundary `{other}`"))),
        }
    }
}

/// How many waited children must be at the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    All,
    Any,
    /// At least n (1 ≤ n ≤ number of children).
    Quorum(u32),
}

impl Condition {
    /// How many children at the boundary satisfy this condition for `total` children.
    pub fn required(self, total: usize) -> usize {
        match self {
            Condition::All => total,
            Condition::Any => 1,
            Condition::Quorum(n) => n as usize,
        }
    }
}

impl ToJson for Condition {
    fn to_json(&self) -> Json {
        match self {
            Condition::All => Json::str("all"),
            Condition::Any => Json::str("any"),
            Condition::Quorum(n) => ObjectBuilder::new().field("quorum", n).build(),
        }
    }
}

impl FromJson for Condition {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match value {
            Json::String(s) if s == "all" => Ok(Condition::All),
            Json::String(s) if s == "any" => Ok(Condition::Any),
            Json::Object(_) => {
                let mut r = ObjectReader::new(value)?;
                let n: u32 = r.required("quorum")?;
                r.finish()?;
                Ok(Condition::Quorum(n))
            }
            other => Err(DecodeError::invalid(format!("unknown wait condition {other:?}"))),
        }
    }
}

/// A wait for some of the requester's direct children to reach a boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildWaitSpec {
    pub key: WaitKey,
    /// Non-empty, unique, direct children of the requester, in request order.
    pub children: Vec<ProcessId>,
    pub boundary: Boundary,
    pub condition: Condition,
}

/// Why a child wait spec is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChildWaitSpecError {
    #[error("a child wait must name at least one child")]
    NoChildren,
    #[error("child {0} is named twice")]
    DuplicateChild(ProcessId),
    #[error("quorum {quorum} must be within 1..={children}")]
    Quorum { quorum: u32, children: usize },
}

impl ChildWaitSpec {
    pub fn validate(&self) -> Result<(), ChildWaitSpecError> {
        if self.children.is_empty() {
            return Err(ChildWaitSpecError::NoChildren);
        }
        for (i, c) in self.children.iter().enumerate() {
            if self.children[..i].contains(c) {
                return Err(ChildWaitSpecError::DuplicateChild(c.clone()));
            }
        }
        if let Condition::Quorum(n) = self.condition {
            if n == 0 || n as usize > self.children.len() {
                return Err(ChildWaitSpecError::Quorum { quorum: n, children: self.children.len() });
            }
        }
        Ok(())
    }
}

impl ToJson for ChildWaitSpec {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("key", &self.key)
            .field("children", &self.children)
            .field("boundary", &self.boundary)
            .field("condition", &self.condition)
            .build()
    }
}

impl FromJson for ChildWaitSpec {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let spec = ChildWaitSpec {
            key: r.required("key")?,
            children: r.required("children")?,
            boundary: r.required("boundary")?,
            condition: r.required("condition")?,
        };
        r.finish()?;
        spec.validate().map_err(|e| DecodeError::invalid(e.to_string()))?;
        Ok(spec)
    }
}

#[cfg(test)]
mod spec_encoding_tests {
    use super::*;
    use crate::json::Digest;
    use crate::kernel::descriptor::Descriptor;

    #[test]
    fn written_spec_and_its_request_digest_equal_the_tree_encoding() {
        let descriptor = Descriptor::new("tool.echo", "Echoes \"q\".", Json::Bool(true), Json::Bool(true), None).unwrap();
        let deployment_ref = DeploymentRef::new(&descriptor, Digest([5; 32]), Digest([6; 32]), &[]);
        let input = Payload::from_json(crate::json::parse(br#"{"q":"round \"1\"\n","n":[1,2.5,null]}"#).unwrap()).unwrap();
        let specs = [
            ChildSpec {
                key: ChildKey::parse("tool_call_1").unwrap(),
                deployment_ref: deployment_ref.clone(),
                input: input.clone(),
                budget: Budget::unlimited(),
                capabilities: CapabilitySet::empty(),
            },
            ChildSpec {
                key: ChildKey::parse("tool_call_2").unwrap(),
                deployment_ref,
                input,
                budget: Budget::finite(3, 4, 5),
                capabilities: CapabilitySet::from_names(&["net.fetch", "fs.read"]).unwrap(),
            },
        ];
        for spec in specs {
            let mut written = String::new();
            spec.write_json(&mut written);
            assert_eq!(written.as_bytes(), &spec.to_json().to_canonical_bytes()[..]);
            assert_eq!(spec.request_digest(), Digest::of_json(&spec.to_json()));
        }
    }
}
