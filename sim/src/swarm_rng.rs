//! The pure random source a world uses to expand a seed into its swarm options and fault
//! schedule, before (and independently of) any runtime: `schedule_of(seed)` must not need to
//! run the world.

/// SplitMix64: tiny, fast, and fully determined by `(seed, stream)`.
#[derive(Debug, Clone)]
pub struct SwarmRng {
    state: u64,
}

impl SwarmRng {
    /// A generator for `seed`; different `stream` values give unrelated sequences, so the swarm
    /// options and the fault schedule can be drawn independently.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = SwarmRng {
            state: seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F),
        };
        // Mix once so that nearby seeds start far apart.
        rng.next_u64();
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Rejection keeps the draw unbiased.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.below(span),
            None => self.next_u64(),
        }
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `choices`, uniformly; `None` for an empty slice.
    pub fn pick<'a, T>(&mut self, choices: &'a [T]) -> Option<&'a T> {
        let i = usize::try_from(self.below(choices.len() as u64)).ok()?;
        choices.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_stream_same_sequence() {
        let a: Vec<u64> = {
            let mut r = SwarmRng::new(5, 1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SwarmRng::new(5, 1);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        let mut c = SwarmRng::new(5, 2);
        assert_ne!(a[0], c.next_u64());
        let mut d = SwarmRng::new(6, 1);
        assert_ne!(a[0], d.next_u64());
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = SwarmRng::new(0, 0);
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
            let x = r.range_inclusive(3, 5);
            assert!((3..=5).contains(&x));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range_inclusive(9, 2), 9);
        let _ = r.range_inclusive(0, u64::MAX);
        assert_eq!(r.pick::<u8>(&[]), None);
        assert_eq!(r.pick(&[4]), Some(&4));
        assert!(!r.percent(0));
        assert!(r.percent(100));
    }
}
