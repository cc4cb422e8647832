//! The fast decoder of a stored Process record: the oracle's path for every record a commit
//! changed (`TreeSnapshot::decode_reusing`).
//!
//! Most of a record's bytes are its states' payloads (the committed state's and the prepared
//! candidate's). Parsing them into a tree, cloning the tree into a [`Payload`] and encoding
//! it again to get its canonical text is most of what decoding a record cost. Here the
//! record's canonical text is split instead (`json::canonical`): each payload's span is
//! checked canonical in place and becomes the payload as it is (its value is built only if
//! something looks into it), and only the small members around the payloads are parsed, into
//! the tree that the strict typed decoder ([`Process::decode_record_with`]) reads.
//!
//! The decoder only accepts canonical text, so it is a fast path, never a verdict: on `None`
//! the caller decodes the record with the strict decoder, which names the fault; the caller
//! also re-encodes an accepted record and compares the bytes, so an accepted record is the
//! strict decoder's value for the same bytes.

use super::process::Process;
use super::segment::Segment;
use super::waist::ExecutionState;
use crate::json::canonical::{members, scan};
use crate::json::{parse_with, DecodeError, Json, Object, ParseLimits, Payload};
use crate::limits::MAX_JSON_DEPTH;
use std::sync::Arc;

/// Decodes one Process record (canonical text only), resolving its states' segment
/// references through `segments`; `None` when the text is not canonical or does not decode.
pub fn decode_process_record(
    bytes: &[u8],
    segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
) -> Option<Process> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut record = Object::new();
    let mut committed = None;
    let mut candidate = None;
    let end = members(bytes, 0, 0, &mut |key, start, depth| {
        let (value, end) = match key {
            "committed_execution_state" => {
                let (tree, payload, end) = state(text, start, depth)?;
                committed = Some(payload);
                (tree, end)
            }
            "prepared" => {
                let (tree, payload, end) = prepared(text, start, depth)?;
                candidate = Some(payload);
                (tree, end)
            }
            _ => parsed(text, start, depth)?,
        };
        record.insert(key.to_owned(), value);
        Some(end)
    })?;
    if end != bytes.len() {
        return None;
    }
    let record = Json::Object(record);
    let committed_node = record.get("committed_execution_state");
    let candidate_node = record.get("prepared").and_then(|p| p.get("candidate_state"));
    let mut state_of = |v: &Json| {
        // The tree holds each state without its payload: give back the one split off there.
        let payload = if committed_node.is_some_and(|c| std::ptr::eq(c, v)) {
            committed.take()
        } else if candidate_node.is_some_and(|c| std::ptr::eq(c, v)) {
            candidate.take()
        } else {
            None
        };
        let payload = payload.ok_or_else(|| DecodeError::invalid("a state outside the record's two state members"))?;
        ExecutionState::decode_record_with_payload(v, payload, segments)
    };
    Process::decode_record_with(&record, &mut state_of).ok()
}

/// The canonical value at `start` (`depth` containers enclose it in the record), parsed into
/// a tree, and its end.
fn parsed(text: &str, start: usize, depth: usize) -> Option<(Json, usize)> {
    let end = scan(text.as_bytes(), start, depth)?;
    let limits = ParseLimits { max_bytes: usize::MAX, max_depth: MAX_JSON_DEPTH.checked_sub(depth)? };
    Some((parse_with(text.get(start..end)?.as_bytes(), &limits).ok()?, end))
}

/// A state object (`kind`, `payload`, `segments`) at `start`: the tree without the payload
/// (whose member reads as `null`), the payload taken from its canonical text, and the end.
fn state(text: &str, start: usize, depth: usize) -> Option<(Json, Payload, usize)> {
    let bytes = text.as_bytes();
    let mut tree = Object::new();
    let mut payload = None;
    let end = members(bytes, start, depth, &mut |key, s, d| {
        let (value, end) = if key == "payload" {
            let end = scan(bytes, s, d)?;
            payload = Some(Payload::from_scanned(text.get(s..end)?)?);
            (Json::Null, end)
        } else {
            parsed(text, s, d)?
        };
        tree.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some((Json::Object(tree), payload?, end))
}

/// The prepared step at `start`: its members parsed, its candidate state split like the
/// committed one.
fn prepared(text: &str, start: usize, depth: usize) -> Option<(Json, Payload, usize)> {
    let mut tree = Object::new();
    let mut payload = None;
    let end = members(text.as_bytes(), start, depth, &mut |key, s, d| {
        let (value, end) = if key == "candidate_state" {
            let (tree, p, end) = state(text, s, d)?;
            payload = Some(p);
            (tree, end)
        } else {
            parsed(text, s, d)?
        };
        tree.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some((Json::Object(tree), payload?, end))
}
