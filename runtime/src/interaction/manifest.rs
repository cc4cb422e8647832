//! The model-facing tool manifest of one Interaction Definition.
//!
//! The WorkingContext never holds tool definitions; the model Dispatcher adds them per call:
//! the initial tools (ToolSet registration order), then the delegates (definition order), then
//! the deferred tools advertised so far (commit order). The Definition produces this value and
//! the Dispatcher copies it once at construction.

use super::error::{ErrorKind, InteractionError};
use crate::chat::ToolDefinition;
use crate::limits::MAX_REQUEST_TOOLS;
use std::collections::{BTreeMap, BTreeSet};

/// Every tool definition the model can ever see, grouped by how it becomes visible.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelManifest {
    /// Always visible, in ToolSet registration order.
    pub initial: Vec<ToolDefinition>,
    /// Always visible after the initial tools, in Delegate definition order.
    pub delegates: Vec<ToolDefinition>,
    /// Bound but visible only once advertised, keyed by tool name.
    pub deferred: BTreeMap<String, ToolDefinition>,
}

impl ModelManifest {
    /// Every definition is valid, each deferred entry is keyed by its own name, names are
    /// unique across all three groups, and even the largest reachable manifest (every deferred
    /// tool advertised) fits one request, so an advertisement can never make a later model call
    /// unpreparable. Errors are [`ErrorKind::InvalidDispatcherConfig`].
    pub fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| InteractionError::new(ErrorKind::InvalidDispatcherConfig, detail);
        let mut names = BTreeSet::new();
        let groups = [("initial", self.initial.iter()), ("delegate", self.delegates.iter())];
        for (group, definitions) in groups {
            for (index, definition) in definitions.enumerate() {
                definition.validate().map_err(|e| invalid(format!("{group} tool {index}: {e}")))?;
                if !names.insert(definition.name.as_str()) {
                    return Err(invalid(format!("tool name `{}` appears more than once", definition.name)));
                }
            }
        }
        for (key, definition) in &self.deferred {
            definition.validate().map_err(|e| invalid(format!("deferred tool `{key}`: {e}")))?;
            if key != &definition.name {
                return Err(invalid(format!("deferred entry `{key}` holds the definition of `{}`", definition.name)));
            }
            if !names.insert(definition.name.as_str()) {
                return Err(invalid(format!("tool name `{}` appears more than once", definition.name)));
            }
        }
        if names.len() > MAX_REQUEST_TOOLS {
            return Err(invalid(format!(
                "the manifest holds {} tools, above the request limit of {MAX_REQUEST_TOOLS}",
                names.len()
            )));
        }
        Ok(())
    }

    /// The always-visible definitions: initial, then delegates.
    pub fn visible(&self) -> Vec<ToolDefinition> {
        self.initial.iter().chain(&self.delegates).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Json};

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition::new(name, format!("the {name} tool"), parse(br#"{"type":"object"}"#).unwrap())
    }

    fn manifest() -> ModelManifest {
        ModelManifest {
            initial: vec![tool("search"), tool("fetch")],
            delegates: vec![tool("research")],
            deferred: [("archive".to_owned(), tool("archive"))].into_iter().collect(),
        }
    }

    #[test]
    fn valid_manifest_and_visible_order() {
        let m = manifest();
        m.validate().unwrap();
        let names: Vec<_> = m.visible().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["search", "fetch", "research"]);
        ModelManifest::default().validate().unwrap();
    }

    #[test]
    fn duplicate_names_are_rejected_in_and_across_groups() {
        let mut m = manifest();
        m.initial.push(tool("search"));
        assert!(m.validate().unwrap_err().is(ErrorKind::InvalidDispatcherConfig));
        let mut m = manifest();
        m.delegates.push(tool("fetch"));
        assert!(m.validate().unwrap_err().detail().contains("`fetch` appears more than once"));
        let mut m = manifest();
        m.deferred.insert("research".into(), tool("research"));
        assert!(m.validate().is_err());
    }

    #[test]
    fn deferred_key_must_match_its_definition() {
        let mut m = manifest();
        m.deferred.insert("other".into(), tool("elsewhere"));
        assert!(m.validate().unwrap_err().detail().contains("holds the definition of `elsewhere`"));
    }

    #[test]
    fn invalid_definitions_are_rejected_in_every_group() {
        let bad = ToolDefinition::new("bad", "d", Json::Null);
        for group in 0..3 {
            let mut m = manifest();
            match group {
                0 => m.initial.push(bad.clone()),
                1 => m.delegates.push(bad.clone()),
                _ => {
                    m.deferred.insert("bad".into(), bad.clone());
                }
            }
            assert!(m.validate().unwrap_err().is(ErrorKind::InvalidDispatcherConfig), "group {group}");
        }
    }

    #[test]
    fn the_largest_reachable_manifest_must_fit_a_request() {
        let mut m = ModelManifest::default();
        for i in 0..MAX_REQUEST_TOOLS {
            m.initial.push(tool(&format!("t{i}")));
        }
        m.validate().unwrap();
        m.deferred.insert("extra".into(), tool("extra"));
        assert!(m.validate().unwrap_err().detail().contains("above the request limit"));
    }
}
