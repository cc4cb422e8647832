//! Staging deferred tools for model visibility from inside a tool call.
//!
//! A running call stages names through [`super::ToolContext::advertise`]; the tool dispatcher
//! reads [`Advertiser::staged`] after the call and commits the names only if the call ended
//! with a successful, non-error result. Advertising never adds executable authority: deferred
//! tools are executable whether advertised or not.

use super::diagnostic::excerpt;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The per-call staging handle. Clones share the same staged list. Each call attempt gets a
/// fresh one (names staged before an input pause are discarded with it).
#[derive(Clone, Debug)]
pub struct Advertiser {
    // `None`: no active tool call can advertise through this handle.
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    deferred: Arc<BTreeSet<String>>,
    staged: Mutex<Vec<String>>,
}

/// Why an advertisement was refused. No name of a refused call is staged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdvertiseError {
    /// The context belongs to no active tool call.
    #[error("tool advertisement unavailable: no active tool call")]
    Unavailable,
    #[error("invalid tool advertisement: {0}")]
    Invalid(InvalidAdvertisement),
}

/// The rule an advertisement broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAdvertisement {
    #[error("no tool names given")]
    NoNames,
    #[error("empty tool name")]
    EmptyName,
    #[error("tool name `{name}` has surrounding whitespace")]
    SurroundingWhitespace { name: String },
    /// Unknown names and initially visible tools alike: only deferred tools are advertised.
    #[error("`{name}` is not a deferred tool of this tool set")]
    NotDeferred { name: String },
}

impl Advertiser {
    /// A handle for one call attempt, allowed to stage exactly the names in `deferred`.
    pub fn new(deferred: Arc<BTreeSet<String>>) -> Advertiser {
        Advertiser {
            inner: Some(Arc::new(Inner {
                deferred,
                staged: Mutex::new(Vec::new()),
            })),
        }
    }

    /// A handle for contexts with no active tool call: every advertisement fails with
    /// [`AdvertiseError::Unavailable`].
    pub fn unavailable() -> Advertiser {
        Advertiser { inner: None }
    }

    /// Stages `names` (all or nothing). Names already staged are accepted again unchanged.
    pub fn advertise(&self, names: &[&str]) -> Result<(), AdvertiseError> {
        let inner = self.inner.as_ref().ok_or(AdvertiseError::Unavailable)?;
        if names.is_empty() {
            return Err(AdvertiseError::Invalid(InvalidAdvertisement::NoNames));
        }
        for name in names {
            check_name(&inner.deferred, name).map_err(AdvertiseError::Invalid)?;
        }
        let mut staged = lock(&inner.staged);
        for name in names {
            if !staged.iter().any(|s| s == name) {
                staged.push((*name).to_owned());
            }
        }
        Ok(())
    }

    /// The staged names in first-staged order, without duplicates.
    pub fn staged(&self) -> Vec<String> {
        match &self.inner {
            Some(inner) => lock(&inner.staged).clone(),
            None => Vec::new(),
        }
    }

    /// Whether this handle can stage anything at all.
    pub fn is_available(&self) -> bool {
        self.inner.is_some()
    }
}

fn check_name(deferred: &BTreeSet<String>, name: &str) -> Result<(), InvalidAdvertisement> {
    if name.is_empty() {
        return Err(InvalidAdvertisement::EmptyName);
    }
    if name.trim() != name {
        return Err(InvalidAdvertisement::SurroundingWhitespace {
            name: excerpt(name),
        });
    }
    if !deferred.contains(name) {
        return Err(InvalidAdvertisement::NotDeferred {
            name: excerpt(name),
        });
    }
    Ok(())
}

// A poisoned lock only means a holder panicked between whole-list updates; the list is intact.
fn lock(m: &Mutex<Vec<String>>) -> MutexGuard<'_, Vec<String>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advertiser() -> Advertiser {
        let deferred: BTreeSet<String> = ["search", "fetch", "write"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        Advertiser::new(Arc::new(deferred))
    }

    fn invalid(a: &Advertiser, names: &[&str]) -> InvalidAdvertisement {
        match a.advertise(names) {
            Err(AdvertiseError::Invalid(why)) => why,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn stages_in_first_staged_order_idempotently() {
        let a = advertiser();
        a.advertise(&["fetch", "search"]).unwrap();
        a.advertise(&["search", "write", "fetch"]).unwrap();
        a.advertise(&["write", "write"]).unwrap();
        assert_eq!(a.staged(), ["fetch", "search", "write"]);
        // Clones share the staged list (the dispatcher keeps one, the context another).
        let b = a.clone();
        assert_eq!(b.staged(), a.staged());
    }

    #[test]
    fn every_rule_rejects_the_whole_call() {
        let a = advertiser();
        assert_eq!(invalid(&a, &[]), InvalidAdvertisement::NoNames);
        assert_eq!(
            invalid(&a, &["search", ""]),
            InvalidAdvertisement::EmptyName
        );
        assert!(matches!(
            invalid(&a, &["search", " fetch"]),
            InvalidAdvertisement::SurroundingWhitespace { .. }
        ));
        assert!(matches!(
            invalid(&a, &["search", "fetch\n"]),
            InvalidAdvertisement::SurroundingWhitespace { .. }
        ));
        // An initially visible tool is not deferred, and neither is an unknown one.
        assert!(matches!(
            invalid(&a, &["search", "read_file"]),
            InvalidAdvertisement::NotDeferred { .. }
        ));
        assert!(matches!(
            invalid(&a, &["Search"]),
            InvalidAdvertisement::NotDeferred { .. }
        ));
        assert!(a.staged().is_empty(), "no name of a refused call is staged");
        a.advertise(&["fetch"]).unwrap();
        assert!(a.advertise(&["search", "nope"]).is_err());
        assert_eq!(a.staged(), ["fetch"]);
    }

    #[test]
    fn unavailable_refuses_everything() {
        let a = Advertiser::unavailable();
        assert!(!a.is_available());
        assert_eq!(a.advertise(&["search"]), Err(AdvertiseError::Unavailable));
        assert_eq!(a.advertise(&[]), Err(AdvertiseError::Unavailable));
        assert!(a.staged().is_empty());
    }

    #[test]
    fn error_names_are_bounded() {
        let a = advertiser();
        let long = "x".repeat(10_000);
        let InvalidAdvertisement::NotDeferred { name } = invalid(&a, &[&long]) else {
            panic!()
        };
        assert!(name.len() < 100);
    }
}
