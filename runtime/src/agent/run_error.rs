//! Why a run operation failed.
//!
//! Every public error here prints its message for `{:?}` too, so a `main` returning
//! `Result<(), Box<dyn Error>>` shows the message, not a struct dump.

use super::result::RunFailure;
use crate::kernel::commit::CommitError;
use crate::kernel::deployment::DeploymentRef;

/// Debug prints the message (what `main() -> Result<_, Box<dyn Error>>` shows on exit).
macro_rules! debug_as_display {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
    };
}
pub(crate) use debug_as_display;

/// A run operation that failed. Every message says what happened and, where the host can act,
/// what to do.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The run ended without completing (failed, canceled, timed out or killed): there is no
    /// answer to show or continue. [`RunFailure`] carries its status, code and message.
    #[error(transparent)]
    NotCompleted(RunFailure),
    /// The store could not read or write (an I/O failure: disk full, permissions, a lost
    /// database connection); nothing was published.
    #[error("the store failed: {0}; check that the store is reachable and has space, then resume the run")]
    Store(String),
    /// Another writer holds the run or the store: the run was started or resumed elsewhere
    /// (another process, or another `Runtime` on the same store), or the store is open in
    /// another process. This writer changed nothing.
    #[error("{0}")]
    Conflict(String),
    /// A run with this id already exists in the store.
    #[error("run {0} already exists in the store; continue it with `Runtime::resume` (`start_with_id` only starts new runs)")]
    AlreadyExists(String),
    /// The stored record of the run is damaged (the store's other runs are unaffected).
    #[error("{0}")]
    Damaged(String),
    /// The engine refused the operation.
    #[error("the engine refused: {0}")]
    Engine(String),
    /// The run's writer stopped (a store failure): this handle is dead.
    #[error("the run stopped: {0}; resume it from the store with `Runtime::resume`")]
    Stopped(String),
    /// The stored run was started by a different agent configuration.
    #[error(transparent)]
    Refused(#[from] RestoreRefused),
    /// The stored run calls another model, and this agent does not allow a model switch.
    #[error(transparent)]
    ModelChanged(#[from] super::model_switch::ModelChanged),
    /// The text is not a run id.
    #[error("`{0}` is not a run id; use the text `Run::id` printed (it starts with `process:`)")]
    InvalidRunId(String),
    /// No run with this id in the store.
    #[error("no run {0} in the store; check the run id (it is printed by `Run::id`)")]
    NotFound(String),
    /// The run is not finished.
    #[error("run {0} has not finished; wait for `Run::result` before continuing it")]
    NotFinished(String),
    /// An input could not be encoded.
    #[error("invalid input: {0}")]
    Input(String),
    /// The run was started by a version of the agent this runtime does not have.
    #[error(
        "run {run} was started by version `{version}` of agent `{agent}`, which this runtime does not have \
         (registered: {registered}); register that version with `Runtime::register` to finish the run under it \
         (then `Run::upgrade` moves it to a newer one)"
    )]
    VersionNotRegistered {
        /// The run.
        run: String,
        /// The agent's name.
        agent: String,
        /// The version the run recorded when it started.
        version: String,
        /// The versions this runtime has, quoted, in registration order.
        registered: String,
    },
    /// A version could not be registered, or a hand-over cannot happen as asked.
    #[error("{0}")]
    Version(String),
    /// The run ended by continuing as a new run (an upgrade or a continue-as-new); its
    /// conversation goes on in `successor` ([`Run::successor`](super::Run::successor)).
    #[error("run {run} continued as run {successor} ({reason}) under version `{version}`; follow it with `Run::successor`")]
    ContinuedAs {
        /// The run that ended.
        run: String,
        /// The run that continues it.
        successor: super::RunId,
        /// Why (`upgrade`, `continue-as-new after 20 model calls`, ...).
        reason: String,
        /// The version the successor runs under.
        version: String,
    },
    /// A hand-over was asked of a run that waits for the host: nothing reaches the next model
    /// call (where the run hands over) until the host acts.
    #[error(
        "run {run} cannot hand over yet: it waits for {waiting}; the request stays: once that is done the run hands \
         over at its next model call, and calling the same method again returns the successor"
    )]
    NotAtBoundary {
        /// The run.
        run: String,
        /// What it waits for.
        waiting: String,
    },
    /// An Unknown could not be resolved.
    #[error("cannot resolve effect {effect}: {detail}")]
    Resolve {
        /// The Effect.
        effect: String,
        /// Why.
        detail: String,
    },
}
debug_as_display!(RunError);

impl RunError {
    /// The failure of a run that did not complete, if that is what this error is.
    pub fn failure(&self) -> Option<&RunFailure> {
        match self {
            RunError::NotCompleted(f) => Some(f),
            _ => None,
        }
    }

    /// The error for a store refusal of `run`'s commit: each conflict between writers is
    /// named as such; only an I/O failure is a store failure.
    pub(crate) fn from_commit(run: &str, e: CommitError) -> RunError {
        match e {
            CommitError::TreeIncarnationConflict { reason } if reason.contains("start over an existing head") => {
                RunError::AlreadyExists(run.to_owned())
            }
            CommitError::TreeIncarnationConflict { reason } => RunError::Conflict(resumed_elsewhere(run, &reason)),
            CommitError::CommitConflict { identity } => RunError::Conflict(format!(
                "run {run}: another writer stored a different commit {identity} for the same step: the run was resumed \
                 elsewhere (another process or `Runtime` on this store); let that writer finish, or stop it and \
                 `Runtime::resume` the run here"
            )),
            CommitError::Damaged { .. } => RunError::Damaged(e.to_string()),
            CommitError::RecordTooLarge { bytes, max } => RunError::Engine(format!(
                "run {run}: a commit of {bytes} bytes exceeds the store's record bound of {max} bytes; lower \
                 `max_context_bytes` or open the store with a larger record bound"
            )),
            CommitError::InvalidCommit { .. } | CommitError::MissingRecord { .. } => {
                RunError::Engine(format!("{e} (a keel bug: please report it)"))
            }
            CommitError::Storage { message } => RunError::Store(message),
            CommitError::Injected { fault } => RunError::Store(format!("injected fault: {fault}")),
        }
    }
}

/// The message for a writer fenced because another incarnation owns the run's head.
pub(crate) fn resumed_elsewhere(run: &str, reason: &str) -> String {
    format!(
        "run {run} is held by another writer ({reason}): it was resumed elsewhere (another process or \
         `Runtime` on this store) and this writer may not change it; let that writer finish, or stop it and \
         `Runtime::resume` the run here"
    )
}

/// A stored run refused at restore because this agent's deployment differs from the one the
/// run was started with. Its message is one line naming what differs; the two full references
/// are in its fields.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run {run} was started by another configuration of agent `{}`: {differences} differ; resume it with the \
     configuration and `.version(..)` it started with (changes apply to new runs only)",
    current.name()
)]
pub struct RestoreRefused {
    /// The run.
    pub run: String,
    /// The stored reference.
    pub stored: DeploymentRef,
    /// This agent's reference.
    pub current: DeploymentRef,
    /// Which parts differ, with short digests (`version (implementation a1b2c3d4 ≠ e5f6a7b8)`,
    /// `configuration (...)`, ...).
    pub differences: String,
}
debug_as_display!(RestoreRefused);

impl RestoreRefused {
    /// `current_model` is this agent's model (see [`ModelIdentity`](crate::interaction::model::ModelIdentity)),
    /// named because a changed model is the most common changed setting.
    pub(crate) fn new(run: String, stored: DeploymentRef, current: DeploymentRef, current_model: &str) -> RestoreRefused {
        let short = |d: crate::json::Digest| d.hex().chars().take(8).collect::<String>();
        let mut parts = Vec::new();
        if stored.name() != current.name() {
            parts.push(format!("the agent name (`{}` ≠ `{}`)", stored.name().as_str(), current.name().as_str()));
        }
        if stored.contract_digest() != current.contract_digest() {
            let (a, b) = (short(stored.contract_digest()), short(current.contract_digest()));
            parts.push(format!("the contract ({a} ≠ {b})"));
        }
        if stored.implementation_digest() != current.implementation_digest() {
            let (a, b) = (short(stored.implementation_digest()), short(current.implementation_digest()));
            parts.push(format!("the version given to `.version(..)` or the keel version ({a} ≠ {b})"));
        }
        if stored.configuration_digest() != current.configuration_digest() {
            let (a, b) = (short(stored.configuration_digest()), short(current.configuration_digest()));
            parts.push(format!("the settings (instructions, tools, output, limits, policies, delegates, validator or whether the model may switch; this agent calls {current_model}: {a} ≠ {b})"));
        }
        if stored.bindings_digest() != current.bindings_digest() {
            let (a, b) = (short(stored.bindings_digest()), short(current.bindings_digest()));
            parts.push(format!("the tools' or delegates' deployments ({a} ≠ {b})"));
        }
        RestoreRefused { run, stored, current, differences: parts.join("; ") }
    }
}

/// An answer to an input request that was refused. Nothing was delivered.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
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
debug_as_display!(AnswerError);
