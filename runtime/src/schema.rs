//! Compiled JSON Schemas. (being implemented elsewhere; these signatures let the kernel value
//! types compile on the `kvalues` branch and are replaced at merge)

use crate::json::Json;

/// A compiled JSON Schema together with its source value.
#[derive(Clone)]
pub struct Schema {
    source: Json,
}

/// Why a schema source failed to compile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid schema: {0}")]
pub struct SchemaError(pub String);

/// Why an instance failed validation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("schema violation: {0}")]
pub struct SchemaViolation(pub String);

impl Schema {
    pub fn compile(_source: &Json) -> Result<Schema, SchemaError> {
        unimplemented!("schema: being implemented")
    }
    /// The schema `false`.
    pub fn reject_all() -> Schema {
        Schema { source: Json::Bool(false) }
    }
    pub fn source(&self) -> &Json {
        &self.source
    }
    pub fn validate(&self, _instance: &Json) -> Result<(), SchemaViolation> {
        unimplemented!("schema: being implemented")
    }
}
