//! The Definition conformance helper: strategies call it from their
//! tests to prove the obligations the kernel relies on but cannot check at runtime.
//!
//! * descriptor stability: repeated calls return byte-identical encodings;
//! * isolated starts: two starts from equal input are equal, and stepping one never changes
//!   the other's snapshot;
//! * snapshot → restore → snapshot is byte-identical;
//! * determinism: the original and a restored instance produce equal Transitions and equal
//!   resulting states over every supplied multi-Step Signal suffix.

use super::signal::Signal;
use super::waist::{Definition, Execution, ExecutionState, StepContext};
use crate::json::{Payload, ToJson};

/// One conformance violation, with the case that showed it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("definition conformance: {check}: {detail}")]
pub struct ConformanceError {
    pub check: &'static str,
    pub detail: String,
}

fn err(check: &'static str, detail: impl Into<String>) -> ConformanceError {
    ConformanceError { check, detail: detail.into() }
}

fn snap(e: &dyn Execution, check: &'static str) -> Result<ExecutionState, ConformanceError> {
    e.snapshot().map_err(|x| err(check, format!("snapshot failed: {x}")))
}

fn bytes(s: &ExecutionState) -> Vec<u8> {
    s.to_json().to_canonical_bytes()
}

/// Runs every check for `input` and each Signal suffix (a suffix is a sequence of windows,
/// one per Step).
pub fn check_definition(
    definition: &dyn Definition,
    input: &Payload,
    suffixes: &[Vec<Vec<Signal>>],
) -> Result<(), ConformanceError> {
    let cx = StepContext::default();
    let d1 = definition.descriptor().contract_json().to_canonical_bytes();
    let d2 = definition.descriptor().contract_json().to_canonical_bytes();
    if d1 != d2 {
        return Err(err("descriptor stability", "two descriptor calls differ"));
    }
    let a = definition.start(input).map_err(|e| err("isolated starts", format!("start failed: {e}")))?;
    let mut b = definition.start(input).map_err(|e| err("isolated starts", format!("start failed: {e}")))?;
    let sa = snap(a.as_ref(), "isolated starts")?;
    if bytes(&sa) != bytes(&snap(b.as_ref(), "isolated starts")?) {
        return Err(err("isolated starts", "two starts from equal input differ"));
    }
    let restored = definition.restore(&cx, &sa).map_err(|e| err("round trip", format!("restore failed: {e}")))?;
    if bytes(&snap(restored.as_ref(), "round trip")?) != bytes(&sa) {
        return Err(err("round trip", "snapshot → restore → snapshot is not byte-identical"));
    }
    for (n, suffix) in suffixes.iter().enumerate() {
        let mut original = definition.restore(&cx, &sa).map_err(|e| err("determinism", e.to_string()))?;
        for (k, window) in suffix.iter().enumerate() {
            let before = snap(original.as_ref(), "determinism")?;
            let mut twin = definition.restore(&cx, &before).map_err(|e| err("determinism", e.to_string()))?;
            let t1 = original.step(&cx, window);
            let t2 = twin.step(&cx, window);
            match (&t1, &t2) {
                (Ok(x), Ok(y)) if x.to_json() == y.to_json() => {}
                (Err(x), Err(y)) if x == y => {}
                _ => return Err(err("determinism", format!("suffix {n} step {k}: original and restored transitions differ"))),
            }
            if t1.is_err() {
                break;
            }
            let s1 = snap(original.as_ref(), "determinism")?;
            if bytes(&s1) != bytes(&snap(twin.as_ref(), "determinism")?) {
                return Err(err("determinism", format!("suffix {n} step {k}: resulting states differ")));
            }
            let back = definition.restore(&cx, &s1).map_err(|e| err("round trip", e.to_string()))?;
            if bytes(&snap(back.as_ref(), "round trip")?) != bytes(&s1) {
                return Err(err("round trip", format!("suffix {n} step {k}: state not byte-stable")));
            }
            original = back;
        }
        // Stepping one instance never changes a sibling's snapshot.
        if bytes(&snap(b.as_ref(), "isolated starts")?) != bytes(&sa) {
            return Err(err("isolated starts", "stepping one execution changed another"));
        }
        if let Some(window) = suffix.first() {
            let _ = b.step(&cx, window);
            b = definition.start(input).map_err(|e| err("isolated starts", e.to_string()))?;
        }
    }
    Ok(())
}
