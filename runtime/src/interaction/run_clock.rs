//! Time budgets: a limit on a run's elapsed time, on the host's clock (the runtime's abstract
//! `keel::env::Clock`: the system clock in production, simulated time under the simulator).
//!
//! A Step never reads a clock. Time enters a run only through durable records:
//!
//! * the run's **start**: the instant the host started it, written in its start input
//!   (`started_ms`, set by `keel::agent`'s `Runtime::start`), else the instant its first
//!   settled model call was dispatched;
//! * the **readings of each model call**: a call declared under a time budget carries its
//!   deadline ([`CallTime`]); the model Dispatcher reads its clock before calling the model,
//!   settles the call as [`ModelResult::OutOfTime`](super::protocol::ModelResult::OutOfTime)
//!   without calling it when the deadline has passed, and otherwise records when it started and
//!   when it settled beside the response ([`CallClock`]).
//!
//! The run keeps these in its state ([`RunClock`]), so a restored run goes on from the same
//! start: a restore never restarts the clock. The deadline is the start plus the run's own
//! limit, tightened by the deadline a parent passes to its delegates (a delegate runs in the
//! same time as its parent, not in a share of it: delegates started together run side by side).
//! The limit is checked before each model call (by the Step against the last reading it has,
//! and by the Dispatcher against its clock) and before each tool batch (against the reading of
//! the call that asked for the tools).

use super::codes;
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::failure::Failure;

/// What a model call declared under a time budget asks of the Dispatcher: read the clock,
/// refuse to call the model at or after `deadline_ms` (when known), record the readings.
///
/// Wire form (the `time` member of a `model_call` Effect): `{"deadline_ms"?:u64}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallTime {
    /// Milliseconds since the epoch on the host's clock; `None` while the run's start is not
    /// known yet (its first call, when the host did not record it).
    pub deadline_ms: Option<u64>,
}

impl ToJson for CallTime {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().opt_field("deadline_ms", self.deadline_ms.as_ref()).build()
    }
}

impl FromJson for CallTime {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let t = CallTime { deadline_ms: r.optional("deadline_ms")? };
        r.finish()?;
        Ok(t)
    }
}

/// The Dispatcher's clock readings of one model call: when it started calling the model and
/// when the answer was complete.
///
/// Wire form (the `clock` member beside a response): `{"started_ms":u64,"settled_ms":u64}`,
/// `started_ms` ≤ `settled_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallClock {
    pub started_ms: u64,
    pub settled_ms: u64,
}

impl ToJson for CallClock {
    fn to_json(&self) -> Json {
        ObjectBuilder::new().field("settled_ms", &self.settled_ms).field("started_ms", &self.started_ms).build()
    }
}

impl FromJson for CallClock {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let c = CallClock { started_ms: r.required("started_ms")?, settled_ms: r.required("settled_ms")? };
        r.finish()?;
        if c.settled_ms < c.started_ms {
            return Err(DecodeError::invalid("a call cannot settle before it started".to_owned()));
        }
        Ok(c)
    }
}

/// A run's durable time record.
///
/// Wire form (the `clock` member of the Interaction state, omitted when empty):
/// `{"started_ms"?:u64,"granted_deadline_ms"?:u64,"seen_ms"?:u64,"last_call_ms"?:u64}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunClock {
    /// When the run started (the host's record, else its first settled call's start).
    pub started_ms: Option<u64>,
    /// The deadline a parent gave this run as its delegate.
    pub granted_deadline_ms: Option<u64>,
    /// The latest clock reading the run has seen.
    pub seen_ms: Option<u64>,
    /// When the latest settled model call started (what the time budget bounds).
    pub last_call_ms: Option<u64>,
}

impl RunClock {
    /// The record of a run started at `started_ms` (if the host recorded it) under a parent's
    /// `deadline_ms` (if any).
    pub fn start(started_ms: Option<u64>, granted_deadline_ms: Option<u64>) -> RunClock {
        RunClock { started_ms, granted_deadline_ms, seen_ms: started_ms, last_call_ms: None }
    }

    pub fn is_empty(&self) -> bool {
        *self == RunClock::default()
    }

    /// The instant the run must not start another model call or tool batch at or after: its
    /// start plus `limit_ms` (its own limit, when the start is known), tightened by a parent's
    /// deadline. `None`: no deadline (yet).
    pub fn deadline(&self, limit_ms: Option<u64>) -> Option<u64> {
        let own = self.started_ms.zip(limit_ms).map(|(s, l)| s.saturating_add(l));
        match (own, self.granted_deadline_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether calls must carry a [`CallTime`]: the run has a limit of its own or a deadline.
    pub fn applies(&self, limit_ms: Option<u64>) -> bool {
        limit_ms.is_some() || self.granted_deadline_ms.is_some()
    }

    /// Adds the readings of a settled model call.
    pub fn observe_call(&mut self, call: CallClock) {
        self.started_ms.get_or_insert(call.started_ms);
        self.last_call_ms = Some(self.last_call_ms.map_or(call.started_ms, |l| l.max(call.started_ms)));
        self.observe(call.settled_ms);
    }

    /// Adds a clock reading.
    pub fn observe(&mut self, at_ms: u64) {
        self.seen_ms = Some(self.seen_ms.map_or(at_ms, |s| s.max(at_ms)));
    }

    /// The exhaustion to fail with when the latest reading is at or past the deadline.
    pub fn exhausted(&self, limit_ms: Option<u64>) -> Option<TimeExhausted> {
        let deadline = self.deadline(limit_ms)?;
        let now = self.seen_ms?;
        (now >= deadline).then_some(self.exhaustion(limit_ms, deadline, now))
    }

    /// The exhaustion observed at `now_ms` against `deadline_ms`.
    pub fn exhaustion(&self, limit_ms: Option<u64>, deadline_ms: u64, now_ms: u64) -> TimeExhausted {
        let own = self.started_ms.zip(limit_ms).map(|(s, l)| s.saturating_add(l));
        TimeExhausted {
            limit_ms: limit_ms.filter(|_| own.is_some_and(|o| o <= deadline_ms)),
            elapsed_ms: self.started_ms.map(|s| now_ms.saturating_sub(s)),
            deadline_ms,
            now_ms,
        }
    }
}

impl ToJson for RunClock {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .opt_field("granted_deadline_ms", self.granted_deadline_ms.as_ref())
            .opt_field("last_call_ms", self.last_call_ms.as_ref())
            .opt_field("seen_ms", self.seen_ms.as_ref())
            .opt_field("started_ms", self.started_ms.as_ref())
            .build()
    }
}

impl FromJson for RunClock {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let c = RunClock {
            granted_deadline_ms: r.optional("granted_deadline_ms")?,
            last_call_ms: r.optional("last_call_ms")?,
            seen_ms: r.optional("seen_ms")?,
            started_ms: r.optional("started_ms")?,
        };
        r.finish()?;
        if c.is_empty() {
            return Err(DecodeError::invalid("an empty clock is omitted, not written".to_owned()));
        }
        Ok(c)
    }
}

/// A time budget that ran out: the failure `interaction.budget.time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeExhausted {
    /// The run's own limit, when it is what set the deadline (else a parent's deadline did).
    pub limit_ms: Option<u64>,
    /// Time since the run started, when its start is known.
    pub elapsed_ms: Option<u64>,
    pub deadline_ms: u64,
    pub now_ms: u64,
}

impl TimeExhausted {
    pub fn failure(&self, what: &str) -> Failure {
        let spent = match self.elapsed_ms {
            Some(e) => format!("{e} ms elapsed since the run started"),
            None => format!("the clock read {} ms past the deadline", self.now_ms.saturating_sub(self.deadline_ms)),
        };
        let text = match self.limit_ms {
            Some(limit) => format!(
                "budget exhausted: time limit {limit} ms, {spent}, {what} needs time left; raise the agent's Budget::time or give the run less to do"
            ),
            None => format!(
                "budget exhausted: the deadline its parent set for this delegate passed ({spent}), {what} needs time left; raise the parent's Budget::time or give the delegate less to do"
            ),
        };
        codes::failure(codes::BUDGET_TIME, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_start_plus_the_limit_tightened_by_a_parent() {
        let mut c = RunClock::start(Some(1_000), None);
        assert_eq!(c.deadline(Some(500)), Some(1_500));
        assert_eq!(c.deadline(None), None);
        assert!(c.exhausted(Some(500)).is_none());
        c.observe_call(CallClock { started_ms: 1_200, settled_ms: 1_500 });
        assert_eq!((c.started_ms, c.last_call_ms, c.seen_ms), (Some(1_000), Some(1_200), Some(1_500)));
        let e = c.exhausted(Some(500)).unwrap();
        assert_eq!((e.limit_ms, e.elapsed_ms), (Some(500), Some(500)));
        let f = e.failure("the next model call");
        assert_eq!(f.code.as_str(), "interaction.budget.time");
        assert!(f.message.as_str().contains("time limit 500 ms, 500 ms elapsed"), "{}", f.message.as_str());
        // A delegate: its parent's deadline is earlier than its own.
        let d = RunClock::start(Some(1_000), Some(1_100));
        assert_eq!(d.deadline(Some(500)), Some(1_100));
        let e = d.exhaustion(Some(500), 1_100, 1_100);
        assert_eq!(e.limit_ms, None, "the parent's deadline set it");
        assert!(e.failure("x").message.as_str().contains("its parent set"));
        // Without a recorded start, the first settled call's start is the run's start.
        let mut late = RunClock::default();
        assert_eq!(late.deadline(Some(10)), None);
        late.observe_call(CallClock { started_ms: 7, settled_ms: 9 });
        late.observe_call(CallClock { started_ms: 12, settled_ms: 13 });
        assert_eq!((late.started_ms, late.deadline(Some(10))), (Some(7), Some(17)));
    }

    #[test]
    fn wire_forms_round_trip_and_refuse_empty_or_backwards() {
        let c = RunClock { started_ms: Some(1), granted_deadline_ms: None, seen_ms: Some(3), last_call_ms: Some(2) };
        assert_eq!(c.to_json().to_canonical_string(), r#"{"last_call_ms":2,"seen_ms":3,"started_ms":1}"#);
        assert_eq!(RunClock::from_json(&c.to_json()).unwrap(), c);
        assert!(RunClock::from_json(&crate::json::parse(b"{}").unwrap()).is_err());
        let call = CallClock { started_ms: 5, settled_ms: 9 };
        assert_eq!(CallClock::from_json(&call.to_json()).unwrap(), call);
        assert!(CallClock::from_json(&crate::json::parse(br#"{"started_ms":9,"settled_ms":5}"#).unwrap()).is_err());
        let t = CallTime { deadline_ms: Some(4) };
        assert_eq!(CallTime::from_json(&t.to_json()).unwrap(), t);
    }
}
