//! A small deterministic PRNG for tests and for the simulator's direct (no-runtime) mode.

use std::sync::Mutex;

use super::Rng;

/// xoshiro256** seeded through SplitMix64 (the seeding its authors recommend). Not
/// cryptographic; the same seed always yields the same stream, on every platform.
///
/// ```
/// use keel::env::{Rng, SeededRng};
/// let (a, b) = (SeededRng::new(42), SeededRng::new(42));
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Debug)]
pub struct SeededRng {
    state: Mutex<[u64; 4]>,
}

impl SeededRng {
    pub fn new(seed: u64) -> SeededRng {
        let mut sm = seed;
        let state =
            [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        SeededRng { state: Mutex::new(state) }
    }

    /// An independent generator seeded from this one's next output (e.g. one per simulated
    /// component, so adding draws in one does not shift the others).
    pub fn fork(&self) -> SeededRng {
        SeededRng::new(self.next_u64())
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn xoshiro256_star_star(s: &mut [u64; 4]) -> u64 {
    let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
    let t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3].rotate_left(45);
    result
}

impl Rng for SeededRng {
    fn next_u64(&self) -> u64 {
        // A poisoned lock only means a holder panicked mid-draw; the state is still a valid state.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        xoshiro256_star_star(&mut state)
    }

    fn fill_bytes(&self, buf: &mut [u8]) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for chunk in buf.chunks_mut(8) {
            let word = xoshiro256_star_star(&mut state).to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // SplitMix64 from seed 0, as published with the reference C code.
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut s), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn xoshiro_reference_values() {
        // xoshiro256** from state [1, 2, 3, 4], computed with an independent transcription of
        // the reference C code.
        let mut s = [1, 2, 3, 4];
        let got: Vec<u64> = (0..4).map(|_| xoshiro256_star_star(&mut s)).collect();
        assert_eq!(got, [11_520, 0, 1_509_978_240, 1_215_971_899_390_074_240]);
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let (a, b, c) = (SeededRng::new(1), SeededRng::new(1), SeededRng::new(2));
        let sa: Vec<u64> = (0..64).map(|_| a.next_u64()).collect();
        let sb: Vec<u64> = (0..64).map(|_| b.next_u64()).collect();
        let sc: Vec<u64> = (0..64).map(|_| c.next_u64()).collect();
        assert_eq!(sa, sb);
        assert_ne!(sa, sc);
    }

    #[test]
    fn stream_is_pinned() {
        // Snapshots and recorded seeds depend on this exact stream; changing it is a breaking change.
        let rng = SeededRng::new(0);
        let mut sm = 0;
        let mut s =
            [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        for _ in 0..8 {
            assert_eq!(rng.next_u64(), xoshiro256_star_star(&mut s));
        }
    }

    #[test]
    fn fill_bytes_is_the_little_endian_stream_including_partial_tail() {
        let mut buf = [0u8; 13];
        SeededRng::new(9).fill_bytes(&mut buf);
        let words = SeededRng::new(9);
        let (w0, w1) = (words.next_u64().to_le_bytes(), words.next_u64().to_le_bytes());
        assert_eq!(&buf[..8], &w0);
        assert_eq!(&buf[8..], &w1[..5]);
    }

    #[test]
    fn fork_is_deterministic_and_independent() {
        let (a, b) = (SeededRng::new(5), SeededRng::new(5));
        let (fa, fb) = (a.fork(), b.fork());
        assert_eq!(fa.next_u64(), fb.next_u64());
        assert_ne!(a.next_u64(), fa.next_u64());
    }
}
