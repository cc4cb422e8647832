//! Building an [`Agent`]: model, tools, delegates, limits, checked before any call is made.

use super::build_error::BuildError;
use super::context_policy::ContextPolicy;
use super::continue_as_new::ContinueAsNew;
use super::handover::HandoverGate;
use super::deltas::DeltaTap;
use super::identity::{configuration_digest, implementation_digest, tagged};
use super::model_retry::{ModelErrorPolicy, ModelRetry, MAX_MODEL_ATTEMPTS};
use super::policy::UnknownPolicy;
use super::tool_fn::FnTool;
use super::typed_output::{output_instructions, output_validator, OutputSpec};
use crate::schema::Schema;
use super::tool_options::{ToolConcurrency, ToolOptions};
use super::trace::TraceConfig;
use super::tracker::Hub;
use crate::chat::ToolOutput;
use crate::env::BoxFuture;
use crate::interaction::completion::CompletionValidator;
use crate::interaction::config::DefinitionConfig;
use crate::interaction::definition::Definition;
use crate::interaction::delegate::{Delegate, DelegateConfig};
use crate::interaction::model::{DispatcherConfig, ModelClient, ModelDispatcher, ModelStreamer};
use crate::interaction::state::RunModel;
use crate::interaction::toolset::{ToolSet, ToolSetConfig};
use crate::json::{Json, ObjectBuilder};
use crate::kernel::binding::Deployment;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::resource::Budget;
use crate::text::QualifiedName;
use crate::tool::{Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError, ToolSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The model-call limit when none is set.
pub const DEFAULT_MAX_MODEL_CALLS: u32 = 8;

/// Who settles the Unknowns of one deployment.
#[derive(Clone, Debug)]
pub(crate) enum RefPolicy {
    /// An agent's own deployment: its model calls, with their limit (a re-issue counts).
    Model { unknown: UnknownPolicy, max_model_calls: u32 },
    /// An agent's tool-child deployment: per tool name.
    Tools(BTreeMap<String, UnknownPolicy>),
}

pub(crate) struct AgentInner {
    pub(crate) name: String,
    pub(crate) parent: Deployment,
    /// Every deployment a run of this agent may create, the parent first.
    pub(crate) deployments: Vec<Deployment>,
    /// Deployment ref text → Unknown policies.
    pub(crate) policies: BTreeMap<String, RefPolicy>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) max_model_calls: u32,
    pub(crate) model_unknown: UnknownPolicy,
    pub(crate) model_error: ModelErrorPolicy,
    pub(crate) tool_options: BTreeMap<String, ToolOptions>,
    pub(crate) max_concurrent_tool_calls: u32,
    pub(crate) delegates: usize,
    pub(crate) model_identity: crate::interaction::model::ModelIdentity,
    /// Deployment ref text → the model its runs record, for this agent and every delegate.
    pub(crate) models: BTreeMap<String, RunModel>,
    /// The version the user declared (recorded in each run's lineage).
    pub(crate) version: String,
    pub(crate) continuation: Option<ContinueAsNew>,
    /// The budget's time limit: a run's start instant is then recorded in its input.
    pub(crate) budget_time_ms: Option<u64>,
    /// The hubs of every delegate agent, at any depth: a runtime gives them its environment
    /// too (their model dispatchers read its clock: time budgets, waits between attempts).
    pub(crate) delegate_hubs: Vec<Arc<Hub>>,
}

impl AgentInner {
    /// Hands `env` to this agent's hub and every delegate's.
    pub(crate) fn set_env(&self, env: &crate::env::Env) {
        self.hub.set_env(env.clone());
        for hub in &self.delegate_hubs {
            hub.set_env(env.clone());
        }
    }
}

/// A validated agent: an Interaction deployment together with every deployment its runs can
/// start (its tool child, its delegates), so none can be forgotten. Cheap to clone.
///
/// Build one with [`Agent::builder`]; run it with a [`Runtime`](super::Runtime).
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentInner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.inner.name)
            .field("deployment", &self.inner.parent.reference().to_string())
            .finish()
    }
}

impl Agent {
    /// Starts building an agent named `name` (letters, digits, `_`, `-`, `.`). Give it a
    /// [`version`](AgentBuilder::version) and a [`model`](AgentBuilder::model); everything
    /// else has a default. [`build`](AgentBuilder::build) checks it all before any call.
    ///
    /// ```
    /// use keel::prelude::*;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup {
    ///     /// The order number.
    ///     order: u64,
    /// }
    ///
    /// let status = tool("order_status", "The status of an order.", |args: Lookup| async move {
    ///     Ok::<_, String>(format!("order {} shipped", args.order))
    /// });
    /// let agent = Agent::builder("support")
    ///     .version("2024-06-01")
    ///     .instructions("You answer questions about orders.")
    ///     .model(ScriptedModel::new().then_text("It shipped."))
    ///     .tool(status)
    ///     .max_model_calls(6)
    ///     .build()?;
    /// assert_eq!(agent.name(), "support");
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(name.into())
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The version of the code declared with [`AgentBuilder::version`]: recorded in every run
    /// this agent starts, and the one a resumed run continues under.
    pub fn version(&self) -> &str {
        &self.inner.version
    }

    /// When runs continue as new ones (see [`AgentBuilder::continue_as_new`]).
    pub fn continue_as_new_policy(&self) -> Option<ContinueAsNew> {
        self.inner.continuation
    }

    /// The exact deployment reference runs of this agent are stored under. It changes whenever
    /// the declared version or anything in the configuration changes.
    pub fn deployment_ref(&self) -> &crate::kernel::deployment::DeploymentRef {
        self.inner.parent.reference()
    }

    /// The agent's Interaction deployment (for programs that drive the kernel themselves).
    pub fn deployment(&self) -> &Deployment {
        &self.inner.parent
    }

    /// Every deployment a run may create: register all of them when you build a resolver by
    /// hand.
    pub fn deployments(&self) -> &[Deployment] {
        &self.inner.deployments
    }

    /// The most model calls one run may make.
    pub fn max_model_calls(&self) -> u32 {
        self.inner.max_model_calls
    }

    /// What the host does with a model call whose outcome is Unknown (see
    /// [`AgentBuilder::on_model_unknown`]).
    pub fn model_unknown_policy(&self) -> UnknownPolicy {
        self.inner.model_unknown
    }

    /// How a model call that failed with an error that may not happen again is repeated (see
    /// [`AgentBuilder::on_model_error`]).
    pub fn model_error_policy(&self) -> ModelErrorPolicy {
        self.inner.model_error
    }

    /// The model the agent calls. Each run records it in its state: a stored run is resumed
    /// only by an agent calling the same model, unless the agent was built with
    /// [`allow_model_switch`](AgentBuilder::allow_model_switch).
    pub fn model_identity(&self) -> &crate::interaction::model::ModelIdentity {
        &self.inner.model_identity
    }

    /// The declared options of each of the agent's own tools, by tool name.
    pub fn tool_options(&self) -> &BTreeMap<String, ToolOptions> {
        &self.inner.tool_options
    }

    /// How many tool calls of one model turn may run at once (0 without tools).
    pub fn max_concurrent_tool_calls(&self) -> u32 {
        self.inner.max_concurrent_tool_calls
    }

    /// How many agents this one delegates to.
    pub fn delegate_count(&self) -> usize {
        self.inner.delegates
    }
}

/// Wraps each tool of an agent at build time: see [`AgentBuilder::wrap_tools`].
pub type ToolWrapper = dyn Fn(Arc<dyn Tool>, &ToolOptions) -> Arc<dyn Tool> + Send + Sync;

struct ToolEntry {
    tool: Arc<dyn Tool>,
    options: ToolOptions,
    /// A problem found while the tool was added (for example a schema that is not JSON).
    problem: Option<String>,
}

/// Collects an agent's parts; [`build`](AgentBuilder::build) checks them all.
#[must_use = "call .build() to get the agent"]
pub struct AgentBuilder {
    name: String,
    description: Option<String>,
    version: Option<String>,
    model: Option<DispatcherConfig>,
    model_unknown: UnknownPolicy,
    model_error: ModelErrorPolicy,
    tools: Vec<ToolEntry>,
    delegates: Vec<(String, String, Agent)>,
    max_model_calls: u32,
    max_concurrent_tool_calls: Option<u32>,
    max_context_bytes: u64,
    validator: Option<(String, CompletionValidator)>,
    wrapper: Option<Arc<ToolWrapper>>,
    instructions: Option<String>,
    output: Option<OutputSpec>,
    /// Set by `context_policy` (in `context_policy.rs`).
    pub(super) context: ContextPolicy,
    trace_content: bool,
    /// Set by `allow_model_switch` (in `model_switch.rs`).
    pub(super) allow_model_switch: bool,
    /// Set by `continue_as_new` (in `continue_as_new.rs`).
    pub(super) continuation: Option<ContinueAsNew>,
    /// Set by `budget` and `prices` (in `budget.rs`).
    pub(super) budget: crate::interaction::budget::Budget,
    pub(super) prices: crate::interaction::budget::Prices,
}

impl AgentBuilder {
    fn new(name: String) -> AgentBuilder {
        AgentBuilder {
            name,
            description: None,
            version: None,
            model: None,
            // A model call's only side effect is its cost, bounded by max_model_calls.
            model_unknown: UnknownPolicy::Retry,
            model_error: ModelErrorPolicy::default(),
            tools: Vec::new(),
            delegates: Vec::new(),
            max_model_calls: DEFAULT_MAX_MODEL_CALLS,
            max_concurrent_tool_calls: None,
            max_context_bytes: crate::limits::DEFAULT_MAX_CONTEXT_BYTES,
            validator: None,
            wrapper: None,
            instructions: None,
            output: None,
            context: ContextPolicy::default(),
            trace_content: false,
            allow_model_switch: false,
            continuation: None,
            budget: crate::interaction::budget::Budget::default(),
            prices: crate::interaction::budget::Prices::default(),
        }
    }

    /// Records prompt and completion text (`gen_ai.input.messages`, `gen_ai.output.messages`)
    /// and tool arguments and results (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`)
    /// on the agent's tracing spans. Off by default: spans then carry names, ids, models and
    /// token counts, never what the user or the model wrote. Not part of the agent's
    /// configuration (tracing changes nothing a run does), so turning it on or off does not
    /// stop stored runs from resuming.
    pub fn trace_content(mut self, on: bool) -> AgentBuilder {
        self.trace_content = on;
        self
    }

    /// What the agent is for (shown to a parent model when the agent is a delegate).
    pub fn description(mut self, description: impl Into<String>) -> AgentBuilder {
        self.description = Some(description.into());
        self
    }

    /// The version of your code (model client, tools). Required. Runs restore only under the
    /// version they started with: change it whenever that code changes behavior.
    pub fn version(mut self, version: impl Into<String>) -> AgentBuilder {
        self.version = Some(version.into());
        self
    }

    /// The agent's instructions (its system prompt): sent to the model as the system message
    /// at the head of every call, whichever provider client is used.
    ///
    /// They are part of the agent's configuration digest, like its tools and limits: a run
    /// started under other instructions is refused on resume (the refusal names the
    /// settings), never continued silently under new ones.
    ///
    /// ```
    /// use keel::prelude::*;
    /// let agent = Agent::builder("support")
    ///     .version("1")
    ///     .instructions("You answer customer questions about orders. Be brief and polite.")
    ///     .model(ScriptedModel::new().then_text("Hello!"))
    ///     .build()?;
    /// # let _ = agent;
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn instructions(mut self, text: impl Into<String>) -> AgentBuilder {
        self.instructions = Some(text.into());
        self
    }

    /// Declares a structured final answer of type `T`: its JSON Schema (derived by
    /// `schemars`) is given to the model, in the system message and, for clients that
    /// support structured output, with each call
    /// ([`ModelCallContext::output_schema`](crate::interaction::model::ModelCallContext::output_schema)).
    ///
    /// Every final answer is checked before the run may complete: one that is not JSON or does
    /// not match the schema is sent back to the model with what is wrong, and the model is
    /// called again (each try counts against [`max_model_calls`](Self::max_model_calls)).
    /// Read the answer with [`RunResult::output`](super::RunResult::output). The schema is
    /// part of the configuration digest. A [`completion_validator`](Self::completion_validator)
    /// still applies, after the schema check.
    ///
    /// ```
    /// use keel::prelude::*;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Forecast {
    ///     city: String,
    ///     celsius: i32,
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let agent = Agent::builder("forecaster")
    ///     .version("1")
    ///     .model(ScriptedModel::new().then_text(r#"{"city":"Paris","celsius":21}"#))
    ///     .output::<Forecast>()
    ///     .build()?;
    /// let run = Runtime::in_memory(agent)?.start("Weather in Paris?").await?;
    /// let forecast: Forecast = run.result().await?.output()?;
    /// assert_eq!((forecast.city.as_str(), forecast.celsius), ("Paris", 21));
    /// # Ok(()) })
    /// # }
    /// ```
    pub fn output<T: schemars::JsonSchema>(mut self) -> AgentBuilder {
        self.output = Some(OutputSpec::of::<T>());
        self
    }

    /// The model, answering each call with one complete response.
    pub fn model(mut self, client: impl ModelClient) -> AgentBuilder {
        self.model = Some(DispatcherConfig::complete(Arc::new(client)));
        self
    }

    /// The model, answering each call with a stream of deltas (see
    /// [`RunEvent::ModelDelta`](super::RunEvent::ModelDelta)).
    pub fn streaming_model(mut self, streamer: impl ModelStreamer) -> AgentBuilder {
        self.model = Some(DispatcherConfig::stream(Arc::new(streamer)));
        self
    }

    /// A model dispatcher configuration built by hand (observer, reducer).
    pub fn model_config(mut self, config: DispatcherConfig) -> AgentBuilder {
        self.model = Some(config);
        self
    }

    /// What the host does when a model call's outcome is Unknown: the process crashed while
    /// it was in flight, or the connection was lost after the request was sent.
    ///
    /// The default, [`UnknownPolicy::Retry`], issues the call again: its only side effect is
    /// its cost, and each re-issue counts against [`max_model_calls`](Self::max_model_calls)
    /// like the call it repeats. Once the limit is reached, or if the repeat's outcome is
    /// Unknown too, the call is held: a [`RunEvent::ResolutionNeeded`](super::RunEvent::ResolutionNeeded)
    /// event, and [`Run::idle`](super::Run::idle) returns
    /// [`Idle::NeedsResolution`](super::Idle::NeedsResolution) until
    /// [`Run::resolve`](super::Run::resolve) settles it. `Hold` always waits for the host;
    /// `ReportToModel` fails the call (and so the run).
    pub fn on_model_unknown(mut self, policy: UnknownPolicy) -> AgentBuilder {
        self.model_unknown = policy;
        self
    }

    /// What the agent does when a model call fails with an error that may not happen again
    /// (the provider was overloaded, rate limited or had a server error, also inside a
    /// started stream: [`ModelError::Transient`](crate::interaction::model::ModelError::Transient)).
    /// Default: [`ModelErrorPolicy::default`], 3 attempts with waits of about 1 s and 2 s on
    /// the runtime's clock. Each repeat is reported by a
    /// [`RunEvent::ModelRetrying`](super::RunEvent::ModelRetrying) event.
    pub fn on_model_error(mut self, policy: ModelErrorPolicy) -> AgentBuilder {
        self.model_error = policy;
        self
    }

    /// Adds a tool: exclusive, Unknowns held for the host.
    pub fn tool(self, tool: impl Tool) -> AgentBuilder {
        self.tool_with(tool, ToolOptions::new())
    }

    /// Adds a tool with declared options (concurrency, Unknown policy).
    pub fn tool_with(mut self, tool: impl Tool, options: ToolOptions) -> AgentBuilder {
        let problem = (&tool as &dyn std::any::Any).downcast_ref::<FnTool>().and_then(|t| t.schema_error().map(str::to_owned));
        self.tools.push(ToolEntry { tool: Arc::new(tool), options, problem });
        self
    }

    /// Adds a tool already behind an `Arc`.
    pub fn shared_tool(mut self, tool: Arc<dyn Tool>, options: ToolOptions) -> AgentBuilder {
        self.tools.push(ToolEntry { tool, options, problem: None });
        self
    }

    /// Adds a delegate: the model may hand a task to `agent` under the tool name `name`. The
    /// delegate's deployments become part of this agent.
    pub fn delegate(mut self, name: impl Into<String>, description: impl Into<String>, agent: Agent) -> AgentBuilder {
        self.delegates.push((name.into(), description.into(), agent));
        self
    }

    /// The most model calls one run may make (default 8).
    pub fn max_model_calls(mut self, n: u32) -> AgentBuilder {
        self.max_model_calls = n;
        self
    }

    /// How many tool calls of one model turn may run at once (default 1). Above 1, at least
    /// one tool must declare concurrency in its [`ToolOptions`].
    pub fn max_concurrent_tool_calls(mut self, n: u32) -> AgentBuilder {
        self.max_concurrent_tool_calls = Some(n);
        self
    }

    /// The most bytes a run's working context may hold, all messages together (default
    /// [`DEFAULT_MAX_CONTEXT_BYTES`](crate::limits::DEFAULT_MAX_CONTEXT_BYTES), 64 MiB; at most
    /// [`MAX_CONTEXT_BYTES_CEILING`](crate::limits::MAX_CONTEXT_BYTES_CEILING), 256 MiB). Each
    /// message is bounded on its own by the payload limit (1 MiB). A run whose context
    /// outgrows it fails with `interaction.limit.context`.
    pub fn max_context_bytes(mut self, bytes: u64) -> AgentBuilder {
        self.max_context_bytes = bytes;
        self
    }

    /// A completion validator under a declared `identity` (part of the configuration digest:
    /// change it whenever the validator's rules change).
    pub fn completion_validator(mut self, identity: impl Into<String>, validator: CompletionValidator) -> AgentBuilder {
        self.validator = Some((identity.into(), validator));
        self
    }

    /// Wraps every tool (given with its declared options) in `wrapper` when the agent is
    /// built: a test harness puts faults and a ledger around the real tool code this way.
    /// The wrapper must keep the tool's definition (`spec`) and behavior; the configuration
    /// digest is computed from the declarations, so a wrapped agent restores runs of the
    /// unwrapped one and the other way round.
    pub fn wrap_tools(mut self, wrapper: impl Fn(Arc<dyn Tool>, &ToolOptions) -> Arc<dyn Tool> + Send + Sync + 'static) -> AgentBuilder {
        self.wrapper = Some(Arc::new(wrapper));
        self
    }

    /// Checks everything and builds the agent. Every error says what to change.
    pub fn build(self) -> Result<Agent, BuildError> {
        let agent = self.name.clone();
        QualifiedName::parse(&agent).map_err(|e| BuildError::Name { name: agent.clone(), detail: e.to_string() })?;
        let version = self.version.clone().ok_or_else(|| BuildError::NoVersion { agent: agent.clone() })?;
        // Every run records it (its lineage): the same rules as there.
        crate::interaction::wire::Wire::validate(&crate::interaction::protocol::Lineage::first(version.clone()))
            .map_err(|e| BuildError::Version { agent: agent.clone(), detail: e.to_string() })?;
        let model = self.model.clone().ok_or_else(|| BuildError::NoModel { agent: agent.clone() })?;
        let carries_summary = self.continuation.is_some_and(|c| c.carries_summary());
        let model = self.context.clone().install(&agent, model, carries_summary)?;
        let model_identity = model.identity();
        if self.max_model_calls == 0 {
            return Err(BuildError::NoModelCalls { agent });
        }
        if let Some(c) = &self.continuation {
            c.check(&agent, self.max_model_calls)?;
        }
        if !(1..=MAX_MODEL_ATTEMPTS).contains(&self.model_error.max_attempts()) {
            return Err(BuildError::ModelAttempts { agent, attempts: self.model_error.max_attempts() });
        }
        if self.max_context_bytes == 0 || self.max_context_bytes > crate::limits::MAX_CONTEXT_BYTES_CEILING {
            return Err(BuildError::ContextLimit { agent, bytes: self.max_context_bytes });
        }
        let description = self.description.clone().unwrap_or_else(|| format!("The {agent} agent."));
        let mut model = model;
        let (system, output_schema, validator) = self.model_instructions(&agent, &mut model)?;
        let implementation = implementation_digest(&version);

        // Tools: each definition checked on its own, names unique across tools and delegates.
        let mut names = BTreeSet::new();
        let mut tool_json = Vec::new();
        let mut tool_policies = BTreeMap::new();
        let mut tool_options = BTreeMap::new();
        let mut wrapped: Vec<Arc<dyn Tool>> = Vec::new();
        for (index, entry) in self.tools.iter().enumerate() {
            let input = entry.tool.spec();
            let label = if input.name.is_empty() { format!("#{index}") } else { input.name.clone() };
            let tool_error = |detail: String| BuildError::Tool { agent: agent.clone(), tool: label.clone(), detail };
            if let Some(problem) = &entry.problem {
                return Err(tool_error(problem.clone()));
            }
            ToolSpec::from_input(&input).map_err(|e| tool_error(e.to_string()))?;
            if !names.insert(input.name.clone()) {
                return Err(BuildError::DuplicateName { agent, name: input.name });
            }
            let direct = entry.tool.returns_direct_result();
            tool_json.push(
                ObjectBuilder::new()
                    .field("name", &input.name)
                    .field("description", &input.description)
                    .value("input_schema", input.input_schema.clone())
                    .value("concurrency", concurrency_json(&entry.options.concurrency))
                    .field("direct", &direct)
                    .field("on_unknown", entry.options.unknown.as_str())
                    .build(),
            );
            tool_policies.insert(input.name.clone(), entry.options.unknown);
            tool_options.insert(input.name.clone(), entry.options.clone());
            let inner = match &self.wrapper {
                Some(wrap) => wrap(entry.tool.clone(), &entry.options),
                None => entry.tool.clone(),
            };
            wrapped.push(Arc::new(Declared { inner, concurrency: entry.options.concurrency.clone() }));
        }
        for (name, _, _) in &self.delegates {
            if !names.insert(name.clone()) {
                return Err(BuildError::DuplicateName { agent, name: name.clone() });
            }
        }
        let limit = self.max_concurrent_tool_calls.unwrap_or(1);
        if self.tools.is_empty() && self.max_concurrent_tool_calls.is_some_and(|n| n > 1) {
            return Err(BuildError::ConcurrencyWithoutTools { agent });
        }
        if limit > 1 && self.tools.iter().all(|t| t.options.concurrency == ToolConcurrency::Exclusive) {
            return Err(BuildError::ConcurrencyUndeclared { agent, limit });
        }

        let hub = Arc::new(Hub::traced(TraceConfig {
            agent: agent.clone(),
            provider: model_identity.provider().to_owned(),
            model: model_identity.model().to_owned(),
            content: self.trace_content,
        }));
        let mut deployments = Vec::new();
        let mut policies = BTreeMap::new();
        let tools = if wrapped.is_empty() {
            None
        } else {
            let tools_config = tagged("tools", Json::Array(tool_json.clone()));
            let set = ToolSet::new(ToolSetConfig {
                name: format!("{agent}.tools"),
                description: format!("Runs one tool call of the {agent} agent."),
                tools: wrapped,
                deferred_tools: Vec::new(),
                observer: None,
                implementation_digest: implementation,
                configuration_digest: configuration_digest(&tools_config),
            })
            .map_err(|e| BuildError::Interaction { agent: agent.clone(), detail: e.to_string() })?;
            policies.insert(set.deployment_ref().to_string(), RefPolicy::Tools(tool_policies));
            deployments.push(set.deployment().clone());
            Some(set)
        };

        let mut delegates = Vec::new();
        let mut delegate_json = Vec::new();
        let mut models: BTreeMap<String, RunModel> = BTreeMap::new();
        // Deployment ref text → the delegate that brought it in first.
        let mut brought_by: BTreeMap<String, String> = BTreeMap::new();
        let mut delegate_hubs = Vec::new();
        for (name, text, sub) in &self.delegates {
            delegate_hubs.push(sub.inner.hub.clone());
            delegate_hubs.extend(sub.inner.delegate_hubs.iter().cloned());
            let delegate = Delegate::new(DelegateConfig {
                name: name.clone(),
                description: text.clone(),
                deployment: sub.inner.parent.clone(),
                budget: Budget::unlimited(),
                capabilities: CapabilitySet::empty(),
            })
            .map_err(|e| BuildError::Delegate { agent: agent.clone(), delegate: name.clone(), detail: e.to_string() })?;
            delegate_json.push(
                ObjectBuilder::new()
                    .field("name", name)
                    .field("description", text)
                    .field("deployment", &sub.inner.parent.reference().to_string())
                    .build(),
            );
            // The delegate's model calls find this agent's runs for their spans.
            sub.inner.hub.add_delegator(&hub);
            for d in &sub.inner.deployments {
                deployments.push(d.clone());
            }
            for (k, v) in &sub.inner.policies {
                policies.insert(k.clone(), v.clone());
            }
            for (k, v) in &sub.inner.models {
                // The same deployment (the delegate itself or one of its own delegates) must
                // call the same model wherever it comes from: a run finds its deployment by
                // ref, and the ref does not hold the model. (This agent's own ref cannot be one
                // of them: its configuration holds every delegate's ref.)
                if let (Some(known), Some(first)) = (models.get(k), brought_by.get(k)) {
                    if known.identity != v.identity {
                        return Err(BuildError::AmbiguousDelegates {
                            agent,
                            first: first.clone(),
                            second: name.clone(),
                            // A ref's text is `name+digest` (a qualified name holds no `+`).
                            delegate_agent: k.split('+').next().unwrap_or(k).to_owned(),
                            first_model: known.identity.to_string(),
                            second_model: v.identity.to_string(),
                        });
                    }
                }
                brought_by.entry(k.clone()).or_insert_with(|| name.clone());
                models.insert(k.clone(), v.clone());
            }
            delegates.push(delegate);
        }

        let has_tools = tools.is_some();
        let delegate_count = delegates.len();
        let config_json = tagged(
            "agent",
            ObjectBuilder::new()
                .field("name", &agent)
                .field("description", &description)
                .field("max_model_calls", &self.max_model_calls)
                .field("max_concurrent_tool_calls", &if has_tools { limit } else { 0 })
                .field("max_context_bytes", &self.max_context_bytes)
                .value(
                    "model",
                    ObjectBuilder::new()
                        .field("mode", model.mode.name())
                        // The model's identity is not here: each run records it in its state.
                        .opt_field("allow_switch", self.allow_model_switch.then_some(&true))
                        .field("reducer", &model.reducer.is_some())
                        .field("on_unknown", self.model_unknown.as_str())
                        .value("on_error", self.model_error.to_json())
                        .build(),
                )
                .value("tools", Json::Array(tool_json))
                .value("delegates", Json::Array(delegate_json))
                .opt_field("validator", self.validator.as_ref().map(|(id, _)| id))
                .opt_field("instructions", system.as_ref())
                .opt_value("output_schema", output_schema)
                .opt_value("context", (!self.context.is_keep_all()).then(|| self.context.to_json()))
                .opt_value("continue_as_new", self.continuation.map(ContinueAsNew::to_json))
                .opt_value("budget", super::budget::budget_json(&self.budget, &self.prices))
                .build(),
        );
        let run_model = RunModel { identity: model_identity.clone(), allow_switch: self.allow_model_switch };
        let budget = super::budget::budget_config(&agent, self.budget, self.prices.clone(), model_identity.model())?;
        let definition = Definition::new_with_model(DefinitionConfig {
            name: agent.clone(),
            description,
            max_model_calls: self.max_model_calls,
            tools,
            tool_budget: has_tools.then(Budget::unlimited),
            tool_capabilities: CapabilitySet::empty(),
            max_concurrent_tool_calls: if has_tools { limit } else { 0 },
            delegates,
            completion_validator: validator,
            max_context_bytes: self.max_context_bytes,
            budget,
        }, Some(run_model.clone()))
        .map_err(|e| BuildError::Interaction { agent: agent.clone(), detail: e.to_string() })?;
        let dispatcher = ModelDispatcher::new(definition.model_manifest(), model)
            .map_err(|e| BuildError::Interaction { agent: agent.clone(), detail: e.to_string() })?;
        let retry = ModelRetry { inner: Arc::new(dispatcher), policy: self.model_error, hub: hub.clone() };
        let gate = HandoverGate { inner: Arc::new(retry), hub: hub.clone(), policy: self.continuation, version: version.clone() };
        let tap = DeltaTap { inner: Arc::new(gate), hub: hub.clone() };
        let parent = Deployment::new(Arc::new(definition), Some(Arc::new(tap)), implementation, configuration_digest(&config_json));
        parent
            .check_binding()
            .map_err(|e| BuildError::Interaction { agent: agent.clone(), detail: e.to_string() })?;
        policies.insert(
            parent.reference().to_string(),
            RefPolicy::Model { unknown: self.model_unknown, max_model_calls: self.max_model_calls },
        );
        models.insert(parent.reference().to_string(), run_model);
        deployments.insert(0, parent.clone());
        Ok(Agent { inner: Arc::new(AgentInner {
            name: agent,
            parent,
            deployments,
            policies,
            hub,
            max_model_calls: self.max_model_calls,
            model_unknown: self.model_unknown,
            model_error: self.model_error,
            tool_options,
            max_concurrent_tool_calls: if has_tools { limit } else { 0 },
            delegates: delegate_count,
            model_identity,
            models,
            version,
            continuation: self.continuation,
            budget_time_ms: self.budget.time_ms(),
            delegate_hubs,
        }) })
    }
}

impl AgentBuilder {
    /// The system message (instructions, then the typed output's request), the output
    /// schema, and the completion validator (the output check before the user's), written
    /// into the model configuration.
    #[allow(clippy::type_complexity)]
    fn model_instructions(
        &self,
        agent: &str,
        model: &mut DispatcherConfig,
    ) -> Result<(Option<String>, Option<Json>, Option<CompletionValidator>), BuildError> {
        let user_validator = self.validator.as_ref().map(|(_, v)| v.clone());
        let mut parts: Vec<String> = self.instructions.iter().cloned().collect();
        let mut schema_json = None;
        let mut validator = user_validator.clone();
        if let Some(spec) = &self.output {
            let output_error = |detail: String| BuildError::Output { agent: agent.to_owned(), type_name: spec.type_name.to_owned(), detail };
            let schema = spec.schema.clone().map_err(output_error)?;
            let compiled = Schema::compile(&schema).map_err(|e| output_error(e.to_string()))?;
            parts.push(output_instructions(&schema));
            validator = Some(output_validator(compiled, user_validator));
            schema_json = Some(schema);
        }
        let system = if parts.is_empty() { model.instructions.clone() } else { Some(parts.join("\n\n")) };
        if let Some(text) = &system {
            crate::chat::Message::system(text.as_str())
                .validate()
                .map_err(|e| BuildError::Instructions { agent: agent.to_owned(), detail: e.to_string() })?;
        }
        model.instructions = system.clone();
        if schema_json.is_some() {
            model.output_schema = schema_json.clone();
        }
        Ok((system, model.output_schema.clone(), validator))
    }
}

fn concurrency_json(c: &ToolConcurrency) -> Json {
    match c {
        ToolConcurrency::Exclusive => Json::str("exclusive"),
        ToolConcurrency::Shared => Json::str("shared"),
        ToolConcurrency::KeyedBy(arg) => ObjectBuilder::new().field("keyed_by", arg).build(),
    }
}

/// A user's tool with its declared concurrency: the declaration decides, so what the
/// configuration digest records is what runs.
struct Declared {
    inner: Arc<dyn Tool>,
    concurrency: ToolConcurrency,
}

impl Tool for Declared {
    fn spec(&self) -> ToolDefinitionInput {
        self.inner.spec()
    }

    fn call<'a>(&'a self, invocation: &'a Invocation, cx: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.inner.call(invocation, cx)
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        match &self.concurrency {
            ToolConcurrency::Exclusive => None,
            ToolConcurrency::Shared => Some(Concurrency::shared()),
            ToolConcurrency::KeyedBy(arg) => {
                let value = invocation.arguments_json().get(arg);
                let key = match value {
                    Some(Json::String(s)) => s.clone(),
                    Some(other) => other.to_canonical_string(),
                    None => String::new(),
                };
                Some(Concurrency::keyed(key))
            }
        }
    }

    fn returns_direct_result(&self) -> bool {
        self.inner.returns_direct_result()
    }
}
