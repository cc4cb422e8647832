//! A run's timeline: what happened, on which Process, at which simulated moment, kept as
//! structured events so `replay --html FILE` can draw it (see [`html`]).
//!
//! A world records into a [`Recorder`] next to its trace lines; the events carry the abstract
//! clock's time (milliseconds since the run began) and their order, never wall time, so one
//! seed always draws the same page. Recording never changes what a run does: the recorder is
//! only written to, and only kept when a caller asked for the trace (`RunOptions::keep_trace`).

pub mod html;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel::env::Clock;

use crate::limits::MAX_TIMELINE_EVENTS;

/// The lane of the host (engine starts, restores, deliveries, Unknown decisions).
pub const HOST_LANE: &str = "host";
/// The lane of the store (commits as ticks; crashes, lost acknowledgements and failed commits).
pub const STORE_LANE: &str = "store";

/// What a span covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SpanKind {
    /// One physical model call.
    Model,
    /// One physical tool call.
    Tool,
    /// A tool paused for input, until the host's answer is delivered.
    Wait,
    /// A steer, from its delivery until the model call that applies it.
    Steer,
    /// An Effect whose outcome is Unknown, until a host settles it.
    Unknown,
}

impl SpanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Model => "model",
            SpanKind::Tool => "tool",
            SpanKind::Wait => "wait",
            SpanKind::Steer => "steer",
            SpanKind::Unknown => "unknown",
        }
    }
}

/// A point event drawn as a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MarkKind {
    /// A writer's commit was acknowledged and then the writer crashed.
    Crash,
    /// A commit reached the store but its acknowledgement was lost.
    LostAck,
    /// A commit failed before reaching the store.
    FailBefore,
    /// An engine started the tree.
    Start,
    /// A new engine restored the tree from the store's head.
    Restore,
    /// A writer stopped (after a commit fault).
    Stop,
    /// A host delivered a signal (steer, input answer, ...).
    Deliver,
    /// An Unknown was settled by the host.
    Settle,
    /// The root finished.
    Finish,
    /// An invariant broke here.
    Violation,
}

impl MarkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MarkKind::Crash => "crash",
            MarkKind::LostAck => "lost-ack",
            MarkKind::FailBefore => "fail-before",
            MarkKind::Start => "start",
            MarkKind::Restore => "restore",
            MarkKind::Stop => "stop",
            MarkKind::Deliver => "deliver",
            MarkKind::Settle => "settle",
            MarkKind::Finish => "finish",
            MarkKind::Violation => "violation",
        }
    }
}

/// What one event is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A span opens; `span` names it until its [`EventKind::End`].
    Begin { span: String, kind: SpanKind },
    /// The span `span` closes with `outcome` (`ok`, `error`, `unknown`, `settled`, ...).
    End { span: String, outcome: String },
    /// A commit of a cut at `boundary`, acknowledged or not.
    Commit { boundary: String, acknowledged: bool },
    Mark(MarkKind),
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Milliseconds of simulated time since the run began.
    pub at_ms: u64,
    /// The lane key (a Process id, [`HOST_LANE`] or [`STORE_LANE`]).
    pub lane: String,
    pub kind: EventKind,
    /// Human text for the page (the trace line's words).
    pub label: String,
}

/// Everything one run recorded, in the order it happened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    pub events: Vec<Event>,
    /// Lane key → display name (`root`, `tool c1 · search`, ...); keys not named show as such.
    pub lane_names: BTreeMap<String, String>,
    /// Events not kept because the run recorded more than [`MAX_TIMELINE_EVENTS`].
    pub dropped: u64,
}

impl Timeline {
    /// Lanes in drawing order: host, store, then Processes by first appearance.
    pub fn lanes(&self) -> Vec<String> {
        let mut lanes = vec![HOST_LANE.to_owned(), STORE_LANE.to_owned()];
        for e in &self.events {
            if !lanes.contains(&e.lane) {
                lanes.push(e.lane.clone());
            }
        }
        lanes
    }

    /// The display name of a lane.
    pub fn lane_name<'a>(&'a self, lane: &'a str) -> &'a str {
        self.lane_names.get(lane).map_or(lane, String::as_str)
    }
}

struct State {
    timeline: Timeline,
    /// Open span → its lane (an End names only the span).
    open: BTreeMap<String, String>,
}

/// Shared by every part of one run that records events.
pub struct Recorder {
    clock: Arc<dyn Clock>,
    start_ms: u64,
    keep: bool,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recorder {
    /// A recorder timing events on `clock` from now; `keep == false` records nothing.
    pub fn new(clock: Arc<dyn Clock>, keep: bool) -> Arc<Recorder> {
        let start_ms = clock.now().as_millis();
        Arc::new(Recorder {
            clock,
            start_ms,
            keep,
            state: Mutex::new(State { timeline: Timeline::default(), open: BTreeMap::new() }),
        })
    }

    fn push(&self, state: &mut State, lane: String, kind: EventKind, label: String) {
        if state.timeline.events.len() >= MAX_TIMELINE_EVENTS {
            state.timeline.dropped += 1;
            return;
        }
        let at_ms = self.clock.now().as_millis().saturating_sub(self.start_ms);
        state.timeline.events.push(Event { at_ms, lane, kind, label });
    }

    /// Whether events are kept (callers skip building labels when not).
    pub fn keeps(&self) -> bool {
        self.keep
    }

    /// Names a lane (the first name given wins).
    pub fn name_lane(&self, lane: &str, name: &str) {
        if !self.keep {
            return;
        }
        lock(&self.state).timeline.lane_names.entry(lane.to_owned()).or_insert_with(|| name.to_owned());
    }

    /// Opens span `span` on `lane`; a span already open under that name stays as it is.
    pub fn begin(&self, lane: &str, span: &str, kind: SpanKind, label: impl Into<String>) {
        if !self.keep {
            return;
        }
        let mut state = lock(&self.state);
        if state.open.contains_key(span) {
            return;
        }
        state.open.insert(span.to_owned(), lane.to_owned());
        self.push(&mut state, lane.to_owned(), EventKind::Begin { span: span.to_owned(), kind }, label.into());
    }

    /// Whether span `span` is open.
    pub fn is_open(&self, span: &str) -> bool {
        self.keep && lock(&self.state).open.contains_key(span)
    }

    /// Closes span `span` (on the lane it opened on); nothing if it is not open.
    pub fn end(&self, span: &str, outcome: &str, label: impl Into<String>) {
        if !self.keep {
            return;
        }
        let mut state = lock(&self.state);
        let Some(lane) = state.open.remove(span) else { return };
        self.push(&mut state, lane, EventKind::End { span: span.to_owned(), outcome: outcome.to_owned() }, label.into());
    }

    /// A commit tick on the store lane.
    pub fn commit(&self, boundary: &str, acknowledged: bool, label: impl Into<String>) {
        if !self.keep {
            return;
        }
        let kind = EventKind::Commit { boundary: boundary.to_owned(), acknowledged };
        self.push(&mut lock(&self.state), STORE_LANE.to_owned(), kind, label.into());
    }

    /// A mark on `lane`.
    pub fn mark(&self, lane: &str, kind: MarkKind, label: impl Into<String>) {
        if !self.keep {
            return;
        }
        self.push(&mut lock(&self.state), lane.to_owned(), EventKind::Mark(kind), label.into());
    }

    /// The recorded timeline (`None` if nothing was kept).
    pub fn finish(&self) -> Option<Timeline> {
        self.keep.then(|| lock(&self.state).timeline.clone())
    }
}
