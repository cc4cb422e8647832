//! Scenario lookup for `--scenario NAME|FILE` and for regression files.
//!
//! Built-in scenarios are registered by name; scenario files go through an optional loader that
//! a world installs (the kernel world will parse `scenarios/*`). The CLI only talks to a
//! [`Registry`], so adding a world never changes the CLI.

use std::error::Error as StdError;
use std::path::Path;
use std::sync::Arc;

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
}

/// The scenarios a binary knows.
#[derive(Default)]
pub struct Registry {
    scenarios: Vec<Arc<dyn Scenario>>,
    file_loader: Option<Box<ScenarioFileLoader>>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds a built-in scenario; names must be unique.
    pub fn register(&mut self, scenario: Arc<dyn Scenario>) -> Result<(), ResolveError> {
        if self.get(scenario.name()).is_some() {
            return Err(ResolveError::Duplicate(scenario.name().to_string()));
        }
        self.scenarios.push(scenario);
        Ok(())
    }

    /// Installs the loader for `--scenario FILE`.
    pub fn set_file_loader(&mut self, loader: Box<ScenarioFileLoader>) {
        self.file_loader = Some(loader);
    }

    /// Registered scenarios, in registration order.
    pub fn scenarios(&self) -> &[Arc<dyn Scenario>] {
        &self.scenarios
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Scenario>> {
        self.scenarios.iter().find(|s| s.name() == name).cloned()
    }

    /// A registered name, else a file path (anything with a path separator or an extension,
    /// or an existing file) through the file loader.
    pub fn resolve(&self, arg: &str) -> Result<Arc<dyn Scenario>, ResolveError> {
        if let Some(s) = self.get(arg) {
            return Ok(s);
        }
        let path = Path::new(arg);
        let looks_like_file =
            arg.contains('/') || arg.contains('\\') || path.extension().is_some() || path.is_file();
        if !looks_like_file {
            let known: Vec<&str> = self.scenarios.iter().map(|s| s.name()).collect();
            return Err(ResolveError::Unknown {
                name: arg.to_string(),
                known: known.join(", "),
            });
        }
        let loader = self
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
        r.set_file_loader(Box::new(|p: &Path| {
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
}
