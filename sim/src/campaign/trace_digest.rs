//! One digest over every run of a campaign: SHA-256 of each run's `(run index, trace hash)`,
//! summed lane-wise. The sum is order-independent (results arrive in any order from the
//! workers) and needs constant memory, yet changes when any run's trace changes, so two builds
//! (say with and without the `mutations` feature) can be compared by one line of the summary.

use sha2::{Digest, Sha256};

/// The running digest; [`TraceDigest::hex`] is its printable form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceDigest {
    lanes: [u64; 4],
}

impl TraceDigest {
    /// Adds run `index` whose trace hashed to `trace_hash`.
    pub fn add(&mut self, index: u64, trace_hash: &[u8; 32]) {
        let mut h = Sha256::new();
        h.update(index.to_be_bytes());
        h.update(trace_hash);
        let d: [u8; 32] = h.finalize().into();
        for (lane, chunk) in self.lanes.iter_mut().zip(d.chunks_exact(8)) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            *lane = lane.wrapping_add(u64::from_be_bytes(word));
        }
    }

    /// Lowercase hex, 64 digits.
    pub fn hex(&self) -> String {
        self.lanes.iter().map(|l| format!("{l:016x}")).collect()
    }

    /// Reads [`TraceDigest::hex`] back (64 lowercase hex digits).
    pub fn from_hex(text: &str) -> Option<TraceDigest> {
        let ok = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            return None;
        }
        let mut lanes = [0u64; 4];
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = u64::from_str_radix(text.get(i * 16..i * 16 + 16)?, 16).ok()?;
        }
        Some(TraceDigest { lanes })
    }

    /// Adds every run of `other` (disjoint runs, say another shard's): the result is the
    /// digest of both sets of runs together.
    pub fn merge(&mut self, other: &TraceDigest) {
        for (lane, o) in self.lanes.iter_mut().zip(other.lanes) {
            *lane = lane.wrapping_add(o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_does_not_matter_but_content_and_position_do() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let mut x = TraceDigest::default();
        x.add(0, &a);
        x.add(1, &b);
        let mut y = TraceDigest::default();
        y.add(1, &b);
        y.add(0, &a);
        assert_eq!(x, y);
        assert_eq!(x.hex().len(), 64);
        let mut swapped = TraceDigest::default();
        swapped.add(0, &b);
        swapped.add(1, &a);
        assert_ne!(x, swapped);
        let (mut first, mut second) = (TraceDigest::default(), TraceDigest::default());
        first.add(1, &b);
        second.add(0, &a);
        first.merge(&second);
        assert_eq!(first, x);
        assert_eq!(TraceDigest::from_hex(&x.hex()), Some(x.clone()));
        assert_eq!(TraceDigest::from_hex("ab"), None);
        assert_eq!(TraceDigest::from_hex(&x.hex().to_uppercase()), None);
        let mut changed = TraceDigest::default();
        changed.add(0, &a);
        changed.add(1, &a);
        assert_ne!(x, changed);
    }
}
