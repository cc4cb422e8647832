//! Bounded, strict, canonical JSON: the one value type for every payload that crosses a
//! boundary (strategy state, effect payloads, signals, snapshots, chat types).
//!
//! * [`Json`] keeps the exact text of every number (`9007199254740993`, `1e400` survive).
//! * [`parse`] is strict: duplicate object keys, invalid UTF-8, lone surrogate escapes,
//!   trailing data, excessive depth and oversized input are typed errors, never panics.
//! * [`Json::to_canonical_bytes`] is the single canonical encoding (see `encode.rs` for the
//!   exact rules); digests, dedup and conflict checks all compare canonical bytes.
//! * [`Payload`] is a normalized JSON value bounded by [`crate::limits::MAX_PAYLOAD_BYTES`]
//!   both before and after normalization.
//! * [`Json::to_serde_value`] / [`Json::from_serde_value`] convert to and from
//!   `serde_json::Value` with exact numbers ([`SerdeValueError`] on excessive depth).
//! * [`ObjectWriter`] streams an object's members canonically (records of known shape are
//!   encoded without building a tree first).
//! * [`codec`] holds the strict typed-decoding helpers (unknown members rejected).

pub(crate) mod canonical;
pub mod codec;
mod digest;
mod encode;
mod error;
mod parse;
mod payload;
mod scratch;
mod serde_value;
mod value;
mod writer;

#[cfg(test)]
mod tests;

pub use codec::{decode_str, DecodeError, FromJson, ObjectBuilder, ObjectReader, ToJson};
pub use digest::{Digest, DigestError};
pub use encode::{write_object, write_object_with, Member};
pub use error::{JsonError, SizeStage};
pub use parse::{parse, parse_with, ParseLimits};
pub(crate) use parse::parse_at;
pub use payload::Payload;
pub(crate) use scratch::with_scratch;
pub use serde_value::SerdeValueError;
pub(crate) use serde_value::{check_serde_convertible, to_serde_number, to_serde_value_with};
pub use value::{Json, Number, Object};
pub use writer::{push_u64, ObjectWriter, WriteJson};
