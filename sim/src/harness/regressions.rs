//! The regressions file of a user's crate: failing seeds, one `CAMPAIGN SEED  # what broke`
//! per line (the format of keel-sim's own `sim/regressions/*.txt`), replayed before the
//! campaign's seeds and appended to when a new seed fails.

use crate::regressions::parse_regressions;
use crate::world::RunReport;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Longest comment written beside a recorded seed, in bytes.
const MAX_COMMENT_BYTES: usize = 200;

pub(crate) struct RegressionFile {
    path: PathBuf,
}

impl RegressionFile {
    /// `path`, relative to the crate under test when cargo runs the test (cargo sets
    /// `CARGO_MANIFEST_DIR` for it), else to the working directory.
    pub fn new(path: &Path) -> RegressionFile {
        let path = match std::env::var_os("CARGO_MANIFEST_DIR") {
            Some(dir) if path.is_relative() => PathBuf::from(dir).join(path),
            _ => path.to_path_buf(),
        };
        RegressionFile { path }
    }

    /// The stored seeds of `campaign`, in file order (a missing file has none).
    pub fn seeds(&self, campaign: &str) -> Result<Vec<u64>, String> {
        let text = match std::fs::metadata(&self.path) {
            Err(_) => return Ok(Vec::new()),
            Ok(m) if m.len() > crate::limits::MAX_REGRESSION_FILE_BYTES => {
                return Err(format!(
                    "{} is {} bytes, more than the {} allowed",
                    self.path.display(),
                    m.len(),
                    crate::limits::MAX_REGRESSION_FILE_BYTES
                ));
            }
            Ok(_) => std::fs::read_to_string(&self.path)
                .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?,
        };
        let entries = parse_regressions(&text)
            .map_err(|bad| format!("{}:{}: {}", self.path.display(), bad.line, bad.error))?;
        let mut seeds = Vec::new();
        for e in entries.into_iter().filter(|e| e.scenario == campaign) {
            if !seeds.contains(&e.seed) {
                seeds.push(e.seed);
            }
        }
        Ok(seeds)
    }

    /// Appends each failing seed not stored yet (at most `MAX_RECORDED_SEEDS` per campaign
    /// run); returns the seeds written.
    pub fn record(&self, campaign: &str, failures: &[RunReport]) -> Result<Vec<u64>, String> {
        let stored = self.seeds(campaign)?;
        let mut lines = String::new();
        let mut written = Vec::new();
        for r in failures {
            if stored.contains(&r.seed)
                || written.contains(&r.seed)
                || written.len() >= crate::limits::MAX_RECORDED_SEEDS
            {
                continue;
            }
            let what = r
                .violations
                .first()
                .map(|v| format!("{}: {}", v.invariant, v.detail))
                .unwrap_or_default();
            let mut comment: String = what.replace(['\n', '\r'], " ");
            if comment.len() > MAX_COMMENT_BYTES {
                let mut cut = MAX_COMMENT_BYTES;
                while !comment.is_char_boundary(cut) {
                    cut -= 1;
                }
                comment.truncate(cut);
            }
            lines.push_str(&format!("{campaign} {}  # {comment}\n", r.seed));
            written.push(r.seed);
        }
        if written.is_empty() {
            return Ok(written);
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| format!("cannot open {}: {e}", self.path.display()))?;
        file.write_all(lines.as_bytes())
            .map_err(|e| format!("cannot append to {}: {e}", self.path.display()))?;
        Ok(written)
    }
}
