//! Which model a client calls: provider, model name and the settings that change its answers.
//!
//! A run records its model's identity in its state (the Interaction state's `model` record), so
//! a stored run is never resumed by a different model without notice (see `keel::agent`).

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
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

    /// The canonical form recorded in a run's state: `{"model","provider","settings":{name: value}}`.
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

impl ToJson for ModelIdentity {
    fn to_json(&self) -> Json {
        ModelIdentity::to_json(self)
    }
}

impl FromJson for ModelIdentity {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let provider = r.required("provider")?;
        let model = r.required("model")?;
        let settings = r.required_with("settings", |v| match v {
            Json::Object(members) => members
                .iter()
                .map(|(k, v)| match v {
                    Json::String(s) => Ok((k.clone(), s.clone())),
                    other => Err(DecodeError::wrong_type("string", other).in_member(k)),
                })
                .collect(),
            other => Err(DecodeError::wrong_type("object", other)),
        })?;
        r.finish()?;
        Ok(ModelIdentity { provider, model, settings })
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
