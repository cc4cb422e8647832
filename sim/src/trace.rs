//! A run's trace: the lines a world writes about what happened, hashed as they come.
//!
//! The hash is what `--check` compares, so it is computed whether or not the lines are kept:
//! a campaign over many seeds keeps only 32 bytes per run.

use sha2::{Digest, Sha256};

use crate::world::RunReport;

/// Incrementally hashed trace lines.
///
/// The hash is SHA-256 over every line followed by `\n`. A newline inside a pushed line is
/// written as the two characters `\n`, so lines stay lines and the hash is unambiguous.
#[derive(Debug, Clone)]
pub struct Trace {
    hasher: Sha256,
    lines: Option<Vec<String>>,
    len: u64,
}

impl Trace {
    /// A new trace; `keep_lines` decides whether lines are stored as well as hashed.
    pub fn new(keep_lines: bool) -> Self {
        Trace {
            hasher: Sha256::new(),
            lines: keep_lines.then(Vec::new),
            len: 0,
        }
    }

    pub fn push(&mut self, line: impl Into<String>) {
        let mut line = line.into();
        if line.contains('\n') {
            line = line.replace('\n', "\\n");
        }
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        self.len += 1;
        if let Some(lines) = &mut self.lines {
            lines.push(line);
        }
    }

    /// Number of lines pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The hash and (if kept) the lines.
    pub fn finish(self) -> ([u8; 32], Option<Vec<String>>) {
        (self.hasher.finalize().into(), self.lines)
    }

    /// Writes the hash and kept lines into `report`.
    pub fn finish_into(self, report: &mut RunReport) {
        let (hash, lines) = self.finish();
        report.trace_hash = hash;
        report.trace = lines;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_the_same_whether_lines_are_kept_or_not() {
        let mut kept = Trace::new(true);
        let mut dropped = Trace::new(false);
        for t in [&mut kept, &mut dropped] {
            t.push("a");
            t.push(String::from("b c"));
        }
        assert_eq!(kept.len(), 2);
        let (h1, lines) = kept.finish();
        let (h2, none) = dropped.finish();
        assert_eq!(h1, h2);
        assert_eq!(lines, Some(vec!["a".to_string(), "b c".to_string()]));
        assert_eq!(none, None);
    }

    #[test]
    fn hash_is_sha256_of_lines_with_newlines() {
        let mut t = Trace::new(false);
        t.push("x");
        let (h, _) = t.finish();
        let want: [u8; 32] = Sha256::digest(b"x\n").into();
        assert_eq!(h, want);
    }

    #[test]
    fn line_boundaries_change_the_hash() {
        let mut one = Trace::new(false);
        one.push("a\nb");
        let mut two = Trace::new(false);
        two.push("a");
        two.push("b");
        assert_ne!(one.finish().0, two.finish().0);
    }

    #[test]
    fn embedded_newline_is_escaped_in_kept_lines() {
        let mut t = Trace::new(true);
        t.push("a\nb");
        assert_eq!(t.finish().1, Some(vec!["a\\nb".to_string()]));
    }
}
