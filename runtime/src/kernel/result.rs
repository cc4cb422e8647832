//! The immutable terminal Result of a Process (what Await returns and child outcomes carry).

use super::deployment::DeploymentRef;
use super::ids::ProcessId;
use super::status::{Status, Termination};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, Payload, ToJson};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessResult {
    pub process_id: ProcessId,
    pub deployment_ref: DeploymentRef,
    pub termination: Termination,
    /// Present exactly for Completed.
    pub output: Option<Payload>,
}

impl ProcessResult {
    pub fn status(&self) -> Status {
        self.termination.status()
    }
}

impl ToJson for ProcessResult {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("process_id", &self.process_id)
            .field("deployment_ref", &self.deployment_ref)
            .field("termination", &self.termination)
            .opt_field("output", self.output.as_ref().map(Payload::value))
            .build()
    }
}

impl FromJson for ProcessResult {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let res = ProcessResult {
            process_id: r.required("process_id")?,
            deployment_ref: r.required("deployment_ref")?,
            termination: r.required("termination")?,
            output: crate::kernel::signal::optional_payload(&mut r, "output")?,
        };
        r.finish()?;
        if (res.status() == Status::Completed) != res.output.is_some() {
            return Err(DecodeError::invalid("exactly a completed result has output"));
        }
        Ok(res)
    }
}
