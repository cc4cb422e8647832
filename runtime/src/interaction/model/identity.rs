//! Which model a client calls: provider, model name and the settings that change its answers.
//!
//! An agent's configuration digest records its model's identity, so a stored run is never
//! resumed by a different model without notice (see `keel::agent`).

use crate::json::{Json, ObjectBuilder};
use std::collections::BTreeMap;

/// The identity of a model client: the provider, the model name and every setting that changes
/// what the model answers (temperature, reasoning effort, a base URL that selects another
/// deployment, ...). Secrets (API keys) are never part of it.
///
/// Clients say who they are through [`ModelClient::identity`](super::ModelClient::identity)
/// and [`ModelStreamer::identity`](super::ModelStreamer::identity).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelIdentity {
    provider: String,
    model: String,
    settings: BTreeMap<String, String>,
}

impl ModelIdentity {
    /// `provider` (for example `"openai"`) serving `model` (for example `"gpt-4o-mini"`).
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> ModelIdentity {
        ModelIdentity { provider: provider.into(), model: model.into(), settings: BTreeMap::new() }
    }

    /// Adds a setting that changes the model's answers.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> ModelIdentity {
        self.settings.insert(name.into(), value.into());
        self
    }

    /// The identity of a client that does not declare one: its Rust type name.
    pub fn of_type<T: ?Sized>() -> ModelIdentity {
        ModelIdentity::new("unnamed", std::any::type_name::<T>())
    }

    /// The provider.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The settings, by name.
    pub fn settings(&self) -> &BTreeMap<String, String> {
        &self.settings
    }

    /// The canonical form recorded in configuration digests.
    pub fn to_json(&self) -> Json {
        let mut settings = ObjectBuilder::new();
        for (k, v) in &self.settings {
            settings = settings.field(k, v);
        }
        ObjectBuilder::new()
            .field("provider", &self.provider)
            .field("model", &self.model)
            .value("settings", settings.build())
            .build()
    }
}

/// `provider/model (name=value, ...)`.
impl std::fmt::Display for ModelIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)?;
        if !self.settings.is_empty() {
            let list: Vec<String> = self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            write!(f, " ({})", list.join(", "))?;
        }
        Ok(())
    }
}
