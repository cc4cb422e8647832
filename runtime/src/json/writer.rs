//! A streaming canonical object writer: members are appended straight to the output, so a
//! record whose shape the code knows is encoded without building a [`Json`] tree first.
//!
//! The caller writes members in canonical key order (UTF-8 byte order, see `encode.rs`);
//! the result is then byte-identical to encoding the equivalent `Json` object. Members whose
//! canonical text is already stored (payloads, cached encodings) are copied verbatim.

use super::{Digest, Json, Payload, ToJson};

/// A value that appends its canonical encoding straight to a buffer. Every implementation
/// writes exactly the canonical encoding of the type's `to_json()` (tests compare the two).
pub trait WriteJson {
    fn write_json(&self, out: &mut String);
}

/// Writes one JSON object member by member; [`ObjectWriter::finish`] closes it.
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    first: bool,
    /// The previous key, to check the canonical member order in debug builds.
    #[cfg(debug_assertions)]
    last: Option<String>,
}

impl<'a> ObjectWriter<'a> {
    /// Opens an object in `out`.
    pub fn new(out: &'a mut String) -> ObjectWriter<'a> {
        out.push('{');
        ObjectWriter {
            out,
            first: true,
            #[cfg(debug_assertions)]
            last: None,
        }
    }

    /// Writes `,"key":` and returns the output, where the caller appends exactly one
    /// canonical value.
    pub fn key(&mut self, key: &str) -> &mut String {
        #[cfg(debug_assertions)]
        {
            debug_assert!(
                self.last.as_deref().is_none_or(|last| last < key),
                "object members out of canonical order: {:?} then {key:?}",
                self.last
            );
            self.last = Some(key.to_owned());
        }
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        super::encode::write_string(key, self.out);
        self.out.push(':');
        self.out
    }

    /// A member whose value is already canonical text (copied verbatim).
    pub fn canonical(&mut self, key: &str, text: &str) -> &mut Self {
        self.key(key).push_str(text);
        self
    }

    /// A member holding a JSON value.
    pub fn value(&mut self, key: &str, value: &Json) -> &mut Self {
        value.write_canonical(self.key(key));
        self
    }

    /// A member written by its [`WriteJson`] implementation (no tree is built).
    pub fn write<T: WriteJson + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        value.write_json(self.key(key));
        self
    }

    /// A [`WriteJson`] member only when present.
    pub fn opt_write<T: WriteJson + ?Sized>(&mut self, key: &str, value: Option<&T>) -> &mut Self {
        if let Some(v) = value {
            self.write(key, v);
        }
        self
    }

    /// A member encoded through [`ToJson`] (builds the value's tree: for members too rare
    /// to deserve a writer of their own).
    pub fn field<T: ToJson + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        self.value(key, &value.to_json())
    }

    /// A member only when present.
    pub fn opt_field<T: ToJson + ?Sized>(&mut self, key: &str, value: Option<&T>) -> &mut Self {
        if let Some(v) = value {
            self.field(key, v);
        }
        self
    }

    /// A string member.
    pub fn str(&mut self, key: &str, text: &str) -> &mut Self {
        super::encode::write_string(text, self.key(key));
        self
    }

    /// An unsigned integer member.
    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        push_u64(self.key(key), value);
        self
    }

    /// Closes the object.
    pub fn finish(self) {
        self.out.push('}');
    }
}

/// Appends the decimal text of `value` (what [`Json::u64`] encodes to), without allocating.
pub fn push_u64(out: &mut String, value: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = value;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[i..]).unwrap_or_default());
}

impl WriteJson for u64 {
    fn write_json(&self, out: &mut String) {
        push_u64(out, *self);
    }
}
impl WriteJson for u32 {
    fn write_json(&self, out: &mut String) {
        push_u64(out, u64::from(*self));
    }
}
impl WriteJson for str {
    fn write_json(&self, out: &mut String) {
        super::encode::write_string(self, out);
    }
}
impl WriteJson for String {
    fn write_json(&self, out: &mut String) {
        super::encode::write_string(self, out);
    }
}
impl WriteJson for Json {
    fn write_json(&self, out: &mut String) {
        self.write_canonical(out);
    }
}
/// The stored canonical text, copied.
impl WriteJson for Payload {
    fn write_json(&self, out: &mut String) {
        out.push_str(self.canonical());
    }
}
/// `"sha256:<hex>"` (never needs escaping).
impl WriteJson for Digest {
    fn write_json(&self, out: &mut String) {
        out.push_str("\"sha256:");
        crate::text::push_lower_hex(out, &self.0);
        out.push('"');
    }
}
impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            item.write_json(out);
        }
        out.push(']');
    }
}
impl<T: WriteJson> WriteJson for Vec<T> {
    fn write_json(&self, out: &mut String) {
        self.as_slice().write_json(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, ObjectBuilder};

    #[test]
    fn matches_the_tree_encoding() {
        let nested = parse(br#"{"b":[1,{"y":null,"x":"\n"}],"a":true}"#).unwrap();
        let tree = ObjectBuilder::new()
            .field("a\u{1}", "q\"uote")
            .value("b", nested.clone())
            .field("c", &7u64)
            .value("d", Json::u64(u64::MAX))
            .field("é", &0u64)
            .build();
        let mut out = String::new();
        let mut w = ObjectWriter::new(&mut out);
        w.str("a\u{1}", "q\"uote")
            .canonical("b", &nested.to_canonical_string())
            .u64("c", 7);
        w.value("d", &Json::u64(u64::MAX))
            .field("é", &0u64)
            .opt_field::<u64>("f", None);
        w.finish();
        assert_eq!(out, tree.to_canonical_string());
        let mut empty = String::new();
        ObjectWriter::new(&mut empty).finish();
        assert_eq!(empty, "{}");
    }

    #[test]
    fn writers_match_the_tree_encoding() {
        fn same<T: WriteJson + ToJson + ?Sized>(v: &T) {
            let mut out = String::new();
            v.write_json(&mut out);
            assert_eq!(out, v.to_json().to_canonical_string());
        }
        same(&7u64);
        same(&u32::MAX);
        same("a\"b\\c\u{0}\u{1f}é");
        same(&"x\ny".to_owned());
        same(&Digest::of(b"x"));
        same(&Payload::from_bytes(br#"{"b":[1,2.50],"a":"\u0000"}"#).unwrap());
        same(&vec![1u64, 2, 3]);
        same(&Vec::<u64>::new());
        same(&parse(br#"[{"z":1,"a":{}}]"#).unwrap());
    }

    #[test]
    fn integers_match_number_text() {
        for v in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = String::new();
            push_u64(&mut out, v);
            assert_eq!(out, Json::u64(v).to_canonical_string());
        }
    }
}
