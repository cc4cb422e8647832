//! A tree whose stored record is damaged. Stores keep trees independent: damage to one tree's
//! record is reported for that tree (by root id), loading or committing it returns
//! [`CommitError::Damaged`], and every other tree is served as if nothing happened.

use super::port::CommitError;
use crate::kernel::ids::ProcessId;

/// One damaged tree, as a store found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeDamage {
    /// The tree's root id as stored (text: the stored id may itself be what is damaged).
    pub root: String,
    /// Where in the store: a log offset, a table row.
    pub location: String,
    /// What is wrong with it.
    pub reason: String,
}

impl TreeDamage {
    /// The error a load or commit of this tree returns.
    pub fn error(&self, root: &ProcessId) -> CommitError {
        CommitError::Damaged { root: root.clone(), reason: format!("{}: {}", self.location, self.reason) }
    }
}

impl std::fmt::Display for TreeDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tree {} damaged at {}: {}", self.root, self.location, self.reason)
    }
}
