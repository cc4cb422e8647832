//! SHA-256 digests with the text form `sha256:<64 lowercase hex>`.
use super::{DecodeError, FromJson, Json, ToJson};
use sha2::Digest as _;

/// A SHA-256 digest. The all-zero digest is invalid as a value (it is never the digest of any
/// input in practice and serves as "absent" on the wire only where a protocol says so).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

/// Byte order of the 32 bytes (what a derived order gives), compared as four big-endian
/// words: the first word almost always decides, without the `memcmp` call a byte-array
/// comparison makes. Digests are sorted and searched on every commit (cut chunks, deltas,
/// segment records).
impl Ord for Digest {
    fn cmp(&self, other: &Digest) -> std::cmp::Ordering {
        self.words().cmp(&other.words())
    }
}
impl PartialOrd for Digest {
    fn partial_cmp(&self, other: &Digest) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("digest must be `sha256:` followed by 64 lowercase hex characters")]
    Malformed,
    #[error("the zero digest is not a valid digest")]
    Zero,
}

impl Digest {
    /// The bytes as four big-endian words (their order is the bytes' order).
    fn words(&self) -> [u64; 4] {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&self.0[i * 8..i * 8 + 8]);
            u64::from_be_bytes(w)
        };
        [word(0), word(1), word(2), word(3)]
    }
    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(sha2::Sha256::digest(bytes).into())
    }
    /// SHA-256 of the canonical encoding of `value`.
    pub fn of_json(value: &Json) -> Digest {
        Digest::of(&value.to_canonical_bytes())
    }
    /// SHA-256 of the canonical encoding `value` writes (equal to [`Digest::of_json`] of its
    /// tree, without building the tree).
    pub fn of_written<T: super::WriteJson + ?Sized>(value: &T) -> Digest {
        // Effect, settlement and child-spec digests are taken on every boundary.
        super::with_scratch(0, |text| {
            value.write_json(text);
            Digest::of(text.as_bytes())
        })
    }
    /// Parses the text form; rejects malformed text and the zero digest.
    pub fn parse(text: &str) -> Result<Digest, DigestError> {
        let hex = text.strip_prefix("sha256:").ok_or(DigestError::Malformed)?.as_bytes();
        if hex.len() != 64 {
            return Err(DigestError::Malformed);
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let (Some(high), Some(low)) = (lower_hex_value(pair[0]), lower_hex_value(pair[1])) else {
                return Err(DigestError::Malformed);
            };
            *byte = (high << 4) | low;
        }
        let digest = Digest(bytes);
        if digest.is_zero() {
            return Err(DigestError::Zero);
        }
        Ok(digest)
    }
    /// Lowercase hex of the 32 bytes (no prefix).
    pub fn hex(&self) -> String {
        let mut out = String::with_capacity(64);
        crate::text::push_lower_hex(&mut out, &self.0);
        out
    }
    /// Whether this is the all-zero digest (which [`Digest::parse`] never returns).
    pub fn is_zero(&self) -> bool {
        self.0 == [0u8; 32]
    }
}

/// Uppercase hex is rejected so that every digest has exactly one text form.
fn lower_hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl std::str::FromStr for Digest {
    type Err = DigestError;
    fn from_str(text: &str) -> Result<Digest, DigestError> {
        Digest::parse(text)
    }
}

/// Encoded as its text form, a JSON string.
impl ToJson for Digest {
    fn to_json(&self) -> Json {
        Json::String(self.to_string())
    }
}
impl FromJson for Digest {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
        Digest::parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}
impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Digest({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The word order is the byte order a derived `Ord` gives (sorted cuts, segment records
        /// and every map keyed by digest depend on it).
        #[test]
        fn order_is_byte_order(a in proptest::array::uniform32(0u8..=255), b in proptest::array::uniform32(0u8..=255), at in 0usize..32) {
            proptest::prop_assert_eq!(Digest(a).cmp(&Digest(b)), a.cmp(&b));
            // Digests sharing a prefix are decided by a later word.
            let mut c = a;
            c[at] = b[at];
            proptest::prop_assert_eq!(Digest(a).cmp(&Digest(c)), a.cmp(&c));
            proptest::prop_assert_eq!(Digest(a).partial_cmp(&Digest(a)), Some(std::cmp::Ordering::Equal));
        }
    }

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    /// `of_written` encodes through one scratch buffer per thread: encodings taken one after
    /// another (long and short alternating, and one nested inside another's writing) each
    /// hash exactly their own canonical text.
    #[test]
    fn written_digests_through_the_scratch_buffer_are_each_values_own() {
        use crate::json::{Json, WriteJson};
        struct Nested(Json);
        impl WriteJson for Nested {
            fn write_json(&self, out: &mut String) {
                // A digest taken while the outer value is being written.
                let inner = Digest::of_written(&self.0);
                Json::Array(vec![self.0.clone(), Json::str(inner.to_string())]).write_json(out);
            }
        }
        let mut values: Vec<Json> = (0..40u64)
            .map(|n| {
                let text = "x\"y\u{1}é".repeat((n * 37 % 300) as usize);
                Json::Array(vec![Json::u64(n), Json::str(text)])
            })
            .collect();
        values.push(Json::Null);
        values.push(Json::str(String::new()));
        for (i, v) in values.iter().enumerate() {
            assert_eq!(Digest::of_written(v), Digest::of(v.to_canonical_string().as_bytes()), "value {i}");
            let nested = Nested(v.clone());
            let expected = Json::Array(vec![v.clone(), Json::str(Digest::of_json(v).to_string())]);
            assert_eq!(Digest::of_written(&nested), Digest::of_json(&expected), "nested value {i}");
        }
    }

    #[test]
    fn known_answers() {
        assert_eq!(Digest::of(b"").to_string(), EMPTY);
        assert_eq!(
            Digest::of(b"abc").hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Digest of a value is over its canonical bytes: `{ "a" : 1 }` hashes as `{"a":1}`.
        let value = crate::json::parse(br#"{ "a" : 1 }"#).unwrap();
        assert_eq!(Digest::of_json(&value), Digest::of(br#"{"a":1}"#));
    }

    #[test]
    fn parse_round_trips() {
        let d = Digest::parse(EMPTY).unwrap();
        assert_eq!(d, Digest::of(b""));
        assert_eq!(d.to_string(), EMPTY);
        assert_eq!(EMPTY.parse::<Digest>(), Ok(d));
        assert_eq!(format!("{d:?}"), format!("Digest({EMPTY})"));
    }

    #[test]
    fn parse_rejects_malformed_text() {
        let hex = &EMPTY["sha256:".len()..];
        for bad in [
            String::new(),
            hex.to_owned(),
            format!("sha256:{}", hex.to_uppercase()),
            format!("SHA256:{hex}"),
            format!("sha-256:{hex}"),
            format!("sha256:{}", &hex[..63]),
            format!("sha256:{hex}0"),
            format!("sha256: {}", &hex[1..]),
            format!("sha256:{}g", &hex[..63]),
            format!(" sha256:{hex}"),
            format!("sha256:{hex}\n"),
            format!("sha256:{}é", &hex[..62]),
        ] {
            assert_eq!(Digest::parse(&bad), Err(DigestError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn parse_rejects_the_zero_digest() {
        let zero = format!("sha256:{}", "0".repeat(64));
        assert_eq!(Digest::parse(&zero), Err(DigestError::Zero));
        assert!(Digest([0; 32]).is_zero());
        assert!(!Digest::of(b"").is_zero());
    }

    #[test]
    fn json_form_is_the_text_form() {
        let d = Digest::of(b"x");
        assert_eq!(d.to_json(), Json::String(d.to_string()));
        assert_eq!(Digest::from_json(&d.to_json()), Ok(d));
        assert!(Digest::from_json(&Json::u64(1)).is_err());
        assert!(Digest::from_json(&Json::str("sha256:00")).is_err());
    }
}
