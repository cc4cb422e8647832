//! The configuration of an Interaction Definition and the rules that make it valid (a broken
//! rule is [`ErrorKind::InvalidDefinitionConfig`]).

use super::completion::CompletionValidator;
use super::delegate::Delegate;
use super::error::{ErrorKind, InteractionError};
use super::toolset::ToolSet;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::resource::Budget;
use std::collections::BTreeSet;

/// Everything an Interaction Definition is built from. Immutable once the Definition exists.
#[derive(Clone, Default)]
pub struct DefinitionConfig {
    /// The descriptor name (a qualified name).
    pub name: String,
    /// The descriptor description.
    pub description: String,
    /// The model-call limit (> 0).
    pub max_model_calls: u32,
    /// Ordinary tools; `None` means no ordinary tools.
    pub tools: Option<ToolSet>,
    /// Granted to every tool child; required (and a valid grant) when `tools` is set.
    pub tool_budget: Option<Budget>,
    /// Granted to every tool child; must be empty without `tools`.
    pub tool_capabilities: CapabilitySet,
    /// Concurrent tool children per window; 0 is normalized to 1. Must be 0 without `tools`.
    pub max_concurrent_tool_calls: u32,
    /// In model-visible order.
    pub delegates: Vec<Delegate>,
    pub completion_validator: Option<CompletionValidator>,
    /// Bound of the working context's canonical bytes (all messages together); 0 means
    /// [`crate::limits::DEFAULT_MAX_CONTEXT_BYTES`]; at most
    /// [`crate::limits::MAX_CONTEXT_BYTES_CEILING`].
    pub max_context_bytes: u64,
    /// Limits on tokens, cost and tool calls ([`super::budget`]); unlimited by default.
    pub budget: super::budget::BudgetConfig,
}

impl std::fmt::Debug for DefinitionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefinitionConfig")
            .field("name", &self.name)
            .field("max_model_calls", &self.max_model_calls)
            .field("tools", &self.tools.as_ref().map(|t| t.deployment_ref().to_string()))
            .field("tool_budget", &self.tool_budget)
            .field("max_concurrent_tool_calls", &self.max_concurrent_tool_calls)
            .field("delegates", &self.delegates.iter().map(Delegate::name).collect::<Vec<_>>())
            .field("completion_validator", &self.completion_validator.is_some())
            .field("max_context_bytes", &self.max_context_bytes)
            .finish()
    }
}

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::new(ErrorKind::InvalidDefinitionConfig, detail)
}

impl DefinitionConfig {
    /// The configuration rules that do not need the descriptor (checked by the
    /// Definition): model-call limit, tool policy only with tools, a valid tool budget with
    /// tools, a valid ToolSet deployment, and unique delegate names that collide with no tool.
    pub fn validate(&self) -> Result<(), InteractionError> {
        if self.max_model_calls == 0 {
            return Err(invalid("max_model_calls must be > 0"));
        }
        if self.max_context_bytes > crate::limits::MAX_CONTEXT_BYTES_CEILING {
            return Err(invalid(format!(
                "max_context_bytes {} exceeds the ceiling of {} bytes",
                self.max_context_bytes,
                crate::limits::MAX_CONTEXT_BYTES_CEILING
            )));
        }
        match &self.tools {
            Some(tools) => {
                tools.deployment().check_binding().map_err(|e| invalid(format!("tool set deployment: {e}")))?;
                match self.tool_budget {
                    Some(budget) if budget.is_valid_grant() => {}
                    Some(_) => return Err(invalid("tool_budget must be a valid, non-zero grant")),
                    None => return Err(invalid("tools need a tool_budget")),
                }
            }
            None => {
                if self.tool_budget.is_some() {
                    return Err(invalid("tool_budget is set without tools"));
                }
                if !self.tool_capabilities.is_empty() {
                    return Err(invalid("tool_capabilities are set without tools"));
                }
                if self.max_concurrent_tool_calls != 0 {
                    return Err(invalid("max_concurrent_tool_calls is set without tools"));
                }
            }
        }
        let mut names = BTreeSet::new();
        for delegate in &self.delegates {
            if !names.insert(delegate.name()) {
                return Err(invalid(format!("delegate `{}` is defined twice", delegate.name())));
            }
            if self.tools.as_ref().is_some_and(|t| t.entry(delegate.name()).is_some()) {
                return Err(invalid(format!("delegate `{}` collides with a tool of the tool set", delegate.name())));
            }
        }
        Ok(())
    }
}
