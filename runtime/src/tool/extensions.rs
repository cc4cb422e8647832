//! Typed values that higher layers attach to a tool call's context (for example the
//! Interaction's attribution of the call), without this module naming their types.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A map from type to one shared value of that type. Cheap to clone (values are shared).
/// Lookup only: the order of `TypeId`s is never observed.
#[derive(Clone, Default)]
pub struct Extensions {
    values: BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Extensions {
    pub fn new() -> Extensions {
        Extensions::default()
    }

    /// Stores `value`, returning the previous value of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) -> Option<Arc<T>> {
        self.insert_arc(Arc::new(value))
    }

    /// Stores an already shared value, returning the previous value of the same type.
    pub fn insert_arc<T: Any + Send + Sync>(&mut self, value: Arc<T>) -> Option<Arc<T>> {
        self.values
            .insert(TypeId::of::<T>(), value)
            .and_then(|old| old.downcast::<T>().ok())
    }

    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }

    pub fn remove<T: Any + Send + Sync>(&mut self) -> Option<Arc<T>> {
        self.values
            .remove(&TypeId::of::<T>())
            .and_then(|old| old.downcast::<T>().ok())
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.values.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Attribution(u32);

    #[test]
    fn keyed_by_type() {
        let mut e = Extensions::new();
        assert!(e.get::<Attribution>().is_none());
        assert!(e.insert(Attribution(1)).is_none());
        assert!(e.insert(7u64).is_none());
        assert_eq!(e.get::<Attribution>(), Some(&Attribution(1)));
        assert_eq!(e.get::<u64>(), Some(&7));
        assert_eq!(e.insert(Attribution(2)).as_deref(), Some(&Attribution(1)));
        assert_eq!(e.get::<Attribution>(), Some(&Attribution(2)));
        assert_eq!(e.len(), 2);
        let clone = e.clone();
        assert_eq!(e.remove::<u64>().as_deref(), Some(&7));
        assert!(e.get::<u64>().is_none());
        assert_eq!(clone.get::<u64>(), Some(&7), "clones are independent maps");
    }
}
