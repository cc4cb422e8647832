//! Running campaigns against a deliberately broken keel (`keel::mutation`, feature
//! `mutations` of this crate, which forwards `keel/mutations`).
//!
//! A campaign with a mutation must fail: that is how the simulator's invariants are proven
//! live. The mutation is switched on per run on the thread that runs it
//! (`keel::mutation::scoped`), so campaign workers, and tests running side by side, each see
//! exactly the mutation they asked for; a run without one sees none, so building with the
//! feature changes nothing until a mutation is named.
//!
//! Without the feature [`Mutation`] is an empty enum: no mutation can be named, and
//! [`from_name`] says how to get them.

/// One deliberately broken rule (the runtime's own type when the feature is on).
#[cfg(feature = "mutations")]
pub use keel::mutation::Mutation;

/// No mutation exists in a build without the `mutations` feature.
#[cfg(not(feature = "mutations"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {}

/// Why `--mutation NAME` names no mutation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutationError {
    #[error("unknown mutation `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error(
        "`--mutation {name}` needs a keel-sim built with the `mutations` feature \
         (cargo run -p keel-sim --features mutations -- ...)"
    )]
    NotBuilt { name: String },
}

/// Every mutation this build knows, in declaration order (none without the feature).
pub fn all() -> Vec<Mutation> {
    #[cfg(feature = "mutations")]
    {
        Mutation::ALL.to_vec()
    }
    #[cfg(not(feature = "mutations"))]
    {
        Vec::new()
    }
}

/// The mutation called `name`.
pub fn from_name(name: &str) -> Result<Mutation, MutationError> {
    #[cfg(feature = "mutations")]
    {
        Mutation::from_name(name).ok_or_else(|| MutationError::Unknown {
            name: name.to_string(),
            known: all().iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        })
    }
    #[cfg(not(feature = "mutations"))]
    {
        Err(MutationError::NotBuilt {
            name: name.to_string(),
        })
    }
}

/// The stable snake_case name (`--mutation`, replay commands).
pub fn name(m: Mutation) -> &'static str {
    #[cfg(feature = "mutations")]
    {
        m.name()
    }
    #[cfg(not(feature = "mutations"))]
    {
        match m {}
    }
}

/// Runs `f` with `m` in effect on this thread (and nothing else changed when `m` is `None`).
pub fn under<T>(m: Option<Mutation>, f: impl FnOnce() -> T) -> T {
    match m {
        None => f(),
        #[cfg(feature = "mutations")]
        Some(m) => keel::mutation::scoped(Some(m), f),
        #[cfg(not(feature = "mutations"))]
        Some(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "mutations")]
    #[test]
    fn names_resolve_and_unknown_ones_are_typed_errors() {
        for m in all() {
            assert_eq!(from_name(name(m)), Ok(m));
            assert!(under(Some(m), || keel::mutation::active(m)));
            assert!(!under(None, || keel::mutation::active(m)));
        }
        assert_eq!(all().len(), Mutation::ALL.len());
        match from_name("nope") {
            Err(MutationError::Unknown { name, known }) => {
                assert_eq!(name, "nope");
                assert!(known.contains("dispatch_before_pending"), "{known}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[cfg(not(feature = "mutations"))]
    #[test]
    fn without_the_feature_no_mutation_can_be_named() {
        assert!(all().is_empty());
        assert_eq!(
            from_name("dispatch_before_pending"),
            Err(MutationError::NotBuilt {
                name: "dispatch_before_pending".into()
            })
        );
        assert_eq!(under(None, || 5), 5);
    }
}
