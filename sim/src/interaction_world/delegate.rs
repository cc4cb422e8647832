//! The deployments of one run: the root Interaction (scripted model, simulated tools behind
//! the real ToolSet, completion validator), the delegate child (a second Interaction with its
//! own scripted model and budget), each real Dispatcher wrapped by the ledger's recorder.

use super::context::Context;
use super::model::{dispatcher_config, validator, SimModel};
use super::recording::Recording;
use super::spec::{DelegateSpec, ModelSpec};
use super::tools::SimTool;
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::delegate::{Delegate, DelegateConfig};
use keel::interaction::model::ModelDispatcher;
use keel::interaction::toolset::{ToolSet, ToolSetConfig};
use keel::json::Digest;
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::deployment::DeploymentRef;
use keel::kernel::resource::Budget;
use keel::tool::Tool;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why the spec could not be turned into deployments (a scenario error, not a runtime bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the {what}: {detail}")]
pub struct BuildError {
    pub what: &'static str,
    pub detail: String,
}

fn build_err(what: &'static str) -> impl Fn(keel::interaction::error::InteractionError) -> BuildError {
    move |e| BuildError { what, detail: e.to_string() }
}

/// Everything the driver needs to start, restore and perform calls.
pub struct Deployments {
    pub parent: Deployment,
    pub resolver: Arc<DeploymentSet>,
    /// Deployment ref text → the recorder around its Dispatcher (the host performs
    /// never-started calls through it).
    pub performers: BTreeMap<String, Arc<Recording>>,
}

fn interaction(
    cx: &Arc<Context>,
    name: &str,
    model_name: &str,
    model: &ModelSpec,
    config: DefinitionConfig,
    performers: &mut BTreeMap<String, Arc<Recording>>,
) -> Result<Deployment, BuildError> {
    let definition = Definition::new(config).map_err(build_err("interaction definition"))?;
    let sim = Arc::new(SimModel { name: model_name.to_owned(), spec: model.clone(), cx: cx.clone() });
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), dispatcher_config(sim)).map_err(build_err("model dispatcher"))?;
    let recording = Arc::new(Recording { inner: Arc::new(dispatcher), cx: cx.clone(), kind: "model" });
    let deployment = Deployment::new(
        Arc::new(definition),
        Some(recording.clone()),
        Digest::of(b"keel.interaction"),
        Digest::of(format!("sim.{name}.config").as_bytes()),
    );
    performers.insert(deployment.reference().to_string(), recording);
    Ok(deployment)
}

fn delegate(cx: &Arc<Context>, d: &DelegateSpec, performers: &mut BTreeMap<String, Arc<Recording>>) -> Result<(Delegate, Deployment), BuildError> {
    let config = DefinitionConfig {
        name: "sim.delegate".into(),
        description: "A delegated simulated interaction.".into(),
        max_model_calls: d.max_model_calls,
        completion_validator: (d.model.validator_rejections > 0).then(|| validator(d.model.validator_rejections)),
        ..DefinitionConfig::default()
    };
    let deployment = interaction(cx, "delegate", &d.name, &d.model, config, performers)?;
    let budget = d.budget_steps.map_or_else(Budget::unlimited, |n| Budget::finite(n, n, n));
    let delegate = Delegate::new(DelegateConfig {
        name: d.name.clone(),
        description: format!("Delegates to the {} worker.", d.name),
        deployment: deployment.clone(),
        budget,
        capabilities: CapabilitySet::empty(),
    })
    .map_err(build_err("delegate"))?;
    Ok((delegate, deployment))
}

/// Builds the run's deployments over `cx`.
pub fn build(cx: &Arc<Context>) -> Result<Deployments, BuildError> {
    let spec = &cx.spec;
    let mut performers = BTreeMap::new();
    let mut set = DeploymentSet::new();
    let tool = |t: &super::spec::ToolSpec| Arc::new(SimTool { spec: t.clone(), cx: cx.clone() }) as Arc<dyn Tool>;
    let tools = if spec.tools.is_empty() && spec.deferred_tools.is_empty() {
        None
    } else {
        let toolset = ToolSet::new(ToolSetConfig {
            name: "sim.tools".into(),
            description: "Runs one simulated tool call.".into(),
            tools: spec.tools.iter().map(tool).collect(),
            deferred_tools: spec.deferred_tools.iter().map(tool).collect(),
            observer: None,
            implementation_digest: Digest::of(b"sim.tools.impl"),
            configuration_digest: Digest::of(b"sim.tools.config"),
        })
        .map_err(build_err("tool set"))?;
        let real = toolset.deployment();
        let inner = real.dispatcher().cloned().ok_or_else(|| BuildError { what: "tool set", detail: "no dispatcher".into() })?;
        let recording = Arc::new(Recording { inner, cx: cx.clone(), kind: "tool" });
        let reference: &DeploymentRef = real.reference();
        let wrapped = Deployment::new(
            real.definition().clone(),
            Some(recording.clone()),
            reference.implementation_digest(),
            reference.configuration_digest(),
        );
        performers.insert(wrapped.reference().to_string(), recording);
        set.insert(wrapped);
        Some(toolset)
    };
    let mut delegates = Vec::new();
    if let Some(d) = &spec.delegate {
        let (delegate, deployment) = delegate(cx, d, &mut performers)?;
        delegates.push(delegate);
        set.insert(deployment);
    }
    let has_tools = tools.is_some();
    let config = DefinitionConfig {
        name: "sim.interaction".into(),
        description: "The simulated interaction under test.".into(),
        max_model_calls: spec.max_model_calls,
        tools,
        tool_budget: has_tools.then(Budget::unlimited),
        max_concurrent_tool_calls: if has_tools { spec.max_concurrent_tool_calls } else { 0 },
        delegates,
        completion_validator: (spec.model.validator_rejections > 0).then(|| validator(spec.model.validator_rejections)),
        budget: keel::interaction::budget::BudgetConfig {
            budget: spec.budget.unwrap_or_default(),
            ..Default::default()
        },
        ..DefinitionConfig::default()
    };
    let parent = interaction(cx, "root", "root", &spec.model, config, &mut performers)?;
    set.insert(parent.clone());
    Ok(Deployments { parent, resolver: Arc::new(set), performers })
}
