//! The JSON value model.

use std::collections::BTreeMap;

/// Object members. `BTreeMap` keeps keys in byte (= Unicode code point) order, which is the
/// canonical member order; it also makes iteration order deterministic.
pub type Object = BTreeMap<String, Json>;

/// A JSON value. Numbers keep their exact source text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// A JSON number, stored as its validated RFC 8259 text (no normalization: `1.0` and `1`
/// are different values, `1e400` is kept as written).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Number(pub(crate) String);

impl Number {
    /// Validates `text` against the RFC 8259 number grammar.
    pub fn parse(text: &str) -> Result<Number, super::JsonError> {
        if super::parse::is_number_text(text) {
            Ok(Number(text.to_owned()))
        } else {
            Err(super::JsonError::InvalidNumber { text: truncate_for_error(text) })
        }
    }
    pub fn from_u64(value: u64) -> Number {
        Number(value.to_string())
    }
    pub fn from_i64(value: i64) -> Number {
        Number(value.to_string())
    }
    /// The exact number text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The value as `u64` when the text is a plain non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        let t = self.0.as_str();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
    /// The value as `i64` when the text is a plain integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        let t = self.0.as_str();
        let digits = t.strip_prefix('-').unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
    /// Lossy floating-point view (may be infinite for `1e400`).
    pub fn as_f64(&self) -> f64 {
        self.0.parse().unwrap_or(f64::NAN)
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn truncate_for_error(text: &str) -> String {
    const MAX: usize = 64;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl Json {
    pub fn str(text: impl Into<String>) -> Json {
        Json::String(text.into())
    }
    pub fn u64(value: u64) -> Json {
        Json::Number(Number::from_u64(value))
    }
    pub fn object() -> Json {
        Json::Object(Object::new())
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Json::Number(n) => Some(n),
            _ => None,
        }
    }
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(Number::as_u64)
    }
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }
    /// Member lookup on objects; `None` for non-objects and absent keys.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|o| o.get(key))
    }
    /// Nesting depth: 0 for scalars, 1 + the deepest member for arrays and objects (`[]` is 1).
    /// Iterative, so it is safe on values of any depth.
    pub fn depth(&self) -> usize {
        // Only containers are queued (a scalar child adds nothing beyond its parent's level),
        // which keeps the pending list short for wide objects of scalars.
        let container = |v: &Json| matches!(v, Json::Array(_) | Json::Object(_));
        if !container(self) {
            return 0;
        }
        let mut deepest = 0;
        let mut pending: Vec<(&Json, usize)> = Vec::with_capacity(16);
        pending.push((self, 0));
        while let Some((value, depth)) = pending.pop() {
            let inner = depth + 1;
            match value {
                Json::Array(items) => pending.extend(items.iter().filter(|c| container(c)).map(|child| (child, inner))),
                Json::Object(object) => {
                    pending.extend(object.values().filter(|c| container(c)).map(|child| (child, inner)))
                }
                _ => {}
            }
            deepest = deepest.max(inner);
        }
        deepest
    }
    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.to_owned())
    }
}
impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::String(s)
    }
}
impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}
impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::u64(v)
    }
}
impl From<u32> for Json {
    fn from(v: u32) -> Json {
        Json::u64(u64::from(v))
    }
}
