//! The static declarations of one tool: concurrency, Unknown policy.

use super::policy::UnknownPolicy;

/// Which calls of a tool may run at the same time as other calls of the same model turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolConcurrency {
    /// One call at a time, alone in its window (the default).
    #[default]
    Exclusive,
    /// Any number of calls may run together.
    Shared,
    /// Calls whose argument named here has equal values run one at a time; others run
    /// together (for example `"account"` serializes calls per account).
    KeyedBy(String),
}

/// How the agent treats one tool. Part of the agent's configuration digest: changing any of
/// it changes the deployment identity, so a run started under other options is not restored
/// silently.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOptions {
    pub(crate) concurrency: ToolConcurrency,
    pub(crate) unknown: UnknownPolicy,
}

impl ToolOptions {
    /// Exclusive, Unknowns held for the host.
    pub fn new() -> ToolOptions {
        ToolOptions::default()
    }

    /// Declares that calls of this tool may run together with any other call.
    pub fn shared(mut self) -> ToolOptions {
        self.concurrency = ToolConcurrency::Shared;
        self
    }

    /// Declares that calls run together unless their `argument` values are equal.
    pub fn keyed_by(mut self, argument: impl Into<String>) -> ToolOptions {
        self.concurrency = ToolConcurrency::KeyedBy(argument.into());
        self
    }

    /// What the host does when a call's outcome is Unknown.
    pub fn on_unknown(mut self, policy: UnknownPolicy) -> ToolOptions {
        self.unknown = policy;
        self
    }

    /// Shorthand for `on_unknown(UnknownPolicy::Retry)`: the tool is safe to call twice.
    pub fn idempotent(self) -> ToolOptions {
        self.on_unknown(UnknownPolicy::Retry)
    }

    /// The declared concurrency.
    pub fn concurrency(&self) -> &ToolConcurrency {
        &self.concurrency
    }

    /// The declared Unknown policy.
    pub fn unknown_policy(&self) -> UnknownPolicy {
        self.unknown
    }
}
