//! The canonical encoding: the one byte form of a [`Json`] value that digests, dedup and
//! conflict checks compare.
//!
//! Rules:
//! * no insignificant whitespace;
//! * object members sorted by key in byte order of their UTF-8 encoding (= Unicode code point
//!   order; `BTreeMap<String, _>` already iterates in it). This differs from RFC 8785 (JCS),
//!   which sorts by UTF-16 code units; the two orders only disagree between supplementary
//!   characters and U+E000–U+FFFF;
//! * strings escape only `"` → `\"`, `\` → `\\` and the control characters U+0000–U+001F:
//!   `\b` `\t` `\n` `\f` `\r` in their short forms, all others as `\u00XX` with lowercase hex;
//!   everything else (including `/`, `<`, DEL, U+2028/U+2029 and all non-ASCII) is emitted as
//!   raw UTF-8;
//! * numbers as their exact text (no normalization: `1.0`, `1e400` are emitted as stored —
//!   again unlike JCS, which would need lossy float formatting);
//! * `true`, `false`, `null`.
//!
//! Since the parser rejects duplicate keys and every escape in the input is at least as long
//! as its canonical form, the canonical encoding of parsed input is never longer than the input.
use super::Json;


impl Json {
    /// The canonical bytes of this value.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        self.to_canonical_string().into_bytes()
    }
    /// The canonical encoding as a string (one pass: no length pre-pass to size the buffer,
    /// which would walk the whole value a second time).
    pub fn to_canonical_string(&self) -> String {
        // A container's text is rarely under this: starting here saves the first few
        // doubling reallocations without sizing the value in a separate pass.
        let mut out = String::with_capacity(if matches!(self, Json::Array(_) | Json::Object(_)) { 128 } else { 16 });
        self.write_canonical(&mut out);
        out
    }
    /// The length in bytes of the canonical encoding, without allocating it.
    pub fn canonical_len(&self) -> usize {
        match self {
            Json::Null => 4,
            Json::Bool(true) => 4,
            Json::Bool(false) => 5,
            Json::Number(n) => n.as_str().len(),
            Json::String(s) => string_len(s),
            Json::Array(items) => items.iter().fold(2 + items.len().saturating_sub(1), |len, item| {
                len.saturating_add(item.canonical_len())
            }),
            Json::Object(object) => {
                object.iter().fold(2 + object.len().saturating_sub(1), |len, (key, value)| {
                    len.saturating_add(string_len(key))
                        .saturating_add(1)
                        .saturating_add(value.canonical_len())
                })
            }
        }
    }

    /// Appends the canonical encoding to `out`.
    pub fn write_canonical(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(true) => out.push_str("true"),
            Json::Bool(false) => out.push_str("false"),
            Json::Number(n) => out.push_str(n.as_str()),
            Json::String(s) => write_string(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_canonical(out);
                }
                out.push(']');
            }
            Json::Object(object) => {
                out.push('{');
                for (i, (key, value)) in object.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    value.write_canonical(out);
                }
                out.push('}');
            }
        }
    }
}

/// One member of an object written by [`write_object`].
pub enum Member<'a> {
    /// A value, encoded here.
    Value(&'a Json),
    /// Text that is already the canonical encoding of a value, copied verbatim (never parsed,
    /// cloned or re-encoded: this is how stored payloads reach a cut at the cost of a copy).
    Canonical(&'a str),
    /// An array whose items are already canonical text.
    CanonicalArray(&'a [&'a str]),
}

/// Writes an object canonically from members given in any order: members are sorted by key
/// bytes, exactly as a [`Json::Object`] would be. The caller guarantees that keys are distinct
/// and that `Canonical` text is canonical; the result is then byte-identical to encoding the
/// equivalent `Json` tree.
pub fn write_object(out: &mut String, mut members: Vec<(&str, Member<'_>)>) {
    members.sort_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, member)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        match member {
            Member::Value(v) => v.write_canonical(out),
            Member::Canonical(text) => out.push_str(text),
            Member::CanonicalArray(items) => {
                out.push('[');
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str(item);
                }
                out.push(']');
            }
        }
    }
    out.push('}');
}

/// Writes the members of `object` plus spliced canonical members (keys absent from `object`).
pub fn write_object_with(out: &mut String, object: &super::Object, spliced: Vec<(&str, Member<'_>)>) {
    let mut members: Vec<(&str, Member<'_>)> = object.iter().map(|(k, v)| (k.as_str(), Member::Value(v))).collect();
    members.extend(spliced);
    write_object(out, members);
}

/// Escape text of a byte, or `None` when it is emitted raw.
fn short_escape(byte: u8) -> Option<&'static str> {
    Some(match byte {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        0x08 => "\\b",
        0x09 => "\\t",
        0x0A => "\\n",
        0x0C => "\\f",
        0x0D => "\\r",
        _ => return None,
    })
}

fn escaped_len(byte: u8) -> usize {
    match short_escape(byte) {
        Some(e) => e.len(),
        None if byte < 0x20 => 6,
        None => 1,
    }
}

fn string_len(s: &str) -> usize {
    s.bytes().fold(2usize, |len, b| len.saturating_add(escaped_len(b)))
}

pub(super) fn write_string(s: &str, out: &mut String) {
    // Most text (ids, names, keys) needs no escape: check that in a branch-free pass over
    // 16-byte chunks (which vectorizes), then copy it whole.
    let plain = s.as_bytes().chunks(16).all(|chunk| chunk.iter().fold(true, |ok, &b| ok & (b >= 0x20 && b != b'"' && b != b'\\')));
    if plain {
        out.reserve(s.len() + 2);
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
    out.push('"');
    let mut run_start = 0;
    // Every byte that needs escaping is ASCII, so runs between them split on char boundaries.
    for (i, byte) in s.bytes().enumerate() {
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        out.push_str(s.get(run_start..i).unwrap_or_default());
        run_start = i + 1;
        match short_escape(byte) {
            Some(e) => out.push_str(e),
            None => {
                out.push_str("\\u00");
                crate::text::push_lower_hex(out, &[byte]);
            }
        }
    }
    out.push_str(s.get(run_start..).unwrap_or_default());
    out.push('"');
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}

#[cfg(test)]
mod tests {
    use crate::json::{parse, Json, Number, Object};

    fn canon(input: &str) -> String {
        parse(input.as_bytes()).unwrap().to_canonical_string()
    }

    #[test]
    fn removes_whitespace_and_sorts_keys() {
        assert_eq!(
            canon(" { \"b\" : [ 1 , 2 ] , \"a\" : { \"d\" : null , \"c\" : true } } "),
            r#"{"a":{"c":true,"d":null},"b":[1,2]}"#
        );
        assert_eq!(canon("[ ]"), "[]");
        assert_eq!(canon("{ }"), "{}");
        assert_eq!(canon("false"), "false");
    }

    #[test]
    fn key_order_is_utf8_byte_order() {
        // Code point order: "" < "A" < "B" < "a" < "aa" < "b" < "é" (U+00E9) < U+FFFD < 😀 (U+1F600).
        // (UTF-16 order would put 😀 before U+FFFD.)
        let input = r#"{"😀":7,"b":5,"é":6,"\ufffd":8,"a":3,"aa":4,"B":2,"A":1,"":0}"#;
        assert_eq!(
            canon(input),
            "{\"\":0,\"A\":1,\"B\":2,\"a\":3,\"aa\":4,\"b\":5,\"é\":6,\"\u{fffd}\":8,\"😀\":7}"
        );
    }

    #[test]
    fn escapes_only_quote_backslash_and_controls() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        let expected = concat!(
            r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f"#,
            r#"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
        );
        assert_eq!(Json::str(all_controls).to_canonical_string(), expected);
        assert_eq!(Json::str("\"\\").to_canonical_string(), r#""\"\\""#);
        let raw = "/<>&'\u{7f}\u{80}\u{2028}\u{2029}é😀\u{feff}";
        assert_eq!(Json::str(raw).to_canonical_string(), format!("\"{raw}\""));
        assert_eq!(canon(r#""\/\u0041\u00E9\ud83d\ude00\u001F\u007f""#), "\"/Aé😀\\u001f\u{7f}\"");
        // Keys are escaped the same way.
        assert_eq!(canon(r#"{"a\nb\u0001":1}"#), r#"{"a\nb\u0001":1}"#);
    }

    #[test]
    fn numbers_are_emitted_exactly() {
        for text in [
            "9007199254740993",
            "1e400",
            "1E+2",
            "-0",
            "1.0",
            "18446744073709551615",
            "0.30000000000000000000001",
        ] {
            assert_eq!(canon(text), text);
            assert_eq!(canon(&format!("{{\"n\": {text} }}")), format!("{{\"n\":{text}}}"));
        }
        assert_eq!(Json::Number(Number::from_i64(-5)).to_canonical_string(), "-5");
    }

    #[test]
    fn canonical_len_matches_encoding() {
        let mut o = Object::new();
        o.insert(
            "k\u{1}\"".into(),
            Json::Array(vec![Json::Null, Json::Bool(false), Json::Bool(true), Json::u64(12)]),
        );
        o.insert("".into(), Json::str("\n\u{0}é\\"));
        o.insert("e".into(), Json::object());
        o.insert("f".into(), Json::Array(vec![]));
        for v in [Json::Object(o), Json::Null, Json::str(""), Json::Array(vec![Json::object()])] {
            assert_eq!(v.canonical_len(), v.to_canonical_bytes().len(), "{v}");
        }
    }

    #[test]
    fn spliced_members_match_the_tree_encoding() {
        use super::{write_object, write_object_with, Member};
        let tree = parse(br#"{"z":[1,{"b":"\n"}],"a":{"y":null},"m":"x","e2":[]}"#).unwrap();
        let Json::Object(all) = &tree else { panic!("object") };
        let mut rest = all.clone();
        let a = rest.remove("a").unwrap().to_canonical_string();
        let z_items: Vec<String> = match rest.remove("z").unwrap() {
            Json::Array(items) => items.iter().map(Json::to_canonical_string).collect(),
            _ => panic!("array"),
        };
        let z: Vec<&str> = z_items.iter().map(String::as_str).collect();
        let mut out = String::new();
        write_object_with(&mut out, &rest, vec![("z", Member::CanonicalArray(&z)), ("a", Member::Canonical(&a))]);
        assert_eq!(out, tree.to_canonical_string());
        let mut empty = String::new();
        write_object(&mut empty, vec![("k", Member::CanonicalArray(&[]))]);
        assert_eq!(empty, r#"{"k":[]}"#);
    }

    #[test]
    fn display_is_canonical() {
        let v = parse(br#"{ "b":1, "a":"x" }"#).unwrap();
        assert_eq!(v.to_string(), r#"{"a":"x","b":1}"#);
        assert_eq!(v.to_canonical_bytes(), br#"{"a":"x","b":1}"#);
    }

    #[test]
    fn parse_encode_parse_is_idempotent() {
        for input in [
            r#" {"z": [1, 2.50, -0, 1e400, {"y": "\u0000\/\ud83d\ude00"}], "a": null, "m": {"": "", " ": " "}} "#,
            r#"["\b\f\n\r\t\"\\", true, false, 9007199254740993]"#,
        ] {
            let first = parse(input.as_bytes()).unwrap();
            let bytes = first.to_canonical_bytes();
            let second = parse(&bytes).unwrap();
            assert_eq!(first, second);
            assert_eq!(second.to_canonical_bytes(), bytes);
        }
    }
}
