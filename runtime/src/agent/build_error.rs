//! Why an agent could not be built, with what to change.

/// A configuration mistake found by [`AgentBuilder::build`](super::AgentBuilder::build),
/// before any model call. Each message says what to change.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The agent name is empty or not a qualified name.
    #[error("agent name `{name}` is not usable: {detail}; use letters, digits, `_`, `-` and `.` (for example \"weather\")")]
    Name {
        /// The name given.
        name: String,
        /// Why it was refused.
        detail: String,
    },
    /// No model was given.
    #[error("agent `{agent}` has no model: call `.model(client)` or `.streaming_model(streamer)`")]
    NoModel {
        /// The agent.
        agent: String,
    },
    /// No implementation version was declared.
    #[error("agent `{agent}` declares no version: call `.version(\"1.0.0\")` and change it whenever the code of the model client or the tools changes (runs are restored only under the version they started with)")]
    NoVersion {
        /// The agent.
        agent: String,
    },
    /// The declared version cannot be recorded.
    #[error("agent `{agent}`: the version is not usable: {detail}; use a short text such as \"1.4.2\" or a date")]
    Version {
        /// The agent.
        agent: String,
        /// Why.
        detail: String,
    },
    /// `max_model_calls` is zero.
    #[error("agent `{agent}`: max_model_calls must be at least 1 (call `.max_model_calls(8)`)")]
    NoModelCalls {
        /// The agent.
        agent: String,
    },
    /// A context policy was set on a model configuration that already has a context reducer.
    #[error("agent `{agent}` has both a context policy and a hand-built context reducer (`DispatcherConfig::with_reducer`); keep one of them")]
    ContextPolicyWithReducer {
        /// The agent.
        agent: String,
    },
    /// The context policy cannot work.
    #[error("agent `{agent}`: the context policy is not usable: {detail}; give `keep_last_bytes` a budget of at least a few kilobytes")]
    ContextPolicy {
        /// The agent.
        agent: String,
        /// Why.
        detail: String,
    },
    /// The continue-as-new policy cannot work.
    #[error("agent `{agent}`: the continue-as-new policy is not usable: {detail}; for example `ContinueAsNew::after_model_calls(20).keep_last_messages(30)` with `.max_model_calls(40)`")]
    ContinueAsNew {
        /// The agent.
        agent: String,
        /// Why.
        detail: String,
    },
    /// The model error policy makes no attempt or too many.
    #[error("agent `{agent}`: the model error policy makes {attempts} attempts; it must make between 1 and 10 (for example `.on_model_error(ModelErrorPolicy::attempts(3))`)")]
    ModelAttempts {
        /// The agent.
        agent: String,
        /// The configured attempts.
        attempts: u32,
    },
    /// `max_context_bytes` is zero or above its ceiling.
    #[error("agent `{agent}`: max_context_bytes is {bytes}; it must be between 1 and 268435456 (256 MiB); call `.max_context_bytes(64 << 20)` or leave the default")]
    ContextLimit {
        /// The agent.
        agent: String,
        /// The configured bound.
        bytes: u64,
    },
    /// Two tools (or a tool and a delegate) share a name.
    #[error("agent `{agent}`: the name `{name}` is used by more than one tool or delegate; rename one of them")]
    DuplicateName {
        /// The agent.
        agent: String,
        /// The repeated name.
        name: String,
    },
    /// A tool's definition is invalid (name, description or argument schema).
    #[error("agent `{agent}`: tool `{tool}` is invalid: {detail}")]
    Tool {
        /// The agent.
        agent: String,
        /// The tool name (or its position when it has none).
        tool: String,
        /// What is wrong.
        detail: String,
    },
    /// More than one concurrent tool call was allowed but no tool may run concurrently.
    #[error("agent `{agent}`: max_concurrent_tool_calls is {limit} but no tool declares concurrency, so calls would run one at a time; declare it with `.tool_with(tool, ToolOptions::new().shared())` (or `.keyed_by(\"argument\")`), or set max_concurrent_tool_calls to 1")]
    ConcurrencyUndeclared {
        /// The agent.
        agent: String,
        /// The configured limit.
        limit: u32,
    },
    /// Concurrent tool calls were allowed but the agent has no tools.
    #[error("agent `{agent}`: max_concurrent_tool_calls is set but the agent has no tools; remove it or add a tool")]
    ConcurrencyWithoutTools {
        /// The agent.
        agent: String,
    },
    /// A delegate is invalid.
    #[error("agent `{agent}`: delegate `{delegate}` is invalid: {detail}")]
    Delegate {
        /// The agent.
        agent: String,
        /// The delegate name.
        delegate: String,
        /// What is wrong.
        detail: String,
    },
    /// The instructions cannot be sent as a system message.
    #[error("agent `{agent}`: the instructions cannot be sent to the model: {detail}; shorten or clean up the text given to `.instructions(..)`")]
    Instructions {
        /// The agent.
        agent: String,
        /// What is wrong.
        detail: String,
    },
    /// The declared output type has no usable JSON Schema.
    #[error("agent `{agent}`: the output type `{type_name}` cannot be checked: {detail}; give `.output::<T>()` a type whose `schemars::JsonSchema` derives a valid JSON Schema")]
    Output {
        /// The agent.
        agent: String,
        /// The type given to `.output::<T>()`.
        type_name: String,
        /// What is wrong.
        detail: String,
    },
    /// The budget cannot be applied.
    #[error("agent `{agent}`: {detail}")]
    Budget {
        /// The agent.
        agent: String,
        /// What to change.
        detail: String,
    },
    /// Two delegates bring in one deployment (the same agent name, version and
    /// configuration) calling different models. The model is not part of a deployment's
    /// identity, so both would run as one of them.
    #[error("agent `{agent}`: delegates `{first}` and `{second}` both run agent `{delegate_agent}` under one deployment, but one calls {first_model} and the other {second_model}; a deployment is found by its name, version and configuration, never by its model, so both would call one model. Give one of them another name (`Agent::builder(\"{delegate_agent}-2\")`) or another `.version(..)`")]
    AmbiguousDelegates {
        /// The agent.
        agent: String,
        /// The delegate (by its tool name) that brought in the deployment first.
        first: String,
        /// The delegate that brought it in again with another model.
        second: String,
        /// The name of the agent both run.
        delegate_agent: String,
        /// The model of the first.
        first_model: String,
        /// The model of the second.
        second_model: String,
    },
    /// The underlying Interaction refused the configuration.
    #[error("agent `{agent}`: {detail}")]
    Interaction {
        /// The agent.
        agent: String,
        /// The refusal.
        detail: String,
    },
}
super::run_error::debug_as_display!(BuildError);
