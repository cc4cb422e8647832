//! Child specifications: what a parent asks the kernel to start, and what it waits for.

use super::capability::CapabilitySet;
use super::deployment::DeploymentRef;
use super::ids::{ChildKey, ProcessId, WaitKey};
use super::resource::Budget;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};

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
