//! Fault schedules: the explicit list of faults one run injects, which the minimizer shrinks.
//!
//! A world makes a numbered sequence of fault decisions ("may a fault happen here?"); an event
//! says which decision fires which fault kind. The text form, used by `minimize` output and
//! `replay --schedule`, is `AT:KIND,AT:KIND` in decision order, or `none`.

use std::fmt;
use std::str::FromStr;

/// One injected fault: at decision number `at`, fire a fault of `kind`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FaultEvent {
    /// Index of the world's fault decision, counted from 0.
    pub at: u64,
    /// Fault kind, `[a-z0-9_]+` (the key of `RunReport::faults_fired`).
    pub kind: String,
}

/// The faults of one run, in decision order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultSchedule {
    pub events: Vec<FaultEvent>,
}

/// Why a world refused a schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("unknown fault kind `{kind}` (this scenario injects: {known})")]
    UnknownKind { kind: String, known: String },
    #[error("fault at decision {at}, but this seed makes only {decisions} decisions")]
    DecisionOutOfRange { at: u64, decisions: u64 },
    #[error("fault events out of order or repeated at decision {at}")]
    NotIncreasing { at: u64 },
}

/// Why a schedule's text form did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleParseError {
    #[error("empty schedule text (write `none` for no faults)")]
    Empty,
    #[error("fault event `{0}` is not AT:KIND")]
    MissingColon(String),
    #[error("decision index `{0}` is not a non-negative integer")]
    BadDecision(String),
    #[error("fault kind `{0}` is not [a-z0-9_]+")]
    BadKind(String),
}

impl FaultSchedule {
    pub fn new(events: Vec<FaultEvent>) -> Self {
        FaultSchedule { events }
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Checks the rules every world relies on: known kinds, decisions in range, strictly
    /// increasing decision indices (one fault per decision).
    pub fn validate(&self, known_kinds: &[&str], decisions: u64) -> Result<(), ScheduleError> {
        let mut previous: Option<u64> = None;
        for event in &self.events {
            if !known_kinds.contains(&event.kind.as_str()) {
                return Err(ScheduleError::UnknownKind {
                    kind: event.kind.clone(),
                    known: known_kinds.join(", "),
                });
            }
            if event.at >= decisions {
                return Err(ScheduleError::DecisionOutOfRange {
                    at: event.at,
                    decisions,
                });
            }
            if previous.is_some_and(|p| p >= event.at) {
                return Err(ScheduleError::NotIncreasing { at: event.at });
            }
            previous = Some(event.at);
        }
        Ok(())
    }

    /// The event for decision `at`, if any.
    pub fn at(&self, at: u64) -> Option<&FaultEvent> {
        self.events.iter().find(|e| e.at == at)
    }
}

impl fmt::Display for FaultSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.events.is_empty() {
            return f.write_str("none");
        }
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", e.at, e.kind)?;
        }
        Ok(())
    }
}

impl FromStr for FaultSchedule {
    type Err = ScheduleParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ScheduleParseError::Empty);
        }
        if text == "none" {
            return Ok(FaultSchedule::default());
        }
        let mut events = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            let (at, kind) = item
                .split_once(':')
                .ok_or_else(|| ScheduleParseError::MissingColon(item.to_string()))?;
            let at = at
                .parse::<u64>()
                .map_err(|_| ScheduleParseError::BadDecision(at.to_string()))?;
            if !is_kind(kind) {
                return Err(ScheduleParseError::BadKind(kind.to_string()));
            }
            events.push(FaultEvent {
                at,
                kind: kind.to_string(),
            });
        }
        Ok(FaultSchedule { events })
    }
}

fn is_kind(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at: u64, kind: &str) -> FaultEvent {
        FaultEvent {
            at,
            kind: kind.to_string(),
        }
    }

    #[test]
    fn text_form_round_trips() {
        let s = FaultSchedule::new(vec![ev(3, "task_abort"), ev(10, "crash_2")]);
        assert_eq!(s.to_string(), "3:task_abort,10:crash_2");
        assert_eq!("3:task_abort,10:crash_2".parse::<FaultSchedule>(), Ok(s));
        assert_eq!(
            "none".parse::<FaultSchedule>(),
            Ok(FaultSchedule::default())
        );
        assert_eq!(FaultSchedule::default().to_string(), "none");
    }

    #[test]
    fn bad_text_is_a_typed_error() {
        use ScheduleParseError::*;
        assert_eq!("".parse::<FaultSchedule>(), Err(Empty));
        assert_eq!("3".parse::<FaultSchedule>(), Err(MissingColon("3".into())));
        assert_eq!("x:a".parse::<FaultSchedule>(), Err(BadDecision("x".into())));
        assert_eq!(
            "-1:a".parse::<FaultSchedule>(),
            Err(BadDecision("-1".into()))
        );
        assert_eq!("1:A".parse::<FaultSchedule>(), Err(BadKind("A".into())));
        assert_eq!("1:".parse::<FaultSchedule>(), Err(BadKind("".into())));
        assert_eq!(
            "1:a,".parse::<FaultSchedule>(),
            Err(MissingColon("".into()))
        );
    }

    #[test]
    fn validate_rejects_unknown_kinds_out_of_range_and_disorder() {
        let known = ["task_abort"];
        assert!(
            FaultSchedule::new(vec![ev(0, "task_abort"), ev(4, "task_abort")])
                .validate(&known, 5)
                .is_ok()
        );
        assert!(matches!(
            FaultSchedule::new(vec![ev(0, "crash")]).validate(&known, 5),
            Err(ScheduleError::UnknownKind { .. })
        ));
        assert_eq!(
            FaultSchedule::new(vec![ev(5, "task_abort")]).validate(&known, 5),
            Err(ScheduleError::DecisionOutOfRange {
                at: 5,
                decisions: 5
            })
        );
        assert_eq!(
            FaultSchedule::new(vec![ev(2, "task_abort"), ev(2, "task_abort")]).validate(&known, 5),
            Err(ScheduleError::NotIncreasing { at: 2 })
        );
        assert_eq!(
            FaultSchedule::new(vec![ev(3, "task_abort"), ev(1, "task_abort")]).validate(&known, 5),
            Err(ScheduleError::NotIncreasing { at: 1 })
        );
    }
}
