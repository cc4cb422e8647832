//! Bounding of diagnostic text produced from tool-supplied or external error text, with the
//! shared rule `crate::text::normalize_diagnostic`.

use crate::limits::MAX_DIAGNOSTIC_BYTES;

/// Invalid UTF-8 becomes U+FFFD, surrounding whitespace is trimmed, empty text becomes
/// `default`, and text longer than `max_bytes` is cut at `max_bytes`, backed off to a char
/// boundary and trimmed again (a cut that leaves nothing also becomes `default`).
pub(crate) fn normalize_diagnostic(raw: &[u8], max_bytes: usize, default: &str) -> String {
    crate::text::normalize_diagnostic(raw, max_bytes, default)
}

/// [`normalize_diagnostic`] with the standard diagnostic limit.
pub(crate) fn bounded(text: &str, default: &str) -> String {
    normalize_diagnostic(text.as_bytes(), MAX_DIAGNOSTIC_BYTES, default)
}

/// A short copy of an untrusted name for an error message (names in errors may be anything a
/// tool or model supplied, so they are never copied whole).
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", cut_at_char_boundary(text, MAX))
    }
}

fn cut_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example() {
        let mut raw = vec![0xFF];
        raw.extend(std::iter::repeat_n(b'a', 2048));
        let out = normalize_diagnostic(&raw, 2048, "x");
        assert_eq!(out, format!("\u{FFFD}{}", "a".repeat(2045)));
    }

    #[test]
    fn trims_and_defaults() {
        assert_eq!(normalize_diagnostic(b"  hi \n", 10, "d"), "hi");
        assert_eq!(normalize_diagnostic(b" \t ", 10, "d"), "d");
        // A cut that leaves nothing falls back to the default, itself bounded to the limit.
        assert_eq!(normalize_diagnostic(b"a", 0, "d"), "");
        assert_eq!(normalize_diagnostic("é".as_bytes(), 1, "d"), "d");
        assert_eq!(normalize_diagnostic(b"ab   cd", 4, "d"), "ab");
    }

    #[test]
    fn excerpt_is_bounded() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(100);
        let e = excerpt(&long);
        assert!(e.len() <= 80 + "…".len());
        assert!(e.ends_with('…'));
    }
}
