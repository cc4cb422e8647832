//! Diagnostic normalization: applied to every Interaction failure message, every
//! error-result text, and every error detail.
//!
//! * invalid UTF-8 becomes U+FFFD;
//! * surrounding whitespace is trimmed;
//! * empty text becomes [`DEFAULT_DIAGNOSTIC`];
//! * text longer than [`MAX_DIAGNOSTIC_BYTES`] is cut at that many bytes, backed off to a char
//!   boundary, and trimmed again.
//!
//! ```
//! use keel::interaction::diagnostic::normalize;
//! let mut raw = vec![0xFF];
//! raw.extend(std::iter::repeat_n(b'a', 2048));
//! assert_eq!(normalize(&raw), format!("\u{FFFD}{}", "a".repeat(2045)));
//! ```

use crate::limits::MAX_DIAGNOSTIC_BYTES;

/// What an empty diagnostic becomes.
pub const DEFAULT_DIAGNOSTIC: &str = "Interaction operation failed";

/// Normalizes raw diagnostic bytes (external error text, possibly invalid UTF-8).
pub fn normalize(raw: &[u8]) -> String {
    crate::text::normalize_diagnostic(raw, MAX_DIAGNOSTIC_BYTES, DEFAULT_DIAGNOSTIC)
}

/// Normalizes diagnostic text.
pub fn normalize_str(text: &str) -> String {
    normalize(text.as_bytes())
}

/// Whether `text` is already in normalized form (normalizing it changes nothing). Wire values
/// that carry diagnostics (model error texts) must be normalized, so a decoded payload never
/// holds text that a later normalization would silently rewrite.
pub fn is_normalized(text: &str) -> bool {
    normalize_str(text) == text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_example() {
        let mut raw = vec![0xFF];
        raw.extend(std::iter::repeat_n(b'a', 2048));
        let out = normalize(&raw);
        assert_eq!(out, format!("\u{FFFD}{}", "a".repeat(2045)));
        assert_eq!(out.len(), MAX_DIAGNOSTIC_BYTES);
    }

    #[test]
    fn rules() {
        assert_eq!(normalize(b""), DEFAULT_DIAGNOSTIC);
        assert_eq!(normalize(b" \n\t "), DEFAULT_DIAGNOSTIC);
        assert_eq!(normalize(b"  boom \n"), "boom");
        assert_eq!(normalize(b"a\xC3\x28b"), "a\u{FFFD}(b");
        // Cut at 2048 bytes inside a two-byte char backs off, then trims again.
        let text = format!("{}é", "a".repeat(MAX_DIAGNOSTIC_BYTES - 1));
        assert_eq!(normalize_str(&text), "a".repeat(MAX_DIAGNOSTIC_BYTES - 1));
        let text = format!("{} {}", "a".repeat(MAX_DIAGNOSTIC_BYTES - 1), "b".repeat(10));
        assert_eq!(normalize_str(&text), "a".repeat(MAX_DIAGNOSTIC_BYTES - 1));
        let exact = "z".repeat(MAX_DIAGNOSTIC_BYTES);
        assert_eq!(normalize_str(&exact), exact);
    }

    #[test]
    fn normalized_form() {
        assert!(is_normalized("boom"));
        assert!(is_normalized(DEFAULT_DIAGNOSTIC));
        assert!(!is_normalized(""));
        assert!(!is_normalized(" boom"));
        assert!(!is_normalized(&"z".repeat(MAX_DIAGNOSTIC_BYTES + 1)));
    }
}
