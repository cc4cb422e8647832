//! Bounded text: validated human text fields, qualified names and normalized diagnostics.
//! (being implemented)

/// Normalizes external error text before it may be persisted or shown to a model: invalid
/// UTF-8 becomes U+FFFD, surrounding whitespace is trimmed, empty text becomes `default`, and
/// text longer than `max_bytes` is cut at `max_bytes`, backed off to a char boundary and
/// trimmed again. Example: `0xFF` + 2048 × `a` with max 2048 → U+FFFD + 2045 × `a`.
pub fn normalize_diagnostic(_raw: &[u8], _max_bytes: usize, _default: &str) -> String {
    unimplemented!("text: being implemented")
}
