//! Scenario lookup for `--scenario NAME|FILE|DIR` and for regression files.
//!
//! Built-in scenarios are registered by name and make up the default campaign. Bundled
//! scenario files (the package's `sim/scenarios/*.json`, compiled in) are registered by name
//! too, listed, but run only when named. Other scenario files go through an optional loader
//! that a world installs, one file or every file of a directory. The CLI only talks to a
//! [`Registry`], so adding a world never changes the CLI.

use std::error::Error as StdError;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::limits::MAX_SCENARIO_DIR_FILES;
use crate::world::Scenario;

/// Turns a scenario file into a scenario. The error is the loader's own typed error, boxed.
pub type ScenarioFileLoader =
    dyn Fn(&Path) -> Result<Arc<dyn Scenario>, Box<dyn StdError + Send + Sync>> + Send + Sync;

/// Why `--scenario` did not name a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("unknown scenario `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error(
        "`{path}` looks like a scenario file, but no registered world loads scenario files yet"
    )]
    FilesUnsupported { path: String },
    #[error("cannot load scenario file `{path}`: {source}")]
    FileLoad {
        path: String,
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    #[error("scenario `{0}` is registered twice")]
    Duplicate(String),
    #[error("`{path}` is a directory: `run --scenario DIR` runs every scenario file in it, `replay` and `minimize` take one scenario")]
    Directory { path: String },
    #[error("cannot read directory `{path}`: {message}")]
    ReadDir { path: String, message: String },
    #[error("directory `{path}` holds no `*.{extension}` scenario files")]
    EmptyDirectory { path: String, extension: &'static str },
    #[error("directory `{path}` holds more than {max} scenario files")]
    TooManyFiles { path: String, max: usize },
}

/// The scenarios a binary knows.
#[derive(Default)]
pub struct Registry {
    scenarios: Vec<Arc<dyn Scenario>>,
    bundled: Vec<Arc<dyn Scenario>>,
    /// The scenario file extension (without the dot) and its loader.
    file_loader: Option<(&'static str, Box<ScenarioFileLoader>)>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds a built-in scenario (part of the default campaign); names must be unique.
    pub fn register(&mut self, scenario: Arc<dyn Scenario>) -> Result<(), ResolveError> {
        if self.get(scenario.name()).is_some() {
            return Err(ResolveError::Duplicate(scenario.name().to_string()));
        }
        self.scenarios.push(scenario);
        Ok(())
    }

    /// Adds a bundled scenario file: listed and found by name, but run only when named (or
    /// with its directory); names must be unique.
    pub fn register_bundled(&mut self, scenario: Arc<dyn Scenario>) -> Result<(), ResolveError> {
        if self.get(scenario.name()).is_some() {
            return Err(ResolveError::Duplicate(scenario.name().to_string()));
        }
        self.bundled.push(scenario);
        Ok(())
    }

    /// Installs the loader for `--scenario FILE` and `--scenario DIR` (the files of a
    /// directory whose extension is `extension`).
    pub fn set_file_loader(&mut self, extension: &'static str, loader: Box<ScenarioFileLoader>) {
        self.file_loader = Some((extension, loader));
    }

    /// Built-in scenarios, in registration order: what `run` runs by default.
    pub fn scenarios(&self) -> &[Arc<dyn Scenario>] {
        &self.scenarios
    }

    /// Bundled scenario files, in registration order.
    pub fn bundled(&self) -> &[Arc<dyn Scenario>] {
        &self.bundled
    }

    /// A built-in or bundled scenario by name.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Scenario>> {
        self.scenarios
            .iter()
            .chain(&self.bundled)
            .find(|s| s.name() == name)
            .cloned()
    }

    /// A registered name, else a file path (anything with a path separator or an extension,
    /// or an existing file) through the file loader. A directory is an error: it names
    /// several scenarios (see [`Registry::resolve_all`]).
    pub fn resolve(&self, arg: &str) -> Result<Arc<dyn Scenario>, ResolveError> {
        if let Some(s) = self.get(arg) {
            return Ok(s);
        }
        let path = Path::new(arg);
        if path.is_dir() {
            return Err(ResolveError::Directory {
                path: arg.to_string(),
            });
        }
        let looks_like_file =
            arg.contains('/') || arg.contains('\\') || path.extension().is_some() || path.is_file();
        if !looks_like_file {
            let known: Vec<&str> = self
                .scenarios
                .iter()
                .chain(&self.bundled)
                .map(|s| s.name())
                .collect();
            return Err(ResolveError::Unknown {
                name: arg.to_string(),
                known: known.join(", "),
            });
        }
        let (_, loader) = self
            .file_loader
            .as_ref()
            .ok_or_else(|| ResolveError::FilesUnsupported {
                path: arg.to_string(),
            })?;
        loader(path).map_err(|source| ResolveError::FileLoad {
            path: arg.to_string(),
            source,
        })
    }

    /// Like [`Registry::resolve`], but a directory (that is not a scenario name) stands for
    /// every scenario file in it, in file-name order.
    pub fn resolve_all(&self, arg: &str) -> Result<Vec<Arc<dyn Scenario>>, ResolveError> {
        let path = Path::new(arg);
        if self.get(arg).is_some() || !path.is_dir() {
            return Ok(vec![self.resolve(arg)?]);
        }
        let (extension, _) = self
            .file_loader
            .as_ref()
            .ok_or_else(|| ResolveError::FilesUnsupported {
                path: arg.to_string(),
            })?;
        let read_dir = |e: std::io::Error| ResolveError::ReadDir {
            path: arg.to_string(),
            message: e.to_string(),
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in fs::read_dir(path).map_err(read_dir)? {
            let file = entry.map_err(read_dir)?.path();
            if file.extension().is_some_and(|e| e == *extension) && file.is_file() {
                if files.len() == MAX_SCENARIO_DIR_FILES {
                    return Err(ResolveError::TooManyFiles {
                        path: arg.to_string(),
                        max: MAX_SCENARIO_DIR_FILES,
                    });
                }
                files.push(file);
            }
        }
        if files.is_empty() {
            return Err(ResolveError::EmptyDirectory {
                path: arg.to_string(),
                extension,
            });
        }
        files.sort();
        files
            .iter()
            .map(|f| self.resolve(&f.display().to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{RunOptions, RunReport};

    struct Named(&'static str);
    impl Scenario for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn run(&self, seed: u64, _: &RunOptions) -> RunReport {
            RunReport::new(self.0, seed)
        }
    }

    #[test]
    fn resolves_names_and_rejects_unknown_ones() {
        let mut r = Registry::new();
        r.register(Arc::new(Named("a"))).unwrap();
        r.register(Arc::new(Named("b"))).unwrap();
        assert_eq!(r.resolve("b").unwrap().name(), "b");
        match r.resolve("c") {
            Err(ResolveError::Unknown { name, known }) => {
                assert_eq!(name, "c");
                assert_eq!(known, "a, b");
            }
            other => panic!("{:?}", other.map(|s| s.name().to_string())),
        }
    }

    #[test]
    fn duplicate_names_are_rejected() {
        let mut r = Registry::new();
        r.register(Arc::new(Named("a"))).unwrap();
        assert!(matches!(
            r.register(Arc::new(Named("a"))),
            Err(ResolveError::Duplicate(_))
        ));
    }

    #[test]
    fn files_need_a_loader() {
        let mut r = Registry::new();
        assert!(matches!(
            r.resolve("scenarios/x.scn"),
            Err(ResolveError::FilesUnsupported { .. })
        ));
        r.set_file_loader("scn", Box::new(|p: &Path| {
            if p.ends_with("good.scn") {
                Ok(Arc::new(Named("from-file")) as Arc<dyn Scenario>)
            } else {
                Err("bad file".into())
            }
        }));
        assert_eq!(r.resolve("dir/good.scn").unwrap().name(), "from-file");
        assert!(matches!(
            r.resolve("dir/bad.scn"),
            Err(ResolveError::FileLoad { .. })
        ));
    }

    #[test]
    fn bundled_scenarios_resolve_by_name_but_are_not_the_default() {
        let mut r = Registry::new();
        r.register(Arc::new(Named("a"))).unwrap();
        r.register_bundled(Arc::new(Named("b"))).unwrap();
        assert!(matches!(
            r.register_bundled(Arc::new(Named("a"))),
            Err(ResolveError::Duplicate(_))
        ));
        assert_eq!(r.scenarios().len(), 1);
        assert_eq!(r.resolve("b").unwrap().name(), "b");
        assert_eq!(r.resolve_all("b").unwrap().len(), 1);
    }
}
