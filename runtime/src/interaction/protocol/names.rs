//! Shared list rules: advertised tool names (in the parent state, the model call Effect and
//! the tool settlement) and signal id lists (applied and pending steers).

use super::excerpt;
use crate::chat::validate_tool_name;
use crate::kernel::ids::SignalId;
use std::collections::BTreeSet;

/// Advertised deferred tool names: each non-empty, without surrounding whitespace, a valid
/// tool name (decision: stricter, since only bound deferred tools can ever be advertised and
/// their names are valid tool names), and unique. Returns the violated rule.
pub fn validate_advertised_names(names: &[String]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for (index, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(format!("advertised tool name {index} is empty"));
        }
        if name.trim() != name {
            return Err(format!("advertised tool name {index} has surrounding whitespace"));
        }
        validate_tool_name(name).map_err(|e| format!("advertised tool name {index}: {e}"))?;
        if !seen.insert(name.as_str()) {
            return Err(format!("advertised tool name `{}` is repeated", excerpt(name)));
        }
    }
    Ok(())
}

/// Signal ids (each already valid identity text by type) must be unique.
pub fn validate_signal_ids(ids: &[SignalId]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(format!("signal id `{id}` is repeated"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn advertised_names() {
        assert!(validate_advertised_names(&[]).is_ok());
        assert!(validate_advertised_names(&names(&["a", "b_c", "d-1"])).is_ok());
        for bad in [&["a", ""][..], &[" a"], &["a "], &["a", "a"], &["a/b"], &["a b"]] {
            assert!(validate_advertised_names(&names(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn signal_ids() {
        let id = |s: &str| SignalId::parse(s).unwrap();
        assert!(validate_signal_ids(&[]).is_ok());
        assert!(validate_signal_ids(&[id("s1"), id("s2")]).is_ok());
        assert!(validate_signal_ids(&[id("s1"), id("s2"), id("s1")]).is_err());
    }
}
