//! Deployments: a Definition bound to an optional Dispatcher under one exact DeploymentRef,
//! and exact resolution of refs: recovery finds behavior only through an exact DeploymentRef
//! match, never by name.

use super::deployment::DeploymentRef;
use super::dispatcher::Dispatcher;
use super::waist::Definition;
use crate::json::Digest;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One exact behavior binding. Recovery resolves behavior only through an exact ref match.
#[derive(Clone)]
pub struct Deployment {
    definition: Arc<dyn Definition>,
    dispatcher: Option<Arc<dyn Dispatcher>>,
    reference: DeploymentRef,
}

/// Why a Deployment's live Definition no longer matches its frozen ref.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    #[error("the live descriptor digest differs from the frozen deployment ref")]
    ContractDrift,
    #[error("the live child bindings differ from the frozen deployment ref")]
    BindingsDrift,
}

impl Deployment {
    /// Binds `definition` (+ optional dispatcher) under host-supplied implementation and
    /// configuration digests. The ref folds in the Definition's static child bindings.
    pub fn new(
        definition: Arc<dyn Definition>,
        dispatcher: Option<Arc<dyn Dispatcher>>,
        implementation_digest: Digest,
        configuration_digest: Digest,
    ) -> Deployment {
        let reference = DeploymentRef::new(
            definition.descriptor(),
            implementation_digest,
            configuration_digest,
            &definition.child_deployments(),
        );
        Deployment { definition, dispatcher, reference }
    }

    pub fn reference(&self) -> &DeploymentRef {
        &self.reference
    }
    pub fn definition(&self) -> &Arc<dyn Definition> {
        &self.definition
    }
    pub fn dispatcher(&self) -> Option<&Arc<dyn Dispatcher>> {
        self.dispatcher.as_ref()
    }

    /// Re-checks that the live Definition still matches the frozen ref (done before use).
    pub fn check_binding(&self) -> Result<(), BindingError> {
        let live = DeploymentRef::new(
            self.definition.descriptor(),
            self.reference.implementation_digest(),
            self.reference.configuration_digest(),
            &self.definition.child_deployments(),
        );
        if live.contract_digest() != self.reference.contract_digest() {
            return Err(BindingError::ContractDrift);
        }
        if live != self.reference {
            return Err(BindingError::BindingsDrift);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("ref", &self.reference.to_string())
            .field("dispatcher", &self.dispatcher.is_some())
            .finish()
    }
}

/// Returns the Deployment for an exact ref. The Engine rejects any answer whose ref differs.
pub trait DeploymentResolver: Send + Sync {
    fn resolve(&self, reference: &DeploymentRef) -> Option<Deployment>;
}

/// A fixed set of Deployments, keyed by ref digest.
#[derive(Clone, Default, Debug)]
pub struct DeploymentSet {
    by_digest: BTreeMap<Digest, Deployment>,
}

impl DeploymentSet {
    pub fn new() -> DeploymentSet {
        DeploymentSet::default()
    }
    pub fn with(mut self, deployment: Deployment) -> DeploymentSet {
        self.insert(deployment);
        self
    }
    pub fn insert(&mut self, deployment: Deployment) {
        self.by_digest.insert(deployment.reference().digest(), deployment);
    }
}

impl DeploymentResolver for DeploymentSet {
    fn resolve(&self, reference: &DeploymentRef) -> Option<Deployment> {
        self.by_digest.get(&reference.digest()).filter(|d| d.reference() == reference).cloned()
    }
}
