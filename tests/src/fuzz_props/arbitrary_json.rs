//! Structured inputs built with `arbitrary`: JSON trees and snapshot mutations.
//!
//! [`ArbitraryJson`] generates bounded JSON trees whose leaves lean towards values the kernel
//! decoders care about (ids, hex, u64 edges, statuses). [`SnapshotMutation`] starts from a real
//! captured snapshot and edits it at a few paths, so decoding gets past the outer layers and
//! into Process, mailbox and prepared-step validation.

use arbitrary::{Arbitrary, Unstructured};
use keel::json::{Json, Number, Object};

/// Deepest generated tree (far below `MAX_JSON_DEPTH`, so every tree encodes and parses).
pub const MAX_DEPTH: u32 = 6;
/// Widest generated array or object.
const MAX_WIDTH: usize = 6;

/// Strings the kernel decoders branch on, to get past the first rejection quickly.
const WORDS: &[&str] = &[
    "",
    "x",
    "keel.fuzz.script",
    "keel.testkit.script",
    "running",
    "waiting",
    "completed",
    "failed",
    "canceled",
    "killed",
    "paused",
    "succeeded",
    "unknown",
    "pending",
    "settled",
    "dispatcher",
    "framework",
    "wait",
    "start_child",
    "wait_children",
    "continue",
    "checkpoint",
    "complete",
    "fail",
    "subtree_drained",
    "started",
    "all",
    "any",
    "signal:engine:x",
    "signal:a",
    "process:00000000000000000000000000000001",
    "00000000000000000000000000000001",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "\u{0}",
    "\u{fffd}",
    "é",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "9007199254740993",
    "1.0",
    "1e400",
    "-0",
    "0.5",
    "1700000000000",
];

/// A generated JSON tree (depth-bounded; converted with [`ArbitraryJson::into_json`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArbitraryJson(pub Json);

impl ArbitraryJson {
    pub fn into_json(self) -> Json {
        self.0
    }
}

impl<'a> Arbitrary<'a> for ArbitraryJson {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(ArbitraryJson(json_tree(u, MAX_DEPTH)?))
    }
}

/// One JSON value of at most `depth` nesting levels.
pub fn json_tree(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Json> {
    let kinds = if depth == 0 { 6 } else { 8 };
    Ok(match u.choose_index(kinds)? {
        0 => Json::Null,
        1 => Json::Bool(u.arbitrary()?),
        2 => Json::Number(Number::from_u64(u.arbitrary::<u8>()?.into())),
        3 => Json::Number(Number::parse(u.choose(NUMBERS)?).map_err(|_| arbitrary::Error::IncorrectFormat)?),
        4 => Json::str(*u.choose(WORDS)?),
        5 => Json::String(u.arbitrary::<String>()?),
        6 => {
            let n = u.int_in_range(0..=MAX_WIDTH)?;
            Json::Array((0..n).map(|_| json_tree(u, depth - 1)).collect::<arbitrary::Result<_>>()?)
        }
        _ => {
            let n = u.int_in_range(0..=MAX_WIDTH)?;
            let mut object = Object::new();
            for _ in 0..n {
                let key = if u.arbitrary()? { u.choose(WORDS)?.to_string() } else { u.arbitrary::<String>()? };
                object.insert(key, json_tree(u, depth - 1)?);
            }
            Json::Object(object)
        }
    })
}

/// One edit at the node reached by following `path` (each step picks a child modulo the
/// node's width; the walk stops at a leaf or when the path ends).
#[derive(Arbitrary, Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub path: Vec<u8>,
    pub op: EditOp,
}

#[derive(Arbitrary, Clone, Debug, PartialEq, Eq)]
pub enum EditOp {
    /// Replace the node with a generated tree.
    Replace(ArbitraryJson),
    /// Replace the node with another node of the same snapshot (found by that path): moves
    /// real ids, digests and records into the wrong places.
    CopyFrom(Vec<u8>),
    /// Add `delta` to an integer node (wrapping at the u64 edges), else no-op.
    Bump(i8),
    /// Remove the chosen member or element of an object or array.
    Remove(u8),
    /// Duplicate the chosen element of an array (or member value under a new key).
    Duplicate(u8, String),
    /// Swap two elements of an array.
    Swap(u8, u8),
    /// Replace the node with `null`.
    Null,
}

/// A real snapshot (chosen by index from the captured seeds) and the edits to apply.
#[derive(Arbitrary, Clone, Debug, PartialEq, Eq)]
pub struct SnapshotMutation {
    pub base: u8,
    pub edits: Vec<Edit>,
}

/// Most edits applied to one snapshot (more rarely survives validation and only slows runs).
pub const MAX_EDITS: usize = 4;

fn node_mut<'j>(node: &'j mut Json, path: &[u8]) -> &'j mut Json {
    let Some((step, rest)) = path.split_first() else { return node };
    let width = match &*node {
        Json::Array(items) => items.len(),
        Json::Object(object) => object.len(),
        _ => 0,
    };
    if width == 0 {
        return node;
    }
    let i = usize::from(*step) % width;
    match node {
        Json::Array(items) => node_mut(&mut items[i], rest),
        Json::Object(object) => node_mut(object.values_mut().nth(i).expect("index below the width"), rest),
        _ => node,
    }
}

fn node<'j>(mut node: &'j Json, path: &[u8]) -> &'j Json {
    for step in path {
        node = match node {
            Json::Array(items) if !items.is_empty() => &items[usize::from(*step) % items.len()],
            Json::Object(object) if !object.is_empty() => match object.values().nth(usize::from(*step) % object.len()) {
                Some(v) => v,
                None => break,
            },
            _ => break,
        };
    }
    node
}

/// Applies one edit in place.
pub fn apply(root: &mut Json, edit: &Edit) {
    let replacement = match &edit.op {
        EditOp::CopyFrom(from) => Some(node(root, from).clone()),
        _ => None,
    };
    let target = node_mut(root, &edit.path);
    match &edit.op {
        EditOp::Replace(tree) => *target = tree.0.clone(),
        EditOp::CopyFrom(_) => {
            if let Some(r) = replacement {
                *target = r;
            }
        }
        EditOp::Bump(delta) => {
            if let Some(n) = target.as_u64() {
                let d = i64::from(*delta);
                let bumped = if d >= 0 { n.wrapping_add(d as u64) } else { n.wrapping_sub(d.unsigned_abs()) };
                *target = Json::u64(bumped);
            }
        }
        EditOp::Remove(i) => match target {
            Json::Array(items) if !items.is_empty() => {
                let i = usize::from(*i) % items.len();
                items.remove(i);
            }
            Json::Object(object) if !object.is_empty() => {
                let i = usize::from(*i) % object.len();
                if let Some(key) = object.keys().nth(i).cloned() {
                    object.remove(&key);
                }
            }
            _ => {}
        },
        EditOp::Duplicate(i, key) => match target {
            Json::Array(items) if !items.is_empty() => {
                let i = usize::from(*i) % items.len();
                let copy = items[i].clone();
                items.insert(i, copy);
            }
            Json::Object(object) if !object.is_empty() => {
                let i = usize::from(*i) % object.len();
                if let Some(v) = object.values().nth(i).cloned() {
                    object.insert(key.clone(), v);
                }
            }
            _ => {}
        },
        EditOp::Swap(a, b) => {
            if let Json::Array(items) = target {
                if !items.is_empty() {
                    let (a, b) = (usize::from(*a) % items.len(), usize::from(*b) % items.len());
                    items.swap(a, b);
                }
            }
        }
        EditOp::Null => *target = Json::Null,
    }
}
