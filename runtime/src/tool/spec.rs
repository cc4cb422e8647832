//! The frozen, validated definition of one tool: what the model is shown and what arguments
//! are checked against.

use super::diagnostic::excerpt;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::{MAX_PAYLOAD_BYTES, MAX_TEXT_BYTES, MAX_TOOL_NAME_BYTES};
use crate::schema::{is_object_schema, Schema, SchemaError};

/// A tool's self-declared definition, as [`super::Tool::spec`] returns it: not yet validated.
/// [`super::bind`] turns it into a [`ToolSpec`] exactly once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDefinitionInput {
    pub name: String,
    pub description: String,
    pub input_schema: Json,
}

/// A validated tool definition:
/// * `name` matches `^[A-Za-z0-9_-]{1,64}$` (accepted by every model provider);
/// * `description` is non-empty, has no surrounding whitespace (what the tool wrote is exactly
///   what the model sees, never silently trimmed) and is at most
///   [`MAX_TEXT_BYTES`] bytes;
/// * `input_schema` compiles, has top-level `"type": "object"` (providers only accept object
///   argument documents) and its canonical encoding is at most [`MAX_PAYLOAD_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSpec {
    name: String,
    description: String,
    input_schema: Schema,
}

/// Why a tool definition was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("invalid tool name `{name}`: must match ^[A-Za-z0-9_-]{{1,64}}$")]
    InvalidName { name: String },
    #[error("tool description must not be empty")]
    EmptyDescription,
    #[error("tool description must not have surrounding whitespace")]
    DescriptionWhitespace,
    #[error("tool description is {len} bytes, exceeds the limit of {limit} bytes")]
    DescriptionTooLong { len: usize, limit: usize },
    #[error("tool input schema must have top-level \"type\": \"object\"")]
    NotObjectSchema,
    #[error("tool input schema is {len} bytes, exceeds the limit of {limit} bytes")]
    SchemaTooLarge { len: usize, limit: usize },
    #[error("tool input schema does not compile: {0}")]
    InvalidSchema(SchemaError),
}

impl ToolSpec {
    /// Validates and freezes a definition (rules on [`ToolSpec`]).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: &Json,
    ) -> Result<ToolSpec, SpecError> {
        let name = name.into();
        let description = description.into();
        validate_tool_name(&name)?;
        validate_description(&description)?;
        // Cheap shape checks before compiling.
        if !is_object_schema(input_schema) {
            return Err(SpecError::NotObjectSchema);
        }
        let len = input_schema.canonical_len();
        if len > MAX_PAYLOAD_BYTES {
            return Err(SpecError::SchemaTooLarge {
                len,
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        let input_schema = Schema::compile(input_schema).map_err(SpecError::InvalidSchema)?;
        Ok(ToolSpec {
            name,
            description,
            input_schema,
        })
    }

    /// Validates a tool's self-declared definition.
    pub fn from_input(input: &ToolDefinitionInput) -> Result<ToolSpec, SpecError> {
        ToolSpec::new(
            input.name.clone(),
            input.description.clone(),
            &input.input_schema,
        )
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The compiled input schema ([`Schema::source`] is the exact model-visible schema).
    pub fn input_schema(&self) -> &Schema {
        &self.input_schema
    }
}

/// Whether `name` is a provider-compatible tool name (`^[A-Za-z0-9_-]{1,64}$`).
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn validate_tool_name(name: &str) -> Result<(), SpecError> {
    if is_valid_tool_name(name) {
        Ok(())
    } else {
        Err(SpecError::InvalidName {
            name: excerpt(name),
        })
    }
}

fn validate_description(description: &str) -> Result<(), SpecError> {
    if description.trim().is_empty() {
        return Err(SpecError::EmptyDescription);
    }
    if description.trim() != description {
        return Err(SpecError::DescriptionWhitespace);
    }
    if description.len() > MAX_TEXT_BYTES {
        return Err(SpecError::DescriptionTooLong {
            len: description.len(),
            limit: MAX_TEXT_BYTES,
        });
    }
    Ok(())
}

/// `{"name", "description", "input_schema"}`: the shape model providers and digests see.
impl ToJson for ToolSpec {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("name", &self.name)
            .field("description", &self.description)
            .value("input_schema", self.input_schema.source().clone())
            .build()
    }
}

/// Strict: unknown members rejected, and the decoded definition is fully re-validated.
impl FromJson for ToolSpec {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let name: String = r.required("name")?;
        let description: String = r.required("description")?;
        let input_schema = r
            .required_value("input_schema")
            .map_err(|e| e.in_member("input_schema"))?;
        r.finish()?;
        ToolSpec::new(name, description, input_schema)
            .map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;

    fn object_schema() -> Json {
        let mut o = Object::new();
        o.insert("type".to_owned(), Json::str("object"));
        Json::Object(o)
    }

    #[test]
    fn tool_names() {
        for ok in ["a", "read_file", "Read-File-2", &"x".repeat(64)] {
            assert!(is_valid_tool_name(ok), "{ok}");
        }
        for bad in ["", "invalid/name", "a b", "é", "a.b", " a", &"x".repeat(65)] {
            assert!(!is_valid_tool_name(bad), "{bad}");
            assert!(matches!(
                ToolSpec::new(bad, "d", &object_schema()),
                Err(SpecError::InvalidName { .. })
            ));
        }
    }

    #[test]
    fn descriptions() {
        let s = object_schema();
        assert_eq!(ToolSpec::new("t", "", &s), Err(SpecError::EmptyDescription));
        assert_eq!(
            ToolSpec::new("t", " \n", &s),
            Err(SpecError::EmptyDescription)
        );
        assert_eq!(
            ToolSpec::new("t", "Reads.\n", &s),
            Err(SpecError::DescriptionWhitespace)
        );
        assert_eq!(
            ToolSpec::new("t", " Reads.", &s),
            Err(SpecError::DescriptionWhitespace)
        );
        assert!(ToolSpec::new("t", "a".repeat(MAX_TEXT_BYTES), &s).is_ok());
        assert_eq!(
            ToolSpec::new("t", "a".repeat(MAX_TEXT_BYTES + 1), &s),
            Err(SpecError::DescriptionTooLong {
                len: MAX_TEXT_BYTES + 1,
                limit: MAX_TEXT_BYTES
            })
        );
        // Interior whitespace is fine.
        assert!(ToolSpec::new("t", "Reads\na file.", &s).is_ok());
    }

    #[test]
    fn schema_must_be_an_object_schema() {
        for bad in [
            Json::Bool(true),
            Json::object(),
            crate::json::parse(br#"{"type":"string"}"#).unwrap(),
            crate::json::parse(br#"{"type":["object"]}"#).unwrap(),
        ] {
            assert_eq!(
                ToolSpec::new("t", "d", &bad),
                Err(SpecError::NotObjectSchema),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn schema_must_compile() {
        let bad =
            crate::json::parse(br#"{"type":"object","properties":{"a":{"type":7}}}"#).unwrap();
        assert!(matches!(
            ToolSpec::new("t", "d", &bad),
            Err(SpecError::InvalidSchema(_))
        ));
        let external =
            crate::json::parse(br#"{"type":"object","$ref":"https://example.com/s"}"#).unwrap();
        assert!(matches!(
            ToolSpec::new("t", "d", &external),
            Err(SpecError::InvalidSchema(_))
        ));
    }

    #[test]
    fn schema_size_is_bounded() {
        let mut o = Object::new();
        o.insert("type".to_owned(), Json::str("object"));
        o.insert(
            "description".to_owned(),
            Json::str("a".repeat(MAX_PAYLOAD_BYTES)),
        );
        assert!(matches!(
            ToolSpec::new("t", "d", &Json::Object(o)),
            Err(SpecError::SchemaTooLarge { .. })
        ));
    }

    #[test]
    fn json_round_trip_is_strict() {
        let spec = ToolSpec::new("echo", "Echoes.", &object_schema()).unwrap();
        let j = spec.to_json();
        assert_eq!(ToolSpec::from_json(&j).unwrap(), spec);
        let extra = crate::json::parse(
            br#"{"name":"echo","description":"Echoes.","input_schema":{"type":"object"},"x":1}"#,
        )
        .unwrap();
        assert!(ToolSpec::from_json(&extra).is_err());
        let invalid = crate::json::parse(
            br#"{"name":"bad/name","description":"Echoes.","input_schema":{"type":"object"}}"#,
        )
        .unwrap();
        assert!(ToolSpec::from_json(&invalid).is_err());
    }
}
