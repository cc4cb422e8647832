//! Why a run operation failed.

use crate::kernel::deployment::DeploymentRef;

/// A run operation that failed. Every message says what happened and, where the host can act,
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The store refused or failed; nothing was published.
    #[error("the store failed: {0}; check the store (disk space, permissions) and resume the run")]
    Store(String),
    /// The engine refused the operation.
    #[error("the engine refused: {0}")]
    Engine(String),
    /// The run's writer stopped (a store failure or a fenced writer): this handle is dead.
    #[error("the run stopped: {0}; resume it from the store with `Runtime::resume`")]
    Stopped(String),
    /// The stored run was started by a different agent configuration.
    #[error(transparent)]
    Refused(#[from] RestoreRefused),
    /// The text is not a run id.
    #[error("`{0}` is not a run id; use the text `Run::id` printed (it starts with `process:`)")]
    InvalidRunId(String),
    /// No run with this id in the store.
    #[error("no run {0} in the store; check the run id (it is printed by `Run::id`)")]
    NotFound(String),
    /// The run is not finished.
    #[error("run {0} has not finished; wait for `Run::result` before continuing it")]
    NotFinished(String),
    /// The run did not complete, so there is no conversation to continue or no text to show.
    #[error("run {run} ended {status}: {reason}")]
    NotCompleted {
        /// The run.
        run: String,
        /// Its terminal status.
        status: String,
        /// Why it ended.
        reason: String,
    },
    /// An input could not be encoded.
    #[error("invalid input: {0}")]
    Input(String),
    /// An Unknown could not be resolved.
    #[error("cannot resolve effect {effect}: {detail}")]
    Resolve {
        /// The Effect.
        effect: String,
        /// Why.
        detail: String,
    },
}

/// A stored run refused at restore because this agent's deployment differs from the one the
/// run was started with. Shows both references and how to proceed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "run {run} was started by deployment {stored} but this agent is {current} (differs in: {differences}). \
     Resume it with the agent configuration and `.version(..)` it started with; changes apply to new runs only"
)]
pub struct RestoreRefused {
    /// The run.
    pub run: String,
    /// The stored reference.
    pub stored: DeploymentRef,
    /// This agent's reference.
    pub current: DeploymentRef,
    /// Which parts differ (`name`, `contract`, `implementation (version)`, `configuration`,
    /// `bindings (tools or delegates)`).
    pub differences: String,
}

impl RestoreRefused {
    pub(crate) fn new(run: String, stored: DeploymentRef, current: DeploymentRef) -> RestoreRefused {
        let mut parts = Vec::new();
        if stored.name() != current.name() {
            parts.push("name");
        }
        if stored.contract_digest() != current.contract_digest() {
            parts.push("contract");
        }
        if stored.implementation_digest() != current.implementation_digest() {
            parts.push("implementation (version)");
        }
        if stored.configuration_digest() != current.configuration_digest() {
            parts.push("configuration (model, tools, limits, delegates or validator)");
        }
        if stored.bindings_digest() != current.bindings_digest() {
            parts.push("bindings (tools or delegates)");
        }
        RestoreRefused { run, stored, current, differences: parts.join(", ") }
    }
}

/// An answer to an input request that was refused. Nothing was delivered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The run is not waiting on this input (already answered with other content, or never
    /// asked); the current waits are in `Run::pending_inputs`.
    #[error("run is not waiting for input {wait}: answer one of the waits in `pending_inputs()` ({current} open)")]
    WrongWait {
        /// The wait answered.
        wait: String,
        /// How many waits are open.
        current: usize,
    },
    /// The answer does not match the request's response schema.
    #[error("the answer to {wait} does not match its response schema {schema}: {detail}")]
    Invalid {
        /// The wait.
        wait: String,
        /// The schema text.
        schema: String,
        /// The validation error.
        detail: String,
    },
    /// The run stopped or the engine refused the delivery.
    #[error("the answer to {wait} was not delivered: {detail}")]
    NotDelivered {
        /// The wait.
        wait: String,
        /// Why.
        detail: String,
    },
    /// The tool call that asked has ended (its process finished, also when it has since
    /// been compacted away): nothing can answer it any more.
    #[error("input {wait} can no longer be answered: this question was already answered or its call ended")]
    CallEnded {
        /// The wait.
        wait: String,
    },
}
