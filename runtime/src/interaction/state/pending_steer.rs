//! Steers admitted but not yet visible to the model: they become visible at the next safe
//! model boundary, in admission order, and survive a restore.

use crate::chat::Message;
use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::protocol::validate_signal_ids;
use crate::interaction::signals::SteerSignal;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::SignalId;

/// Admitted steers, in exact admission order.
///
/// Wire form: `{"messages":[Message],"signal_ids":[SignalId]}`; both lists are required and
/// non-empty (messages without ids, or ids without messages, are rejected).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingSteer {
    pub messages: Vec<Message>,
    pub signal_ids: Vec<SignalId>,
}

impl PendingSteer {
    /// Appends admitted steers in signal order. A duplicate id (already pending or repeated in
    /// `steers`) is [`ErrorKind::InvalidExecutionState`] and leaves `self` unchanged.
    pub fn admit(&mut self, steers: &[SteerSignal]) -> Result<(), InteractionError> {
        let mut ids = self.signal_ids.clone();
        ids.extend(steers.iter().map(|s| s.id.clone()));
        validate_signal_ids(&ids).map_err(|d| InteractionError::invalid_state(format!("pending steer: {d}")))?;
        self.signal_ids = ids;
        self.messages.extend(steers.iter().flat_map(|s| s.messages.iter().cloned()));
        Ok(())
    }

    /// The rules: ≥ 1 valid user messages; ≥ 1 unique ids.
    pub fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |detail: String| {
            InteractionError::new(ErrorKind::InvalidExecutionState, format!("pending steer: {detail}"))
        };
        crate::interaction::protocol::check_user_messages(&self.messages).map_err(invalid)?;
        if self.signal_ids.is_empty() {
            return Err(invalid("no signal ids".into()));
        }
        validate_signal_ids(&self.signal_ids).map_err(invalid)
    }
}

impl ToJson for PendingSteer {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("messages", &self.messages).field("signal_ids", &self.signal_ids).build()
    }
}

impl FromJson for PendingSteer {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let pending = PendingSteer { messages: r.required("messages")?, signal_ids: r.required("signal_ids")? };
        r.finish()?;
        Ok(pending)
    }
}
