//! Delegates: model-visible bindings to one exact child Deployment. The model
//! chooses *whether* to delegate, never *where*.

use super::error::{ErrorKind, InteractionError};
use crate::chat::ToolDefinition;
use crate::kernel::binding::Deployment;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::deployment::DeploymentRef;
use crate::kernel::resource::Budget;
use crate::schema::Schema;
use crate::tool::ToolSpec;

/// What a host supplies to build a [`Delegate`].
#[derive(Clone, Debug)]
pub struct DelegateConfig {
    /// The model-facing tool name (provider compatible: `^[A-Za-z0-9_-]{1,64}$`).
    pub name: String,
    /// The model-facing description: non-empty, no surrounding whitespace, ≤ 4096 bytes.
    pub description: String,
    /// The exact child Deployment every delegated call starts.
    pub deployment: Deployment,
    /// Granted to each child (valid and non-zero); permanently allocated from the parent.
    pub budget: Budget,
    /// Granted to each child.
    pub capabilities: CapabilitySet,
}

/// An immutable, validated Delegate. Not an executable tool: the parent starts its child.
#[derive(Clone, Debug)]
pub struct Delegate {
    definition: ToolDefinition,
    deployment_ref: DeploymentRef,
    input_schema: Schema,
    output_schema: Schema,
    budget: Budget,
    capabilities: CapabilitySet,
}

fn invalid(detail: impl AsRef<str>) -> InteractionError {
    InteractionError::new(ErrorKind::InvalidDelegate, detail)
}

impl Delegate {
    /// Validates the construction rules (a bindable Deployment, a valid non-zero budget, a
    /// provider-compatible tool name and description); every failure is
    /// [`ErrorKind::InvalidDelegate`].
    /// The model tool definition's input schema is the child descriptor's input schema, which
    /// must be an object schema (a primitive-input deployment cannot take tool arguments).
    pub fn new(config: DelegateConfig) -> Result<Delegate, InteractionError> {
        config.deployment.check_binding().map_err(|e| invalid(format!("delegate deployment: {e}")))?;
        if !config.budget.is_valid_grant() {
            return Err(invalid("delegate budget must be a valid, non-zero grant"));
        }
        let descriptor = config.deployment.definition().descriptor();
        let input_schema = descriptor.input_schema().clone();
        let spec = ToolSpec::new(config.name.clone(), config.description.clone(), input_schema.source())
            .map_err(|e| invalid(format!("delegate `{}`: {e}", crate::interaction::protocol::excerpt(&config.name))))?;
        let definition = ToolDefinition::new(spec.name(), spec.description(), input_schema.source().clone());
        definition.validate().map_err(|e| invalid(format!("delegate tool definition: {e}")))?;
        Ok(Delegate {
            definition,
            deployment_ref: config.deployment.reference().clone(),
            input_schema,
            output_schema: descriptor.output_schema().clone(),
            budget: config.budget,
            capabilities: config.capabilities,
        })
    }

    pub fn name(&self) -> &str {
        &self.definition.name
    }
    /// The model-facing tool definition.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }
    pub fn deployment_ref(&self) -> &DeploymentRef {
        &self.deployment_ref
    }
    /// The child's input schema (call arguments are checked against it before starting).
    pub fn input_schema(&self) -> &Schema {
        &self.input_schema
    }
    /// The child's output schema (a completed child's output must satisfy it).
    pub fn output_schema(&self) -> &Schema {
        &self.output_schema
    }
    pub fn budget(&self) -> Budget {
        self.budget
    }
    pub fn capabilities(&self) -> &CapabilitySet {
        &self.capabilities
    }
}
