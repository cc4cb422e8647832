//! Bounding of diagnostic text.
//!
//! Diagnostics use the shared rule `crate::text::normalize_diagnostic`; this file adds only
//! the per-entry shortening a multi-error diagnostic needs.

/// Normalizes external error text: invalid UTF-8 becomes U+FFFD, surrounding whitespace is
/// trimmed, empty text becomes `default`, and text longer than `max_bytes` is cut at
/// `max_bytes`, backed off to a char boundary and trimmed again (a cut that leaves nothing also
/// becomes `default`).
pub(crate) fn normalize_diagnostic(raw: &[u8], max_bytes: usize, default: &str) -> String {
    crate::text::normalize_diagnostic(raw, max_bytes, default)
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a char boundary.
pub(crate) fn cut_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Shortens one entry of a multi-entry diagnostic to `max_bytes`, marking the cut with `…`
/// so a reader knows the entry continues.
pub(crate) fn shorten_entry(text: &str, max_bytes: usize) -> String {
    const ELLIPSIS: &str = "…";
    let text = text.trim();
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let keep = cut_at_char_boundary(text, max_bytes.saturating_sub(ELLIPSIS.len())).trim_end();
    format!("{keep}{ELLIPSIS}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_invalid_utf8_then_cut() {
        let mut raw = vec![0xFF];
        raw.extend(std::iter::repeat_n(b'a', 2048));
        let out = normalize_diagnostic(&raw, 2048, "x");
        assert_eq!(out, format!("\u{FFFD}{}", "a".repeat(2045)));
        assert_eq!(out.len(), 2048);
    }

    #[test]
    fn trims_and_defaults() {
        assert_eq!(normalize_diagnostic(b"  hi \n", 10, "d"), "hi");
        assert_eq!(normalize_diagnostic(b" \t\n ", 10, "d"), "d");
        assert_eq!(normalize_diagnostic(b"", 10, "d"), "d");
    }

    #[test]
    fn cut_backs_off_to_char_boundary_and_trims_again() {
        // "é" is 2 bytes: a cut at 4 falls inside the third one.
        let out = normalize_diagnostic("ééé".as_bytes(), 5, "d");
        assert_eq!(out, "éé");
        // A cut landing just after a space is trimmed again.
        let out = normalize_diagnostic(b"ab   cd", 4, "d");
        assert_eq!(out, "ab");
        // A cut inside the only (4-byte) char leaves nothing → default.
        assert_eq!(normalize_diagnostic("😀".as_bytes(), 3, "d"), "d");
    }

    #[test]
    fn shorten_entry_marks_the_cut() {
        assert_eq!(shorten_entry("short", 10), "short");
        let out = shorten_entry(&"€".repeat(100), 10);
        assert!(out.len() <= 10, "{out}");
        assert_eq!(out, "€€…");
    }
}
