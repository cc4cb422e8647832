//! Deterministic keys the Interaction derives for the kernel: the same inputs give the same
//! key after any restore, so a recovered parent finds its children and waits again.
//!
//! | key | format |
//! |---|---|
//! | tool child | `"tool_" + hex(sha256("<modelSeq>:<callId>"))` |
//! | delegate child | `"interaction.delegate.child." + hex(sha256(dec(modelSeq) ‖ 0 ‖ callId ‖ 0 ‖ callName))` |
//! | child wait | `"interaction.children:<modelSeq>:<firstIndexOfBatch>:<settledCount>"` |
//! | tool input wait | `"interaction.input." + hex(sha256(dec(modelSeq) ‖ 0 ‖ callId ‖ 0 ‖ dec(pauseCount)))` |
//! | budget question wait | `"interaction.budget:<number>"` (the run's 1st, 2nd, ... question) |
//!
//! Kernel identities allow only `A-Z a-z 0-9 - _ . :` (1–256 bytes). Every model-supplied
//! part (call ids are arbitrary text) is inside a SHA-256, so each key is a fixed ASCII prefix
//! plus 64 lowercase hex digits, or (child wait) only decimal digits and `:`; no format needed
//! changing. Call ids cannot contain NUL (control characters are invalid), so the NUL-separated
//! encodings are unambiguous; in the tool key the first `:` ends the decimal sequence.

use super::error::{ErrorKind, InteractionError};
use crate::chat::{validate_call_id, ToolCall};
use crate::kernel::ids::{ChildKey, WaitKey};
use sha2::{Digest as _, Sha256};

/// Prefix of every tool child key.
pub const TOOL_CHILD_KEY_PREFIX: &str = "tool_";
/// Prefix of every delegate child key.
pub const DELEGATE_CHILD_KEY_PREFIX: &str = "interaction.delegate.child.";
/// Prefix of every parent child-wait key.
pub const CHILD_WAIT_KEY_PREFIX: &str = "interaction.children:";
/// Prefix of every tool-input wait key.
pub const TOOL_INPUT_WAIT_KEY_PREFIX: &str = "interaction.input.";
/// Prefix of every budget question's wait key (`interaction.budget:<number>`).
pub const BUDGET_WAIT_KEY_PREFIX: &str = "interaction.budget:";

fn hex_sha256(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(64);
    crate::text::push_lower_hex(&mut out, &Sha256::digest(bytes));
    out
}

/// `dec(a) ‖ 0 ‖ b ‖ 0 ‖ c`.
fn nul_joined(parts: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            bytes.push(0);
        }
        bytes.extend_from_slice(part.as_bytes());
    }
    bytes
}

fn child_key(kind: ErrorKind, text: String) -> Result<ChildKey, InteractionError> {
    ChildKey::parse(&text).map_err(|e| InteractionError::new(kind, format!("derived child key: {e}")))
}

fn wait_key(text: String) -> Result<WaitKey, InteractionError> {
    WaitKey::parse(&text).map_err(|e| InteractionError::invalid_state(format!("derived wait key: {e}")))
}

/// The child key of the tool child running `call_id` of model call `model_call_sequence`
/// Sequence 0 or an invalid call id is [`ErrorKind::InvalidExecutionState`].
pub fn tool_child_key(model_call_sequence: u32, call_id: &str) -> Result<ChildKey, InteractionError> {
    if model_call_sequence == 0 {
        return Err(InteractionError::invalid_state("tool child key: model call sequence must be ≥ 1"));
    }
    validate_call_id(call_id).map_err(|e| InteractionError::invalid_state(format!("tool child key: {e}")))?;
    let hash = hex_sha256(format!("{model_call_sequence}:{call_id}").as_bytes());
    child_key(ErrorKind::InvalidExecutionState, format!("{TOOL_CHILD_KEY_PREFIX}{hash}"))
}

/// The exact child key of the Delegate child for `call` of model call `model_call_sequence`
/// Public so hosts can correlate model observations with child Processes. Sequence 0
/// or an invalid call is [`ErrorKind::InvalidDelegate`].
pub fn delegate_child_key(model_call_sequence: u32, call: &ToolCall) -> Result<ChildKey, InteractionError> {
    if model_call_sequence == 0 {
        return Err(InteractionError::new(
            ErrorKind::InvalidDelegate,
            "delegate child key: model call sequence must be ≥ 1",
        ));
    }
    call.validate()
        .map_err(|e| InteractionError::new(ErrorKind::InvalidDelegate, format!("delegate child key: {e}")))?;
    let sequence = model_call_sequence.to_string();
    let hash = hex_sha256(&nul_joined(&[&sequence, &call.id, &call.name]));
    child_key(ErrorKind::InvalidDelegate, format!("{DELEGATE_CHILD_KEY_PREFIX}{hash}"))
}

/// The key of the parent's child wait. `settled_count` (settled invocations of the
/// batch so far) makes every re-wait within one tool batch use a fresh key.
pub fn child_wait_key(
    model_call_sequence: u32,
    first_index_of_batch: u32,
    settled_count: u32,
) -> Result<WaitKey, InteractionError> {
    if model_call_sequence == 0 {
        return Err(InteractionError::invalid_state("child wait key: model call sequence must be ≥ 1"));
    }
    wait_key(format!("{CHILD_WAIT_KEY_PREFIX}{model_call_sequence}:{first_index_of_batch}:{settled_count}"))
}

/// The key of a tool child's input wait for pause number `pause_count`; every pause of
/// one call has its own key.
pub fn tool_input_wait_key(
    model_call_sequence: u32,
    call_id: &str,
    pause_count: u32,
) -> Result<WaitKey, InteractionError> {
    if model_call_sequence == 0 || pause_count == 0 {
        return Err(InteractionError::invalid_state(
            "tool input wait key: model call sequence and pause count must be ≥ 1",
        ));
    }
    validate_call_id(call_id).map_err(|e| InteractionError::invalid_state(format!("tool input wait key: {e}")))?;
    let sequence = model_call_sequence.to_string();
    let pauses = pause_count.to_string();
    let hash = hex_sha256(&nul_joined(&[&sequence, call_id, &pauses]));
    wait_key(format!("{TOOL_INPUT_WAIT_KEY_PREFIX}{hash}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ids::validate_identity;

    // Known answers computed independently (Python hashlib); snapshots depend on them forever.
    #[test]
    fn known_answers() {
        assert_eq!(
            tool_child_key(3, "call_1").unwrap().as_str(),
            "tool_694cd01496493db3ef0da051b9aa30e7e6531b17ee35424da6ddef6a69bc6954"
        );
        // Call ids outside identity text (here `/` and a space) are hashed, so the key is valid.
        assert_eq!(
            tool_child_key(1, "toolu_01/A b").unwrap().as_str(),
            "tool_906acfa7b69bf1c6bb3d0b12ba88382c6098bef7ba25323a72a3a81127b538e6"
        );
        assert_eq!(
            delegate_child_key(3, &ToolCall::new("call_1", "research", "{}")).unwrap().as_str(),
            "interaction.delegate.child.1cf18ceea070ff54f11659303c503443a4674efe67e3d335308c81e06906156e"
        );
        assert_eq!(
            tool_input_wait_key(3, "call_1", 2).unwrap().as_str(),
            "interaction.input.7c3dd4d42e1a043fe73e3bd50a0565ab36840eccd21bbc24591b00167759d1df"
        );
        assert_eq!(child_wait_key(3, 0, 2).unwrap().as_str(), "interaction.children:3:0:2");
    }

    #[test]
    fn derived_keys_are_identity_text() {
        let odd_ids = ["c", "call 1", "ünïcødé/💥", "a:b", &"x".repeat(256)];
        for id in odd_ids {
            let call = ToolCall::new(id, "t", "");
            for key in [
                tool_child_key(u32::MAX, id).unwrap().as_str().to_owned(),
                delegate_child_key(u32::MAX, &call).unwrap().as_str().to_owned(),
                tool_input_wait_key(u32::MAX, id, u32::MAX).unwrap().as_str().to_owned(),
            ] {
                assert!(validate_identity("key", &key).is_ok(), "{key}");
            }
        }
        let longest = child_wait_key(u32::MAX, u32::MAX, u32::MAX).unwrap();
        assert!(validate_identity("key", longest.as_str()).is_ok());
    }

    #[test]
    fn keys_separate_their_inputs() {
        let call = |id: &str, name: &str| ToolCall::new(id, name, "{}");
        let d = |seq, c: &ToolCall| delegate_child_key(seq, c).unwrap();
        assert_ne!(d(1, &call("c", "n")), d(2, &call("c", "n")), "differs per model call");
        assert_ne!(d(1, &call("c", "n")), d(1, &call("c", "m")), "differs per name");
        assert_ne!(d(1, &call("c", "n")), d(1, &call("d", "n")), "differs per id");
        // Arguments are not part of the identity.
        assert_eq!(d(1, &call("c", "n")), delegate_child_key(1, &ToolCall::new("c", "n", "")).unwrap());
        assert_ne!(tool_child_key(1, "c").unwrap(), tool_child_key(2, "c").unwrap());
        // `1:1` + `2` vs `11` + `:2` cannot collide: the first `:` ends the sequence.
        assert_ne!(tool_child_key(1, "12").unwrap(), tool_child_key(11, "2").unwrap());
        assert_ne!(tool_input_wait_key(1, "c", 1).unwrap(), tool_input_wait_key(1, "c", 2).unwrap());
        assert_ne!(child_wait_key(1, 0, 1).unwrap(), child_wait_key(1, 0, 2).unwrap());
    }

    #[test]
    fn rejections() {
        let good = ToolCall::new("c", "n", "{}");
        let e = delegate_child_key(0, &good).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidDelegate);
        for bad in [ToolCall::new("", "n", ""), ToolCall::new("c", "invalid/name", ""), ToolCall::new("c\n", "n", "")] {
            assert_eq!(delegate_child_key(1, &bad).unwrap_err().kind(), ErrorKind::InvalidDelegate, "{bad:?}");
        }
        assert_eq!(tool_child_key(0, "c").unwrap_err().kind(), ErrorKind::InvalidExecutionState);
        assert!(tool_child_key(1, "").is_err());
        assert!(tool_input_wait_key(1, "c", 0).is_err());
        assert!(tool_input_wait_key(0, "c", 1).is_err());
        assert!(tool_input_wait_key(1, "", 1).is_err());
        assert!(child_wait_key(0, 0, 0).is_err());
    }
}
