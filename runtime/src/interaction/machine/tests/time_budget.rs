//! Time budgets through the real owner: the deadline travels with each model call, the
//! Dispatcher refuses a call past it without calling the model, a tool batch does not start
//! once the last reading passed it, the start recorded in the input survives a restore, and
//! a call under a time budget without a clock is a host failure saying so.

use super::*;
use crate::env::Clock;
use crate::interaction::budget::{Budget as RunBudget, BudgetConfig};
use crate::interaction::codes;
use crate::interaction::protocol::{ModelCallEffect, ToolCallSettlement};
use crate::kernel::owner::{Command, Reply};
use crate::kernel::status::Status;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const T0: u64 = 1_700_000_000_000;

/// A clock that moves `step` ms forward at every reading (each reading is a model call's
/// start or end: the calls take time, the tests' tools take none).
struct Stepping {
    now: AtomicU64,
    step: u64,
}

impl Clock for Stepping {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.now.fetch_add(self.step, Ordering::SeqCst)).unwrap()
    }
    fn sleep(&self, _: Duration) -> BoxFuture<'static, ()> {
        Box::pin(futures::future::ready(()))
    }
}

pub(super) fn timed(responses: Vec<Response>, limit_ms: u64, step: u64) -> Harness {
    let clock: Arc<dyn Clock> = Arc::new(Stepping { now: AtomicU64::new(T0), step });
    harness_full(
        tool_set(),
        responses,
        move |c| c.budget = BudgetConfig { budget: RunBudget::new().time(Duration::from_millis(limit_ms)), ..Default::default() },
        |_| {},
        move |m| DispatcherConfig::complete(m).with_clock(clock),
    )
}

fn weather() -> Response {
    calls_response(vec![call("c1", "weather", "{}")])
}

/// Performs the dispatches (at most `limit`), returning the `model_call` Effects among them.
fn drive(r: &mut DirectRunner, limit: usize) -> Vec<ModelCallEffect> {
    let mut declared = Vec::new();
    let mut performed = 0;
    while performed < limit {
        let Some(d) = r.take_dispatches().into_iter().next() else { break };
        if let Ok(e) = ModelCallEffect::from_payload(&d.request.payload) {
            declared.push(e);
        }
        performed += 1;
        let (effect, outcome) = d.run(performed as u64);
        r.complete(effect, outcome);
        // Any other queued dispatch goes back to the runner's order on the next take.
    }
    declared
}

fn run(h: &Harness) -> (ProcessResult, Vec<ModelCallEffect>) {
    let mut r = h.start("go");
    let declared = drive(&mut r, usize::MAX);
    h.check(&r);
    (root_result(&r).expect("the root finished"), declared)
}

#[test]
fn the_dispatcher_refuses_a_call_past_the_deadline_without_calling_the_model() {
    // Readings: call 1 starts at T0 and ends at T0+60; call 2 would start at T0+120, past
    // the deadline T0+100 (the run's start is its first call's start).
    let h = timed(vec![weather(), answer("never")], 100, 60);
    let (result, declared) = run(&h);
    assert_eq!(result.status(), Status::Failed);
    let f = failure_of(&result);
    assert!(f.is(codes::BUDGET_TIME), "{f:?}");
    assert!(f.message.as_str().contains("time limit 100 ms, 120 ms elapsed"), "{}", f.message.as_str());
    assert_eq!(h.model.calls(), 1, "the second call never reached the model");
    assert_eq!(declared.len(), 2);
    assert_eq!(declared[0].time.map(|t| t.deadline_ms), Some(None), "the start is not known before the first call");
    assert_eq!(declared[1].time.map(|t| t.deadline_ms), Some(Some(T0 + 100)));
    let clock = h.parent_state().clock;
    assert_eq!((clock.started_ms, clock.last_call_ms), (Some(T0), Some(T0)));
}

#[test]
fn no_tool_batch_starts_once_the_last_reading_passed_the_deadline() {
    // Call 1 starts at T0 (the start) and ends at T0+150, past the deadline T0+100: its tool
    // calls never start.
    let h = timed(vec![weather(), answer("never")], 100, 150);
    let (result, _) = run(&h);
    let f = failure_of(&result);
    assert!(f.is(codes::BUDGET_TIME), "{f:?}");
    assert!(f.message.as_str().contains("the next tool call"), "{}", f.message.as_str());
    assert_eq!(h.head().processes().len(), 1, "no tool child exists");
}

#[test]
fn a_run_within_its_time_completes_and_a_run_without_one_reads_no_clock() {
    let h = timed(vec![weather(), answer("done")], 1_000, 10);
    let (result, declared) = run(&h);
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(declared.len(), 2);
    assert!(declared.iter().all(|e| e.time.is_some()));
    // Without a time budget the calls carry no time member and nothing reads a clock.
    let plain = harness(vec![weather(), answer("done")], |_| {});
    let (result, declared) = run(&plain);
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(declared.len(), 2);
    assert!(declared.iter().all(|e| e.time.is_none()));
    assert!(plain.parent_state().clock.is_empty());
}

#[test]
fn the_recorded_start_survives_a_restore() {
    // The host started the run at T0 - 900 ms (recorded in the input): with a 1 s limit the
    // deadline is T0 + 100. The first call (T0 .. T0+60) fits; the process stops while its
    // tool runs; after the restore the second call is declared (the last reading, T0+60, is
    // before the deadline) and the Dispatcher reads T0+120.
    let h = timed(vec![weather(), answer("never")], 1_000, 60);
    let input = InteractionInput::new(vec![Message::user("go")]).started_at(T0 - 900).to_payload().unwrap();
    let mut first = h.start_input(input).unwrap();
    let declared = drive(&mut first, 1);
    assert_eq!(declared[0].time.map(|t| t.deadline_ms), Some(Some(T0 + 100)), "known from the first call");
    drop(first);
    // The tool call was in flight: after the restore it is Unknown until the host settles it.
    let mut second = h.restore(200);
    second.run_to_idle();
    let unknown = unknowns(&h.head());
    assert_eq!(unknown.len(), 1);
    let (process, effect) = unknown[0].clone();
    let settled = ToolCallSettlement::Result(SettledToolResult::new(crate::chat::ToolResult::ok("c1", "weather", crate::chat::ToolOutput::text("sunny")), false));
    let reply = second.command(Command::Resolve { process, effect, settlement: settled.to_settlement().unwrap() });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    second.run_to_idle();
    let result = root_result(&second).expect("finished");
    let f = failure_of(&result);
    assert!(f.is(codes::BUDGET_TIME), "{f:?}");
    assert!(f.message.as_str().contains("1020 ms elapsed"), "counted from the recorded start: {}", f.message.as_str());
    assert_eq!(h.model.calls(), 1);
    assert_eq!(h.parent_state().clock.started_ms, Some(T0 - 900));
}

#[test]
fn a_time_budget_without_a_clock_is_a_host_failure_that_says_what_to_do() {
    let h = harness(vec![answer("done")], |c| {
        c.budget = BudgetConfig { budget: RunBudget::new().time(Duration::from_secs(1)), ..Default::default() }
    });
    let (result, _) = run(&h);
    let f = failure_of(&result);
    assert!(f.is(codes::HOST_FAILED), "{f:?}");
    assert!(f.message.as_str().contains("no clock"), "{}", f.message.as_str());
    assert_eq!(h.model.calls(), 0);
}
