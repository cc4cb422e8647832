//! Quotas, budgets, allocations and usage.
//!
//! * [`Quota`]: unlimited (`{"maximum":null}`) or a finite inclusive maximum, including 0.
//! * [`Budget`]: one Quota per dimension (steps, effects, signals).
//! * [`Allocation`]: per-dimension amounts charged against finite quotas: permanent debits
//!   granted to children, or transient reservations. Only finite dimensions ever carry a
//!   non-zero amount.
//! * [`Usage`]: what a Process has consumed itself.
//!
//! Transfer to a child, per dimension independently ([`Budget::grant_child`]):
//! parent unlimited → any child quota, no debit; parent finite → child finite with
//! `child.max ≤ parent.max` and `used + allocated + reserved + child.max ≤ parent.max`, debit
//! `child.max`. Invariant ([`Budget::check`]): `used + allocated ≤ max` per finite dimension and
//! an unlimited dimension carries no allocation. All sums are checked; overflow never fits.

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson, WriteJson};

/// One resource limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quota {
    Unlimited,
    /// Inclusive maximum.
    Finite(u64),
}

impl Quota {
    /// The finite maximum, if any.
    pub fn maximum(self) -> Option<u64> {
        match self {
            Quota::Unlimited => None,
            Quota::Finite(max) => Some(max),
        }
    }
    pub fn is_unlimited(self) -> bool {
        self == Quota::Unlimited
    }
    /// Whether `extra` more fits on top of `used`. Overflow of the sum never fits.
    pub fn admits(self, used: u64, extra: u64) -> bool {
        match self {
            Quota::Unlimited => true,
            Quota::Finite(max) => used.checked_add(extra).is_some_and(|total| total <= max),
        }
    }
}

impl ToJson for Quota {
    fn to_json(&self) -> Json {
        let maximum = match self {
            Quota::Unlimited => Json::Null,
            Quota::Finite(max) => Json::u64(*max),
        };
        ObjectBuilder::new().value("maximum", maximum).build()
    }
}
impl WriteJson for Quota {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"maximum\":");
        match self {
            Quota::Unlimited => out.push_str("null"),
            Quota::Finite(max) => crate::json::push_u64(out, *max),
        }
        out.push('}');
    }
}
impl FromJson for Quota {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let quota = match r.nullable_value("maximum").map_err(|e| e.in_member("maximum"))? {
            Json::Null => Quota::Unlimited,
            max => Quota::Finite(u64::from_json(max).map_err(|e| e.in_member("maximum"))?),
        };
        r.finish()?;
        Ok(quota)
    }
}

/// A budget dimension, for error reports and per-dimension access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// Committed Steps.
    Steps,
    /// Logical Effect identities across all Steps (not attempts).
    Effects,
    /// Accepted mailbox entries, external and Engine-generated.
    Signals,
}

impl Dimension {
    pub const ALL: [Dimension; 3] = [Dimension::Steps, Dimension::Effects, Dimension::Signals];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Steps => "steps",
            Dimension::Effects => "effects",
            Dimension::Signals => "signals",
        }
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a budget operation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("{dimension}: a finite parent quota cannot grant an unlimited child quota")]
    UnlimitedFromFinite { dimension: Dimension },
    #[error("{dimension}: child maximum {child} exceeds parent maximum {parent}")]
    ExceedsParent { dimension: Dimension, child: u64, parent: u64 },
    #[error(
        "{dimension}: a grant of {requested} does not fit: used {used} + allocated {allocated} + \
         reserved {reserved} of maximum {maximum}"
    )]
    Exhausted { dimension: Dimension, requested: u64, used: u64, allocated: u64, reserved: u64, maximum: u64 },
    #[error("{dimension}: used {used} + allocated {allocated} exceeds maximum {maximum}")]
    Overcommitted { dimension: Dimension, used: u64, allocated: u64, maximum: u64 },
    #[error("{dimension}: an unlimited quota must carry no allocation, found {allocated}")]
    AllocationOnUnlimited { dimension: Dimension, allocated: u64 },
    #[error("{dimension}: counter exhausted")]
    CounterExhausted { dimension: Dimension },
}

/// A budget: one quota per dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Budget {
    pub steps: Quota,
    pub effects: Quota,
    pub signals: Quota,
}

impl Budget {
    /// No limits in any dimension.
    pub fn unlimited() -> Budget {
        Budget { steps: Quota::Unlimited, effects: Quota::Unlimited, signals: Quota::Unlimited }
    }
    /// Finite in every dimension.
    pub fn finite(steps: u64, effects: u64, signals: u64) -> Budget {
        Budget {
            steps: Quota::Finite(steps),
            effects: Quota::Finite(effects),
            signals: Quota::Finite(signals),
        }
    }
    pub fn quota(&self, dimension: Dimension) -> Quota {
        match dimension {
            Dimension::Steps => self.steps,
            Dimension::Effects => self.effects,
            Dimension::Signals => self.signals,
        }
    }
    /// Every dimension finite 0: nothing at all may happen.
    pub fn is_zero(&self) -> bool {
        Dimension::ALL.iter().all(|d| self.quota(*d) == Quota::Finite(0))
    }
    /// A budget a child can do work with: the steps quota admits at least one Step. (Finite 0
    /// effects or signals still allow pure or input-free runs; finite 0 steps fails the child's
    /// first scheduled Step with `engine.limit.steps`.) This is our reading of the "valid,
    /// non-zero Budget" a delegate requires: every `Budget` value is well formed, so the only
    /// degenerate grant is one that forbids computation.
    pub fn is_valid_grant(&self) -> bool {
        self.steps.admits(0, 1)
    }
    /// Whether `extra` more of `dimension` fits: `used + allocated + extra ≤ max`.
    pub fn admits(&self, dimension: Dimension, usage: &Usage, allocated: &Allocation, extra: u64) -> bool {
        usage
            .used(dimension)
            .checked_add(allocated.get(dimension))
            .is_some_and(|base| self.quota(dimension).admits(base, extra))
    }

    /// The debit of granting `child` under this (parent) budget, all dimensions or none.
    /// `reserved` holds transient reservations (the next Step, a batch's settlement Signals,
    /// other provisional grants) that the grant must not eat into.
    pub fn grant_child(
        &self,
        usage: &Usage,
        allocated: &Allocation,
        reserved: &Allocation,
        child: &Budget,
    ) -> Result<Allocation, BudgetError> {
        let mut debit = Allocation::ZERO;
        for dimension in Dimension::ALL {
            let amount = grant_dimension(
                dimension,
                self.quota(dimension),
                usage.used(dimension),
                allocated.get(dimension),
                reserved.get(dimension),
                child.quota(dimension),
            )?;
            debit.set(dimension, amount);
        }
        Ok(debit)
    }

    /// The standing invariant: `used + allocated ≤ max` per finite dimension, and no allocation
    /// on an unlimited dimension.
    pub fn check(&self, usage: &Usage, allocated: &Allocation) -> Result<(), BudgetError> {
        for dimension in Dimension::ALL {
            let used = usage.used(dimension);
            let amount = allocated.get(dimension);
            match self.quota(dimension) {
                Quota::Unlimited if amount != 0 => {
                    return Err(BudgetError::AllocationOnUnlimited { dimension, allocated: amount });
                }
                Quota::Unlimited => {}
                Quota::Finite(maximum) => {
                    if !Quota::Finite(maximum).admits(used, amount) {
                        return Err(BudgetError::Overcommitted {
                            dimension,
                            used,
                            allocated: amount,
                            maximum,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

fn grant_dimension(
    dimension: Dimension,
    parent: Quota,
    used: u64,
    allocated: u64,
    reserved: u64,
    child: Quota,
) -> Result<u64, BudgetError> {
    let Quota::Finite(maximum) = parent else {
        return Ok(0);
    };
    let Quota::Finite(requested) = child else {
        return Err(BudgetError::UnlimitedFromFinite { dimension });
    };
    if requested > maximum {
        return Err(BudgetError::ExceedsParent { dimension, child: requested, parent: maximum });
    }
    let fits = used
        .checked_add(allocated)
        .and_then(|sum| sum.checked_add(reserved))
        .is_some_and(|base| parent.admits(base, requested));
    if !fits {
        return Err(BudgetError::Exhausted { dimension, requested, used, allocated, reserved, maximum });
    }
    Ok(requested)
}

impl ToJson for Budget {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("steps", &self.steps)
            .field("effects", &self.effects)
            .field("signals", &self.signals)
            .build()
    }
}
impl WriteJson for Budget {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.write("effects", &self.effects).write("signals", &self.signals).write("steps", &self.steps);
        w.finish();
    }
}
impl FromJson for Budget {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let budget = Budget {
            steps: r.required("steps")?,
            effects: r.required("effects")?,
            signals: r.required("signals")?,
        };
        r.finish()?;
        Ok(budget)
    }
}

/// Per-dimension amounts charged against finite quotas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Allocation {
    pub steps: u64,
    pub effects: u64,
    pub signals: u64,
}

impl Allocation {
    pub const ZERO: Allocation = Allocation { steps: 0, effects: 0, signals: 0 };

    pub fn get(&self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::Steps => self.steps,
            Dimension::Effects => self.effects,
            Dimension::Signals => self.signals,
        }
    }
    pub fn set(&mut self, dimension: Dimension, amount: u64) {
        match dimension {
            Dimension::Steps => self.steps = amount,
            Dimension::Effects => self.effects = amount,
            Dimension::Signals => self.signals = amount,
        }
    }
    pub fn is_zero(&self) -> bool {
        *self == Allocation::ZERO
    }
    /// Per-dimension sum; `None` on overflow.
    pub fn checked_add(&self, other: &Allocation) -> Option<Allocation> {
        Some(Allocation {
            steps: self.steps.checked_add(other.steps)?,
            effects: self.effects.checked_add(other.effects)?,
            signals: self.signals.checked_add(other.signals)?,
        })
    }
    /// Per-dimension difference (releasing a provisional grant); `None` on underflow.
    pub fn checked_sub(&self, other: &Allocation) -> Option<Allocation> {
        Some(Allocation {
            steps: self.steps.checked_sub(other.steps)?,
            effects: self.effects.checked_sub(other.effects)?,
            signals: self.signals.checked_sub(other.signals)?,
        })
    }
}

impl ToJson for Allocation {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("steps", &self.steps)
            .field("effects", &self.effects)
            .field("signals", &self.signals)
            .build()
    }
}
impl WriteJson for Allocation {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        w.u64("effects", self.effects).u64("signals", self.signals).u64("steps", self.steps);
        w.finish();
    }
}
impl FromJson for Allocation {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let a = Allocation {
            steps: r.required("steps")?,
            effects: r.required("effects")?,
            signals: r.required("signals")?,
        };
        r.finish()?;
        Ok(a)
    }
}

/// What a Process consumed itself. Monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usage {
    /// The step counter.
    pub committed_steps: u64,
    /// Logical Effects prepared across all Steps (stored counter; overflow is an error).
    pub prepared_effects: u64,
    /// The mailbox length.
    pub accepted_signals: u64,
    /// Deltas dropped for slow listeners (telemetry; saturates).
    pub dropped_deltas: u64,
}

impl Usage {
    /// The amount charged against `dimension`.
    pub fn used(&self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::Steps => self.committed_steps,
            Dimension::Effects => self.prepared_effects,
            Dimension::Signals => self.accepted_signals,
        }
    }
    /// Counts `n` newly prepared Effects.
    pub fn add_prepared_effects(&mut self, n: u64) -> Result<(), BudgetError> {
        self.prepared_effects = self
            .prepared_effects
            .checked_add(n)
            .ok_or(BudgetError::CounterExhausted { dimension: Dimension::Effects })?;
        Ok(())
    }
    /// Counts one dropped Delta, saturating.
    pub fn record_dropped_delta(&mut self) {
        self.dropped_deltas = self.dropped_deltas.saturating_add(1);
    }
}

impl ToJson for Usage {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("committed_steps", &self.committed_steps)
            .field("prepared_effects", &self.prepared_effects)
            .field("accepted_signals", &self.accepted_signals)
            .field("dropped_deltas", &self.dropped_deltas)
            .build()
    }
}
impl FromJson for Usage {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let usage = Usage {
            committed_steps: r.required("committed_steps")?,
            prepared_effects: r.required("prepared_effects")?,
            accepted_signals: r.required("accepted_signals")?,
            dropped_deltas: r.required("dropped_deltas")?,
        };
        r.finish()?;
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Number, Object};

    fn obj(members: &[(&str, Json)]) -> Json {
        Json::Object(members.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect::<Object>())
    }
    fn quota(max: Option<u64>) -> Json {
        obj(&[("maximum", max.map_or(Json::Null, Json::u64))])
    }
    fn usage(steps: u64, effects: u64, signals: u64) -> Usage {
        Usage {
            committed_steps: steps,
            prepared_effects: effects,
            accepted_signals: signals,
            dropped_deltas: 0,
        }
    }
    fn alloc(steps: u64, effects: u64, signals: u64) -> Allocation {
        Allocation { steps, effects, signals }
    }
    const NONE: Allocation = Allocation::ZERO;

    #[test]
    fn quota_admits_is_inclusive_and_overflow_safe() {
        assert!(Quota::Finite(10).admits(7, 3));
        assert!(!Quota::Finite(10).admits(7, 4));
        assert!(Quota::Finite(0).admits(0, 0));
        assert!(!Quota::Finite(0).admits(0, 1));
        assert!(!Quota::Finite(u64::MAX).admits(u64::MAX, 1));
        assert!(Quota::Finite(u64::MAX).admits(u64::MAX, 0));
        assert!(Quota::Unlimited.admits(u64::MAX, u64::MAX));
    }

    #[test]
    fn quota_codec() {
        assert_eq!(Quota::Unlimited.to_json(), quota(None));
        assert_eq!(Quota::Finite(0).to_json(), quota(Some(0)));
        for q in [Quota::Unlimited, Quota::Finite(0), Quota::Finite(u64::MAX)] {
            assert_eq!(Quota::from_json(&q.to_json()).unwrap(), q);
        }
        // `maximum` is required (absent ≠ unlimited), must be a u64, no other members.
        assert!(Quota::from_json(&Json::object()).is_err());
        assert!(Quota::from_json(&obj(&[("maximum", Json::str("1"))])).is_err());
        assert!(Quota::from_json(&obj(&[("maximum", Json::Number(Number::from_i64(-1)))])).is_err());
        assert!(Quota::from_json(&obj(&[("maximum", Json::Number(Number("1.0".into())))])).is_err());
        assert!(Quota::from_json(&obj(&[("maximum", Json::Number(Number("18446744073709551616".into())))]))
            .is_err());
        assert!(Quota::from_json(&obj(&[("maximum", Json::Null), ("minimum", Json::u64(0))])).is_err());
        assert!(Quota::from_json(&Json::Null).is_err());
        assert!(Quota::from_json(&Json::u64(3)).is_err());
    }

    // The transfer rule, one dimension at a time (the others unlimited on both sides).
    fn grant_steps(
        parent: Quota,
        used: u64,
        allocated: u64,
        reserved: u64,
        child: Quota,
    ) -> Result<Allocation, BudgetError> {
        let p = Budget { steps: parent, ..Budget::unlimited() };
        let c = Budget { steps: child, ..Budget::unlimited() };
        p.grant_child(&usage(used, 0, 0), &alloc(allocated, 0, 0), &alloc(reserved, 0, 0), &c)
    }

    #[test]
    fn unlimited_parent_grants_anything_without_debit() {
        assert_eq!(grant_steps(Quota::Unlimited, 5, 0, 9, Quota::Finite(u64::MAX)), Ok(NONE));
        assert_eq!(grant_steps(Quota::Unlimited, 5, 0, 9, Quota::Unlimited), Ok(NONE));
        assert_eq!(
            Budget::unlimited().grant_child(&usage(1, 2, 3), &NONE, &NONE, &Budget::finite(4, 5, 6)),
            Ok(NONE)
        );
    }

    #[test]
    fn finite_parent_cannot_grant_unlimited() {
        assert_eq!(
            grant_steps(Quota::Finite(100), 0, 0, 0, Quota::Unlimited),
            Err(BudgetError::UnlimitedFromFinite { dimension: Dimension::Steps })
        );
    }

    #[test]
    fn child_maximum_above_parent_maximum_is_rejected() {
        assert_eq!(
            grant_steps(Quota::Finite(10), 0, 0, 0, Quota::Finite(11)),
            Err(BudgetError::ExceedsParent { dimension: Dimension::Steps, child: 11, parent: 10 })
        );
    }

    #[test]
    fn exact_fit_is_accepted_and_debited() {
        assert_eq!(grant_steps(Quota::Finite(10), 3, 2, 1, Quota::Finite(4)), Ok(alloc(4, 0, 0)));
        assert_eq!(grant_steps(Quota::Finite(10), 0, 0, 0, Quota::Finite(10)), Ok(alloc(10, 0, 0)));
        // A finite zero child under a finite parent debits nothing but is still finite.
        assert_eq!(grant_steps(Quota::Finite(0), 0, 0, 0, Quota::Finite(0)), Ok(NONE));
    }

    #[test]
    fn one_over_is_rejected_in_each_term() {
        for (used, allocated, reserved) in [(4, 2, 1), (3, 3, 1), (3, 2, 2)] {
            assert_eq!(
                grant_steps(Quota::Finite(10), used, allocated, reserved, Quota::Finite(4)),
                Err(BudgetError::Exhausted {
                    dimension: Dimension::Steps,
                    requested: 4,
                    used,
                    allocated,
                    reserved,
                    maximum: 10
                })
            );
        }
    }

    #[test]
    fn overflow_never_fits() {
        let m = u64::MAX;
        assert!(matches!(
            grant_steps(Quota::Finite(m), m, 1, 0, Quota::Finite(1)),
            Err(BudgetError::Exhausted { .. })
        ));
        assert!(matches!(
            grant_steps(Quota::Finite(m), 1, 0, m, Quota::Finite(0)),
            Err(BudgetError::Exhausted { .. })
        ));
        assert!(matches!(
            grant_steps(Quota::Finite(m), 1, 0, 0, Quota::Finite(m)),
            Err(BudgetError::Exhausted { .. })
        ));
        assert_eq!(grant_steps(Quota::Finite(m), 0, 0, 0, Quota::Finite(m)), Ok(alloc(m, 0, 0)));
    }

    #[test]
    fn dimensions_are_independent_and_all_or_nothing() {
        let parent =
            Budget { steps: Quota::Unlimited, effects: Quota::Finite(10), signals: Quota::Finite(20) };
        let child = Budget { steps: Quota::Unlimited, effects: Quota::Finite(5), signals: Quota::Finite(7) };
        assert_eq!(parent.grant_child(&usage(99, 2, 3), &NONE, &alloc(0, 3, 0), &child), Ok(alloc(0, 5, 7)));
        // Signals does not fit: the whole grant fails, naming that dimension.
        let err = parent.grant_child(&usage(0, 0, 14), &NONE, &NONE, &child).unwrap_err();
        assert!(matches!(err, BudgetError::Exhausted { dimension: Dimension::Signals, .. }));
        // Effects escalates to unlimited: named.
        let bad = Budget { effects: Quota::Unlimited, ..child };
        assert_eq!(
            parent.grant_child(&Usage::default(), &NONE, &NONE, &bad),
            Err(BudgetError::UnlimitedFromFinite { dimension: Dimension::Effects })
        );
    }

    #[test]
    fn invariant_check() {
        let b = Budget { steps: Quota::Finite(10), effects: Quota::Unlimited, signals: Quota::Finite(0) };
        assert_eq!(b.check(&usage(4, 1000, 0), &alloc(6, 0, 0)), Ok(()));
        assert_eq!(
            b.check(&usage(5, 0, 0), &alloc(6, 0, 0)),
            Err(BudgetError::Overcommitted {
                dimension: Dimension::Steps,
                used: 5,
                allocated: 6,
                maximum: 10
            })
        );
        assert_eq!(
            b.check(&usage(0, 0, 0), &alloc(0, 1, 0)),
            Err(BudgetError::AllocationOnUnlimited { dimension: Dimension::Effects, allocated: 1 })
        );
        assert!(matches!(
            b.check(&usage(0, 0, 1), &NONE),
            Err(BudgetError::Overcommitted { dimension: Dimension::Signals, .. })
        ));
        let full = Budget::finite(u64::MAX, 0, 0);
        assert!(full.check(&usage(u64::MAX, 0, 0), &alloc(1, 0, 0)).is_err());
    }

    #[test]
    fn admits_counts_usage_and_allocations() {
        let b = Budget::finite(10, 5, 3);
        assert!(b.admits(Dimension::Effects, &usage(0, 2, 0), &alloc(0, 2, 0), 1));
        assert!(!b.admits(Dimension::Effects, &usage(0, 2, 0), &alloc(0, 2, 0), 2));
        assert!(!b.admits(Dimension::Steps, &usage(u64::MAX, 0, 0), &alloc(1, 0, 0), 0));
        assert!(Budget::unlimited().admits(Dimension::Signals, &usage(0, 0, u64::MAX), &NONE, u64::MAX));
    }

    #[test]
    fn grant_validity() {
        assert!(Budget::unlimited().is_valid_grant());
        assert!(Budget::finite(1, 0, 0).is_valid_grant());
        assert!(!Budget::finite(0, 9, 9).is_valid_grant());
        assert!(Budget::finite(0, 0, 0).is_zero());
        assert!(!Budget::finite(0, 0, 1).is_zero());
        assert!(!Budget::unlimited().is_zero());
    }

    #[test]
    fn usage_counters() {
        let mut u =
            Usage { prepared_effects: u64::MAX - 1, dropped_deltas: u64::MAX - 1, ..Usage::default() };
        assert_eq!(u.add_prepared_effects(1), Ok(()));
        assert_eq!(
            u.add_prepared_effects(1),
            Err(BudgetError::CounterExhausted { dimension: Dimension::Effects })
        );
        assert_eq!(u.prepared_effects, u64::MAX);
        u.record_dropped_delta();
        u.record_dropped_delta();
        assert_eq!(u.dropped_deltas, u64::MAX);
    }

    #[test]
    fn allocation_arithmetic() {
        let a = alloc(1, 2, 3);
        assert_eq!(a.checked_add(&a), Some(alloc(2, 4, 6)));
        assert_eq!(a.checked_add(&alloc(0, u64::MAX, 0)), None);
        assert_eq!(alloc(2, 4, 6).checked_sub(&a), Some(a));
        assert_eq!(a.checked_sub(&alloc(0, 3, 0)), None);
        assert!(NONE.is_zero() && !a.is_zero());
    }

    #[test]
    fn budget_allocation_usage_codecs() {
        let b = Budget { steps: Quota::Unlimited, effects: Quota::Finite(0), signals: Quota::Finite(7) };
        let json = b.to_json();
        assert_eq!(
            json,
            obj(&[("steps", quota(None)), ("effects", quota(Some(0))), ("signals", quota(Some(7)))])
        );
        assert_eq!(Budget::from_json(&json).unwrap(), b);
        assert!(Budget::from_json(&obj(&[("steps", quota(None)), ("effects", quota(None))])).is_err());
        assert!(Budget::from_json(&obj(&[
            ("steps", quota(None)),
            ("effects", quota(None)),
            ("signals", quota(None)),
            ("children", quota(None))
        ]))
        .is_err());
        assert!(Budget::from_json(&obj(&[
            ("steps", Json::Null),
            ("effects", quota(None)),
            ("signals", quota(None))
        ]))
        .is_err());

        let a = alloc(1, 0, u64::MAX);
        assert_eq!(Allocation::from_json(&a.to_json()).unwrap(), a);
        assert!(Allocation::from_json(&obj(&[("steps", Json::u64(1)), ("effects", Json::u64(0))])).is_err());

        let u = Usage { committed_steps: 1, prepared_effects: 2, accepted_signals: 3, dropped_deltas: 4 };
        let json = u.to_json();
        assert_eq!(json.get("dropped_deltas"), Some(&Json::u64(4)));
        assert_eq!(Usage::from_json(&json).unwrap(), u);
        let Json::Object(mut members) = json else { unreachable!() };
        members.insert("extra".into(), Json::u64(0));
        assert!(Usage::from_json(&Json::Object(members.clone())).is_err());
        members.remove("extra");
        members.remove("dropped_deltas");
        assert!(Usage::from_json(&Json::Object(members)).is_err());
    }
}
