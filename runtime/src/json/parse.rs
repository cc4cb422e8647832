//! The strict JSON parser (RFC 8259 + strictness rules of this crate).
//!
//! Rules beyond the RFC grammar, all typed errors:
//! * the raw size is checked before anything else ([`JsonError::TooLarge`] with stage `Raw`);
//! * the whole input must be valid UTF-8 ([`JsonError::InvalidUtf8`]), and a byte order mark
//!   is rejected: canonical bytes never carry one, so accepting it would make two raw forms
//!   of every value;
//! * exactly one value, surrounded only by RFC whitespace (space, tab, LF, CR);
//! * raw control characters (below U+0020) inside strings are rejected;
//! * `\uXXXX` surrogate pairs are combined; lone or mis-ordered surrogates are rejected
//!   ([`JsonError::InvalidEscape`]) because they cannot be represented as a Rust `String`;
//! * duplicate object member names (compared after unescaping) are rejected;
//! * numbers must match `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` and keep their text.
//!
//! The parser recurses once per array/object level, bounded by the depth limit, which is
//! clamped to [`crate::limits::MAX_JSON_DEPTH`]: every consumer of [`Json`] (encoder, `Drop`,
//! `Eq`) recurses as well, so deeper values must never come into existence.
use super::error::SizeStage;
use super::value::{truncate_for_error, Number, Object};
use super::{Json, JsonError};
use crate::limits::MAX_JSON_DEPTH;

/// Limits applied while parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLimits {
    /// Maximum raw input bytes.
    pub max_bytes: usize,
    /// Maximum nesting depth (arrays + objects; a scalar has depth 0, `[]` depth 1).
    /// Values above [`crate::limits::MAX_JSON_DEPTH`] are clamped to it.
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
pub fn parse_with(bytes: &[u8], limits: &ParseLimits) -> Result<Json, JsonError> {
    if bytes.len() > limits.max_bytes {
        return Err(JsonError::TooLarge {
            stage: SizeStage::Raw,
            actual: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    // Validating up front makes "invalid UTF-8 anywhere" one rule and lets the string scanner
    // copy whole runs as `&str`.
    let text = std::str::from_utf8(bytes).map_err(|e| JsonError::InvalidUtf8 { offset: e.valid_up_to() })?;
    if text.starts_with('\u{FEFF}') {
        return Err(JsonError::Syntax { offset: 0, reason: "a byte order mark is not allowed" });
    }
    let mut parser =
        Parser { text, bytes: text.as_bytes(), pos: 0, max_depth: limits.max_depth.min(MAX_JSON_DEPTH) };
    parser.skip_whitespace();
    let value = parser.value(0)?;
    parser.skip_whitespace();
    if parser.pos < parser.bytes.len() {
        return Err(JsonError::TrailingData { offset: parser.pos });
    }
    Ok(value)
}

/// The one JSON value that starts at byte `start` of `text` (no whitespace before it), and
/// the offset just after it: the value [`parse_with`] gives for `text[start..end]` alone
/// under `max_depth` (same grammar, same rules). For a reader splitting a text it already
/// holds as `&str`: the piece is neither copied nor checked as UTF-8 again, and its end is
/// where parsing stopped, so it needs no scan of its own.
pub(crate) fn parse_at(text: &str, start: usize, max_depth: usize) -> Result<(Json, usize), JsonError> {
    if !text.is_char_boundary(start) {
        return Err(JsonError::InvalidUtf8 { offset: start });
    }
    let mut parser = Parser { text, bytes: text.as_bytes(), pos: start, max_depth: max_depth.min(MAX_JSON_DEPTH) };
    let value = parser.value(0)?;
    Ok((value, parser.pos))
}

/// Whether `text` is exactly one RFC 8259 number:
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
pub(crate) fn is_number_text(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    let at = |i: usize| b.get(i).copied();
    let digits_from = |mut i: usize| {
        let start = i;
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        (i, i > start)
    };
    if at(i) == Some(b'-') {
        i += 1;
    }
    match at(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits_from(i).0,
        _ => return false,
    }
    if at(i) == Some(b'.') {
        let (next, any) = digits_from(i + 1);
        if !any {
            return false;
        }
        i = next;
    }
    if matches!(at(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(at(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let (next, any) = digits_from(i);
        if !any {
            return false;
        }
        i = next;
    }
    i == b.len()
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn syntax(&self, reason: &'static str) -> JsonError {
        JsonError::Syntax { offset: self.pos, reason }
    }

    /// `depth` is the number of containers enclosing the value about to be parsed.
    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        match self.peek() {
            None => Err(JsonError::UnexpectedEnd),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Json::Number),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(_) => Err(self.syntax("expected a JSON value")),
        }
    }

    /// Depth of a container opened at `depth`, or `TooDeep`.
    fn enter(&self, depth: usize) -> Result<usize, JsonError> {
        let inner = depth.saturating_add(1);
        if inner > self.max_depth {
            Err(JsonError::TooDeep { limit: self.max_depth })
        } else {
            Ok(inner)
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, JsonError> {
        let inner = self.enter(depth)?;
        self.pos += 1; // `[`
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(inner)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                Some(_) => return Err(self.syntax("expected `,` or `]`")),
                None => return Err(JsonError::UnexpectedEnd),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, JsonError> {
        let inner = self.enter(depth)?;
        self.pos += 1; // `{`
        // Members arrive in strictly ascending key order in canonical text (every stored
        // record): those are collected in order and the map is built in one pass at the end,
        // which needs no per-member search. The first key not above its predecessor moves
        // the members into a map and the rest are inserted one by one, so a duplicate is
        // refused exactly where it stands.
        let mut ordered: Vec<(String, Json)> = Vec::new();
        let mut object: Option<Object> = None;
        let finish = |ordered: Vec<(String, Json)>, object: Option<Object>| match object {
            Some(object) => Json::Object(object),
            None => Json::Object(ordered.into_iter().collect()),
        };
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(Object::new()));
        }
        loop {
            self.skip_whitespace();
            let key_offset = self.pos;
            match self.peek() {
                Some(b'"') => {}
                Some(_) => return Err(self.syntax("expected a string member name")),
                None => return Err(JsonError::UnexpectedEnd),
            }
            let key = self.string()?;
            if object.is_none() && ordered.last().is_some_and(|(last, _)| *last >= key) {
                object = Some(std::mem::take(&mut ordered).into_iter().collect());
            }
            if let Some(object) = &object {
                if object.contains_key(&key) {
                    return Err(JsonError::DuplicateKey { offset: key_offset, key: truncate_for_error(&key) });
                }
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b':') => self.pos += 1,
                Some(_) => return Err(self.syntax("expected `:`")),
                None => return Err(JsonError::UnexpectedEnd),
            }
            self.skip_whitespace();
            let value = self.value(inner)?;
            match &mut object {
                Some(object) => {
                    object.insert(key, value);
                }
                None => ordered.push((key, value)),
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(finish(ordered, object));
                }
                Some(_) => return Err(self.syntax("expected `,` or `}`")),
                None => return Err(JsonError::UnexpectedEnd),
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            let rest = self.bytes.get(start..).unwrap_or_default();
            self.pos += rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(rest.len());
            // `start` and `pos` sit on ASCII bytes or the end, so both are char boundaries.
            let run = self.text.get(start..self.pos).ok_or(JsonError::InvalidUtf8 { offset: start })?;
            out.push_str(run);
            match self.peek() {
                None => return Err(JsonError::UnexpectedEnd),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => return Err(self.syntax("unescaped control character in string")),
            }
        }
    }

    /// One escape sequence starting at the backslash.
    fn escape(&mut self) -> Result<char, JsonError> {
        let offset = self.pos;
        self.pos += 1; // `\`
        let Some(kind) = self.peek() else {
            return Err(JsonError::UnexpectedEnd);
        };
        self.pos += 1;
        let c = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(offset),
            _ => return Err(JsonError::Syntax { offset, reason: "invalid escape sequence" }),
        };
        Ok(c)
    }

    /// The rest of a `\uXXXX` escape (the `\u` at `offset` is consumed), combining pairs.
    fn unicode_escape(&mut self, offset: usize) -> Result<char, JsonError> {
        let first = self.hex4(offset)?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return Err(JsonError::InvalidEscape {
                        offset,
                        reason: "high surrogate without a low surrogate",
                    });
                }
                self.pos += 2;
                let second = self.hex4(offset)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(JsonError::InvalidEscape {
                        offset,
                        reason: "high surrogate without a low surrogate",
                    });
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(JsonError::InvalidEscape {
                    offset,
                    reason: "low surrogate without a high surrogate",
                })
            }
            other => other,
        };
        char::from_u32(code).ok_or(JsonError::InvalidEscape { offset, reason: "not a Unicode scalar value" })
    }

    fn hex4(&mut self, offset: usize) -> Result<u32, JsonError> {
        let mut code = 0u32;
        for _ in 0..4 {
            let digit = match self.peek() {
                None => return Err(JsonError::UnexpectedEnd),
                Some(b) => (b as char)
                    .to_digit(16)
                    .ok_or(JsonError::InvalidEscape { offset, reason: "expected four hex digits" })?,
            };
            code = code * 16 + digit;
            self.pos += 1;
        }
        Ok(code)
    }

    fn number(&mut self) -> Result<Number, JsonError> {
        // Take the maximal run of number characters, then validate it whole, so `01`, `1.`
        // and `1e+` are reported as invalid numbers rather than as confusing syntax errors.
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')) {
            self.pos += 1;
        }
        let token = self.text.get(start..self.pos).ok_or(JsonError::InvalidUtf8 { offset: start })?;
        if is_number_text(token) {
            Ok(Number(token.to_owned()))
        } else {
            Err(JsonError::InvalidNumber { text: truncate_for_error(token) })
        }
    }

    fn literal(&mut self, word: &'static str, value: Json) -> Result<Json, JsonError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if rest.starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else if word.as_bytes().starts_with(rest) {
            Err(JsonError::UnexpectedEnd)
        } else {
            Err(self.syntax("invalid literal"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(input: &[u8]) -> JsonError {
        parse(input).expect_err("input must be rejected")
    }

    fn num(text: &str) -> Json {
        Json::Number(Number(text.to_owned()))
    }

    #[test]
    fn accepts_every_value_kind() {
        assert_eq!(parse(b"null").unwrap(), Json::Null);
        assert_eq!(parse(b"true").unwrap(), Json::Bool(true));
        assert_eq!(parse(b"false").unwrap(), Json::Bool(false));
        assert_eq!(parse(b"0").unwrap(), num("0"));
        assert_eq!(parse(br#""hi""#).unwrap(), Json::str("hi"));
        assert_eq!(parse(b"[]").unwrap(), Json::Array(vec![]));
        assert_eq!(parse(b"{}").unwrap(), Json::object());
        let v = parse(b" \t\r\n{ \"a\" : [ 1 , true , null ] , \"b\" : { } }\n ").unwrap();
        let mut o = Object::new();
        o.insert("a".into(), Json::Array(vec![num("1"), Json::Bool(true), Json::Null]));
        o.insert("b".into(), Json::object());
        assert_eq!(v, Json::Object(o));
    }

    #[test]
    fn empty_and_whitespace_only_are_unexpected_end() {
        assert_eq!(err(b""), JsonError::UnexpectedEnd);
        assert_eq!(err(b" \n\t\r"), JsonError::UnexpectedEnd);
    }

    #[test]
    fn truncated_inputs_are_unexpected_end() {
        for input in [
            &b"["[..],
            b"[1",
            b"[1,",
            b"{",
            b"{\"a\"",
            b"{\"a\":",
            b"{\"a\":1",
            b"\"abc",
            b"\"\\",
            b"\"\\u12",
            b"tru",
            b"nul",
            b"f",
        ] {
            assert_eq!(err(input), JsonError::UnexpectedEnd, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn trailing_data_is_rejected() {
        assert_eq!(err(b"1 2"), JsonError::TrailingData { offset: 2 });
        assert_eq!(err(b"{}{}"), JsonError::TrailingData { offset: 2 });
        assert_eq!(err(b"null x"), JsonError::TrailingData { offset: 5 });
        assert_eq!(err(b"[] \x00"), JsonError::TrailingData { offset: 3 });
        assert_eq!(err(b"truex"), JsonError::TrailingData { offset: 4 });
    }

    #[test]
    fn only_rfc_whitespace_is_skipped() {
        // Form feed, vertical tab, NBSP are not JSON whitespace.
        assert!(matches!(err(b"\x0c1"), JsonError::Syntax { offset: 0, .. }));
        assert!(matches!(err(b"\x0b1"), JsonError::Syntax { offset: 0, .. }));
        assert!(matches!(err("\u{a0}1".as_bytes()), JsonError::Syntax { offset: 0, .. }));
        assert_eq!(err(b"1\x0c"), JsonError::TrailingData { offset: 1 });
    }

    #[test]
    fn byte_order_mark_is_rejected() {
        assert_eq!(
            err(b"\xEF\xBB\xBF{}"),
            JsonError::Syntax { offset: 0, reason: "a byte order mark is not allowed" }
        );
        assert_eq!(
            err(b"\xEF\xBB\xBF"),
            JsonError::Syntax { offset: 0, reason: "a byte order mark is not allowed" }
        );
        assert!(matches!(err(b" \xEF\xBB\xBF{}"), JsonError::Syntax { offset: 1, .. }));
    }

    #[test]
    fn invalid_utf8_anywhere_is_rejected() {
        assert_eq!(err(b"\"a\xFFb\""), JsonError::InvalidUtf8 { offset: 2 });
        assert_eq!(err(b"[1] \xC3"), JsonError::InvalidUtf8 { offset: 4 });
        assert_eq!(err(b"\xFF"), JsonError::InvalidUtf8 { offset: 0 });
        // Overlong encoding of `/` and an encoded surrogate are invalid UTF-8.
        assert_eq!(err(b"\"\xC0\xAF\""), JsonError::InvalidUtf8 { offset: 1 });
        assert_eq!(err(b"\"\xED\xA0\x80\""), JsonError::InvalidUtf8 { offset: 1 });
        assert_eq!(err(b"{\"k\xFE\":1}"), JsonError::InvalidUtf8 { offset: 3 });
    }

    #[test]
    fn raw_control_characters_in_strings_are_rejected() {
        for c in 0u8..0x20 {
            let input = [b'"', b'a', c, b'"'];
            assert!(matches!(err(&input), JsonError::Syntax { offset: 2, .. }), "control {c:#x}");
        }
        // DEL and non-ASCII are fine raw.
        assert_eq!(parse(b"\"\x7f\"").unwrap(), Json::str("\u{7f}"));
        assert_eq!(parse("\"é😀\u{2028}\"".as_bytes()).unwrap(), Json::str("é😀\u{2028}"));
    }

    #[test]
    fn escapes_are_decoded() {
        let v = parse(br#""\"\\\/\b\f\n\r\t\u0041\u00e9\u00E9\u0000\ud83d\ude00""#).unwrap();
        assert_eq!(v, Json::str("\"\\/\u{8}\u{c}\n\r\tAéé\u{0}😀"));
    }

    #[test]
    fn invalid_escapes_are_rejected() {
        assert!(matches!(err(br#""\x""#), JsonError::Syntax { offset: 1, .. }));
        assert!(matches!(err(br#""\U0041""#), JsonError::Syntax { offset: 1, .. }));
        assert!(matches!(err(br#""\'""#), JsonError::Syntax { offset: 1, .. }));
        assert!(matches!(err(br#""\u00g1""#), JsonError::InvalidEscape { offset: 1, .. }));
        assert!(matches!(err(br#""\u12""#), JsonError::InvalidEscape { offset: 1, .. }));
    }

    #[test]
    fn lone_and_misordered_surrogates_are_rejected() {
        for input in [
            &br#""\ud800""#[..],
            br#""\ud800x""#,
            br#""\ud800\n""#,
            br#""\ud800\u0041""#,
            br#""\ud800\ud800""#,
            br#""\udc00""#,
            br#""\udfff\ud800""#,
            br#""a\udbff""#,
        ] {
            assert!(
                matches!(err(input), JsonError::InvalidEscape { .. }),
                "{}: {:?}",
                String::from_utf8_lossy(input),
                err(input)
            );
        }
        assert_eq!(parse(br#""\udbff\udfff""#).unwrap(), Json::str("\u{10ffff}"));
        assert_eq!(parse(br#""\uD800\uDC00""#).unwrap(), Json::str("\u{10000}"));
    }

    #[test]
    fn duplicate_keys_are_rejected_after_unescaping() {
        assert_eq!(err(br#"{"a":1,"a":2}"#), JsonError::DuplicateKey { offset: 7, key: "a".into() });
        assert_eq!(err(br#"{"a":1,"\u0061":2}"#), JsonError::DuplicateKey { offset: 7, key: "a".into() });
        assert_eq!(err(br#"{"/":1,"\/":2}"#), JsonError::DuplicateKey { offset: 7, key: "/".into() });
        assert!(matches!(err(br#"{"x":{"a":1,"b":2,"a":3}}"#), JsonError::DuplicateKey { .. }));
        // Same key in different objects is fine.
        assert!(parse(br#"{"a":{"a":1},"b":{"a":2}}"#).is_ok());
    }

    #[test]
    fn members_in_any_order_make_the_same_object() {
        let sorted = parse(br#"{"a":1,"b":[2],"c":{"x":null,"y":"z"}}"#).unwrap();
        for input in [
            &br#"{"c":{"y":"z","x":null},"b":[2],"a":1}"#[..],
            br#"{"b":[2],"a":1,"c":{"x":null,"y":"z"}}"#,
            br#"{"a":1,"c":{"x":null,"y":"z"},"b":[2]}"#,
        ] {
            assert_eq!(parse(input).unwrap(), sorted, "{}", String::from_utf8_lossy(input));
        }
        // A duplicate is refused at its own offset whether it comes before or after the
        // members leave ascending order.
        assert_eq!(err(br#"{"a":1,"b":2,"b":3}"#), JsonError::DuplicateKey { offset: 13, key: "b".into() });
        assert_eq!(err(br#"{"b":1,"a":2,"b":3}"#), JsonError::DuplicateKey { offset: 13, key: "b".into() });
        assert_eq!(err(br#"{"b":1,"c":2,"a":3,"c":4}"#), JsonError::DuplicateKey { offset: 19, key: "c".into() });
        // A syntax error after an out-of-order member is still that syntax error.
        assert!(matches!(err(br#"{"b":1,"a":2,}"#), JsonError::Syntax { .. }));
    }

    #[test]
    fn duplicate_key_error_text_is_bounded() {
        let key = "k".repeat(10_000);
        let input = format!(r#"{{"{key}":1,"{key}":2}}"#);
        match err(input.as_bytes()) {
            JsonError::DuplicateKey { key, .. } => assert!(key.len() < 100),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn numbers_keep_their_exact_text() {
        for text in [
            "9007199254740993",
            "1e400",
            "-1e-400",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "0.1000000000000000055511151231257827021181583404541015625",
            "1.0",
            "1E+2",
            "-0",
            "-0.0e-0",
            "123456789012345678901234567890.123456789012345678901234567890e123",
        ] {
            assert_eq!(parse(text.as_bytes()).unwrap(), num(text), "{text}");
            let wrapped = format!("[{text}]");
            assert_eq!(parse(wrapped.as_bytes()).unwrap(), Json::Array(vec![num(text)]));
        }
    }

    #[test]
    fn invalid_numbers_are_rejected() {
        for text in [
            "01", "-01", "00", "1.", ".5", "-", "1e", "1e+", "1E-", "1.e5", "--1", "1.2.3", "1e5e5", "0x10",
            "-.5", "1-2", "1+2",
        ] {
            let e = err(text.as_bytes());
            assert!(
                matches!(
                    e,
                    JsonError::InvalidNumber { .. }
                        | JsonError::Syntax { .. }
                        | JsonError::TrailingData { .. }
                ),
                "{text}: {e:?}"
            );
            assert!(!is_number_text(text), "{text}");
        }
        assert_eq!(err(b"01"), JsonError::InvalidNumber { text: "01".into() });
        assert_eq!(err(b"[1.]"), JsonError::InvalidNumber { text: "1.".into() });
        // No leading plus, NaN or Infinity.
        assert!(matches!(err(b"+1"), JsonError::Syntax { offset: 0, .. }));
        assert!(matches!(err(b"NaN"), JsonError::Syntax { offset: 0, .. }));
        assert!(matches!(err(b"Infinity"), JsonError::Syntax { offset: 0, .. }));
        assert!(matches!(err(b"-Infinity"), JsonError::InvalidNumber { .. }));
        assert!(matches!(err(b"[.5]"), JsonError::Syntax { offset: 1, .. }));
    }

    #[test]
    fn is_number_text_implements_the_grammar() {
        for ok in ["0", "-0", "1", "10", "1.5", "0.0", "1e5", "1E5", "1e+5", "1e-5", "-12.34e-56"] {
            assert!(is_number_text(ok), "{ok}");
        }
        for bad in ["", " 1", "1 ", "+1", "01", "1.", ".1", "e5", "1e", "-", "NaN", "Infinity", "1_000", "١"]
        {
            assert!(!is_number_text(bad), "{bad:?}");
        }
    }

    #[test]
    fn structural_errors_are_rejected() {
        for input in [
            &b"[1,]"[..],
            b"[,1]",
            b"[1 2]",
            b"{\"a\":1,}",
            b"{,}",
            b"{\"a\" 1}",
            b"{a:1}",
            b"{1:1}",
            b"{'a':1}",
            b"'a'",
            b"]",
            b"}",
            b"[}",
            b"{]",
            b"nulll",
            b"True",
            b"[1:2]",
        ] {
            let e = err(input);
            assert!(
                matches!(e, JsonError::Syntax { .. } | JsonError::TrailingData { .. }),
                "{}: {e:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn raw_size_is_checked_first() {
        let limits = ParseLimits { max_bytes: 4, max_depth: 8 };
        assert_eq!(parse_with(b"[1] ", &limits).unwrap(), Json::Array(vec![num("1")]));
        // Too large wins over invalid UTF-8 and syntax errors.
        assert_eq!(
            parse_with(b"\xFF\xFF\xFF\xFF\xFF", &limits),
            Err(JsonError::TooLarge { stage: SizeStage::Raw, actual: 5, limit: 4 })
        );
        assert_eq!(
            parse_with(b"[1]  ", &limits),
            Err(JsonError::TooLarge { stage: SizeStage::Raw, actual: 5, limit: 4 })
        );
    }

    fn nested(open: &str, close: &str, depth: usize) -> String {
        format!("{}{}", open.repeat(depth), close.repeat(depth))
    }

    #[test]
    fn depth_limit_is_exact() {
        assert!(parse(nested("[", "]", MAX_JSON_DEPTH).as_bytes()).is_ok());
        assert_eq!(
            err(nested("[", "]", MAX_JSON_DEPTH + 1).as_bytes()),
            JsonError::TooDeep { limit: MAX_JSON_DEPTH }
        );
        assert!(parse(
            format!("{}1{}", "{\"a\":".repeat(MAX_JSON_DEPTH), "}".repeat(MAX_JSON_DEPTH)).as_bytes()
        )
        .is_ok());
        let too_deep = format!("{}1{}", "{\"a\":".repeat(MAX_JSON_DEPTH + 1), "}".repeat(MAX_JSON_DEPTH + 1));
        assert_eq!(err(too_deep.as_bytes()), JsonError::TooDeep { limit: MAX_JSON_DEPTH });
        let limits = ParseLimits { max_bytes: 1000, max_depth: 2 };
        assert!(parse_with(b"[{}]", &limits).is_ok());
        assert_eq!(parse_with(b"[[[]]]", &limits), Err(JsonError::TooDeep { limit: 2 }));
        let scalars_only = ParseLimits { max_bytes: 1000, max_depth: 0 };
        assert!(parse_with(b"1", &scalars_only).is_ok());
        assert_eq!(parse_with(b"[]", &scalars_only), Err(JsonError::TooDeep { limit: 0 }));
    }

    #[test]
    fn megabyte_of_open_brackets_is_an_error_not_a_stack_overflow() {
        let input = vec![b'['; 1 << 20];
        assert_eq!(err(&input), JsonError::TooDeep { limit: MAX_JSON_DEPTH });
        // A caller asking for more depth is clamped to the global limit.
        let limits = ParseLimits { max_bytes: usize::MAX, max_depth: usize::MAX };
        assert_eq!(parse_with(&input, &limits), Err(JsonError::TooDeep { limit: MAX_JSON_DEPTH }));
        let objects = "{\"a\":".repeat(200_000);
        assert_eq!(
            parse_with(objects.as_bytes(), &limits),
            Err(JsonError::TooDeep { limit: MAX_JSON_DEPTH })
        );
    }

    /// A value parsed in place inside a larger text is the value of its piece parsed alone,
    /// and ends where the piece ends; what the parser refuses alone it refuses in place.
    #[test]
    fn parse_at_is_parse_of_the_piece() {
        let pieces = [
            "0", "-12", "1.0", "1e5", "01", "1.", "true", "tru", "null", "\"a\"", "\"\\u0061\\n\"", "\"\\ud800\"",
            "[]", "[1,[2,{}]]", "[1 , 2]", "{}", "{\"a\":1,\"b\":[true]}", "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":2}",
            "{ \"a\" : 1 }", "[1,]", "{\"a\"}", "\"é\"",
        ];
        for piece in pieces {
            for (before, after) in [("[", ",0]"), ("{\"k\":", "}"), ("", "")] {
                let text = format!("{before}{piece}{after}");
                let alone = parse(piece.as_bytes());
                let in_place = parse_at(&text, before.len(), MAX_JSON_DEPTH - usize::from(!before.is_empty()));
                match alone {
                    Ok(v) => assert_eq!(in_place, Ok((v, before.len() + piece.len())), "{text}"),
                    Err(_) => assert!(in_place.map_or(true, |(_, end)| end != before.len() + piece.len()), "{text}"),
                }
            }
        }
        let deep = format!("{}{}", "[".repeat(10), "]".repeat(10));
        assert!(parse_at(&deep, 0, 9).is_err());
        assert_eq!(parse_at(&deep, 0, 10).map(|(_, end)| end), Ok(20));
    }
}
