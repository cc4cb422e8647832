//! A model-visible tool definition.

use super::name::validate_tool_name;
use super::ChatError;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::MAX_TEXT_BYTES;

/// What the model sees of one tool.
///
/// Wire form: `{"name":S,"description":S,"input_schema":{..}}`.
///
/// Valid when: the name is provider compatible (`^[A-Za-z0-9_-]{1,64}$`), the description is
/// 1 to [`MAX_TEXT_BYTES`] bytes, and the input schema is a JSON object whose `type` is
/// `"object"` (providers only accept object-shaped arguments). Only that structure is checked
/// here; compiling the schema is the tool layer's job.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: Json,
}

impl ToolDefinition {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Json,
    ) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema,
        }
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        validate_tool_name(&self.name)?;
        if self.description.is_empty() {
            return Err(ChatError::InvalidDescription {
                reason: "must not be empty",
            });
        }
        if self.description.len() > MAX_TEXT_BYTES {
            return Err(ChatError::InvalidDescription {
                reason: "longer than 4096 bytes",
            });
        }
        let Json::Object(schema) = &self.input_schema else {
            return Err(ChatError::InvalidInputSchema {
                reason: "must be a JSON object",
            });
        };
        if schema.get("type").and_then(Json::as_str) != Some("object") {
            return Err(ChatError::InvalidInputSchema {
                reason: "`type` must be \"object\"",
            });
        }
        Ok(())
    }
}

impl ToJson for ToolDefinition {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("name", &self.name)
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .build()
    }
}

impl FromJson for ToolDefinition {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let definition = ToolDefinition {
            name: r.required("name")?,
            description: r.required("description")?,
            input_schema: r.required("input_schema")?,
        };
        r.finish()?;
        definition.validate()?;
        Ok(definition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    fn schema() -> Json {
        ObjectBuilder::new()
            .field("type", "object")
            .value(
                "properties",
                ObjectBuilder::new()
                    .value("q", ObjectBuilder::new().field("type", "string").build())
                    .build(),
            )
            .build()
    }

    #[test]
    fn round_trip() {
        let d = ToolDefinition::new("search", "Searches the web.", schema());
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(d.to_json().get("input_schema"), Some(&schema()));
        assert_eq!(ToolDefinition::from_json(&d.to_json()), Ok(d));
    }

    #[test]
    fn validation_rules() {
        let ok = ToolDefinition::new("search", "d", schema());
        let bad_name = ToolDefinition {
            name: "invalid/name".into(),
            ..ok.clone()
        };
        assert!(matches!(
            bad_name.validate(),
            Err(ChatError::InvalidToolName { .. })
        ));
        let no_description = ToolDefinition {
            description: String::new(),
            ..ok.clone()
        };
        assert!(matches!(
            no_description.validate(),
            Err(ChatError::InvalidDescription { .. })
        ));
        let long = ToolDefinition {
            description: "d".repeat(MAX_TEXT_BYTES + 1),
            ..ok.clone()
        };
        assert!(matches!(
            long.validate(),
            Err(ChatError::InvalidDescription { .. })
        ));
        assert_eq!(
            ToolDefinition {
                description: "d".repeat(MAX_TEXT_BYTES),
                ..ok.clone()
            }
            .validate(),
            Ok(())
        );
        for bad_schema in [
            Json::Bool(true),
            Json::str("object"),
            Json::object(),
            ObjectBuilder::new().field("type", "string").build(),
            ObjectBuilder::new()
                .value("type", Json::Array(vec![Json::str("object")]))
                .build(),
        ] {
            let d = ToolDefinition {
                input_schema: bad_schema,
                ..ok.clone()
            };
            assert!(
                matches!(d.validate(), Err(ChatError::InvalidInputSchema { .. })),
                "{d:?}"
            );
            assert!(ToolDefinition::from_json(&d.to_json()).is_err());
        }
    }

    #[test]
    fn strict_decoding() {
        let mut v = ToolDefinition::new("search", "d", schema()).to_json();
        if let Json::Object(o) = &mut v {
            o.insert("strict".into(), Json::Bool(true));
        }
        assert_eq!(
            ToolDefinition::from_json(&v).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("strict".into())
        );
        let null_schema = ObjectBuilder::new()
            .field("name", "s")
            .field("description", "d")
            .value("input_schema", Json::Null)
            .build();
        assert_eq!(
            ToolDefinition::from_json(&null_schema).unwrap_err().kind,
            DecodeErrorKind::NullMember("input_schema".into())
        );
        let wrong = ObjectBuilder::new()
            .field("name", &1u64)
            .field("description", "d")
            .field("input_schema", &schema())
            .build();
        assert_eq!(
            ToolDefinition::from_json(&wrong).unwrap_err().path,
            "$.name"
        );
    }
}
