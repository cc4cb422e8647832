//! Several versions of one agent in one [`Runtime`](super::Runtime): which agent runs which
//! stored run, and the resolver every registered version's deployments are found through.
//!
//! New runs start under the version the runtime was built with (the first). A resumed run
//! continues under the version it recorded when it started, never another one: its exact
//! deployment reference picks the registered agent. A run whose version is not registered is
//! refused with a [`RunError::VersionNotRegistered`](super::RunError::VersionNotRegistered)
//! that lists the registered versions.

use super::builder::Agent;
use super::run_error::RunError;
use crate::kernel::binding::{Deployment, DeploymentResolver, DeploymentSet};
use crate::kernel::deployment::DeploymentRef;
use std::sync::{Mutex, PoisonError};

/// Every registered version, the one new runs start under first, and the resolver over all
/// their deployments.
pub(crate) struct Versions {
    agents: Mutex<Vec<Agent>>,
    deployments: Mutex<DeploymentSet>,
}

impl Versions {
    pub(crate) fn new(primary: Agent) -> Versions {
        let mut set = DeploymentSet::new();
        for d in primary.deployments() {
            set.insert(d.clone());
        }
        Versions { agents: Mutex::new(vec![primary]), deployments: Mutex::new(set) }
    }

    fn agents(&self) -> std::sync::MutexGuard<'_, Vec<Agent>> {
        self.agents.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every registered agent, the primary first.
    pub(crate) fn all(&self) -> Vec<Agent> {
        self.agents().clone()
    }

    /// Adds `agent` (same name, another version). Registering the same agent again is a no-op;
    /// another configuration under a version already registered is refused, since a run
    /// names its version and that name must pick one configuration.
    pub(crate) fn register(&self, agent: &Agent) -> Result<(), RunError> {
        let mut agents = self.agents();
        let primary = &agents[0];
        if agent.name() != primary.name() {
            return Err(RunError::Version(format!(
                "agent `{}` cannot be registered in a runtime of agent `{}`: a runtime holds versions of one agent; \
                 use another `Runtime` for another agent",
                agent.name(),
                primary.name()
            )));
        }
        if let Some(same) = agents.iter().find(|a| a.version() == agent.version()) {
            if same.deployment_ref() == agent.deployment_ref() {
                return Ok(());
            }
            return Err(RunError::Version(format!(
                "version `{}` of agent `{}` is already registered with another configuration; give the changed \
                 agent a new `.version(..)`",
                agent.version(),
                agent.name()
            )));
        }
        let mut set = self.deployments.lock().unwrap_or_else(PoisonError::into_inner);
        for d in agent.deployments() {
            set.insert(d.clone());
        }
        agents.push(agent.clone());
        Ok(())
    }

    /// The registered agent whose runs are stored under `reference`.
    pub(crate) fn by_ref(&self, reference: &DeploymentRef) -> Option<Agent> {
        self.agents().iter().find(|a| a.deployment_ref() == reference).cloned()
    }

    /// The registered agent of `version`.
    pub(crate) fn by_version(&self, version: &str) -> Option<Agent> {
        self.agents().iter().find(|a| a.version() == version).cloned()
    }

    /// The registered versions, in registration order, for messages.
    pub(crate) fn listed(&self) -> String {
        self.agents().iter().map(|a| format!("`{}`", a.version())).collect::<Vec<_>>().join(", ")
    }
}

impl DeploymentResolver for Versions {
    fn resolve(&self, reference: &DeploymentRef) -> Option<Deployment> {
        self.deployments.lock().unwrap_or_else(PoisonError::into_inner).resolve(reference)
    }
}
