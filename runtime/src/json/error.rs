//! Parse and size errors of the JSON layer.

/// Which representation exceeded a size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeStage {
    /// The bytes as supplied.
    Raw,
    /// The canonical encoding.
    Canonical,
}

impl std::fmt::Display for SizeStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizeStage::Raw => "raw",
            SizeStage::Canonical => "canonical",
        })
    }
}

/// Why JSON text was rejected. Offsets are byte offsets into the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    #[error("syntax error at byte {offset}: {reason}")]
    Syntax { offset: usize, reason: &'static str },
    #[error("unexpected end of input")]
    UnexpectedEnd,
    #[error("trailing data at byte {offset}")]
    TrailingData { offset: usize },
    #[error("duplicate object member `{key}` at byte {offset}")]
    DuplicateKey { offset: usize, key: String },
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("invalid unicode escape at byte {offset}: {reason}")]
    InvalidEscape { offset: usize, reason: &'static str },
    #[error("invalid number `{text}`")]
    InvalidNumber { text: String },
    #[error("nesting deeper than {limit}")]
    TooDeep { limit: usize },
    #[error("{stage} size {actual} bytes exceeds the limit of {limit} bytes")]
    TooLarge { stage: SizeStage, actual: usize, limit: usize },
}
