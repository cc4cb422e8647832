//! SHA-256 digests with the text form `sha256:<64 lowercase hex>`.
use super::Json;

/// A SHA-256 digest. The all-zero digest is invalid as a value (it is never the digest of any
/// input in practice and serves as "absent" on the wire only where a protocol says so).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("digest must be `sha256:` followed by 64 lowercase hex characters")]
    Malformed,
    #[error("the zero digest is not a valid digest")]
    Zero,
}

impl Digest {
    /// SHA-256 of `bytes`.
    pub fn of(_bytes: &[u8]) -> Digest {
        unimplemented!("digest: being implemented")
    }
    /// SHA-256 of the canonical encoding of `value`.
    pub fn of_json(value: &Json) -> Digest {
        Digest::of(&value.to_canonical_bytes())
    }
    /// Parses the text form; rejects malformed text and the zero digest.
    pub fn parse(_text: &str) -> Result<Digest, DigestError> {
        unimplemented!("digest: being implemented")
    }
    /// Lowercase hex of the 32 bytes (no prefix).
    pub fn hex(&self) -> String {
        unimplemented!("digest: being implemented")
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
