//! Strict typed decoding and deterministic encoding over [`Json`].
//!
//! Every wire type implements [`ToJson`] and [`FromJson`] by hand with [`ObjectBuilder`] and
//! [`ObjectReader`]. The reader enforces the strict rules once, for all types:
//! required members must be present and non-null, optional members are either absent or
//! non-null (an explicit `null` is rejected), and [`ObjectReader::finish`] rejects any member
//! that was not read (unknown fields).
//!
//! ```
//! use keel::json::{FromJson, Json, ObjectBuilder, ObjectReader, ToJson, DecodeError};
//! struct Point { x: u64, label: Option<String> }
//! impl ToJson for Point {
//!     fn to_json(&self) -> Json {
//!         ObjectBuilder::new().field("x", &self.x).opt_field("label", self.label.as_ref()).build()
//!     }
//! }
//! impl FromJson for Point {
//!     fn from_json(value: &Json) -> Result<Self, DecodeError> {
//!         let mut r = ObjectReader::new(value)?;
//!         let p = Point { x: r.required("x")?, label: r.optional("label")? };
//!         r.finish()?;
//!         Ok(p)
//!     }
//! }
//! let p = Point::from_json(&keel::json::parse(br#"{"x":1}"#).unwrap()).unwrap();
//! assert_eq!(p.x, 1);
//! assert!(Point::from_json(&keel::json::parse(br#"{"x":1,"y":2}"#).unwrap()).is_err());
//! ```

use super::value::{Json, Object};
use super::JsonError;

/// A typed decoding failure: where (a JSON-pointer-like path) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value at {path}: {kind}")]
pub struct DecodeError {
    /// Location of the offending value, e.g. `$.messages[2].role`.
    pub path: String,
    pub kind: DecodeErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("malformed JSON: {0}")]
    Json(#[from] JsonError),
    #[error("expected {expected}, found {found}")]
    WrongType { expected: &'static str, found: &'static str },
    #[error("missing required member `{0}`")]
    MissingMember(String),
    #[error("member `{0}` must not be null")]
    NullMember(String),
    #[error("unknown member `{0}`")]
    UnknownMember(String),
    #[error("{0}")]
    Invalid(String),
}

impl DecodeError {
    /// An error at the root path.
    pub fn new(kind: DecodeErrorKind) -> DecodeError {
        DecodeError { path: "$".to_owned(), kind }
    }
    /// A semantic validation failure at the root path.
    pub fn invalid(reason: impl Into<String>) -> DecodeError {
        DecodeError::new(DecodeErrorKind::Invalid(reason.into()))
    }
    pub fn wrong_type(expected: &'static str, found: &Json) -> DecodeError {
        DecodeError::new(DecodeErrorKind::WrongType { expected, found: found.type_name() })
    }
    /// Prefixes the path with an object member name (used while unwinding nested decodes).
    pub fn in_member(mut self, key: &str) -> DecodeError {
        self.path = format!("$.{key}{}", &self.path[1..]);
        self
    }
    /// Prefixes the path with an array index.
    pub fn in_index(mut self, index: usize) -> DecodeError {
        self.path = format!("$[{index}]{}", &self.path[1..]);
        self
    }
}

impl From<JsonError> for DecodeError {
    fn from(e: JsonError) -> DecodeError {
        DecodeError::new(DecodeErrorKind::Json(e))
    }
}

/// Deterministic encoding into a [`Json`] value.
pub trait ToJson {
    fn to_json(&self) -> Json;
}

/// Strict decoding from a [`Json`] value.
pub trait FromJson: Sized {
    fn from_json(value: &Json) -> Result<Self, DecodeError>;

    /// Parses `bytes` strictly (default limits) and decodes.
    fn from_json_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let value = super::parse(bytes)?;
        Self::from_json(&value)
    }
}

/// Reads the members of one JSON object, tracking which were consumed.
pub struct ObjectReader<'a> {
    object: &'a Object,
    read: Vec<&'a str>,
}

impl<'a> ObjectReader<'a> {
    /// Fails unless `value` is an object.
    pub fn new(value: &'a Json) -> Result<ObjectReader<'a>, DecodeError> {
        match value {
            Json::Object(object) => Ok(ObjectReader { object, read: Vec::with_capacity(object.len()) }),
            other => Err(DecodeError::wrong_type("object", other)),
        }
    }

    fn mark(&mut self, key: &'a str) {
        self.read.push(key);
    }

    /// The raw value of a required, non-null member.
    pub fn required_value(&mut self, key: &'static str) -> Result<&'a Json, DecodeError> {
        match self.object.get_key_value(key) {
            None => Err(DecodeError::new(DecodeErrorKind::MissingMember(key.to_owned()))),
            Some((k, Json::Null)) => {
                self.mark(k);
                Err(DecodeError::new(DecodeErrorKind::NullMember(key.to_owned())))
            }
            Some((k, v)) => {
                self.mark(k);
                Ok(v)
            }
        }
    }

    /// The raw value of an optional member: absent → `None`; explicit `null` → error.
    pub fn optional_value(&mut self, key: &'static str) -> Result<Option<&'a Json>, DecodeError> {
        match self.object.get_key_value(key) {
            None => Ok(None),
            Some((k, Json::Null)) => {
                self.mark(k);
                Err(DecodeError::new(DecodeErrorKind::NullMember(key.to_owned())))
            }
            Some((k, v)) => {
                self.mark(k);
                Ok(Some(v))
            }
        }
    }

    /// The raw value of a member that may legitimately be `null` (e.g. `{"maximum":null}`).
    /// Absent → error.
    pub fn nullable_value(&mut self, key: &'static str) -> Result<&'a Json, DecodeError> {
        match self.object.get_key_value(key) {
            None => Err(DecodeError::new(DecodeErrorKind::MissingMember(key.to_owned()))),
            Some((k, v)) => {
                self.mark(k);
                Ok(v)
            }
        }
    }

    /// Decodes a required member.
    pub fn required<T: FromJson>(&mut self, key: &'static str) -> Result<T, DecodeError> {
        let v = self.required_value(key).map_err(|e| e.in_member(key))?;
        T::from_json(v).map_err(|e| e.in_member(key))
    }

    /// Decodes an optional member.
    pub fn optional<T: FromJson>(&mut self, key: &'static str) -> Result<Option<T>, DecodeError> {
        match self.optional_value(key).map_err(|e| e.in_member(key))? {
            None => Ok(None),
            Some(v) => T::from_json(v).map(Some).map_err(|e| e.in_member(key)),
        }
    }

    /// Decodes an optional array member; absent → empty. (Use only where absent and empty are
    /// the same value; where they differ, use [`ObjectReader::optional`] with `Vec<T>`.)
    pub fn optional_vec<T: FromJson>(&mut self, key: &'static str) -> Result<Vec<T>, DecodeError> {
        Ok(self.optional::<Vec<T>>(key)?.unwrap_or_default())
    }

    /// Decodes a required member with a custom decoder.
    pub fn required_with<T>(
        &mut self,
        key: &'static str,
        decode: impl FnOnce(&'a Json) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let v = self.required_value(key).map_err(|e| e.in_member(key))?;
        decode(v).map_err(|e| e.in_member(key))
    }

    /// Whether the object has a member `key` (does not mark it read).
    pub fn has(&self, key: &str) -> bool {
        self.object.contains_key(key)
    }

    /// Rejects members that were never read.
    pub fn finish(mut self) -> Result<(), DecodeError> {
        // Every marked key is one of the object's own (borrowed from it), so as many distinct
        // marks as members means every member was read. Distinct by address: sorting a few
        // pointers is cheaper than comparing key texts member by member.
        self.read.sort_unstable_by_key(|k| k.as_ptr());
        self.read.dedup_by_key(|k| k.as_ptr());
        if self.read.len() == self.object.len() {
            return Ok(());
        }
        // Some member was not read: name the first one in key order.
        for key in self.object.keys() {
            if !self.read.contains(&key.as_str()) {
                return Err(DecodeError::new(DecodeErrorKind::UnknownMember(key.clone())));
            }
        }
        Ok(())
    }
}

/// Builds a JSON object member by member.
#[derive(Default)]
pub struct ObjectBuilder {
    object: Object,
}

impl ObjectBuilder {
    pub fn new() -> ObjectBuilder {
        ObjectBuilder::default()
    }
    /// Sets a member (always emitted).
    pub fn field<T: ToJson + ?Sized>(mut self, key: &str, value: &T) -> ObjectBuilder {
        self.object.insert(key.to_owned(), value.to_json());
        self
    }
    /// Sets a raw member value.
    pub fn value(mut self, key: &str, value: Json) -> ObjectBuilder {
        self.object.insert(key.to_owned(), value);
        self
    }
    /// Sets a raw member value only when present.
    pub fn opt_value(self, key: &str, value: Option<Json>) -> ObjectBuilder {
        match value {
            Some(v) => self.value(key, v),
            None => self,
        }
    }
    /// Sets a member only when present.
    pub fn opt_field<T: ToJson + ?Sized>(self, key: &str, value: Option<&T>) -> ObjectBuilder {
        match value {
            Some(v) => self.field(key, v),
            None => self,
        }
    }
    /// Sets an array member only when non-empty.
    pub fn nonempty_field<T: ToJson>(self, key: &str, values: &[T]) -> ObjectBuilder {
        if values.is_empty() {
            self
        } else {
            self.field(key, values)
        }
    }
    pub fn build(self) -> Json {
        Json::Object(self.object)
    }
    /// The members built so far (for writers that splice further canonical members).
    pub fn into_object(self) -> Object {
        self.object
    }
}

impl ToJson for Json {
    fn to_json(&self) -> Json {
        self.clone()
    }
}
impl FromJson for Json {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        Ok(value.clone())
    }
}
impl ToJson for str {
    fn to_json(&self) -> Json {
        Json::String(self.to_owned())
    }
}
impl ToJson for String {
    fn to_json(&self) -> Json {
        Json::String(self.clone())
    }
}
/// The text of a string value, borrowed (for decoders that only match or parse it).
pub fn decode_str(value: &Json) -> Result<&str, DecodeError> {
    value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))
}

impl FromJson for String {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        decode_str(value).map(str::to_owned)
    }
}
impl ToJson for bool {
    fn to_json(&self) -> Json {
        Json::Bool(*self)
    }
}
impl FromJson for bool {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        value.as_bool().ok_or_else(|| DecodeError::wrong_type("boolean", value))
    }
}
impl ToJson for u64 {
    fn to_json(&self) -> Json {
        Json::u64(*self)
    }
}
impl FromJson for u64 {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match value {
            Json::Number(n) => n.as_u64().ok_or_else(|| {
                DecodeError::invalid(format!("expected an unsigned 64-bit integer, found {n}"))
            }),
            other => Err(DecodeError::wrong_type("integer", other)),
        }
    }
}
impl ToJson for u32 {
    fn to_json(&self) -> Json {
        Json::u64(u64::from(*self))
    }
}
impl FromJson for u32 {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let v = u64::from_json(value)?;
        u32::try_from(v)
            .map_err(|_| DecodeError::invalid(format!("expected an unsigned 32-bit integer, found {v}")))
    }
}
impl<T: ToJson> ToJson for [T] {
    fn to_json(&self) -> Json {
        Json::Array(self.iter().map(ToJson::to_json).collect())
    }
}
impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Json {
        self.as_slice().to_json()
    }
}
impl<T: FromJson> FromJson for Vec<T> {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        match value {
            Json::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| T::from_json(v).map_err(|e| e.in_index(i)))
                .collect(),
            other => Err(DecodeError::wrong_type("array", other)),
        }
    }
}
impl<T: ToJson + ?Sized> ToJson for &T {
    fn to_json(&self) -> Json {
        (**self).to_json()
    }
}
impl<T: ToJson + ?Sized> ToJson for Box<T> {
    fn to_json(&self) -> Json {
        (**self).to_json()
    }
}
