//! CapabilitySet: monotone privilege. A child never holds a capability its parent lacks, and a
//! prepared Effect never requires one its Process lacks; both are checked when granted and
//! again when a snapshot is parsed, so recovery cannot reintroduce a refused escalation.
//!
//! An immutable sorted set of qualified names. Wire: a JSON array of strings, always encoded
//! sorted (`[]` when empty). Decoding accepts any order (a set has none; hand-written Host
//! configuration need not be sorted) but rejects `null`, non-strings, invalid names and
//! duplicates. Since encoding always sorts, everything we hash is in one canonical order.

use crate::json::{DecodeError, FromJson, Json, ToJson};
use crate::text::{QualifiedName, TextError};
use std::collections::BTreeSet;

/// Why a capability list was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    #[error("capability `{name}`: {error}")]
    InvalidName { name: String, error: TextError },
    #[error("duplicate capability `{0}`")]
    Duplicate(String),
}

/// A set of capabilities.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct CapabilitySet(BTreeSet<QualifiedName>);

impl CapabilitySet {
    /// The empty set (no authority).
    pub fn empty() -> CapabilitySet {
        CapabilitySet::default()
    }
    /// From names in any order; invalid names and duplicates are rejected (a duplicate in a
    /// literal list is almost certainly a mistake, and decoding rejects it too).
    pub fn from_names(names: &[&str]) -> Result<CapabilitySet, CapabilityError> {
        let mut set = BTreeSet::new();
        for name in names {
            let parsed = QualifiedName::parse(name)
                .map_err(|error| CapabilityError::InvalidName { name: (*name).to_owned(), error })?;
            if !set.insert(parsed) {
                return Err(CapabilityError::Duplicate((*name).to_owned()));
            }
        }
        Ok(CapabilitySet(set))
    }
    /// From an already deduplicated set.
    pub fn from_set(names: BTreeSet<QualifiedName>) -> CapabilitySet {
        CapabilitySet(names)
    }
    pub fn contains(&self, name: &QualifiedName) -> bool {
        self.0.contains(name)
    }
    /// Whether every capability here is also in `other` (no escalation).
    pub fn is_subset_of(&self, other: &CapabilitySet) -> bool {
        self.0.is_subset(&other.0)
    }
    /// The first capability (in sorted order) that `other` lacks, for error reports.
    pub fn first_missing_from(&self, other: &CapabilitySet) -> Option<&QualifiedName> {
        self.0.iter().find(|name| !other.0.contains(*name))
    }
    /// In sorted order.
    pub fn iter(&self) -> impl Iterator<Item = &QualifiedName> {
        self.0.iter()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl ToJson for CapabilitySet {
    fn to_json(&self) -> Json {
        Json::Array(self.0.iter().map(ToJson::to_json).collect())
    }
}
impl crate::json::WriteJson for CapabilitySet {
    fn write_json(&self, out: &mut String) {
        out.push('[');
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            crate::json::WriteJson::write_json(name, out);
        }
        out.push(']');
    }
}
impl FromJson for CapabilitySet {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let items = value.as_array().ok_or_else(|| DecodeError::wrong_type("array", value))?;
        let mut set = BTreeSet::new();
        for (index, item) in items.iter().enumerate() {
            let name = QualifiedName::from_json(item).map_err(|e| e.in_index(index))?;
            if !set.insert(name) {
                let text = item.as_str().unwrap_or_default();
                return Err(DecodeError::invalid(format!("duplicate capability `{text}`")).in_index(index));
            }
        }
        Ok(CapabilitySet(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(set: &CapabilitySet) -> Vec<&str> {
        set.iter().map(QualifiedName::as_str).collect()
    }
    fn array(items: &[&str]) -> Json {
        Json::Array(items.iter().map(|s| Json::str(*s)).collect())
    }

    #[test]
    fn from_names_sorts_and_validates() {
        let set = CapabilitySet::from_names(&["net.http", "fs.read", "fs.write"]).unwrap();
        assert_eq!(names(&set), ["fs.read", "fs.write", "net.http"]);
        assert_eq!(set.len(), 3);
        assert!(matches!(
            CapabilitySet::from_names(&["fs.read", "fs.read"]),
            Err(CapabilityError::Duplicate(_))
        ));
        assert!(matches!(CapabilitySet::from_names(&["FS"]), Err(CapabilityError::InvalidName { .. })));
        assert!(matches!(CapabilitySet::from_names(&[""]), Err(CapabilityError::InvalidName { .. })));
        assert!(CapabilitySet::from_names(&[]).unwrap().is_empty());
    }

    #[test]
    fn subset_and_contains() {
        let parent = CapabilitySet::from_names(&["a", "b", "c"]).unwrap();
        let child = CapabilitySet::from_names(&["a", "c"]).unwrap();
        let escalated = CapabilitySet::from_names(&["a", "d"]).unwrap();
        assert!(child.is_subset_of(&parent));
        assert!(parent.is_subset_of(&parent));
        assert!(CapabilitySet::empty().is_subset_of(&CapabilitySet::empty()));
        assert!(CapabilitySet::empty().is_subset_of(&parent));
        assert!(!parent.is_subset_of(&child));
        assert!(!escalated.is_subset_of(&parent));
        assert_eq!(escalated.first_missing_from(&parent).map(QualifiedName::as_str), Some("d"));
        assert_eq!(child.first_missing_from(&parent), None);
        assert!(parent.contains(&QualifiedName::parse("b").unwrap()));
        assert!(!child.contains(&QualifiedName::parse("b").unwrap()));
    }

    #[test]
    fn encodes_sorted_and_empty_as_empty_array() {
        assert_eq!(CapabilitySet::empty().to_json(), Json::Array(vec![]));
        let set = CapabilitySet::from_names(&["z", "a", "m"]).unwrap();
        assert_eq!(set.to_json(), array(&["a", "m", "z"]));
        assert_eq!(CapabilitySet::from_json(&set.to_json()).unwrap(), set);
    }

    #[test]
    fn decode_accepts_any_order_and_normalizes() {
        let set = CapabilitySet::from_json(&array(&["z", "a"])).unwrap();
        assert_eq!(set.to_json(), array(&["a", "z"]));
    }

    #[test]
    fn decode_rejections() {
        assert!(CapabilitySet::from_json(&Json::Null).is_err());
        assert!(CapabilitySet::from_json(&Json::object()).is_err());
        assert!(CapabilitySet::from_json(&Json::str("a")).is_err());
        let dup = CapabilitySet::from_json(&array(&["a", "b", "a"])).unwrap_err();
        assert_eq!(dup.path, "$[2]");
        assert!(CapabilitySet::from_json(&array(&["a", "B"])).is_err());
        assert!(CapabilitySet::from_json(&Json::Array(vec![Json::Null])).is_err());
        assert!(CapabilitySet::from_json(&Json::Array(vec![Json::u64(1)])).is_err());
    }
}
