//! Bounded text: validated human text fields, qualified names and normalized diagnostics.
//! (being implemented)

/// Normalizes external error text before it may be persisted or shown to a model: invalid
/// UTF-8 becomes U+FFFD, surrounding whitespace is trimmed, empty text becomes `default`, and
/// text longer than `max_bytes` is cut at `max_bytes`, backed off to a char boundary and
/// trimmed again. Example: `0xFF` + 2048 × `a` with max 2048 → U+FFFD + 2045 × `a`.
pub fn normalize_diagnostic(_raw: &[u8], _max_bytes: usize, _default: &str) -> String {
    unimplemented!("text: being implemented")
}

// ---------------------------------------------------------------------------------------------
// Minimal stand-ins for `QualifiedName` and `BoundedText` so the kernel value types compile on
// the `kvalues` branch. The json helper's implementation replaces this block at merge; the
// public API below is exactly the agreed one.
// ---------------------------------------------------------------------------------------------

use crate::json::{DecodeError, FromJson, Json, ToJson};
use crate::limits::{MAX_QUALIFIED_NAME_BYTES, MAX_TEXT_BYTES};

/// Why a text field was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("text must not be empty")]
    Empty,
    #[error("text is {len} bytes, the limit is {max}")]
    TooLong { len: usize, max: usize },
    #[error("qualified name must match [a-z][a-z0-9._-]*")]
    Charset,
    #[error("text must not have surrounding whitespace")]
    Untrimmed,
}

/// A qualified name: 1–128 bytes of `[a-z][a-z0-9._-]*`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName(String);

impl QualifiedName {
    pub fn parse(text: &str) -> Result<QualifiedName, TextError> {
        if text.is_empty() {
            return Err(TextError::Empty);
        }
        if text.len() > MAX_QUALIFIED_NAME_BYTES {
            return Err(TextError::TooLong { len: text.len(), max: MAX_QUALIFIED_NAME_BYTES });
        }
        let bytes = text.as_bytes();
        if !bytes[0].is_ascii_lowercase()
            || !bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(TextError::Charset);
        }
        Ok(QualifiedName(text.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl ToJson for QualifiedName {
    fn to_json(&self) -> Json {
        Json::String(self.0.clone())
    }
}
impl FromJson for QualifiedName {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let s = String::from_json(value)?;
        QualifiedName::parse(&s).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

/// Human text: non-empty, trimmed UTF-8 of at most 4096 bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BoundedText(String);

impl BoundedText {
    pub fn parse(text: &str) -> Result<BoundedText, TextError> {
        if text.is_empty() {
            return Err(TextError::Empty);
        }
        if text.trim() != text {
            return Err(TextError::Untrimmed);
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(TextError::TooLong { len: text.len(), max: MAX_TEXT_BYTES });
        }
        Ok(BoundedText(text.to_owned()))
    }
    /// Trims, cuts to the byte limit on a char boundary, and falls back to `default` when
    /// nothing is left. Never fails.
    pub fn normalize(raw: &str, default: &str) -> BoundedText {
        fn cut(text: &str) -> &str {
            let text = text.trim();
            let mut end = text.len().min(MAX_TEXT_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].trim()
        }
        let text = cut(raw);
        let text = if text.is_empty() { cut(default) } else { text };
        let text = if text.is_empty() { "operation failed" } else { text };
        BoundedText(text.to_owned())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for BoundedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl ToJson for BoundedText {
    fn to_json(&self) -> Json {
        Json::String(self.0.clone())
    }
}
impl FromJson for BoundedText {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let s = String::from_json(value)?;
        BoundedText::parse(&s).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}
