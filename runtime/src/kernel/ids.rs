//! Identities.
//!
//! * Identity text: 1–256 bytes of `A-Z a-z 0-9 - _ . :`.
//! * Derived identity: `prefix + hex(SHA-256(tag ‖ 0x00 ‖ part1 ‖ 0x00 ‖ …))`; numbers are
//!   decimal strings. No component can contain NUL, so the encoding is unambiguous. Only the
//!   kernel derives identities; incarnation and attempt ids never enter a derivation.

use crate::json::{DecodeError, FromJson, Json, ToJson};
use crate::limits::MAX_IDENTITY_BYTES;
use sha2::{Digest as _, Sha256};

/// Why an identity text was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} must be 1..={max} bytes, got {len}")]
    Length { kind: &'static str, len: usize, max: usize },
    #[error("{kind} contains a character outside A-Z a-z 0-9 - _ . :")]
    Charset { kind: &'static str },
    #[error("{kind} must start with `{prefix}`")]
    Prefix { kind: &'static str, prefix: &'static str },
    #[error("{kind} must not use the reserved `signal:engine:` namespace")]
    ReservedNamespace { kind: &'static str },
}

/// Validates generic identity text.
pub fn validate_identity(kind: &'static str, text: &str) -> Result<(), IdError> {
    if text.is_empty() || text.len() > MAX_IDENTITY_BYTES {
        return Err(IdError::Length { kind, len: text.len(), max: MAX_IDENTITY_BYTES });
    }
    if !text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':')) {
        return Err(IdError::Charset { kind });
    }
    Ok(())
}

/// `prefix + hex(SHA-256(tag ‖ 0 ‖ part ‖ 0 ‖ …))`.
pub fn derive(prefix: &str, tag: &str, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(tag.as_bytes());
    for p in parts {
        h.update([0u8]);
        h.update(p.as_bytes());
    }
    let digest = h.finalize();
    let mut out = String::with_capacity(prefix.len() + 64);
    out.push_str(prefix);
    // A table writer, not one `format!` per byte: identities are derived on every step and
    // every oracle check.
    crate::text::push_lower_hex(&mut out, &digest);
    out
}

macro_rules! identity {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        // Shared text: identities are cloned into every event, record copy and cut, so a
        // clone is a reference count, not an allocation. Comparison and hashing are by text.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(std::sync::Arc<str>);

        impl $name {
            /// Validates identity text.
            pub fn parse(text: &str) -> Result<$name, IdError> {
                validate_identity($kind, text)?;
                $name::check_extra(text)?;
                Ok($name(std::sync::Arc::from(text)))
            }
            /// Wraps text this module derived (already valid by construction).
            #[allow(dead_code)]
            fn derived(text: String) -> $name {
                $name(std::sync::Arc::from(text))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
        impl ToJson for $name {
            fn to_json(&self) -> Json {
                Json::String(self.0.to_string())
            }
        }
        impl crate::json::WriteJson for $name {
            fn write_json(&self, out: &mut String) {
                crate::json::WriteJson::write_json(&*self.0, out);
            }
        }
        impl FromJson for $name {
            fn from_json(value: &Json) -> Result<Self, DecodeError> {
                let s = crate::json::decode_str(value)?;
                $name::parse(s).map_err(|e| DecodeError::invalid(e.to_string()))
            }
        }
    };
}

identity!(
    /// A Process identity: minted (`process:` + random hex) for roots, derived for children.
    ProcessId, "process id"
);
identity!(
    /// A Signal identity: caller-chosen for external input (never in `signal:engine:`),
    /// derived for Engine-minted Signals.
    SignalId, "signal id"
);
identity!(
    /// An Engine-minted wait identity, derived from the wait Effect's id.
    WaitId, "wait id"
);
identity!(
    /// An Effect identity derived from (process, step sequence, batch index).
    EffectId, "effect id"
);
identity!(
    /// An Execution-owned logical key linking a requested wait to the WaitId that comes back.
    WaitKey, "wait key"
);
identity!(
    /// A parent-chosen key naming one child; unique per parent.
    ChildKey, "child key"
);
identity!(
    /// One active writer of a tree: `incarnation:` + 32 lowercase hex. Never in an
    /// idempotency key.
    IncarnationId, "incarnation id"
);
identity!(
    /// One physical dispatch attempt: `attempt:` + 32 lowercase hex. Observation only.
    AttemptId, "attempt id"
);

/// The reserved namespace of Engine-minted Signals.
pub const ENGINE_SIGNAL_PREFIX: &str = "signal:engine:";

impl ProcessId {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
    /// A root id from 16 random bytes rendered as hex (the driver supplies the randomness).
    pub fn root_from_hex(hex32: &str) -> Result<ProcessId, IdError> {
        ProcessId::parse(&format!("process:{hex32}"))
    }
    /// `derive("process:", "child", start_child_effect_id)`.
    pub fn child(start_effect: &EffectId) -> ProcessId {
        ProcessId::derived(derive("process:", "child", &[start_effect.as_str()]))
    }
}

impl SignalId {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
    /// Whether this id is in the Engine namespace.
    pub fn is_engine_owned(&self) -> bool {
        self.0.starts_with(ENGINE_SIGNAL_PREFIX)
    }
    /// Parses a caller-chosen id: must not be in the Engine namespace.
    pub fn external(text: &str) -> Result<SignalId, IdError> {
        let id = SignalId::parse(text)?;
        if id.is_engine_owned() {
            return Err(IdError::ReservedNamespace { kind: "signal id" });
        }
        Ok(id)
    }
    /// The settlement Signal of an Effect: `derive("signal:engine:", "signal", effect_id)`.
    pub fn settlement(effect: &EffectId) -> SignalId {
        SignalId::derived(derive(ENGINE_SIGNAL_PREFIX, "signal", &[effect.as_str()]))
    }
    /// The opening Signal of a wait: `derive("signal:engine:", "wait-opened", wait_id)`.
    pub fn wait_opening(wait: &WaitId) -> SignalId {
        SignalId::derived(derive(ENGINE_SIGNAL_PREFIX, "wait-opened", &[wait.as_str()]))
    }
    /// The satisfaction Signal of a child wait (answerable at most once).
    pub fn child_wait_satisfied(wait: &WaitId) -> SignalId {
        SignalId::derived(derive(ENGINE_SIGNAL_PREFIX, "child-wait-satisfied", &[wait.as_str()]))
    }
}

impl WaitId {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
    /// `derive("wait:", "wait", effect_id_of_the_wait_effect)`.
    pub fn of_effect(effect: &EffectId) -> WaitId {
        WaitId::derived(derive("wait:", "wait", &[effect.as_str()]))
    }
}

impl EffectId {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
    /// `derive("effect:", "effect", process, step_sequence, batch_index)`.
    pub fn derive(process: &ProcessId, step_sequence: u64, batch_index: u32) -> EffectId {
        EffectId::derived(derive(
            "effect:",
            "effect",
            &[process.as_str(), &step_sequence.to_string(), &batch_index.to_string()],
        ))
    }
}

impl WaitKey {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
}
impl ChildKey {
    fn check_extra(_: &str) -> Result<(), IdError> {
        Ok(())
    }
}

fn check_random_hex(kind: &'static str, prefix: &'static str, text: &str) -> Result<(), IdError> {
    let Some(hex) = text.strip_prefix(prefix) else {
        return Err(IdError::Prefix { kind, prefix });
    };
    if hex.len() != 32 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(IdError::Charset { kind });
    }
    Ok(())
}

impl IncarnationId {
    fn check_extra(text: &str) -> Result<(), IdError> {
        check_random_hex("incarnation id", "incarnation:", text)
    }
    /// From 32 lowercase hex characters (16 random bytes supplied by the driver).
    pub fn from_hex(hex32: &str) -> Result<IncarnationId, IdError> {
        IncarnationId::parse(&format!("incarnation:{hex32}"))
    }
}
impl AttemptId {
    fn check_extra(text: &str) -> Result<(), IdError> {
        check_random_hex("attempt id", "attempt:", text)
    }
    pub fn from_hex(hex32: &str) -> Result<AttemptId, IdError> {
        AttemptId::parse(&format!("attempt:{hex32}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_text_rules() {
        assert!(ProcessId::parse("process:abc").is_ok());
        assert!(matches!(ProcessId::parse(""), Err(IdError::Length { .. })));
        assert!(matches!(ProcessId::parse(&"a".repeat(257)), Err(IdError::Length { .. })));
        assert!(ProcessId::parse(&"a".repeat(256)).is_ok());
        assert!(matches!(ProcessId::parse("a b"), Err(IdError::Charset { .. })));
        assert!(matches!(ProcessId::parse("a/b"), Err(IdError::Charset { .. })));
    }

    #[test]
    fn derivation_is_stable_and_separated() {
        let p = ProcessId::parse("process:root").unwrap();
        let e1 = EffectId::derive(&p, 1, 0);
        assert_eq!(e1, EffectId::derive(&p, 1, 0));
        assert_ne!(e1, EffectId::derive(&p, 1, 1));
        assert_ne!(e1, EffectId::derive(&p, 2, 0));
        // NUL separation: ("1","10") and ("11","0") must differ.
        assert_ne!(derive("x:", "t", &["1", "10"]), derive("x:", "t", &["11", "0"]));
        assert!(e1.as_str().starts_with("effect:") && e1.as_str().len() == 7 + 64);
        let s = SignalId::settlement(&e1);
        assert!(s.is_engine_owned());
        assert_ne!(SignalId::wait_opening(&WaitId::of_effect(&e1)), s);
        assert!(ProcessId::child(&e1).as_str().starts_with("process:"));
        // Known answer pins the derivation encoding forever (snapshots depend on it).
        assert_eq!(
            derive("effect:", "effect", &["process:root", "1", "0"]),
            e1.as_str()
        );
        // SHA-256("effect" NUL "process:root" NUL "1" NUL "0"), lowercase hex.
        assert_eq!(
            e1.as_str(),
            "effect:b4b5766e12befe2f434778e23c1ada2f152c5107f1e64a904dca33949aaf5282"
        );
    }

    #[test]
    fn external_signals_cannot_use_engine_namespace() {
        assert!(SignalId::external("signal:user-1").is_ok());
        assert!(matches!(
            SignalId::external("signal:engine:x"),
            Err(IdError::ReservedNamespace { .. })
        ));
    }

    #[test]
    fn random_ids_have_exact_shape() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert!(IncarnationId::from_hex(hex).is_ok());
        assert!(AttemptId::from_hex(hex).is_ok());
        assert!(IncarnationId::parse("incarnation:XYZ").is_err());
        assert!(IncarnationId::parse(&format!("attempt:{hex}")).is_err());
        assert!(IncarnationId::from_hex(&hex[..31]).is_err());
        assert!(IncarnationId::from_hex(&hex.to_uppercase()).is_err());
    }
}
