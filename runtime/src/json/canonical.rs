//! Checking that text is already canonical, without building a value.
//!
//! [`scan`] walks one value of canonical text (the encoding of `encode.rs`: no whitespace,
//! members in strictly ascending key order, only the canonical escapes, numbers as RFC 8259
//! text) under the parser's depth limit and returns where it ends. It is the fast path of
//! decoders that take a stored payload's bytes as they are (see `kernel::record_decoder`): a
//! span it accepts is exactly what [`super::parse`] would accept there and re-encode byte for
//! byte, so it can be the payload's canonical text without a tree being built, cloned or
//! encoded. It says only yes or no (`None`); a caller that needs the reason, or that must
//! accept non-canonical input, uses the parser.

use crate::limits::MAX_JSON_DEPTH;
use std::borrow::Cow;

/// The end of the canonical value starting at `pos`, or `None` when the text there is not
/// one canonical value. `depth` is the number of containers enclosing it: containers may nest
/// to [`MAX_JSON_DEPTH`] counted from the text's root, as in [`super::parse`].
pub(crate) fn scan(text: &str, pos: usize, depth: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    match *bytes.get(pos)? {
        b'{' => members(text, pos, depth, &mut |_, start, inner| scan(text, start, inner)),
        b'[' => {
            let inner = enter(depth)?;
            let mut at = pos + 1;
            if bytes.get(at) == Some(&b']') {
                return Some(at + 1);
            }
            loop {
                at = scan(text, at, inner)?;
                match bytes.get(at)? {
                    b',' => at += 1,
                    b']' => return Some(at + 1),
                    _ => return None,
                }
            }
        }
        b'"' => string(text, pos).map(|(end, _)| end),
        b'-' | b'0'..=b'9' => {
            let len = bytes[pos..].iter().position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'));
            let end = pos + len.unwrap_or(bytes.len() - pos);
            super::parse::is_number_text(text.get(pos..end)?).then_some(end)
        }
        b't' => literal(bytes, pos, b"true"),
        b'f' => literal(bytes, pos, b"false"),
        b'n' => literal(bytes, pos, b"null"),
        _ => None,
    }
}

/// Walks the canonical object starting at `pos` (`depth` containers enclose it): for each
/// member in order, `member(key, value_start, value_depth)` consumes the value (typically
/// with [`scan`], `value_depth` being the containers enclosing it) and returns its end, or
/// `None` to stop. `None` when the text is not a canonical object; else the object's end.
pub(crate) fn members(
    text: &str,
    pos: usize,
    depth: usize,
    member: &mut dyn FnMut(&str, usize, usize) -> Option<usize>,
) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    let inner = enter(depth)?;
    let mut at = pos + 1;
    if bytes.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    let mut previous: Option<Cow<'_, str>> = None;
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let (key_end, key) = string(text, at)?;
        // Strictly ascending keys: canonical order, and no duplicates.
        if previous.as_deref().is_some_and(|p| p >= &*key) {
            return None;
        }
        if bytes.get(key_end) != Some(&b':') {
            return None;
        }
        at = member(&key, key_end + 1, inner)?;
        previous = Some(key);
        match bytes.get(at)? {
            b',' => at += 1,
            b'}' => return Some(at + 1),
            _ => return None,
        }
    }
}

fn enter(depth: usize) -> Option<usize> {
    let inner = depth.checked_add(1)?;
    (inner <= MAX_JSON_DEPTH).then_some(inner)
}

fn literal(bytes: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    bytes[pos..].starts_with(word).then_some(pos + word.len())
}

/// The canonical string starting at the quote at `pos`: its end and its text (borrowed when
/// it has no escape). Its runs are sliced from `text` (they start and end at ASCII bytes, so
/// at char boundaries); only the escapes the encoder writes are canonical.
fn string(text: &str, pos: usize) -> Option<(usize, Cow<'_, str>)> {
    let bytes = text.as_bytes();
    let start = pos + 1;
    let mut at = start;
    let mut owned: Option<String> = None;
    let mut run = start;
    loop {
        let rest = bytes.get(at..)?;
        at += rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        match bytes[at] {
            b'"' => {
                let tail = text.get(run..at)?;
                let text = match owned {
                    None => Cow::Borrowed(tail),
                    Some(mut s) => {
                        s.push_str(tail);
                        Cow::Owned(s)
                    }
                };
                return Some((at + 1, text));
            }
            b'\\' => {
                let (c, len) = canonical_escape(bytes.get(at + 1..)?)?;
                let s = owned.get_or_insert_with(String::new);
                s.push_str(text.get(run..at)?);
                s.push(c);
                at += 1 + len;
                run = at;
            }
            _ => return None, // a raw control character
        }
    }
}

/// The character of the escape after a backslash and the escape's length, when it is the
/// escape the encoder writes for that character.
fn canonical_escape(rest: &[u8]) -> Option<(char, usize)> {
    let c = match *rest.first()? {
        b'"' => '"',
        b'\\' => '\\',
        b'b' => '\u{8}',
        b't' => '\t',
        b'n' => '\n',
        b'f' => '\u{c}',
        b'r' => '\r',
        b'u' => {
            let hex = rest.get(1..5)?;
            if &hex[..2] != b"00" {
                return None;
            }
            let digit = |b: u8| match b {
                b'0'..=b'9' => Some(b - b'0'),
                b'a'..=b'f' => Some(b - b'a' + 10),
                _ => None,
            };
            let code = digit(hex[2])? * 16 + digit(hex[3])?;
            // Only control characters without a short form are written as `\u00XX`.
            if code >= 0x20 || matches!(code, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D) {
                return None;
            }
            return Some((char::from(code), 5));
        }
        _ => return None,
    };
    Some((c, 1))
}

/// The container nesting depth of canonical JSON text, as [`super::Json::depth`] counts it: the
/// brackets outside strings (inside one, a backslash always escapes the next byte). A byte
/// loop, several times cheaper than scanning the text as canonical.
pub(crate) fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(text: &str) -> bool {
        scan(text, 0, 0) == Some(text.len())
    }

    /// Every text the scanner accepts whole is what parsing and re-encoding give back.
    fn agrees(text: &str) {
        let parsed = crate::json::parse(text.as_bytes()).map(|v| v.to_canonical_string());
        let canonical = parsed.as_deref() == Ok(text);
        assert_eq!(whole(text), canonical, "{text:?}: parse gives {parsed:?}");
    }

    #[test]
    fn accepts_exactly_the_canonical_texts() {
        for text in [
            "null", "true", "false", "0", "-1.5e+3", "1e400", "\"\"", "\"a b/<\u{7f}é\"",
            "\"\\\"\\\\\\b\\t\\n\\f\\r\\u0000\\u001f\"", "[]", "{}", "[1,[2,{}],\"x\"]",
            "{\"a\":1,\"b\":{\"a\":[]},\"c\\n\":null}", "{\"\\u0001\":1,\"a\":2}",
            // Not canonical: whitespace, order, duplicates, escapes the encoder never writes.
            " null", "[1, 2]", "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":1}", "\"\\/\"", "\"\\u0041\"",
            "\"\\u000a\"", "\"\\u001F\"", "\"\\u0020\"", "\"\u{1}\"",
            // Not JSON at all.
            "", "[", "{\"a\"}", "{\"a\":}", "[1,]", "01", "1.", "-", "tru", "nulll", "{,}", "\"abc",
            "\"\\u00\"", "{1:2}",
        ] {
            agrees(text);
        }
    }

    #[test]
    fn ends_where_the_value_ends_and_nests_to_the_parser_limit() {
        assert_eq!(scan("[1]xyz", 0, 0), Some(3));
        assert_eq!(scan("{\"a\":\"b\"},", 0, 0), Some(9));
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(whole(&deep(MAX_JSON_DEPTH)));
        assert!(!whole(&deep(MAX_JSON_DEPTH + 1)));
        // Enclosing containers count toward the limit.
        assert_eq!(scan(&deep(MAX_JSON_DEPTH), 0, 1), None);
        agrees(&deep(MAX_JSON_DEPTH + 1));
    }

    #[test]
    fn members_are_reported_in_order() {
        let text = r#"{"a":[1,2],"b":"x"}"#;
        let mut seen = Vec::new();
        let end = members(text, 0, 0, &mut |k, s, d| {
            let e = scan(text, s, d)?;
            seen.push((k.to_owned(), text[s..e].to_owned(), d));
            Some(e)
        });
        assert_eq!(end, Some(text.len()));
        assert_eq!(seen, [("a".to_owned(), "[1,2]".to_owned(), 1), ("b".to_owned(), "\"x\"".to_owned(), 1)]);
        assert_eq!(members(text, 0, 0, &mut |_, _, _| None), None);
        assert_eq!(members("[]", 0, 0, &mut |_, s, d| scan("[]", s, d)), None);
        // A member that ends elsewhere than where the next separator stands is refused.
        assert_eq!(members(text, 0, 0, &mut |_, s, _| Some(s)), None);
    }
}
