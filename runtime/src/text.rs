//! Bounded text: validated human text fields, qualified names, identity text and normalized
//! diagnostics.
//!
//! Validation (`parse`) is for text that must already be well-formed (wire values, names);
//! normalization ([`normalize_diagnostic`], [`BoundedText::normalize`]) is for external error
//! text, which is repaired instead of rejected so that a failure can always be recorded.
use crate::json::{DecodeError, FromJson, Json, ToJson};
use crate::limits::{MAX_DIAGNOSTIC_BYTES, MAX_IDENTITY_BYTES, MAX_QUALIFIED_NAME_BYTES, MAX_TEXT_BYTES};

/// Appends the lowercase hex of `bytes` to `out` (two digits per byte). The one hex writer of
/// the crate: digests, derived identities, random ids and JSON `\u00xx` escapes all use it.
pub fn push_lower_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 * bytes.len());
    // A digest's worth at a time through a stack buffer: one append per 32 bytes instead of
    // one `char` push (capacity check and UTF-8 encoding) per digit.
    let mut buf = [0u8; 64];
    for chunk in bytes.chunks(32) {
        for (i, &b) in chunk.iter().enumerate() {
            buf[2 * i] = HEX[usize::from(b >> 4)];
            buf[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        // Hex digits are ASCII, so this never fails.
        if let Ok(text) = std::str::from_utf8(&buf[..2 * chunk.len()]) {
            out.push_str(text);
        }
    }
}

/// Used by [`BoundedText::normalize`] when both the text and the caller's default normalize
/// to nothing (the kernel's default failure text).
pub const FALLBACK_TEXT: &str = "operation failed";

/// Which kind of text failed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    Text,
    QualifiedName,
    Identity,
}

impl std::fmt::Display for TextKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TextKind::Text => "text",
            TextKind::QualifiedName => "qualified name",
            TextKind::Identity => "identity",
        })
    }
}

/// Why a text value was rejected. Never echoes the text itself (it may be large or hostile),
/// only the offending character.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("{kind} must not be empty")]
    Empty { kind: TextKind },
    #[error("{kind} is {len} bytes, more than the limit of {limit}")]
    TooLong { kind: TextKind, len: usize, limit: usize },
    #[error("{kind} must not begin or end with whitespace")]
    Untrimmed { kind: TextKind },
    #[error("{kind} must start with a lowercase ASCII letter, found {found:?}")]
    InvalidStart { kind: TextKind, found: char },
    #[error("{kind} must not contain {found:?} (at byte {offset})")]
    InvalidChar { kind: TextKind, found: char, offset: usize },
}

/// Normalizes external error text before it may be persisted or shown to a model: invalid
/// UTF-8 becomes U+FFFD, surrounding whitespace is trimmed, empty text becomes `default`, and
/// text longer than `max_bytes` is cut at `max_bytes`, backed off to a char boundary and
/// trimmed again. Example: `0xFF` + 2048 × `a` with max 2048 → U+FFFD + 2045 × `a`.
///
/// `default` goes through the same trim and cut, so the result always fits `max_bytes`; it is
/// empty only if `default` is (or `max_bytes` is smaller than its first character).
pub fn normalize_diagnostic(raw: &[u8], max_bytes: usize, default: &str) -> String {
    let repaired = String::from_utf8_lossy(raw);
    let text = trim_and_cut(&repaired, max_bytes);
    if !text.is_empty() {
        return text.to_owned();
    }
    trim_and_cut(default, max_bytes).to_owned()
}

fn trim_and_cut(text: &str, max_bytes: usize) -> &str {
    let trimmed = text.trim();
    if trimmed.len() <= max_bytes {
        return trimmed;
    }
    let mut end = max_bytes;
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    trimmed.get(..end).unwrap_or_default().trim_end()
}

fn check_length(kind: TextKind, text: &str, limit: usize) -> Result<(), TextError> {
    if text.is_empty() {
        return Err(TextError::Empty { kind });
    }
    if text.len() > limit {
        return Err(TextError::TooLong { kind, len: text.len(), limit });
    }
    Ok(())
}

fn decode_text<T>(value: &Json, parse: impl FnOnce(&str) -> Result<T, TextError>) -> Result<T, DecodeError> {
    let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
    parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
}

/// Validated human text (descriptions, reasons, failure messages): non-empty, no leading or
/// trailing whitespace (`char::is_whitespace`), at most [`MAX_TEXT_BYTES`] bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BoundedText(String);

impl BoundedText {
    /// Validates `text` as-is; nothing is repaired.
    pub fn parse(text: &str) -> Result<BoundedText, TextError> {
        check_length(TextKind::Text, text, MAX_TEXT_BYTES)?;
        if text.trim() != text {
            return Err(TextError::Untrimmed { kind: TextKind::Text });
        }
        Ok(BoundedText(text.to_owned()))
    }

    /// Repairs arbitrary text into a valid value (trim, cut to [`MAX_TEXT_BYTES`] on a char
    /// boundary, `default` when nothing is left, [`FALLBACK_TEXT`] when `default` is empty too).
    pub fn normalize(raw: &str, default: &str) -> BoundedText {
        BoundedText::normalized(raw.as_bytes(), MAX_TEXT_BYTES, default)
    }

    /// Like [`BoundedText::normalize`] for external error bytes, bounded by
    /// [`MAX_DIAGNOSTIC_BYTES`] (invalid UTF-8 becomes U+FFFD).
    pub fn diagnostic(raw: &[u8], default: &str) -> BoundedText {
        BoundedText::normalized(raw, MAX_DIAGNOSTIC_BYTES, default)
    }

    fn normalized(raw: &[u8], max_bytes: usize, default: &str) -> BoundedText {
        let text = normalize_diagnostic(raw, max_bytes, default);
        if text.is_empty() {
            BoundedText(FALLBACK_TEXT.to_owned())
        } else {
            BoundedText(text)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0.to_string()
    }
}

impl std::str::FromStr for BoundedText {
    type Err = TextError;
    fn from_str(text: &str) -> Result<BoundedText, TextError> {
        BoundedText::parse(text)
    }
}
impl AsRef<str> for BoundedText {
    fn as_ref(&self) -> &str {
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
        decode_text(value, BoundedText::parse)
    }
}

/// A qualified name (names, kinds, capabilities, failure codes, event names):
/// 1–[`MAX_QUALIFIED_NAME_BYTES`] bytes matching `[a-z][a-z0-9._-]*`. Ordered by bytes.
///
/// Shared text: names are cloned into every event, record copy and state, so a clone is a
/// reference count, not an allocation (comparison, hashing and `Debug` are the text's).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName(std::sync::Arc<str>);

impl QualifiedName {
    pub fn parse(text: &str) -> Result<QualifiedName, TextError> {
        let kind = TextKind::QualifiedName;
        check_length(kind, text, MAX_QUALIFIED_NAME_BYTES)?;
        for (offset, found) in text.char_indices() {
            let allowed = if offset == 0 {
                found.is_ascii_lowercase()
            } else {
                found.is_ascii_lowercase() || found.is_ascii_digit() || matches!(found, '.' | '_' | '-')
            };
            if !allowed {
                return Err(if offset == 0 {
                    TextError::InvalidStart { kind, found }
                } else {
                    TextError::InvalidChar { kind, found, offset }
                });
            }
        }
        Ok(QualifiedName(std::sync::Arc::from(text)))
    }

    /// A name written in the source (failure codes, event names). An invalid literal is a
    /// programming error, so this panics; never call it with runtime input.
    #[track_caller]
    pub fn from_static(name: &'static str) -> QualifiedName {
        match QualifiedName::parse(name) {
            Ok(n) => n,
            Err(e) => panic!("invalid qualified name literal {name:?}: {e}"),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0.to_string()
    }
}

impl std::str::FromStr for QualifiedName {
    type Err = TextError;
    fn from_str(text: &str) -> Result<QualifiedName, TextError> {
        QualifiedName::parse(text)
    }
}
impl AsRef<str> for QualifiedName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
/// Lets ordered collections of names be queried with `&str` (the `Ord` of both is byte order).
impl std::borrow::Borrow<str> for QualifiedName {
    fn borrow(&self) -> &str {
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
        Json::String(self.0.to_string())
    }
}
impl crate::json::WriteJson for QualifiedName {
    fn write_json(&self, out: &mut String) {
        crate::json::WriteJson::write_json(&*self.0, out);
    }
}
impl FromJson for QualifiedName {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        decode_text(value, QualifiedName::parse)
    }
}

/// Validates generic identity text (ProcessID, SignalID, WaitID, EffectID, WaitKey, ChildKey):
/// 1–[`MAX_IDENTITY_BYTES`] bytes drawn from `A-Z a-z 0-9 - _ . :`.
pub fn validate_identity(text: &str) -> Result<(), TextError> {
    let kind = TextKind::Identity;
    check_length(kind, text, MAX_IDENTITY_BYTES)?;
    match text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
    {
        Some((offset, found)) => Err(TextError::InvalidChar { kind, found, offset }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const DEFAULT: &str = "Interaction operation failed";

    #[test]
    fn lower_hex_writes_two_digits_per_byte() {
        let mut out = String::from("x:");
        push_lower_hex(&mut out, &[0x00, 0x0f, 0xa0, 0xff]);
        assert_eq!(out, "x:000fa0ff");
        push_lower_hex(&mut out, &[]);
        assert_eq!(out, "x:000fa0ff");
        // Across the 32-byte chunks it writes through: every byte value, in order.
        let all: Vec<u8> = (0..=255).collect();
        let mut long = String::new();
        push_lower_hex(&mut long, &all);
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(long, expected);
    }

    #[test]
    fn diagnostic_spec_example() {
        let mut raw = vec![0xFF];
        raw.extend(std::iter::repeat_n(b'a', 2048));
        let out = normalize_diagnostic(&raw, 2048, DEFAULT);
        assert_eq!(out, format!("\u{FFFD}{}", "a".repeat(2045)));
        assert_eq!(out.len(), 2048);
    }

    #[test]
    fn diagnostic_replaces_invalid_utf8_and_trims() {
        assert_eq!(normalize_diagnostic(b"  bad \xC3\x28 byte \n", 2048, DEFAULT), "bad \u{FFFD}( byte");
        assert_eq!(normalize_diagnostic("\u{3000}\tnbsp\u{a0}".as_bytes(), 2048, DEFAULT), "nbsp");
        assert_eq!(normalize_diagnostic(b"ok", 2048, DEFAULT), "ok");
        // An invalid byte is text, not whitespace: it survives as U+FFFD.
        assert_eq!(normalize_diagnostic(b" \xFF ", 2048, DEFAULT), "\u{FFFD}");
    }

    #[test]
    fn diagnostic_uses_default_when_empty() {
        assert_eq!(normalize_diagnostic(b"", 2048, DEFAULT), DEFAULT);
        assert_eq!(normalize_diagnostic(b" \n\t\r ", 2048, DEFAULT), DEFAULT);
        // The default is normalized too.
        assert_eq!(normalize_diagnostic(b"", 2048, "  padded  "), "padded");
        assert_eq!(normalize_diagnostic(b"", 4, "abcdef"), "abcd");
        assert_eq!(normalize_diagnostic(b"", 2048, ""), "");
    }

    #[test]
    fn diagnostic_cuts_on_char_boundary_and_trims_again() {
        // 'é' is two bytes: a cut at 5 falls inside the third 'é' and backs off to 4.
        assert_eq!(normalize_diagnostic("ééé".as_bytes(), 5, DEFAULT), "éé");
        assert_eq!(normalize_diagnostic("ab   cd".as_bytes(), 5, DEFAULT), "ab");
        assert_eq!(normalize_diagnostic("😀x".as_bytes(), 4, DEFAULT), "😀");
        // Nothing fits: the default, cut to the same limit, takes over.
        assert_eq!(normalize_diagnostic("😀x".as_bytes(), 3, DEFAULT), "Int");
        // Leading whitespace does not count against the limit.
        assert_eq!(normalize_diagnostic(format!("{}abc", " ".repeat(5000)).as_bytes(), 3, DEFAULT), "abc");
        let long = "x".repeat(5000);
        assert_eq!(normalize_diagnostic(long.as_bytes(), 2048, DEFAULT).len(), 2048);
    }

    #[test]
    fn bounded_text_validation() {
        assert_eq!(BoundedText::parse("hello world").unwrap().as_str(), "hello world");
        assert_eq!(BoundedText::parse("é").unwrap().to_string(), "é");
        assert_eq!(BoundedText::parse(""), Err(TextError::Empty { kind: TextKind::Text }));
        for untrimmed in [" a", "a ", "\ta", "a\n", "\u{a0}a", "a\u{2028}", "a\u{3000}", " "] {
            assert_eq!(
                BoundedText::parse(untrimmed),
                Err(TextError::Untrimmed { kind: TextKind::Text }),
                "{untrimmed:?}"
            );
        }
        // Inner whitespace and control characters are allowed.
        assert!(BoundedText::parse("a\n\tb\u{0}c").is_ok());
        let max = "a".repeat(MAX_TEXT_BYTES);
        assert!(BoundedText::parse(&max).is_ok());
        let over = "a".repeat(MAX_TEXT_BYTES + 1);
        assert_eq!(
            BoundedText::parse(&over),
            Err(TextError::TooLong { kind: TextKind::Text, len: MAX_TEXT_BYTES + 1, limit: MAX_TEXT_BYTES })
        );
        assert_eq!("x y".parse::<BoundedText>(), BoundedText::parse("x y"));
    }

    #[test]
    fn bounded_text_normalize_never_fails() {
        assert_eq!(BoundedText::normalize("  why  ", DEFAULT).as_str(), "why");
        assert_eq!(BoundedText::normalize("", DEFAULT).as_str(), DEFAULT);
        assert_eq!(BoundedText::normalize(" ", " ").as_str(), FALLBACK_TEXT);
        let long = format!("{}é", "a".repeat(MAX_TEXT_BYTES - 1));
        let cut = BoundedText::normalize(&long, DEFAULT);
        assert_eq!(cut.as_str(), "a".repeat(MAX_TEXT_BYTES - 1));
        for raw in ["", " ", &long, "x", " \u{2029} y \n"] {
            for default in ["", " ", DEFAULT] {
                let text = BoundedText::normalize(raw, default);
                assert_eq!(BoundedText::parse(text.as_str()).as_ref(), Ok(&text));
            }
        }
    }

    #[test]
    fn bounded_text_diagnostic_uses_diagnostic_limit() {
        let raw = vec![b'z'; MAX_DIAGNOSTIC_BYTES + 10];
        assert_eq!(BoundedText::diagnostic(&raw, DEFAULT).as_str().len(), MAX_DIAGNOSTIC_BYTES);
        assert_eq!(BoundedText::diagnostic(b"\xFF", DEFAULT).as_str(), "\u{FFFD}");
        assert_eq!(BoundedText::diagnostic(b"", "").as_str(), FALLBACK_TEXT);
    }

    #[test]
    fn bounded_text_json() {
        let text = BoundedText::parse("a reason").unwrap();
        assert_eq!(text.to_json(), Json::str("a reason"));
        assert_eq!(BoundedText::from_json(&Json::str("a reason")), Ok(text));
        assert!(BoundedText::from_json(&Json::str(" padded")).is_err());
        assert!(BoundedText::from_json(&Json::str("")).is_err());
        assert!(BoundedText::from_json(&Json::Null).is_err());
        assert!(BoundedText::from_json(&Json::u64(1)).is_err());
    }

    #[test]
    fn qualified_names() {
        for ok in
            ["a", "interaction.tool.start_failed", "engine.dispatch.panicked", "a-b_c.d9", "z0", "a..", "a-"]
        {
            assert_eq!(QualifiedName::parse(ok).unwrap().as_str(), ok);
        }
        let kind = TextKind::QualifiedName;
        assert_eq!(QualifiedName::parse(""), Err(TextError::Empty { kind }));
        for (bad, found) in
            [("A", 'A'), ("1a", '1'), (".a", '.'), ("_a", '_'), ("-a", '-'), (" a", ' '), ("éa", 'é')]
        {
            assert_eq!(QualifiedName::parse(bad), Err(TextError::InvalidStart { kind, found }), "{bad:?}");
        }
        for (bad, found, offset) in [
            ("aB", 'B', 1),
            ("a b", ' ', 1),
            ("a/b", '/', 1),
            ("ab:", ':', 2),
            ("aé", 'é', 1),
            ("a\n", '\n', 1),
        ] {
            assert_eq!(
                QualifiedName::parse(bad),
                Err(TextError::InvalidChar { kind, found, offset }),
                "{bad:?}"
            );
        }
        let max = "a".repeat(MAX_QUALIFIED_NAME_BYTES);
        assert!(QualifiedName::parse(&max).is_ok());
        let over = "a".repeat(MAX_QUALIFIED_NAME_BYTES + 1);
        assert_eq!(
            QualifiedName::parse(&over),
            Err(TextError::TooLong {
                kind,
                len: MAX_QUALIFIED_NAME_BYTES + 1,
                limit: MAX_QUALIFIED_NAME_BYTES
            })
        );
    }

    #[test]
    fn qualified_name_order_json_and_lookup() {
        let names: BTreeSet<QualifiedName> =
            ["b", "a.b", "a", "a-b", "a_b"].into_iter().map(QualifiedName::from_static).collect();
        let sorted: Vec<&str> = names.iter().map(QualifiedName::as_str).collect();
        assert_eq!(sorted, ["a", "a-b", "a.b", "a_b", "b"]);
        assert!(names.contains("a.b"));
        let name = QualifiedName::from_static("engine.child.identity_conflict");
        assert_eq!(name.to_json(), Json::str("engine.child.identity_conflict"));
        assert_eq!(QualifiedName::from_json(&name.to_json()), Ok(name.clone()));
        assert_eq!(name.to_string(), "engine.child.identity_conflict");
        assert_eq!("x.y".parse::<QualifiedName>().unwrap().as_str(), "x.y");
        assert!(QualifiedName::from_json(&Json::str("Bad")).is_err());
        assert!(QualifiedName::from_json(&Json::Bool(true)).is_err());
    }

    #[test]
    #[should_panic(expected = "invalid qualified name literal")]
    fn from_static_rejects_invalid_literals() {
        QualifiedName::from_static("Not.Valid");
    }

    #[test]
    fn identity_text() {
        for ok in ["process:0af3", "A-Z_a.z:09", "x", ":", "signal:engine:abc"] {
            assert_eq!(validate_identity(ok), Ok(()), "{ok}");
        }
        let kind = TextKind::Identity;
        assert_eq!(validate_identity(""), Err(TextError::Empty { kind }));
        for (bad, found, offset) in [
            (" a", ' ', 0),
            ("a/b", '/', 1),
            ("a b", ' ', 1),
            ("aé", 'é', 1),
            ("a\u{0}", '\u{0}', 1),
            ("a+", '+', 1),
        ] {
            assert_eq!(
                validate_identity(bad),
                Err(TextError::InvalidChar { kind, found, offset }),
                "{bad:?}"
            );
        }
        assert_eq!(validate_identity(&"a".repeat(MAX_IDENTITY_BYTES)), Ok(()));
        assert_eq!(
            validate_identity(&"a".repeat(MAX_IDENTITY_BYTES + 1)),
            Err(TextError::TooLong { kind, len: MAX_IDENTITY_BYTES + 1, limit: MAX_IDENTITY_BYTES })
        );
    }

    #[test]
    fn errors_do_not_echo_the_text() {
        let long = format!("{} ", "secret".repeat(1000));
        let message = BoundedText::parse(&long).unwrap_err().to_string();
        assert!(!message.contains("secret"), "{message}");
    }
}
