//! The two failures of the schema layer: a schema that does not compile, and an instance that
//! does not satisfy a compiled schema. Both carry only bounded text
//! (≤ [`crate::limits::MAX_DIAGNOSTIC_BYTES`]).

/// A JSON Schema that cannot be compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema nests arrays + objects deeper than [`crate::limits::MAX_JSON_DEPTH`].
    #[error("invalid schema: nesting deeper than {limit}")]
    TooDeep { limit: usize },
    /// The schema is not a valid schema of its draft: a meta-schema violation, a pattern that
    /// does not compile, an unresolvable or external `$ref`, an unknown `$schema`, …
    /// `diagnostic` is the full bounded message.
    #[error("{diagnostic}")]
    Invalid { diagnostic: String },
}

impl SchemaError {
    /// The bounded human-readable message (the `Display` text).
    pub fn diagnostic(&self) -> String {
        self.to_string()
    }
}

/// An instance that does not satisfy a schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{diagnostic}")]
pub struct SchemaViolation {
    pub(super) diagnostic: String,
    pub(super) error_count: usize,
}

impl SchemaViolation {
    /// The bounded message listing the first errors with their instance paths.
    pub fn diagnostic(&self) -> &str {
        &self.diagnostic
    }
    /// How many errors the validator reported in total (≥ 1); the diagnostic lists at most
    /// [`crate::limits::MAX_SCHEMA_ERRORS_LISTED`] of them.
    pub fn error_count(&self) -> usize {
        self.error_count
    }
}
