//! TreeLimits: one set of structural limits per tree, carried in the snapshot.
//!
//! | field | default |
//! | --- | --- |
//! | `max_snapshot_bytes` (Quota) | unlimited |
//! | `max_process_snapshot_bytes` (Quota) | unlimited |
//! | `max_pending_signals` (u32) | 10 000 |
//! | `max_depth` (u32, root-relative) | 16 |
//! | `max_children` (Quota, lifetime per Process) | unlimited |
//! | `max_active_children` (u32, per Process) | 16 |
//! | `max_tree_processes` (Quota, lifetime per tree; must admit 1) | unlimited |
//!
//! Byte sizes: a tree's is its whole cut text; a Process's is its record plus the segment
//! records its states reference (`kernel::segment_record`), so moving segments out of the
//! record does not move them out of the limit.
//!
//! Zero for the three integer fields means "default", both when configured and when decoded,
//! so a stored value is always the effective one. The codec always emits every field and
//! requires every field on decode.

use super::resource::Quota;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::limits::{DEFAULT_MAX_ACTIVE_CHILDREN, DEFAULT_MAX_DEPTH, DEFAULT_MAX_PENDING_SIGNALS};

/// Why a TreeLimits value was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeLimitsError {
    #[error("max_tree_processes must admit the root (finite 0 is invalid)")]
    NoRoomForRoot,
}

/// The structural limits of one tree. Fields are private so the zero-means-default rule and
/// the root-admission rule cannot be bypassed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TreeLimits {
    max_snapshot_bytes: Quota,
    max_process_snapshot_bytes: Quota,
    max_pending_signals: u32,
    max_depth: u32,
    max_children: Quota,
    max_active_children: u32,
    max_tree_processes: Quota,
}

impl Default for TreeLimits {
    fn default() -> TreeLimits {
        TreeLimits {
            max_snapshot_bytes: Quota::Unlimited,
            max_process_snapshot_bytes: Quota::Unlimited,
            max_pending_signals: DEFAULT_MAX_PENDING_SIGNALS,
            max_depth: DEFAULT_MAX_DEPTH,
            max_children: Quota::Unlimited,
            max_active_children: DEFAULT_MAX_ACTIVE_CHILDREN,
            max_tree_processes: Quota::Unlimited,
        }
    }
}

fn or_default(value: u32, default: u32) -> u32 {
    if value == 0 {
        default
    } else {
        value
    }
}

impl TreeLimits {
    pub fn with_max_snapshot_bytes(mut self, quota: Quota) -> TreeLimits {
        self.max_snapshot_bytes = quota;
        self
    }
    pub fn with_max_process_snapshot_bytes(mut self, quota: Quota) -> TreeLimits {
        self.max_process_snapshot_bytes = quota;
        self
    }
    /// 0 selects the default.
    pub fn with_max_pending_signals(mut self, max: u32) -> TreeLimits {
        self.max_pending_signals = or_default(max, DEFAULT_MAX_PENDING_SIGNALS);
        self
    }
    /// 0 selects the default.
    pub fn with_max_depth(mut self, max: u32) -> TreeLimits {
        self.max_depth = or_default(max, DEFAULT_MAX_DEPTH);
        self
    }
    pub fn with_max_children(mut self, quota: Quota) -> TreeLimits {
        self.max_children = quota;
        self
    }
    /// 0 selects the default.
    pub fn with_max_active_children(mut self, max: u32) -> TreeLimits {
        self.max_active_children = or_default(max, DEFAULT_MAX_ACTIVE_CHILDREN);
        self
    }
    /// Rejects a quota that cannot hold the root itself.
    pub fn with_max_tree_processes(mut self, quota: Quota) -> Result<TreeLimits, TreeLimitsError> {
        if !quota.admits(0, 1) {
            return Err(TreeLimitsError::NoRoomForRoot);
        }
        self.max_tree_processes = quota;
        Ok(self)
    }

    pub fn max_snapshot_bytes(&self) -> Quota {
        self.max_snapshot_bytes
    }
    pub fn max_process_snapshot_bytes(&self) -> Quota {
        self.max_process_snapshot_bytes
    }
    pub fn max_pending_signals(&self) -> u32 {
        self.max_pending_signals
    }
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }
    pub fn max_children(&self) -> Quota {
        self.max_children
    }
    pub fn max_active_children(&self) -> u32 {
        self.max_active_children
    }
    pub fn max_tree_processes(&self) -> Quota {
        self.max_tree_processes
    }

    /// Whether a Process may exist at root-relative `depth` (root = 0): `depth ≤ max_depth`.
    pub fn admits_depth(&self, depth: u32) -> bool {
        depth <= self.max_depth
    }
}

impl ToJson for TreeLimits {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("max_snapshot_bytes", &self.max_snapshot_bytes)
            .field("max_process_snapshot_bytes", &self.max_process_snapshot_bytes)
            .field("max_pending_signals", &self.max_pending_signals)
            .field("max_depth", &self.max_depth)
            .field("max_children", &self.max_children)
            .field("max_active_children", &self.max_active_children)
            .field("max_tree_processes", &self.max_tree_processes)
            .build()
    }
}
impl FromJson for TreeLimits {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let limits = TreeLimits::default()
            .with_max_snapshot_bytes(r.required("max_snapshot_bytes")?)
            .with_max_process_snapshot_bytes(r.required("max_process_snapshot_bytes")?)
            .with_max_pending_signals(r.required("max_pending_signals")?)
            .with_max_depth(r.required("max_depth")?)
            .with_max_children(r.required("max_children")?)
            .with_max_active_children(r.required("max_active_children")?)
            .with_max_tree_processes(r.required("max_tree_processes")?)
            .map_err(|e| DecodeError::invalid(e.to_string()).in_member("max_tree_processes"))?;
        r.finish()?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;

    fn members(limits: &TreeLimits) -> Object {
        match limits.to_json() {
            Json::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults() {
        let d = TreeLimits::default();
        assert_eq!(d.max_snapshot_bytes(), Quota::Unlimited);
        assert_eq!(d.max_process_snapshot_bytes(), Quota::Unlimited);
        assert_eq!(d.max_pending_signals(), 10_000);
        assert_eq!(d.max_depth(), 16);
        assert_eq!(d.max_children(), Quota::Unlimited);
        assert_eq!(d.max_active_children(), 16);
        assert_eq!(d.max_tree_processes(), Quota::Unlimited);
    }

    #[test]
    fn zero_means_default_on_construction() {
        let l =
            TreeLimits::default().with_max_depth(3).with_max_active_children(2).with_max_pending_signals(7);
        assert_eq!((l.max_depth(), l.max_active_children(), l.max_pending_signals()), (3, 2, 7));
        let l = l.with_max_depth(0).with_max_active_children(0).with_max_pending_signals(0);
        assert_eq!(l, TreeLimits::default());
        let max = TreeLimits::default().with_max_pending_signals(u32::MAX);
        assert_eq!(max.max_pending_signals(), u32::MAX);
    }

    #[test]
    fn zero_means_default_on_decode() {
        let mut m = members(&TreeLimits::default().with_max_depth(5));
        for key in ["max_pending_signals", "max_depth", "max_active_children"] {
            m.insert(key.into(), Json::u64(0));
        }
        assert_eq!(TreeLimits::from_json(&Json::Object(m)).unwrap(), TreeLimits::default());
    }

    #[test]
    fn tree_processes_must_admit_the_root() {
        assert_eq!(
            TreeLimits::default().with_max_tree_processes(Quota::Finite(0)),
            Err(TreeLimitsError::NoRoomForRoot)
        );
        assert!(TreeLimits::default().with_max_tree_processes(Quota::Finite(1)).is_ok());
        let mut m = members(&TreeLimits::default());
        m.insert("max_tree_processes".into(), Quota::Finite(0).to_json());
        let err = TreeLimits::from_json(&Json::Object(m)).unwrap_err();
        assert!(err.path.starts_with("$.max_tree_processes"));
    }

    #[test]
    fn codec_round_trip_emits_every_field() {
        let l = TreeLimits::default()
            .with_max_snapshot_bytes(Quota::Finite(1 << 20))
            .with_max_process_snapshot_bytes(Quota::Finite(0))
            .with_max_pending_signals(1)
            .with_max_depth(2)
            .with_max_children(Quota::Finite(64))
            .with_max_active_children(4)
            .with_max_tree_processes(Quota::Finite(1024))
            .unwrap();
        let m = members(&l);
        assert_eq!(m.len(), 7);
        assert_eq!(m["max_depth"], Json::u64(2));
        assert_eq!(m["max_children"], Quota::Finite(64).to_json());
        assert_eq!(TreeLimits::from_json(&l.to_json()).unwrap(), l);
        assert_eq!(members(&TreeLimits::default()).len(), 7);
        assert_eq!(TreeLimits::from_json(&TreeLimits::default().to_json()).unwrap(), TreeLimits::default());
    }

    #[test]
    fn codec_strict_rejections() {
        let good = members(&TreeLimits::default());
        for key in good.keys() {
            let mut missing = good.clone();
            missing.remove(key);
            assert!(TreeLimits::from_json(&Json::Object(missing)).is_err(), "missing {key}");
            let mut nulled = good.clone();
            nulled.insert(key.clone(), Json::Null);
            assert!(TreeLimits::from_json(&Json::Object(nulled)).is_err(), "null {key}");
        }
        let mut extra = good.clone();
        extra.insert("max_steps".into(), Json::u64(1));
        assert!(TreeLimits::from_json(&Json::Object(extra)).is_err());
        let mut too_big = good.clone();
        too_big.insert("max_pending_signals".into(), Json::u64(u64::from(u32::MAX) + 1));
        assert!(TreeLimits::from_json(&Json::Object(too_big)).is_err());
        let mut quota_as_number = good;
        quota_as_number.insert("max_children".into(), Json::u64(3));
        assert!(TreeLimits::from_json(&Json::Object(quota_as_number)).is_err());
    }

    #[test]
    fn depth_admission() {
        let l = TreeLimits::default().with_max_depth(2);
        assert!(l.admits_depth(0) && l.admits_depth(2));
        assert!(!l.admits_depth(3));
    }
}
