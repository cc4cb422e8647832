//! The Interaction Definition: the immutable, validated strategy configuration that
//! the kernel starts and restores parent Executions from.

use super::completion::CompletionValidator;
use super::codes;
use super::config::DefinitionConfig;
use super::delegate::Delegate;
use super::error::{ErrorKind, InteractionError};
use super::machine::{ParentExecution, Snapshotted};
use super::manifest::ModelManifest;
use super::protocol::InteractionInput;
use super::state::{ParentState, RunModel, StateRules};
use super::toolset::ToolSet;
use super::window::{next_segment, Segment, ToolCatalog};
use super::wire::Wire;
use crate::chat::ToolCall;
use crate::json::{Json, Payload};
use crate::kernel::capability::CapabilitySet;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::descriptor::Descriptor;
use crate::kernel::resource::Budget;
use crate::kernel::waist::{self, Execution, ExecutionState, StepContext, StepError};
use crate::schema::Schema;
use crate::tool::BoundTool;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The descriptor input schema: the shape of [`InteractionInput`] (strict decoding does the rest).
const INPUT_SCHEMA: &str = r#"{"type":"object","required":["messages"],"additionalProperties":false,
"properties":{"messages":{"type":"array","minItems":1},"options":{"type":"object"},"lineage":{"type":"object"},"budget":{"type":"object"},"started_ms":{"type":"integer","minimum":0},"deadline_ms":{"type":"integer","minimum":0}}}"#;

/// The descriptor output schema: the shape of [`super::output::Output`].
const OUTPUT_SCHEMA: &str = r#"{"type":"object","required":["source","model_calls"],"additionalProperties":false,
"properties":{"source":{"enum":["model_response","direct_tool_results"]},"model_response":{"type":"object"},
"direct_tool_results":{"type":"array","minItems":1},"model_calls":{"type":"integer","minimum":1},
"usage":{"type":"object"},"spending":{"type":"object"}}}"#;

/// The descriptor signal schema: the only external Signal a parent accepts is a steer (tool
/// input answers go to the tool child's mailbox).
const SIGNAL_SCHEMA: &str = r#"{"type":"object","required":["operation","steer"],"additionalProperties":false,
"properties":{"operation":{"enum":["steer"]},"steer":{"type":"object"}}}"#;

/// The Interaction strategy's Definition. Cheap to clone; Executions share its rules.
#[derive(Clone)]
pub struct Definition {
    descriptor: Descriptor,
    rules: Arc<Rules>,
}

/// The configuration the state machine and state validation read.
pub(crate) struct Rules {
    pub(crate) max_model_calls: u32,
    pub(crate) tools: Option<ToolSet>,
    pub(crate) tool_budget: Budget,
    pub(crate) tool_capabilities: CapabilitySet,
    /// Normalized: ≥ 1.
    pub(crate) max_concurrent_tool_calls: u32,
    pub(crate) delegates: Vec<Delegate>,
    delegate_index: BTreeMap<String, usize>,
    pub(crate) validator: Option<CompletionValidator>,
    /// Normalized: the default when configured as 0.
    pub(crate) max_context_bytes: u64,
    /// The model its runs record (see [`Definition::new_with_model`]).
    pub(crate) model: Option<RunModel>,
    /// The run's budget, prices and default model name.
    pub(crate) budget: super::budget::BudgetConfig,
}

impl Rules {
    pub(crate) fn delegate(&self, name: &str) -> Option<&Delegate> {
        self.delegate_index.get(name).and_then(|i| self.delegates.get(*i))
    }
}

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::new(ErrorKind::InvalidDefinitionConfig, detail)
}

fn static_schema(text: &str) -> Result<Json, InteractionError> {
    crate::json::parse(text.as_bytes()).map_err(|e| invalid(format!("static schema: {e}")))
}

impl Definition {
    /// Validates `config` (a broken rule is [`ErrorKind::InvalidDefinitionConfig`]) and freezes it.
    pub fn new(config: DefinitionConfig) -> Result<Definition, InteractionError> {
        Definition::new_with_model(config, None)
    }

    /// [`Definition::new`] for a Definition that names its model: every run records it in its
    /// state (`model`), a state recording another model restores only when `model` allows a
    /// switch, and then the run's next Step records the switch.
    pub fn new_with_model(config: DefinitionConfig, model: Option<RunModel>) -> Result<Definition, InteractionError> {
        config.validate()?;
        let descriptor = Descriptor::new(
            &config.name,
            &config.description,
            static_schema(INPUT_SCHEMA)?,
            static_schema(OUTPUT_SCHEMA)?,
            Some(static_schema(SIGNAL_SCHEMA)?),
        )
        .map_err(|e| invalid(format!("descriptor: {e}")))?;
        let delegate_index =
            config.delegates.iter().enumerate().map(|(i, d)| (d.name().to_owned(), i)).collect();
        let rules = Rules {
            max_model_calls: config.max_model_calls,
            tools: config.tools,
            tool_budget: config.tool_budget.unwrap_or_else(Budget::unlimited),
            tool_capabilities: config.tool_capabilities,
            max_concurrent_tool_calls: config.max_concurrent_tool_calls.max(1),
            delegates: config.delegates,
            delegate_index,
            validator: config.completion_validator,
            max_context_bytes: match config.max_context_bytes {
                0 => crate::limits::DEFAULT_MAX_CONTEXT_BYTES,
                n => n,
            },
            model,
            budget: config.budget,
        };
        let definition = Definition { descriptor, rules: Arc::new(rules) };
        definition.model_manifest().validate().map_err(|e| e.with_kind(ErrorKind::InvalidDefinitionConfig))?;
        Ok(definition)
    }

    /// What the model Dispatcher copies at construction: initial tools (ToolSet order), the
    /// delegates (definition order) and the deferred tools by name.
    pub fn model_manifest(&self) -> ModelManifest {
        let (initial, deferred) = match &self.rules.tools {
            Some(t) => (t.initial_definitions(), t.deferred_definitions()),
            None => (Vec::new(), BTreeMap::new()),
        };
        ModelManifest { initial, delegates: self.rules.delegates.iter().map(|d| d.definition().clone()).collect(), deferred }
    }

    pub fn tools(&self) -> Option<&ToolSet> {
        self.rules.tools.as_ref()
    }

    pub fn delegates(&self) -> &[Delegate] {
        &self.rules.delegates
    }

    pub fn max_model_calls(&self) -> u32 {
        self.rules.max_model_calls
    }

    /// `MaxConcurrentToolCalls` after normalization (≥ 1).
    pub fn max_concurrent_tool_calls(&self) -> u32 {
        self.rules.max_concurrent_tool_calls
    }

    /// The working context's byte bound after normalization.
    pub fn max_context_bytes(&self) -> u64 {
        self.rules.max_context_bytes
    }

    /// Restores and fully validates a parent state this Definition produced.
    /// The rules its Executions share (tests compare them by identity).
    #[cfg(test)]
    pub(crate) fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    pub fn restore_state(&self, state: &ExecutionState) -> Result<ParentState, InteractionError> {
        let parent = ParentState::from_execution_state(state)?;
        parent.validate(self.rules.as_ref())?;
        Ok(parent)
    }
}

impl std::fmt::Debug for Definition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Definition")
            .field("name", &self.descriptor.name().as_str())
            .field("max_model_calls", &self.rules.max_model_calls)
            .field("tools", &self.rules.tools.as_ref().map(|t| t.deployment_ref().to_string()))
            .field("max_concurrent_tool_calls", &self.rules.max_concurrent_tool_calls)
            .field("delegates", &self.rules.delegates.iter().map(Delegate::name).collect::<Vec<_>>())
            .field("completion_validator", &self.rules.validator.is_some())
            .field("max_context_bytes", &self.rules.max_context_bytes)
            .finish()
    }
}

impl ToolCatalog for Rules {
    fn tool(&self, name: &str) -> Option<&BoundTool> {
        self.tools.as_ref().and_then(|t| t.entry(name)).map(|e| &e.bound)
    }
    fn is_delegate(&self, name: &str) -> bool {
        self.delegate_index.contains_key(name)
    }
}

impl StateRules for Rules {
    fn model(&self) -> Option<&RunModel> {
        self.model.as_ref()
    }
    fn max_model_calls(&self) -> u32 {
        self.max_model_calls
    }
    fn max_context_bytes(&self) -> u64 {
        self.max_context_bytes
    }
    fn max_concurrent_tool_calls(&self) -> u32 {
        self.max_concurrent_tool_calls
    }
    fn is_tool(&self, name: &str) -> bool {
        self.tools.as_ref().is_some_and(|t| t.entry(name).is_some())
    }
    fn delegate_output_schema(&self, name: &str) -> Option<&Schema> {
        self.delegate(name).map(Delegate::output_schema)
    }
    fn plan_window(&self, calls: &[ToolCall]) -> Result<usize, InteractionError> {
        match next_segment(calls, 0, self, self.max_concurrent_tool_calls) {
            Ok(Segment::Tools { start: 0, end }) => Ok(end),
            Ok(other) => Err(InteractionError::invalid_state(format!("planning forms no tool window: {other:?}"))),
            Err(e) => Err(InteractionError::invalid_state(format!("planning: {e}"))),
        }
    }
}

impl StateRules for Definition {
    fn model(&self) -> Option<&RunModel> {
        self.rules.model.as_ref()
    }
    fn max_model_calls(&self) -> u32 {
        self.rules.max_model_calls
    }
    fn max_context_bytes(&self) -> u64 {
        self.rules.max_context_bytes
    }
    fn max_concurrent_tool_calls(&self) -> u32 {
        self.rules.max_concurrent_tool_calls
    }
    fn is_tool(&self, name: &str) -> bool {
        self.rules.is_tool(name)
    }
    fn delegate_output_schema(&self, name: &str) -> Option<&Schema> {
        self.rules.delegate_output_schema(name)
    }
    fn plan_window(&self, calls: &[ToolCall]) -> Result<usize, InteractionError> {
        self.rules.plan_window(calls)
    }
}

impl waist::Definition for Definition {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// The ToolSet deployment (if any), then each delegate's deployment, deduplicated.
    fn child_deployments(&self) -> Vec<DeploymentRef> {
        let mut refs: Vec<DeploymentRef> = Vec::new();
        let tools = self.rules.tools.iter().map(|t| t.deployment_ref().clone());
        for r in tools.chain(self.rules.delegates.iter().map(|d| d.deployment_ref().clone())) {
            if !refs.contains(&r) {
                refs.push(r);
            }
        }
        refs
    }

    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let input = InteractionInput::from_payload(input)?;
        let mut state = ParentState::start(&input);
        state.adopt_model(self.rules.model.as_ref());
        state.working_context.seal().map_err(|e| InteractionError::new(ErrorKind::InvalidInput, e.to_string()))?;
        if state.working_context.sealed_bytes() > self.rules.max_context_bytes {
            return Err(codes::classified(codes::LIMIT_CONTEXT, &context_limit_text(self.rules.max_context_bytes)));
        }
        state.validate(self.rules.as_ref())?;
        Ok(Box::new(ParentExecution::new(self.rules.clone(), Arc::new(state))))
    }

    /// Decodes and validates strictly, except for a state this Definition's own Execution
    /// just encoded in this process ([`Snapshotted`]): that one was validated under these
    /// rules before it was encoded, and decoding its payload gives it back exactly (test
    /// builds check both on every such restore).
    fn restore(&self, _cx: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        if let Some(reused) = Snapshotted::reusable(state, &self.rules) {
            #[cfg(test)]
            assert_eq!(
                self.restore_state(state).expect("a reused snapshot decodes strictly"),
                *reused,
                "a reused snapshot equals its strict decoding"
            );
            return Ok(Box::new(ParentExecution::new(self.rules.clone(), reused)));
        }
        let state = self.restore_state(state)?;
        Ok(Box::new(ParentExecution::new(self.rules.clone(), Arc::new(state))))
    }
}

/// The failure text of an outgrown context: what was exceeded and what to change.
pub(crate) fn context_limit_text(limit: u64) -> String {
    format!(
        "the working context exceeds its limit of {limit} bytes; raise it with AgentBuilder::max_context_bytes \
         (DefinitionConfig::max_context_bytes, at most {} bytes) or configure a context reducer that shortens it",
        crate::limits::MAX_CONTEXT_BYTES_CEILING
    )
}
