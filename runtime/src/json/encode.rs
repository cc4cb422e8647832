//! The canonical encoding.
use super::Json;

impl Json {
    /// The canonical bytes of this value.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        unimplemented!("json encoder: being implemented")
    }
    /// The canonical encoding as a string.
    pub fn to_canonical_string(&self) -> String {
        unimplemented!("json encoder: being implemented")
    }
    /// The length in bytes of the canonical encoding, without allocating it.
    pub fn canonical_len(&self) -> usize {
        unimplemented!("json encoder: being implemented")
    }
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_canonical_string())
    }
}
