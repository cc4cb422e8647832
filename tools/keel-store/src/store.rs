//! One opened store of either kind, read through the same few questions.

use crate::cli::StoreArg;
use keel::kernel::commit::{
    CommitError, CommitRecord, FileCommitter, FileOptions, Head, OpenError, TreeDamage, LOG_FILE_NAME,
};
use keel::kernel::ids::ProcessId;
use keel_store_sqlite::SqliteCommitter;
use std::path::{Path, PathBuf};

/// The first bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// The first bytes of a file store's log of any format version (the file store itself refuses
/// the versions it cannot read, saying what to do).
const LOG_MAGIC_PREFIX: &[u8] = b"keel.commits.";

pub enum Store {
    File(FileCommitter),
    Sqlite(SqliteCommitter),
}

/// A tree as `list` shows it: its head, or the damage that keeps it from being read.
pub struct Listed {
    pub root: String,
    pub head: Result<Head, String>,
}

/// What the command will do with the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Read only: a file store is opened read-only (nothing created, cut or written); a SQLite
    /// store read-only (no journal-mode change, no migration, nothing written; an empty or
    /// foreign file is refused as it is).
    Inspect,
    /// Write (compact, repair): a file store is opened as its writer; a SQLite store as its
    /// writer, which never makes a new store.
    Write,
}

impl Store {
    /// Opens an existing store (never creates one: a mistyped path is an error, not a new
    /// empty store).
    pub fn open(arg: &StoreArg, intent: Intent) -> Result<Store, String> {
        match arg {
            StoreArg::File(dir) => open_file(dir, intent),
            StoreArg::Sqlite(path) => open_sqlite(path, intent),
            StoreArg::Detect(path) => {
                if path.is_dir() {
                    return open_file(path, intent);
                }
                if !path.exists() {
                    return Err(format!("{} does not exist (keel-store never creates a store)", path.display()));
                }
                let mut magic = [0u8; 16];
                let read = std::fs::File::open(path)
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                    .map_err(|e| format!("{}: {e}", path.display()));
                match read {
                    Ok(()) if &magic == SQLITE_MAGIC => open_sqlite(path, intent),
                    Ok(()) if magic.starts_with(LOG_MAGIC_PREFIX) => {
                        open_file(path.parent().unwrap_or_else(|| Path::new(".")), intent)
                    }
                    Ok(()) | Err(_) => Err(format!(
                        "{} is neither a file store directory, a keel commit log nor a SQLite file \
                         (it starts with neither keel's log header nor SQLite's)",
                        path.display()
                    )),
                }
            }
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Store::File(_) => "file",
            Store::Sqlite(_) => "sqlite",
        }
    }

    /// Every tree, in root order, damaged ones included.
    pub fn trees(&self) -> Result<Vec<Listed>, String> {
        match self {
            Store::File(f) => {
                let damaged = f.damaged_trees();
                let mut out: Vec<Listed> = f
                    .roots()
                    .into_iter()
                    .filter(|r| !damaged.iter().any(|d| d.root == r.as_str()))
                    .map(|r| Listed {
                        head: f.head(&r).ok_or_else(|| "no head".to_owned()),
                        root: r.as_str().to_owned(),
                    })
                    .collect();
                out.extend(damaged.into_iter().map(|d| Listed {
                    root: d.root.clone(),
                    head: Err(format!("damaged at {}: {}", d.location, d.reason)),
                }));
                out.sort_by(|a, b| a.root.cmp(&b.root));
                Ok(out)
            }
            Store::Sqlite(s) => {
                let trees = s.trees().map_err(|e| e.to_string())?;
                Ok(trees
                    .into_iter()
                    .map(|t| match t {
                        Ok(summary) => Listed {
                            root: summary.root.as_str().to_owned(),
                            head: s
                                .head(&summary.root)
                                .map_err(|e| e.to_string())
                                .and_then(|h| h.ok_or_else(|| "no head".to_owned())),
                        },
                        Err(d) => Listed {
                            root: d.root.clone(),
                            head: Err(format!("damaged at {}: {}", d.location, d.reason)),
                        },
                    })
                    .collect())
            }
        }
    }

    /// The head of `root` (a damaged tree is an error naming the damage).
    pub fn head(&self, root: &ProcessId) -> Result<Option<Head>, CommitError> {
        match self {
            Store::File(f) => {
                if let Some(d) = f.damaged_trees().into_iter().find(|d| d.root == root.as_str()) {
                    return Err(d.error(root));
                }
                Ok(f.head(root))
            }
            Store::Sqlite(s) => s.head(root),
        }
    }

    pub fn history(&self, root: &ProcessId) -> Result<Vec<CommitRecord>, CommitError> {
        match self {
            Store::File(f) => Ok(f.history(root)),
            Store::Sqlite(s) => s.history(root),
        }
    }

    /// The damage the store itself finds (the file store at open; SQLite by checking every
    /// row).
    pub fn damaged_trees(&self) -> Result<Vec<TreeDamage>, String> {
        match self {
            Store::File(f) => Ok(f.damaged_trees()),
            Store::Sqlite(s) => s.damaged_trees().map_err(|e| e.to_string()),
        }
    }

    /// A torn tail the store's log ends in (file store, opened read-only: left in place),
    /// described for people: its bytes, the tree and sequence its unfinished record names
    /// where its metadata was written whole, and the sequence that tree stays at.
    pub fn torn_tail(&self) -> Option<String> {
        let Store::File(f) = self else { return None };
        let torn = f.recovery().torn_tail.as_ref()?;
        let record = match (&torn.root, torn.sequence) {
            (Some(root), sequence) => {
                let at = ProcessId::parse(root).ok().and_then(|r| f.head(&r)).map_or_else(
                    || "that tree has no acknowledged commit".to_owned(),
                    |h| format!("{root} stays at its last acknowledged sequence {}", h.sequence),
                );
                let seq = sequence.map(|s| format!(" (sequence {s})")).unwrap_or_default();
                format!("an unfinished record of tree {root}{seq}, never acknowledged; {at}")
            }
            (None, _) => "an unfinished record whose tree is not readable, never acknowledged".to_owned(),
        };
        Some(format!(
            "torn tail: {} bytes at byte {} after the last complete record: {record}; cutting it \
             drops no acknowledged commit. Nothing was changed: `keel-store repair` (or the next \
             writer's open) cuts it off",
            torn.bytes, torn.offset
        ))
    }

    /// The store's size on disk in bytes (the database with its write-ahead log, or the log).
    pub fn bytes_on_disk(&self) -> u64 {
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        match self {
            Store::File(f) => size(f.path()),
            Store::Sqlite(s) => {
                let wal = PathBuf::from(format!("{}-wal", s.path().display()));
                size(s.path()) + size(&wal)
            }
        }
    }

    pub fn sqlite(&self) -> Option<&SqliteCommitter> {
        match self {
            Store::Sqlite(s) => Some(s),
            Store::File(_) => None,
        }
    }

    pub fn file(&self) -> Option<&FileCommitter> {
        match self {
            Store::File(f) => Some(f),
            Store::Sqlite(_) => None,
        }
    }
}

fn open_file(dir: &Path, intent: Intent) -> Result<Store, String> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{} is not a file store: it does not exist (keel-store never creates a store)",
                dir.display()
            ))
        }
        Ok(meta) if !meta.is_dir() => {
            let hint = match dir.file_name() {
                Some(name) if name == LOG_FILE_NAME => format!(
                    "give the directory that holds it: --file {}",
                    dir.parent().unwrap_or_else(|| Path::new(".")).display()
                ),
                _ => "--file takes a file store directory (holding commits.log); a SQLite file \
                      takes --sqlite, and --store detects either"
                    .to_owned(),
            };
            return Err(format!("{} is a file, not a directory; {hint}", dir.display()));
        }
        _ => {}
    }
    let options = FileOptions::default();
    let opened = match intent {
        Intent::Inspect => FileCommitter::open_read_only(dir, options),
        Intent::Write => FileCommitter::open_existing(dir, options),
    };
    opened.map(Store::File).map_err(|e| match e {
        OpenError::NoLog { .. } => {
            format!("{} is not a file store (no {LOG_FILE_NAME} in it)", dir.display())
        }
        OpenError::Locked { .. } if intent == Intent::Inspect => format!(
            "{e} (keel-store reads a file store only while no writer has it open: a record being \
             written would read as a torn tail)"
        ),
        e => e.to_string(),
    })
}

fn open_sqlite(path: &Path, intent: Intent) -> Result<Store, String> {
    if path.is_dir() {
        return Err(format!(
            "{} is a directory, not a SQLite file; --sqlite takes the database file (a file store \
             directory takes --file, and --store detects either)",
            path.display()
        ));
    }
    if !path.is_file() {
        return Err(format!("{} does not exist (keel-store never creates a store)", path.display()));
    }
    let opened = match intent {
        Intent::Inspect => SqliteCommitter::open_read_only(path),
        Intent::Write => SqliteCommitter::open_existing(path),
    };
    opened.map(Store::Sqlite).map_err(|e| e.to_string())
}
