//! The strict JSON parser (RFC 8259 + strictness rules of this crate).
use super::{Json, JsonError};

/// Limits applied while parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLimits {
    /// Maximum raw input bytes.
    pub max_bytes: usize,
    /// Maximum nesting depth.
    pub max_depth: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits { max_bytes: crate::limits::MAX_PAYLOAD_BYTES, max_depth: crate::limits::MAX_JSON_DEPTH }
    }
}

/// Parses one JSON value with the default limits.
pub fn parse(bytes: &[u8]) -> Result<Json, JsonError> {
    parse_with(bytes, &ParseLimits::default())
}

/// Parses exactly one JSON value (surrounding whitespace allowed) under `limits`.
pub fn parse_with(_bytes: &[u8], _limits: &ParseLimits) -> Result<Json, JsonError> {
    unimplemented!("json parser: being implemented")
}

/// Whether `text` is exactly one RFC 8259 number.
pub(crate) fn is_number_text(_text: &str) -> bool {
    unimplemented!("json parser: being implemented")
}
