//! Normalized, size-bounded JSON payloads.
use super::error::SizeStage;
use super::parse::{parse_with, ParseLimits};
use super::{DecodeError, Digest, FromJson, Json, JsonError, ToJson};
use crate::limits::{MAX_JSON_DEPTH, MAX_PAYLOAD_BYTES};
use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A normalized JSON value whose raw input and canonical encoding both fit
/// [`crate::limits::MAX_PAYLOAD_BYTES`] (or a caller-chosen limit). Cheap to clone.
///
/// The canonical text is the payload; the value is built from it on first use when the
/// payload was taken from stored canonical bytes (`Payload::from_scanned`): the oracle
/// decodes every acknowledged record and most payloads in it are never looked into. Equality
/// and hashing compare the canonical text (the encoding is one-to-one); ordering is the
/// value's, as before.
///
/// A payload may carry one decoded form of itself ([`Payload::decoded`]), attached by the
/// code that encoded it from that form (an Execution's snapshot), so the restore that follows
/// in the same process need not decode it again. Never part of equality, hashing, ordering or
/// encoding; a payload read from bytes never has one.
#[derive(Clone)]
pub struct Payload {
    value: Arc<OnceLock<Json>>,
    canonical: Arc<str>,
    decoded: Option<Arc<dyn Any + Send + Sync>>,
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        self.canonical == other.canonical
    }
}
impl Eq for Payload {}
impl std::hash::Hash for Payload {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.canonical.hash(state);
    }
}
impl PartialOrd for Payload {
    fn partial_cmp(&self, other: &Payload) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Payload {
    fn cmp(&self, other: &Payload) -> std::cmp::Ordering {
        self.value().cmp(other.value()).then_with(|| self.canonical.cmp(&other.canonical))
    }
}

fn ready(value: Json) -> Arc<OnceLock<Json>> {
    Arc::new(OnceLock::from(value))
}

impl Payload {
    /// Parses and normalizes raw bytes under the default limit.
    pub fn from_bytes(bytes: &[u8]) -> Result<Payload, JsonError> {
        Payload::from_bytes_with_limit(bytes, MAX_PAYLOAD_BYTES)
    }
    /// Parses and normalizes raw bytes; `limit` bounds raw and canonical sizes.
    pub fn from_bytes_with_limit(bytes: &[u8], limit: usize) -> Result<Payload, JsonError> {
        if bytes.len() > limit {
            return Err(JsonError::TooLarge { stage: SizeStage::Raw, actual: bytes.len(), limit });
        }
        let value = parse_with(bytes, &ParseLimits { max_bytes: limit, max_depth: MAX_JSON_DEPTH })?;
        // Canonical bytes of parsed input are never longer than the input; the check stays so
        // the bound does not silently depend on that property of the encoder.
        Payload::seal(value, limit)
    }
    /// Normalizes an in-memory value under the default limit.
    pub fn from_json(value: Json) -> Result<Payload, JsonError> {
        Payload::from_json_with_limit(value, MAX_PAYLOAD_BYTES)
    }
    /// Normalizes an in-memory value; `limit` bounds the canonical size, and values nested
    /// deeper than [`crate::limits::MAX_JSON_DEPTH`] are rejected (as the parser would).
    pub fn from_json_with_limit(value: Json, limit: usize) -> Result<Payload, JsonError> {
        // Depth first: `depth` is iterative, the encoder is not.
        if value.depth() > MAX_JSON_DEPTH {
            return Err(JsonError::TooDeep { limit: MAX_JSON_DEPTH });
        }
        Payload::seal(value, limit)
    }
    fn seal(value: Json, limit: usize) -> Result<Payload, JsonError> {
        // Encode once and measure the encoding (a separate length pass would walk the value
        // twice). The value is already in memory, so its encoding is bounded by a small
        // multiple of its size whatever the limit.
        let canonical = value.to_canonical_string();
        if canonical.len() > limit {
            return Err(JsonError::TooLarge { stage: SizeStage::Canonical, actual: canonical.len(), limit });
        }
        Ok(Payload { value: ready(value), canonical: Arc::from(canonical), decoded: None })
    }
    /// A payload whose canonical text is `text`, taken as it is: no value is built until
    /// [`Payload::value`] is first called. The caller has just checked `text` with
    /// `json::canonical::scan` (one canonical value, to its end, at its depth in the record,
    /// so it nests at most [`MAX_JSON_DEPTH`] deep); only the size is checked here. The
    /// payload is then exactly what [`Payload::from_bytes`] would give.
    pub(crate) fn from_scanned(text: &str) -> Option<Payload> {
        if text.len() > MAX_PAYLOAD_BYTES {
            return None;
        }
        Some(Payload { value: Arc::new(OnceLock::new()), canonical: Arc::from(text), decoded: None })
    }
    /// A payload of `value` whose canonical encoding is `text`, as the caller built both (a
    /// value spliced from parts whose encodings it holds): `None` over the size limit. The
    /// caller guarantees `text` is `value`'s canonical encoding (test builds compare) and that
    /// `value` nests at most [`MAX_JSON_DEPTH`] deep.
    pub(crate) fn from_parts(value: Json, text: String) -> Option<Payload> {
        #[cfg(test)]
        assert_eq!(text, value.to_canonical_string(), "a payload's text is its value's canonical encoding");
        if text.len() > MAX_PAYLOAD_BYTES {
            return None;
        }
        Some(Payload { value: ready(value), canonical: Arc::from(text), decoded: None })
    }
    /// The `null` payload.
    pub fn null() -> Payload {
        Payload { value: ready(Json::Null), canonical: Arc::from("null"), decoded: None }
    }
    pub fn value(&self) -> &Json {
        // Only `from_scanned` leaves the value unbuilt, and it took scanned canonical text
        // within the limits, which parses (the `Null` is never taken).
        let unbounded = ParseLimits { max_bytes: usize::MAX, max_depth: MAX_JSON_DEPTH };
        self.value.get_or_init(|| parse_with(self.canonical.as_bytes(), &unbounded).unwrap_or(Json::Null))
    }
    /// The canonical encoding.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }
    pub fn len(&self) -> usize {
        self.canonical.len()
    }
    pub fn is_empty(&self) -> bool {
        self.canonical.is_empty()
    }
    pub fn digest(&self) -> Digest {
        Digest::of(self.canonical.as_bytes())
    }
    /// This payload carrying `decoded`, the value it was encoded from (replacing any other).
    /// The caller guarantees that decoding the payload gives exactly `decoded`.
    pub(crate) fn with_decoded<T: Any + Send + Sync>(mut self, decoded: Arc<T>) -> Payload {
        self.decoded = Some(decoded);
        self
    }
    /// The attached decoded form, if one of type `T` was attached.
    pub(crate) fn decoded<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.decoded.clone().and_then(|d| d.downcast::<T>().ok())
    }
}

/// Encoded as the value itself.
impl ToJson for Payload {
    fn to_json(&self) -> Json {
        self.value().clone()
    }
}
/// Decodes any value that fits the default payload limits.
impl FromJson for Payload {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        Payload::from_json(value.clone()).map_err(DecodeError::from)
    }
}

impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.canonical)
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({})", self.canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_large(stage: SizeStage, actual: usize, limit: usize) -> JsonError {
        JsonError::TooLarge { stage, actual, limit }
    }

    #[test]
    fn normalizes_to_canonical_form() {
        let p = Payload::from_bytes(br#" { "b" : 1e400 , "a" : "\u0041" } "#).unwrap();
        assert_eq!(p.canonical(), r#"{"a":"A","b":1e400}"#);
        assert_eq!(p.len(), p.canonical().len());
        assert!(!p.is_empty());
        assert_eq!(p.digest(), Digest::of(p.canonical().as_bytes()));
        assert_eq!(p.digest(), Digest::of_json(p.value()));
        assert_eq!(Payload::from_json(p.value().clone()).unwrap(), p);
        assert_eq!(p.to_string(), p.canonical());
        assert_eq!(Payload::null(), Payload::from_bytes(b"null").unwrap());
    }

    #[test]
    fn the_decoded_form_is_typed_shared_by_clones_and_never_compared() {
        let plain = Payload::from_bytes(b"[1]").unwrap();
        let carrying = plain.clone().with_decoded(Arc::new(vec![1u32]));
        assert_eq!(carrying.clone().decoded::<Vec<u32>>().as_deref(), Some(&vec![1u32]));
        assert!(carrying.decoded::<String>().is_none(), "only the attached type");
        assert!(plain.decoded::<Vec<u32>>().is_none(), "attaching does not reach other payloads");
        assert_eq!(carrying, plain, "equality is by the canonical text, never by the decoded form");
        assert_eq!(carrying.canonical(), plain.canonical());
    }

    #[test]
    fn raw_limit_applies_to_whitespace_heavy_input() {
        let limit = 64;
        let input = format!("{}[1]", " ".repeat(limit)); // canonical `[1]` is tiny
        assert_eq!(
            Payload::from_bytes_with_limit(input.as_bytes(), limit),
            Err(too_large(SizeStage::Raw, limit + 3, limit))
        );
        // The same value fits once the whitespace is gone, and at exactly the limit.
        assert!(Payload::from_bytes_with_limit(b"[1]", limit).is_ok());
        let exact = format!("{}[1]", " ".repeat(limit - 3));
        assert_eq!(Payload::from_bytes_with_limit(exact.as_bytes(), limit).unwrap().canonical(), "[1]");
        // Raw size is checked before syntax.
        assert_eq!(
            Payload::from_bytes_with_limit(&[b'x'; 65], limit),
            Err(too_large(SizeStage::Raw, 65, limit))
        );
    }

    #[test]
    fn default_limit_is_max_payload_bytes() {
        let over = vec![b' '; MAX_PAYLOAD_BYTES + 1];
        assert_eq!(
            Payload::from_bytes(&over),
            Err(too_large(SizeStage::Raw, MAX_PAYLOAD_BYTES + 1, MAX_PAYLOAD_BYTES))
        );
        // A string whose canonical form is exactly the limit is accepted.
        let exact = Json::str("a".repeat(MAX_PAYLOAD_BYTES - 2));
        assert_eq!(Payload::from_json(exact).unwrap().len(), MAX_PAYLOAD_BYTES);
        let over = Json::str("a".repeat(MAX_PAYLOAD_BYTES - 1));
        assert_eq!(
            Payload::from_json(over),
            Err(too_large(SizeStage::Canonical, MAX_PAYLOAD_BYTES + 1, MAX_PAYLOAD_BYTES))
        );
    }

    #[test]
    fn canonical_limit_applies_to_in_memory_values() {
        let limit = 32;
        // 30 control characters: 30 bytes in memory, 6 × 30 + 2 canonical bytes.
        let controls = Json::str("\u{1}".repeat(30));
        assert_eq!(
            Payload::from_json_with_limit(controls, limit),
            Err(too_large(SizeStage::Canonical, 182, limit))
        );
        let just_over = Json::str("a".repeat(limit - 1));
        assert_eq!(
            Payload::from_json_with_limit(just_over, limit),
            Err(too_large(SizeStage::Canonical, limit + 1, limit))
        );
        let exact = Json::str("a".repeat(limit - 2));
        assert_eq!(Payload::from_json_with_limit(exact, limit).unwrap().len(), limit);
    }

    fn nested_arrays(depth: usize) -> Json {
        let mut v = Json::Null;
        for _ in 0..depth {
            v = Json::Array(vec![v]);
        }
        v
    }

    #[test]
    fn depth_is_bounded_for_in_memory_values() {
        assert!(Payload::from_json(nested_arrays(MAX_JSON_DEPTH)).is_ok());
        assert_eq!(
            Payload::from_json(nested_arrays(MAX_JSON_DEPTH + 1)),
            Err(JsonError::TooDeep { limit: MAX_JSON_DEPTH })
        );
        let deep_bytes = format!("{}{}", "[".repeat(MAX_JSON_DEPTH + 1), "]".repeat(MAX_JSON_DEPTH + 1));
        assert_eq!(
            Payload::from_bytes(deep_bytes.as_bytes()),
            Err(JsonError::TooDeep { limit: MAX_JSON_DEPTH })
        );
    }

    #[test]
    fn parse_errors_pass_through() {
        assert_eq!(Payload::from_bytes(b""), Err(JsonError::UnexpectedEnd));
        assert!(matches!(Payload::from_bytes(br#"{"a":1,"a":2}"#), Err(JsonError::DuplicateKey { .. })));
    }

    /// What `kernel::record_decoder` does with a payload's span.
    fn from_canonical(text: &str, depth: usize) -> Option<Payload> {
        (super::super::canonical::scan(text, 0, depth)? == text.len()).then_some(())?;
        Payload::from_scanned(text)
    }

    #[test]
    fn canonical_text_is_taken_as_it_is_and_parsed_on_first_use() {
        let text = r#"{"a":[1,"x\n"],"b":1e400}"#;
        let lazy = from_canonical(text, 0).unwrap();
        let eager = Payload::from_bytes(text.as_bytes()).unwrap();
        assert_eq!(lazy.canonical(), text);
        assert_eq!(lazy, eager);
        assert_eq!(lazy.value(), eager.value());
        assert_eq!(lazy.cmp(&eager), std::cmp::Ordering::Equal);
        assert_eq!(lazy.digest(), eager.digest());
        assert_eq!(lazy.to_json(), eager.to_json());
        // Only canonical text, within the limits, is taken.
        for text in [r#"{"b":1,"a":2}"#, "[1, 2]", "\"\\u0041\"", "[1]x", ""] {
            assert_eq!(from_canonical(text, 0), None, "{text}");
        }
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(from_canonical(&deep(MAX_JSON_DEPTH), 0).is_some());
        assert_eq!(from_canonical(&deep(MAX_JSON_DEPTH), 2), None);
        let big = format!("\"{}\"", "a".repeat(MAX_PAYLOAD_BYTES - 1));
        assert_eq!(from_canonical(&big, 0), None);
    }

    #[test]
    fn json_codec_round_trips() {
        let p = Payload::from_bytes(br#"{"k":[1,"x"]}"#).unwrap();
        assert_eq!(<Payload as FromJson>::from_json(&p.to_json()).unwrap(), p);
        assert!(<Payload as FromJson>::from_json(&nested_arrays(MAX_JSON_DEPTH + 1)).is_err());
    }
}
