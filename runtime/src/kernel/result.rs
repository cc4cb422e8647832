//! The immutable terminal Result of a Process (what Await returns and child outcomes carry).

use super::deployment::DeploymentRef;
use super::ids::ProcessId;
use super::status::{Status, Termination};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, Payload, ToJson, WriteJson};

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

/// The same bytes as the tree of [`ToJson`], written straight (a retired child's residue keeps
/// the digest of these bytes, and child-wait satisfactions carry them: no tree per Result).
impl WriteJson for ProcessResult {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("deployment_ref", &self.deployment_ref)
            .opt_write("output", self.output.as_ref())
            .write("process_id", &self.process_id)
            .write("termination", &self.termination);
        w.finish();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::descriptor::Descriptor;
    use crate::kernel::status::{Cause, Termination};
    use crate::json::Digest;

    #[test]
    fn written_result_equals_its_tree_encoding() {
        let descriptor = Descriptor::new("agent.main", "The \"main\" agent.", Json::Bool(true), Json::Bool(true), None).unwrap();
        let deployment_ref = DeploymentRef::new(&descriptor, Digest([5; 32]), Digest([6; 32]), &[]);
        let completed = ProcessResult {
            process_id: ProcessId::parse("process:root").unwrap(),
            deployment_ref: deployment_ref.clone(),
            termination: Termination { cause: Cause::Completion, reason: String::new(), failure: None, unresolved_effect_ids: vec![] },
            output: Some(Payload::from_json(crate::json::parse(br#"{"b":[1,"\u0001"],"a":"x"}"#).unwrap()).unwrap()),
        };
        let failed = ProcessResult {
            output: None,
            termination: Termination {
                cause: Cause::ExecutionFailure,
                reason: "tool \"echo\" failed\n".into(),
                failure: Some(crate::kernel::failure::Failure::new(crate::kernel::failure::codes::LIMIT_STEPS, "no steps left")),
                unresolved_effect_ids: vec![],
            },
            ..completed.clone()
        };
        for result in [completed, failed] {
            let mut written = String::new();
            result.write_json(&mut written);
            assert_eq!(written.as_bytes(), &result.to_json().to_canonical_bytes()[..]);
            assert_eq!(crate::kernel::retired::result_digest(&result), Digest::of_json(&result.to_json()));
        }
    }
}
