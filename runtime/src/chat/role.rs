//! Who authored a message.

use super::error::quote;
use crate::json::{DecodeError, FromJson, Json, ToJson};

/// Who authored a message. Wire form: `"system" | "user" | "assistant" | "tool"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses a wire name.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToJson for Role {
    fn to_json(&self) -> Json {
        Json::str(self.as_str())
    }
}

impl FromJson for Role {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let name = value
            .as_str()
            .ok_or_else(|| DecodeError::wrong_type("string", value))?;
        Role::from_name(name)
            .ok_or_else(|| DecodeError::invalid(format!("unknown role `{}`", quote(name))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    #[test]
    fn round_trips_every_role() {
        for role in Role::ALL {
            assert_eq!(role.to_json(), Json::str(role.as_str()));
            assert_eq!(Role::from_json(&role.to_json()), Ok(role));
        }
    }

    #[test]
    fn rejects_unknown_names_and_wrong_types() {
        for bad in ["", "System", "developer", "function"] {
            let e = Role::from_json(&Json::str(bad)).unwrap_err();
            assert!(matches!(e.kind, DecodeErrorKind::Invalid(_)), "{bad}: {e}");
        }
        let e = Role::from_json(&Json::u64(1)).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::WrongType { .. }));
        assert!(Role::from_json(&Json::Null).is_err());
    }
}
