//! STAND-IN for the ToolSet (being written on branch `itools`): exactly the API the parent
//! Definition codes against, plus [`ToolSet::from_parts`] so parent tests can build one. When
//! the real `toolset.rs` lands, it replaces this file; only tests call `from_parts`.

use crate::chat::ToolDefinition;
use crate::interaction::window::ToolCatalog;
use crate::kernel::binding::Deployment;
use crate::kernel::deployment::DeploymentRef;
use crate::tool::BoundTool;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One bound tool of the set and whether it starts hidden.
#[derive(Clone)]
pub struct ToolEntry {
    pub bound: BoundTool,
    pub deferred: bool,
}

/// Frozen ordinary tool authority plus the child Deployment that runs one call per child.
#[derive(Clone)]
pub struct ToolSet {
    inner: Arc<Inner>,
}

struct Inner {
    deployment: Deployment,
    /// Registration order.
    order: Vec<String>,
    entries: BTreeMap<String, ToolEntry>,
}

impl ToolSet {
    /// Stand-in constructor: `entries` in registration order, names assumed unique.
    pub fn from_parts(deployment: Deployment, entries: Vec<ToolEntry>) -> ToolSet {
        let order = entries.iter().map(|e| e.bound.name().to_owned()).collect();
        let entries = entries.into_iter().map(|e| (e.bound.name().to_owned(), e)).collect();
        ToolSet { inner: Arc::new(Inner { deployment, order, entries }) }
    }

    pub fn deployment(&self) -> &Deployment {
        &self.inner.deployment
    }

    pub fn deployment_ref(&self) -> &DeploymentRef {
        self.inner.deployment.reference()
    }

    /// The initially visible definitions, in registration order.
    pub fn initial_definitions(&self) -> Vec<ToolDefinition> {
        self.inner
            .order
            .iter()
            .filter_map(|n| self.inner.entries.get(n))
            .filter(|e| !e.deferred)
            .map(|e| definition_of(&e.bound))
            .collect()
    }

    /// The deferred definitions by name.
    pub fn deferred_definitions(&self) -> BTreeMap<String, ToolDefinition> {
        self.inner
            .entries
            .iter()
            .filter(|(_, e)| e.deferred)
            .map(|(n, e)| (n.clone(), definition_of(&e.bound)))
            .collect()
    }

    pub fn entry(&self, name: &str) -> Option<&ToolEntry> {
        self.inner.entries.get(name)
    }
}

fn definition_of(bound: &BoundTool) -> ToolDefinition {
    let spec = bound.spec();
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
