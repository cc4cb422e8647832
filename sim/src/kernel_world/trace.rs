//! The run trace: one line per world event, hashed as it grows (equal seeds must give equal
//! hashes). Lines are kept only when asked for.

use sha2::{Digest as _, Sha256};

pub struct Trace {
    hasher: Sha256,
    lines: Option<Vec<String>>,
}

impl Trace {
    pub fn new(keep: bool) -> Trace {
        Trace { hasher: Sha256::new(), lines: keep.then(Vec::new) }
    }

    pub fn push(&mut self, line: String) {
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        if let Some(lines) = &mut self.lines {
            lines.push(line);
        }
    }

    pub fn finish(self) -> ([u8; 32], Option<Vec<String>>) {
        (self.hasher.finalize().into(), self.lines)
    }
}
