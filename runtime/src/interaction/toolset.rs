//! The ToolSet: frozen ordinary
//! tool authority and the separate child Deployment that runs exactly one tool call per
//! Process.
//!
//! The ToolSet binds every tool once, checks names are unique across initial and deferred
//! tools, and builds the tool-child [`Deployment`]: a [`ToolChildDefinition`] plus a
//! [`ToolDispatcher`] over the same entries. The parent Definition receives the manifest from
//! here (deployment ref, initial definitions in registration order, per-name entries). "No
//! ordinary tools" is `Option<ToolSet>::None` upstream, so an empty ToolSet is rejected.

use super::attribution::ToolInvocation;
use super::error::{ErrorKind, InteractionError};
use super::tool_child::ToolChildDefinition;
use super::tool_dispatcher::ToolDispatcher;
use super::window::ToolCatalog;
use crate::chat::{ToolDefinition, ToolResult};
use crate::json::Digest;
use crate::kernel::binding::Deployment;
use crate::kernel::deployment::DeploymentRef;
use crate::limits::MAX_REQUEST_TOOLS;
use crate::text::QualifiedName;
use crate::tool::{bind, BoundTool, Tool};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Suffix appended to the ToolSet name to name the tool-child descriptor.
pub const TOOL_CHILD_NAME_SUFFIX: &str = ".tool_call";

/// What a ToolSet is built from.
pub struct ToolSetConfig {
    /// A kernel qualified name; the child descriptor is named `<name>.tool_call`.
    pub name: String,
    /// The child descriptor's description (kernel bounded text).
    pub description: String,
    /// Initially visible tools, in registration order.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Bound and executable, visible to the model only once advertised.
    pub deferred_tools: Vec<Arc<dyn Tool>>,
    pub observer: Option<Arc<dyn ToolObserver>>,
    pub implementation_digest: Digest,
    pub configuration_digest: Digest,
}

/// One bound tool of the set.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    pub bound: BoundTool,
    pub deferred: bool,
}

/// Observes actual tool call attempts. Observational only: it never alters
/// execution or the Engine's settlement, may run concurrently across children, gets detached
/// copies, and its panics are caught and counted.
pub trait ToolObserver: Send + Sync + 'static {
    /// At the external call boundary, right before the tool runs.
    fn on_tool_started(&self, invocation: &ToolInvocation);
    /// Exactly once per started call.
    fn on_tool_settled(&self, invocation: &ToolInvocation, settlement: &ToolSettlement);
}

/// What an observer learns about one finished attempt: exactly one of a definite `result`,
/// `input_required`, or `failure` with `unknown` set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSettlement {
    pub result: Option<ToolResult>,
    pub input_required: bool,
    pub failure: Option<String>,
    pub unknown: bool,
}

impl ToolSettlement {
    pub(crate) fn result(result: ToolResult) -> ToolSettlement {
        ToolSettlement { result: Some(result), input_required: false, failure: None, unknown: false }
    }
    pub(crate) fn input_required() -> ToolSettlement {
        ToolSettlement { result: None, input_required: true, failure: None, unknown: false }
    }
    pub(crate) fn unknown(failure: String) -> ToolSettlement {
        ToolSettlement { result: None, input_required: false, failure: Some(failure), unknown: true }
    }
}

/// Observer panics isolated so far; each count saturates at `u64::MAX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolObservationFailures {
    pub tool_started_panics: u64,
    pub tool_settled_panics: u64,
}

/// Concurrency-safe saturating panic counters shared by a ToolSet and its Dispatcher.
#[derive(Debug, Default)]
pub(crate) struct ObservationCounters {
    started: AtomicU64,
    settled: AtomicU64,
}

fn saturating_increment(counter: &AtomicU64) {
    // The closure always returns Some, so the update cannot fail.
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(1)));
}

impl ObservationCounters {
    pub(crate) fn record_started_panic(&self) {
        saturating_increment(&self.started);
    }
    pub(crate) fn record_settled_panic(&self) {
        saturating_increment(&self.settled);
    }
    pub(crate) fn snapshot(&self) -> ToolObservationFailures {
        ToolObservationFailures {
            tool_started_panics: self.started.load(Ordering::Relaxed),
            tool_settled_panics: self.settled.load(Ordering::Relaxed),
        }
    }
    #[cfg(test)]
    pub(crate) fn set(&self, started: u64, settled: u64) {
        self.started.store(started, Ordering::Relaxed);
        self.settled.store(settled, Ordering::Relaxed);
    }
}

/// Frozen ordinary tool authority plus its child Deployment. Cheap to clone (shared).
#[derive(Clone)]
pub struct ToolSet {
    inner: Arc<Inner>,
}

struct Inner {
    entries: BTreeMap<String, ToolEntry>,
    /// Initial tool names in registration order.
    initial: Vec<String>,
    deployment: Deployment,
    counters: Arc<ObservationCounters>,
}

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::new(ErrorKind::InvalidToolSet, detail)
}

impl ToolSet {
    /// Binds every tool and builds the child Deployment. Errors are
    /// [`ErrorKind::InvalidToolSet`]: no tools at all, more than [`MAX_REQUEST_TOOLS`], a bind
    /// failure, a name used twice (initial and deferred share one namespace), or an invalid
    /// name or description for the child descriptor.
    pub fn new(config: ToolSetConfig) -> Result<ToolSet, InteractionError> {
        let total = config.tools.len() + config.deferred_tools.len();
        if total == 0 {
            return Err(invalid("a tool set needs at least one tool"));
        }
        if total > MAX_REQUEST_TOOLS {
            return Err(invalid(format!("{total} tools exceed the limit of {MAX_REQUEST_TOOLS}")));
        }
        QualifiedName::parse(&config.name).map_err(|e| invalid(format!("name: {e}")))?;
        let mut entries = BTreeMap::new();
        let mut initial = Vec::with_capacity(config.tools.len());
        let groups = [(false, config.tools), (true, config.deferred_tools)];
        for (deferred, tools) in groups {
            let group = if deferred { "deferred tool" } else { "tool" };
            for (index, tool) in tools.into_iter().enumerate() {
                let bound = bind(tool).map_err(|e| invalid(format!("{group} {index}: {e}")))?;
                let name = bound.name().to_owned();
                if entries.contains_key(&name) {
                    return Err(invalid(format!("tool name `{name}` is registered more than once")));
                }
                if !deferred {
                    initial.push(name.clone());
                }
                entries.insert(name, ToolEntry { bound, deferred });
            }
        }
        let child_name = format!("{}{TOOL_CHILD_NAME_SUFFIX}", config.name);
        let definition = ToolChildDefinition::new(&child_name, &config.description)
            .map_err(|e| e.with_kind(ErrorKind::InvalidToolSet))?;
        let counters = Arc::new(ObservationCounters::default());
        let dispatcher = ToolDispatcher::new(entries.clone(), config.observer, counters.clone());
        let deployment = Deployment::new(
            Arc::new(definition),
            Some(Arc::new(dispatcher)),
            config.implementation_digest,
            config.configuration_digest,
        );
        Ok(ToolSet { inner: Arc::new(Inner { entries, initial, deployment, counters }) })
    }

    /// The tool-child Deployment (ToolChildDefinition + ToolDispatcher).
    pub fn deployment(&self) -> &Deployment {
        &self.inner.deployment
    }

    pub fn deployment_ref(&self) -> &DeploymentRef {
        self.inner.deployment.reference()
    }

    /// The initially visible definitions, in registration order.
    pub fn initial_definitions(&self) -> Vec<ToolDefinition> {
        self.inner.initial.iter().filter_map(|name| self.inner.entries.get(name)).map(definition_of).collect()
    }

    /// The deferred definitions, keyed by name.
    pub fn deferred_definitions(&self) -> BTreeMap<String, ToolDefinition> {
        self.inner
            .entries
            .iter()
            .filter(|(_, e)| e.deferred)
            .map(|(name, e)| (name.clone(), definition_of(e)))
            .collect()
    }

    /// The names of the deferred tools (what an advertisement may name).
    pub fn deferred_names(&self) -> BTreeSet<String> {
        self.inner.entries.iter().filter(|(_, e)| e.deferred).map(|(n, _)| n.clone()).collect()
    }

    pub fn entry(&self, name: &str) -> Option<&ToolEntry> {
        self.inner.entries.get(name)
    }

    /// Every entry, keyed by name.
    pub fn entries(&self) -> &BTreeMap<String, ToolEntry> {
        &self.inner.entries
    }

    pub fn observation_failures(&self) -> ToolObservationFailures {
        self.inner.counters.snapshot()
    }

    #[cfg(test)]
    pub(crate) fn counters(&self) -> &ObservationCounters {
        &self.inner.counters
    }
}

fn definition_of(entry: &ToolEntry) -> ToolDefinition {
    let spec = entry.bound.spec();
    ToolDefinition::new(spec.name(), spec.description(), spec.input_schema().source().clone())
}

impl ToolCatalog for ToolSet {
    fn tool(&self, name: &str) -> Option<&BoundTool> {
        self.entry(name).map(|e| &e.bound)
    }
    fn is_delegate(&self, _name: &str) -> bool {
        false
    }
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSet")
            .field("deployment", &self.inner.deployment)
            .field("tools", &self.inner.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}
