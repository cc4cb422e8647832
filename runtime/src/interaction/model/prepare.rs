//! Request preparation: the per-call tool manifest.

use crate::chat::{Request, ToolDefinition};
use crate::interaction::protocol::ModelCallEffect;
use std::collections::BTreeMap;

/// The request the model receives: the effect's context request (rebuilt from the Step's
/// segments, never carrying tools; taken by value, not copied: a context grows with the
/// loop's age) with `tools` = the always-visible definitions (initial, then delegates) followed by
/// the advertised deferred definitions in commit order. An advertised name that is not a bound
/// deferred tool, or a prepared request that fails chat validation, is an error: the Effect
/// stays unknown. `context`'s messages and options must have passed their rules (as
/// `ModelCallEffect::request` returns it); they are not walked again.
pub(crate) fn prepare_request(
    visible: &[ToolDefinition],
    deferred: &BTreeMap<String, ToolDefinition>,
    effect: &ModelCallEffect,
    context: Request,
) -> Result<Request, String> {
    let mut tools = Vec::with_capacity(visible.len() + effect.advertised_tool_names.len());
    tools.extend_from_slice(visible);
    for name in &effect.advertised_tool_names {
        let definition = deferred
            .get(name)
            .ok_or_else(|| format!("advertised tool `{name}` is not a deferred tool of this Interaction"))?;
        tools.push(definition.clone());
    }
    let mut request = context;
    request.tools = tools;
    // The context's messages and options passed their rules when it was rebuilt
    // (`ModelCallEffect::request`); what this adds is checked here.
    request.validate_with_checked_messages().map_err(|e| format!("prepared model request is invalid: {e}"))?;
    Ok(request)
}
