//! keel's own [`Json`] as an instance representation the `jsonschema` validator reads
//! directly, so validating an instance no longer copies it into a `serde_json::Value` first
//! (every string, member and array rebuilt, then dropped: most of a validation's cost).
//!
//! Every accessor answers what the converted `serde_json::Value` answers, so verdicts and
//! diagnostics do not depend on the representation:
//! * numbers are read through the same `serde_json::Number` the conversion builds (exact
//!   digits, exponents respelled), so bounds, `multipleOf` and `integer` see the same value;
//! * object members are a `BTreeMap` in both (same iteration order, same lookups);
//! * the cold paths (`to_value`: error messages, annotations, the `const`/`enum`/`uniqueItems`
//!   comparisons) convert the node they are asked about.
//!
//! Callers first check that the whole instance converts ([`check_convertible`]); a number
//! that would not convert is refused before the validator sees it, as it was before.

use crate::json::{to_serde_number, Json, Object as Members};
use crate::limits::MAX_JSON_DEPTH;
use jsonschema::json::{Array, Json as Representation, Node, NodeIdentity, Object};
use jsonschema::JsonType;
use serde_json::Value;
use std::borrow::Cow;

/// The representation marker: instances are `&Json`.
pub(super) struct KeelJson;

impl Representation for KeelJson {
    type Node<'a> = &'a Json;
    type PreparedKey = String;
    type StringBuffer = NameBuffer;

    // Members are a `BTreeMap`, as in `serde_json::Map`: the same trade-off applies.
    const KEYS_PER_LOOKUP: usize = 2;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>(buffer: &mut NameBuffer, string: &str, f: impl FnOnce(&Json) -> T) -> T {
        // Reuses the buffer's allocation across property names.
        if let Json::String(existing) = &mut buffer.0 {
            existing.clear();
            existing.push_str(string);
        } else {
            buffer.0 = Json::String(string.to_owned());
        }
        f(&buffer.0)
    }
}

/// Scratch node for `propertyNames` (a property name validated as a string instance).
pub(super) struct NameBuffer(Json);

impl Default for NameBuffer {
    fn default() -> NameBuffer {
        NameBuffer(Json::Null)
    }
}

/// Checks that `json` converts to a `serde_json::Value`, without building it (the check
/// lives beside the conversion so both walk with the same depth rule).
pub(super) use crate::json::check_serde_convertible as check_convertible;

impl<'a> Node<'a, KeelJson> for &'a Json {
    type Object = &'a Members;
    type Array = &'a [Json];
    type Number = serde_json::Number;

    fn as_object(&self) -> Option<&'a Members> {
        match self {
            Json::Object(members) => Some(members),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&'a [Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self {
            Json::String(s) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<serde_json::Number> {
        match self {
            // Always converts: the instance was checked (`check_convertible`) first.
            Json::Number(n) => to_serde_number(n).ok(),
            _ => None,
        }
    }

    fn is_number(&self) -> bool {
        matches!(self, Json::Number(_))
    }

    fn as_boolean(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    fn json_type(&self) -> JsonType {
        match self {
            Json::Null => JsonType::Null,
            Json::Bool(_) => JsonType::Boolean,
            Json::Number(_) => JsonType::Number,
            Json::String(_) => JsonType::String,
            Json::Array(_) => JsonType::Array,
            Json::Object(_) => JsonType::Object,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        // Converts: a subtree of a checked instance is within the limits too.
        Cow::Owned(crate::json::to_serde_value_with(self, MAX_JSON_DEPTH).unwrap_or(Value::Null))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(std::ptr::from_ref::<Json>(self) as usize))
    }
}

impl<'a> Object<'a, KeelJson> for &'a Members {
    type Node = &'a Json;
    type MemberName = &'a str;
    type MembersIter = MembersIter<'a>;

    fn len(&self) -> usize {
        Members::len(self)
    }

    fn get(&self, key: &String) -> Option<&'a Json> {
        Members::get(self, key.as_str())
    }

    fn members(&self) -> MembersIter<'a> {
        MembersIter(self.iter())
    }
}

/// Object members in key order, as `(name, value)`.
pub(super) struct MembersIter<'a>(std::collections::btree_map::Iter<'a, String, Json>);

impl<'a> Iterator for MembersIter<'a> {
    type Item = (&'a str, &'a Json);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.as_str(), v))
    }
}

impl<'a> Array<'a, KeelJson> for &'a [Json] {
    type Node = &'a Json;
    type ElementsIter = std::slice::Iter<'a, Json>;

    fn len(&self) -> usize {
        <[Json]>::len(self)
    }

    fn elements(&self) -> std::slice::Iter<'a, Json> {
        self.iter()
    }
}
