//! The steer payload: host guidance for the next model boundary.

use super::{envelope, open, Operation};
use crate::chat::{Message, Role};
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// User messages to append at the next safe model boundary.
///
/// Wire form: `{"operation":"steer","steer":{"messages":[Message]}}`.
///
/// Valid when there is at least one message and every message is a valid **user** message.
/// The Signal carrying it must be unaddressed (checked where Signals are classified).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steer {
    pub messages: Vec<Message>,
}

/// The rule shared by steers and pending steers: ≥ 1 valid user messages.
pub(crate) fn check_user_messages(messages: &[Message]) -> Result<(), String> {
    if messages.is_empty() {
        return Err("no messages".into());
    }
    for (index, message) in messages.iter().enumerate() {
        if message.role != Role::User {
            return Err(format!("message {index} has role {}, expected user", message.role));
        }
        message.validate().map_err(|e| format!("message {index}: {e}"))?;
    }
    Ok(())
}

impl Wire for Steer {
    const INVALID: ErrorKind = ErrorKind::InvalidSteer;
    const WHAT: &'static str = "steer";

    fn validate(&self) -> Result<(), InteractionError> {
        check_user_messages(&self.messages).map_err(|d| InteractionError::new(ErrorKind::InvalidSteer, d))
    }
}

impl ToJson for Steer {
    fn to_json(&self) -> Json {
        envelope(Operation::Steer, "steer", ObjectBuilder::new().field("messages", &self.messages).build())
    }
}

impl FromJson for Steer {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let body = open(value, Operation::Steer, "steer")?;
        decode_body(body).map_err(|e| e.in_member("steer"))
    }
}

fn decode_body(body: &Json) -> Result<Steer, DecodeError> {
    let mut r = ObjectReader::new(body)?;
    let steer = Steer { messages: r.required("messages")? };
    r.finish()?;
    steer.validate()?;
    Ok(steer)
}
