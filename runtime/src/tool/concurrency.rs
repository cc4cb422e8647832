//! How one prepared call may overlap with its siblings in a model-requested batch.

/// A call's scheduling declaration. Produced by [`super::Tool::concurrency`] and
/// normalized by [`super::BoundTool::classify`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Concurrency {
    /// The call runs alone: nothing overlaps it, and nothing after it starts until it ends.
    Exclusive,
    /// The call may overlap other shared calls. Calls with the same `key` (a mutually exclusive
    /// resource) never overlap each other; `None` names no resource. After
    /// [`super::BoundTool::classify`] a key is never empty (an empty key means no key).
    Shared { key: Option<String> },
}

impl Concurrency {
    /// A shared call with no resource key.
    pub fn shared() -> Concurrency {
        Concurrency::Shared { key: None }
    }

    /// A shared call serialized with every other call naming `key` (empty = no key).
    pub fn keyed(key: impl Into<String>) -> Concurrency {
        Concurrency::Shared {
            key: Some(key.into()),
        }
        .normalized()
    }

    pub fn is_exclusive(&self) -> bool {
        matches!(self, Concurrency::Exclusive)
    }

    /// The non-empty resource key of a shared call.
    pub fn key(&self) -> Option<&str> {
        match self {
            Concurrency::Shared { key: Some(key) } => Some(key),
            _ => None,
        }
    }

    /// Folds an empty key into "no key", so schedulers compare keys without special cases.
    pub(crate) fn normalized(self) -> Concurrency {
        match self {
            Concurrency::Shared { key: Some(key) } if key.is_empty() => {
                Concurrency::Shared { key: None }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_key_means_no_key() {
        assert_eq!(Concurrency::keyed(""), Concurrency::shared());
        assert_eq!(Concurrency::keyed("").key(), None);
        assert_eq!(Concurrency::keyed("db").key(), Some("db"));
        assert_eq!(Concurrency::Exclusive.key(), None);
        assert!(Concurrency::Exclusive.is_exclusive());
        assert!(!Concurrency::shared().is_exclusive());
    }
}
