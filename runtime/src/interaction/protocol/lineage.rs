//! A run's lineage: the version of the host's code that started it and the run it continues.

use crate::interaction::error::{ErrorKind, InteractionError};
use crate::interaction::wire::Wire;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::ids::ProcessId;

/// The most bytes of a lineage's version or reason text.
pub const MAX_LINEAGE_TEXT_BYTES: usize = 256;

/// Recorded once, when a run starts, and kept in its state for its whole life (never sent to
/// the model): the host code's declared version, and for a run that continues another
/// (an upgrade, a continue-as-new) that run's id and why.
///
/// Wire form: `{"version":S,"predecessor"?:ProcessId,"reason"?:S}`.
///
/// Valid when `version` is non-empty, `version` and `reason` are at most
/// [`MAX_LINEAGE_TEXT_BYTES`] bytes without control characters, `predecessor` is a root
/// Process id, and `reason` is present exactly when `predecessor` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lineage {
    pub version: String,
    pub predecessor: Option<ProcessId>,
    pub reason: Option<String>,
}

impl Lineage {
    /// A run started fresh under `version`.
    pub fn first(version: impl Into<String>) -> Lineage {
        Lineage { version: version.into(), predecessor: None, reason: None }
    }

    /// A run that continues `predecessor` under `version`, because of `reason`.
    pub fn continuing(version: impl Into<String>, predecessor: ProcessId, reason: impl Into<String>) -> Lineage {
        Lineage { version: version.into(), predecessor: Some(predecessor), reason: Some(reason.into()) }
    }
}

fn check_text(what: &str, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if text.len() > MAX_LINEAGE_TEXT_BYTES {
        return Err(format!("{what} has {} bytes, more than {MAX_LINEAGE_TEXT_BYTES}", text.len()));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{what} contains a control character"));
    }
    Ok(())
}

impl Wire for Lineage {
    const INVALID: ErrorKind = ErrorKind::InvalidInput;
    const WHAT: &'static str = "lineage";

    fn validate(&self) -> Result<(), InteractionError> {
        let invalid = |d: String| InteractionError::new(ErrorKind::InvalidInput, format!("lineage: {d}"));
        check_text("version", &self.version).map_err(invalid)?;
        if let Some(reason) = &self.reason {
            check_text("reason", reason).map_err(invalid)?;
        }
        if let Some(p) = &self.predecessor {
            // A run id is `process:` + 32 hex digits; a child's id is longer.
            if p.as_str().len() != "process:".len() + 32 {
                return Err(invalid(format!("predecessor {p} is not a run (root) id")));
            }
        }
        if self.predecessor.is_some() != self.reason.is_some() {
            return Err(invalid("a predecessor and its reason come together".into()));
        }
        Ok(())
    }
}

impl ToJson for Lineage {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("version", &self.version)
            .opt_field("predecessor", self.predecessor.as_ref())
            .opt_field("reason", self.reason.as_ref())
            .build()
    }
}

impl FromJson for Lineage {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let lineage = Lineage { version: r.required("version")?, predecessor: r.optional("predecessor")?, reason: r.optional("reason")? };
        r.finish()?;
        lineage.validate()?;
        Ok(lineage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineage_round_trips_and_refuses_what_it_cannot_mean() {
        let root = ProcessId::root_from_hex(&"ab".repeat(16)).unwrap();
        for l in [Lineage::first("1.0.0"), Lineage::continuing("2", root.clone(), "upgrade")] {
            let json = l.to_json();
            assert_eq!(Lineage::from_json(&json).unwrap(), l);
        }
        let bad = [
            Lineage::first(""),
            Lineage::first("a\nb"),
            Lineage::first("x".repeat(MAX_LINEAGE_TEXT_BYTES + 1)),
            Lineage { version: "1".into(), predecessor: Some(root), reason: None },
            Lineage { version: "1".into(), predecessor: None, reason: Some("upgrade".into()) },
        ];
        for l in bad {
            assert!(l.validate().is_err(), "{l:?}");
            assert!(Lineage::from_json(&l.to_json()).is_err(), "{l:?}");
        }
    }
}
