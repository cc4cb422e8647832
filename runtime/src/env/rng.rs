//! The randomness port, and the id helper built on it.

/// A source of random bits. Implementations: `TokioEnv` (OS randomness), `MadsimEnv`
/// (madsim's seeded global RNG), [`SeededRng`](super::SeededRng) (deterministic, no runtime).
///
/// Methods take `&self` so one generator can be shared as `Arc<dyn Rng>`.
pub trait Rng: Send + Sync {
    fn next_u64(&self) -> u64;
    fn fill_bytes(&self, buf: &mut [u8]);
}

/// `bytes` random bytes as lowercase hex (`2 * bytes` characters), e.g. for incarnation and
/// attempt ids.
pub fn random_hex(rng: &dyn Rng, bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    rng.fill_bytes(&mut raw);
    let mut hex = String::with_capacity(2 * bytes);
    crate::text::push_lower_hex(&mut hex, &raw);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::SeededRng;

    #[test]
    fn random_hex_is_lowercase_and_sized() {
        let rng = SeededRng::new(7);
        for bytes in [0, 1, 8, 16, 33] {
            let hex = random_hex(&rng, bytes);
            assert_eq!(hex.len(), 2 * bytes);
            assert!(hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{hex}");
        }
    }

    #[test]
    fn random_hex_encodes_the_drawn_bytes() {
        let mut expected = [0u8; 5];
        SeededRng::new(3).fill_bytes(&mut expected);
        let hex = random_hex(&SeededRng::new(3), 5);
        let decoded: Vec<u8> =
            (0..5).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
        assert_eq!(decoded, expected);
    }
}
