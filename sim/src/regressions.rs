//! Failing seeds kept forever: `sim/regressions/*.txt`, replayed before every campaign.
//!
//! One entry per line, `SCENARIO SEED`, optionally followed by `# comment`; blank lines and
//! lines starting with `#` are ignored (the format of proptest's regression files, by name).
//! Files are read in file-name order; an entry listed twice runs once. `keel-sim run` appends
//! each new failing seed to `seeds.txt` itself (`cli::Cli`, with the date and what broke).

use std::fs;
use std::path::{Path, PathBuf};

use crate::limits::MAX_REGRESSION_FILE_BYTES;

/// One stored failing seed, and where it was written down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regression {
    pub scenario: String,
    pub seed: u64,
    pub file: PathBuf,
    /// 1-based line number in `file`.
    pub line: usize,
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("`{scenario}` has no seed (expected `SCENARIO SEED  # comment`)")]
    MissingSeed { scenario: String },
    #[error("seed `{text}` is not a decimal u64")]
    BadSeed { text: String },
    #[error("unexpected `{text}` after the seed (start comments with `#`)")]
    ExtraField { text: String },
}

/// Why regressions could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is {bytes} bytes, more than the {max} allowed")]
    TooLarge { path: PathBuf, bytes: u64, max: u64 },
    #[error("{path} is not UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error("{path}:{line}: {error}")]
    Line {
        path: PathBuf,
        line: usize,
        #[source]
        error: LineError,
    },
}

/// One parsed line of a regression file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line number.
    pub line: usize,
    pub scenario: String,
    pub seed: u64,
}

/// The first bad line of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub error: LineError,
}

/// Parses one file's text, stopping at the first bad line.
pub fn parse_regressions(text: &str) -> Result<Vec<Entry>, BadLine> {
    let mut entries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let content = raw.split_once('#').map_or(raw, |(before, _)| before);
        let mut fields = content.split_whitespace();
        let Some(scenario) = fields.next() else {
            continue;
        };
        let Some(seed_text) = fields.next() else {
            let error = LineError::MissingSeed {
                scenario: scenario.to_string(),
            };
            return Err(BadLine {
                line: line_no,
                error,
            });
        };
        let seed = parse_seed(seed_text).ok_or_else(|| BadLine {
            line: line_no,
            error: LineError::BadSeed {
                text: seed_text.to_string(),
            },
        })?;
        if let Some(extra) = fields.next() {
            let error = LineError::ExtraField {
                text: extra.to_string(),
            };
            return Err(BadLine {
                line: line_no,
                error,
            });
        }
        entries.push(Entry {
            line: line_no,
            scenario: scenario.to_string(),
            seed,
        });
    }
    Ok(entries)
}

/// A seed or count as written by a person: plain decimal digits only (`+5`, `0x5` or `5_000`
/// would read differently elsewhere). Shared with the CLI.
pub(crate) fn parse_seed(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Every entry of every `*.txt` file in `dir`, files in name order, duplicates dropped.
pub fn load_regressions(dir: &Path) -> Result<Vec<Regression>, RegressionError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RegressionError::Io { path, source }
    };
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.extension().is_some_and(|e| e == "txt") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();

    let mut out: Vec<Regression> = Vec::new();
    for path in files {
        let bytes = fs::metadata(&path).map_err(io(&path))?.len();
        if bytes > MAX_REGRESSION_FILE_BYTES {
            return Err(RegressionError::TooLarge {
                path,
                bytes,
                max: MAX_REGRESSION_FILE_BYTES,
            });
        }
        let raw = fs::read(&path).map_err(io(&path))?;
        let text =
            String::from_utf8(raw).map_err(|_| RegressionError::NotUtf8 { path: path.clone() })?;
        let entries =
            parse_regressions(&text).map_err(|BadLine { line, error }| RegressionError::Line {
                path: path.clone(),
                line,
                error,
            })?;
        for Entry {
            line,
            scenario,
            seed,
        } in entries
        {
            if !out.iter().any(|r| r.scenario == scenario && r.seed == seed) {
                out.push(Regression {
                    scenario,
                    seed,
                    file: path.clone(),
                    line,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_lines_parse() {
        let text =
            "# header\n\nclock-and-rng 42  # found 2024\n  other 0\nx 18446744073709551615#c\n";
        assert_eq!(
            parse_regressions(text).unwrap(),
            vec![
                Entry {
                    line: 3,
                    scenario: "clock-and-rng".into(),
                    seed: 42
                },
                Entry {
                    line: 4,
                    scenario: "other".into(),
                    seed: 0
                },
                Entry {
                    line: 5,
                    scenario: "x".into(),
                    seed: u64::MAX
                },
            ]
        );
    }

    #[test]
    fn bad_lines_are_typed_errors_with_line_numbers() {
        assert_eq!(
            parse_regressions("ok 1\nlonely\n"),
            Err(BadLine {
                line: 2,
                error: LineError::MissingSeed {
                    scenario: "lonely".into()
                }
            })
        );
        assert_eq!(
            parse_regressions("a -3"),
            Err(BadLine {
                line: 1,
                error: LineError::BadSeed { text: "-3".into() }
            })
        );
        assert_eq!(
            parse_regressions("a 0x10"),
            Err(BadLine {
                line: 1,
                error: LineError::BadSeed {
                    text: "0x10".into()
                }
            })
        );
        assert_eq!(
            parse_regressions("a +1"),
            Err(BadLine {
                line: 1,
                error: LineError::BadSeed { text: "+1".into() }
            })
        );
        assert_eq!(
            parse_regressions("a 18446744073709551616"),
            Err(BadLine {
                line: 1,
                error: LineError::BadSeed {
                    text: "18446744073709551616".into()
                }
            })
        );
        assert_eq!(
            parse_regressions("a 1 comment"),
            Err(BadLine {
                line: 1,
                error: LineError::ExtraField {
                    text: "comment".into()
                }
            })
        );
    }
}
