//! How the model may use the request's tools.

use super::error::quote;
use super::name::validate_tool_name;
use super::ChatError;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// How the model may use the request's tools.
///
/// Wire form: `"auto" | "none" | "required" | {"tool":S}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

impl ToolChoice {
    /// A named choice's name is a valid tool name (whether the request has that tool is a
    /// request rule).
    pub fn validate(&self) -> Result<(), ChatError> {
        match self {
            ToolChoice::Tool(name) => validate_tool_name(name),
            _ => Ok(()),
        }
    }
}

impl ToJson for ToolChoice {
    fn to_json(&self) -> Json {
        match self {
            ToolChoice::Auto => Json::str("auto"),
            ToolChoice::None => Json::str("none"),
            ToolChoice::Required => Json::str("required"),
            ToolChoice::Tool(name) => ObjectBuilder::new().field("tool", name).build(),
        }
    }
}

impl FromJson for ToolChoice {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let choice = match value {
            Json::String(s) => match s.as_str() {
                "auto" => ToolChoice::Auto,
                "none" => ToolChoice::None,
                "required" => ToolChoice::Required,
                other => {
                    return Err(DecodeError::invalid(format!(
                        "unknown tool choice `{}`",
                        quote(other)
                    )))
                }
            },
            Json::Object(_) => {
                let mut r = ObjectReader::new(value)?;
                let name = r.required("tool")?;
                r.finish()?;
                ToolChoice::Tool(name)
            }
            other => return Err(DecodeError::wrong_type("string or object", other)),
        };
        choice.validate()?;
        Ok(choice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    #[test]
    fn round_trip() {
        for (choice, wire) in [
            (ToolChoice::Auto, Json::str("auto")),
            (ToolChoice::None, Json::str("none")),
            (ToolChoice::Required, Json::str("required")),
            (
                ToolChoice::Tool("search".into()),
                ObjectBuilder::new().field("tool", "search").build(),
            ),
        ] {
            assert_eq!(choice.to_json(), wire);
            assert_eq!(ToolChoice::from_json(&wire), Ok(choice));
        }
        assert_eq!(ToolChoice::default(), ToolChoice::Auto);
    }

    #[test]
    fn rejections() {
        assert!(matches!(
            ToolChoice::Tool("invalid/name".into()).validate(),
            Err(ChatError::InvalidToolName { .. })
        ));
        assert!(ToolChoice::from_json(&ToolChoice::Tool("invalid/name".into()).to_json()).is_err());
        assert!(ToolChoice::from_json(&Json::str("any")).is_err());
        assert!(ToolChoice::from_json(&Json::str("Auto")).is_err());
        assert!(matches!(
            ToolChoice::from_json(&Json::Bool(true)).unwrap_err().kind,
            DecodeErrorKind::WrongType { .. }
        ));
        let extra = ObjectBuilder::new()
            .field("tool", "s")
            .field("type", "function")
            .build();
        assert_eq!(
            ToolChoice::from_json(&extra).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("type".into())
        );
        let null = ObjectBuilder::new().value("tool", Json::Null).build();
        assert_eq!(
            ToolChoice::from_json(&null).unwrap_err().kind,
            DecodeErrorKind::NullMember("tool".into())
        );
        assert_eq!(
            ToolChoice::from_json(&Json::object()).unwrap_err().kind,
            DecodeErrorKind::MissingMember("tool".into())
        );
    }
}
