//! Engine tests on a hand-rolled single-threaded executor: every task runs on the test thread
//! in a fixed order, and a test whose awaited future can make no progress fails at once
//! ("stalled") instead of hanging.

use super::*;
use crate::env::CancelToken;
use crate::env::{BoxFuture, Clock, Executor, JoinError, SeededRng, TaskControl, TaskHandle, Timestamp};
use crate::json::Json;
use crate::kernel::binding::DeploymentSet;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{
    CheckpointKind, CommitCallKind, CommitRecordKind, EffectBoundaryKind, Fault, FaultyCommitter,
    MemoryCommitter,
};
use crate::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::{EffectPhase, Settlement};
use crate::kernel::event::{names, Event, EventPhase};
use crate::kernel::ids::{SignalId, WaitId};
use crate::kernel::resource::Budget;
use crate::kernel::signal::{SettlementStatus, SignalRequest};
use crate::kernel::status::{Cause, Status};
use crate::kernel::testkit::{script_deployment, script_input, FnDispatcher, Op};
use crate::kernel::tree_limits::TreeLimits;
use futures::task::{waker, waker_ref, ArcWake};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

#[cfg(feature = "mutations")]
mod mutations;

// ---------------------------------------------------------------------------------------------
// A deterministic single-threaded executor.

#[derive(Default)]
struct Queue {
    ready: Mutex<VecDeque<Arc<Task>>>,
}

struct Task {
    future: Mutex<Option<BoxFuture<'static, ()>>>,
    queue: Arc<Queue>,
    queued: AtomicBool,
    finished: AtomicBool,
}

impl ArcWake for Task {
    fn wake_by_ref(task: &Arc<Self>) {
        if !task.queued.swap(true, Ordering::SeqCst) {
            task.queue.ready.lock().unwrap().push_back(task.clone());
        }
    }
}

struct Control(Arc<Task>);

impl TaskControl for Control {
    fn abort(&self) {
        self.0.future.lock().unwrap().take();
        self.0.finished.store(true, Ordering::SeqCst);
    }
    fn is_finished(&self) -> bool {
        self.0.finished.load(Ordering::SeqCst)
    }
    fn join(self: Box<Self>) -> BoxFuture<'static, Result<(), JoinError>> {
        // The driver never joins its tasks; this executor only needs to say whether it ended.
        let done = self.0.finished.load(Ordering::SeqCst);
        Box::pin(async move {
            if done {
                Ok(())
            } else {
                Err(JoinError::Aborted)
            }
        })
    }
}

#[derive(Clone, Default)]
struct Sim {
    queue: Arc<Queue>,
    tasks: Arc<Mutex<Vec<Arc<Task>>>>,
}

impl Executor for Sim {
    fn spawn(&self, future: BoxFuture<'static, ()>) -> TaskHandle {
        let task = Arc::new(Task {
            future: Mutex::new(Some(future)),
            queue: self.queue.clone(),
            queued: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        });
        ArcWake::wake_by_ref(&task);
        self.tasks.lock().unwrap().push(task.clone());
        TaskHandle::new(Box::new(Control(task)))
    }
}

struct MainWake(AtomicBool);
impl ArcWake for MainWake {
    fn wake_by_ref(w: &Arc<Self>) {
        w.0.store(true, Ordering::SeqCst);
    }
}

impl Sim {
    /// Runs tasks until `f` is ready or nothing can run.
    fn run_until_stalled<F: Future>(&self, mut f: Pin<&mut F>) -> Poll<F::Output> {
        let main = Arc::new(MainWake(AtomicBool::new(true)));
        let main_waker = waker(main.clone());
        let mut cx = Context::from_waker(&main_waker);
        for _ in 0..1_000_000 {
            if main.0.swap(false, Ordering::SeqCst) {
                if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                    return Poll::Ready(v);
                }
            }
            let next = self.queue.ready.lock().unwrap().pop_front();
            let Some(task) = next else {
                if main.0.load(Ordering::SeqCst) {
                    continue;
                }
                return Poll::Pending;
            };
            task.queued.store(false, Ordering::SeqCst);
            let task_waker = waker_ref(&task);
            let mut tcx = Context::from_waker(&task_waker);
            let mut slot = task.future.lock().unwrap();
            if let Some(fut) = slot.as_mut() {
                match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut tcx))) {
                    Ok(Poll::Pending) => {}
                    Ok(Poll::Ready(())) | Err(_) => {
                        *slot = None;
                        task.finished.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
        panic!("step limit reached: a task keeps waking itself");
    }

    /// Drops every task's future, as a runtime shutting down does.
    fn shutdown(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        for t in tasks {
            let future = t.future.lock().unwrap().take();
            drop(future);
            t.finished.store(true, Ordering::SeqCst);
        }
    }

    /// Runs every task until none can run (the tree parks, finishes, or waits on a gate).
    fn settle(&self) {
        assert!(self
            .run_until_stalled(pin!(futures::future::pending::<()>()))
            .is_pending());
    }

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        match self.run_until_stalled(pin!(f)) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("stalled: the awaited future is pending and no task can run"),
        }
    }
}

/// Advances 1 ms per reading so timestamps are distinct and ordered.
struct StepClock(AtomicU64);
impl Clock for StepClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000 + self.0.fetch_add(1, Ordering::SeqCst)).unwrap()
    }
    fn sleep(&self, _: std::time::Duration) -> BoxFuture<'static, ()> {
        Box::pin(futures::future::ready(()))
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures.

#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);
impl EventListener for Recorder {
    fn on_event(&self, e: &Event) {
        self.0.lock().unwrap().push(e.clone());
    }
}
impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

struct Panicking;
impl EventListener for Panicking {
    fn on_event(&self, _: &Event) {
        panic!("listener bug");
    }
}

type Memory = Arc<MemoryCommitter>;

struct World {
    sim: Sim,
    memory: Memory,
    committer: Arc<FaultyCommitter<Memory>>,
    deployment: Deployment,
    resolver: Arc<DeploymentSet>,
    calls: Arc<AtomicU64>,
    attempts: Arc<Mutex<Vec<Option<crate::kernel::ids::AttemptId>>>>,
    events: Arc<Recorder>,
}

fn settlement(v: &str) -> Settlement {
    Settlement {
        status: SettlementStatus::Succeeded,
        payload: Payload::from_json(Json::str(v)).unwrap(),
    }
}

type Behavior = Arc<dyn Fn(u64) -> Result<Settlement, DispatchError> + Send + Sync>;

fn world(behavior: Behavior) -> World {
    let calls = Arc::new(AtomicU64::new(0));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let (c, a) = (calls.clone(), attempts.clone());
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::new(Arc::new(
        move |r: &EffectRequest, _: &DispatchContext| {
            a.lock().unwrap().push(r.attempt_id.clone());
            behavior(c.fetch_add(1, Ordering::SeqCst) + 1)
        },
    )));
    with_dispatcher(dispatcher, calls, attempts)
}

fn with_dispatcher(
    dispatcher: Arc<dyn Dispatcher>,
    calls: Arc<AtomicU64>,
    attempts: Arc<Mutex<Vec<Option<crate::kernel::ids::AttemptId>>>>,
) -> World {
    let deployment = script_deployment("keel.test.engine", Some(dispatcher), vec![]);
    let resolver = Arc::new(DeploymentSet::new().with(deployment.clone()));
    let memory: Memory = Arc::new(MemoryCommitter::new());
    World {
        sim: Sim::default(),
        committer: Arc::new(FaultyCommitter::new(memory.clone())),
        memory,
        deployment,
        resolver,
        calls,
        attempts,
        events: Arc::new(Recorder::default()),
    }
}

fn echo_world() -> World {
    world(Arc::new(|n| Ok(settlement(&format!("answer-{n}")))))
}

impl World {
    fn engine_with(&self, seed: u64, listeners: Vec<Arc<dyn EventListener>>) -> Engine {
        let env = Env::new(
            Arc::new(StepClock(AtomicU64::new(0))),
            Arc::new(self.sim.clone()),
            Arc::new(SeededRng::new(seed)),
        );
        Engine::new(EngineConfig {
            env,
            committer: self.committer.clone(),
            resolver: self.resolver.clone(),
            root: RootConfig {
                budget: Budget::unlimited(),
                capabilities: CapabilitySet::empty(),
                limits: TreeLimits::default(),
            },
            listeners,
        })
    }
    fn engine(&self) -> Engine {
        self.engine_with(1, vec![self.events.clone()])
    }
    fn boundaries(&self, root: &ProcessId) -> Vec<&'static str> {
        self.memory
            .history(root)
            .iter()
            .map(|r| match &r.kind {
                CommitRecordKind::Checkpoint(k) => k.as_str(),
                CommitRecordKind::Effect { kind, .. } => kind.as_str(),
                CommitRecordKind::Activation { .. } => "activation",
            })
            .collect()
    }
    fn dispatches(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
    fn fail_on(&self, kind: CommitCallKind) {
        self.committer.set_fault_plan(Box::new(move |call| {
            if call.kind == kind {
                Fault::FailBefore
            } else {
                Fault::Pass
            }
        }));
    }
}

fn fails_settled(call: &CommitCallKind) -> bool {
    matches!(
        call,
        CommitCallKind::Effect {
            kind: EffectBoundaryKind::Settled,
            ..
        }
    )
}

fn dispatch(v: &str) -> Op {
    Op::Dispatch(Json::str(v))
}

fn answer(wait: &WaitId, id: &str, v: &str) -> SignalRequest {
    SignalRequest::new(
        SignalId::external(id).unwrap(),
        Some(wait.clone()),
        Payload::from_json(Json::str(v)).unwrap(),
    )
    .unwrap()
}

fn output(r: &ProcessResult) -> String {
    r.output
        .as_ref()
        .expect("completed output")
        .value()
        .to_canonical_string()
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn engine_futures_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let w = echo_world();
    let e = w.engine();
    is_send(&e.start(w.deployment.clone(), script_input(&[])));
    is_send(&e.run(w.deployment.clone(), script_input(&[])));
    let root = ProcessId::root_from_hex(&"1".repeat(32)).unwrap();
    is_send(&e.capture_tree(&root));
    is_send(&e.load_and_restore(w.deployment.clone(), &root));
}

#[test]
fn run_completes_after_one_dispatcher_effect() {
    let w = echo_world();
    let engine = w.engine();
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[dispatch("hello")])))
        .unwrap();
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(
        output(&result),
        r#"[{"payload":"answer-1","status":"succeeded"}]"#
    );
    assert_eq!(w.dispatches(), 1);
    assert_eq!(
        w.boundaries(&result.process_id),
        ["start", "pending", "settled", "terminal"]
    );
    let attempts = w.attempts.lock().unwrap().clone();
    assert_eq!(attempts.len(), 1);
    assert!(
        attempts[0]
            .as_ref()
            .is_some_and(|a| a.as_str().starts_with("attempt:")),
        "the driver mints the attempt id"
    );
    // The handle stays readable and the head is the terminal cut.
    let handle = engine.lookup(&result.process_id).expect("published");
    assert!(handle.relation().is_root());
    assert_eq!(w.sim.block_on(handle.await_result()).unwrap(), result);
    let head = engine.inspect_head(&result.process_id).expect("head");
    assert_eq!(head.root().status, Status::Completed);
}

#[test]
fn start_returns_only_after_the_start_checkpoint_is_acknowledged() {
    let w = echo_world();
    let (release, held) = futures::channel::oneshot::channel();
    let held = Mutex::new(Some(held));
    w.committer.set_fault_plan(Box::new(move |call| {
        match (call.index, held.lock().unwrap().take()) {
            (0, Some(h)) => Fault::Hold(h),
            _ => Fault::Pass,
        }
    }));
    let engine = w.engine();
    let mut start = pin!(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])));
    assert!(
        w.sim.run_until_stalled(start.as_mut()).is_pending(),
        "start waits for its checkpoint"
    );
    assert!(w.memory.roots().is_empty(), "nothing committed yet");
    assert!(
        w.events.events().is_empty(),
        "nothing published before the commit"
    );
    release.send(()).unwrap();
    let handle = match w.sim.run_until_stalled(start.as_mut()) {
        Poll::Ready(h) => h.unwrap(),
        Poll::Pending => panic!("start did not finish after the release"),
    };
    assert!(engine.lookup(handle.id()).is_some());
    assert_eq!(w.boundaries(handle.id())[0], "start");
}

#[test]
fn a_start_whose_commit_fails_publishes_nothing_and_returns_the_commit_error() {
    let w = echo_world();
    w.fail_on(CommitCallKind::Checkpoint(CheckpointKind::Start));
    let engine = w.engine();
    let err = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Commit(CommitError::Injected { .. })),
        "{err:?}"
    );
    assert!(w.events.events().is_empty(), "no event, not even runtime.stopped");
    assert!(w.memory.roots().is_empty());
    assert_eq!(w.dispatches(), 0);
}

#[test]
fn start_rejects_invalid_input_before_committing() {
    let w = echo_world();
    let engine = w.engine();
    let not_an_array = Payload::from_json(Json::str("x")).unwrap();
    let err = w
        .sim
        .block_on(engine.start(w.deployment.clone(), not_an_array))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Start(StartError::InvalidInput(_))),
        "{err:?}"
    );
    assert!(w.memory.roots().is_empty());
}

#[test]
fn a_waiting_process_is_answered_through_its_handle() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("approval".into())])))
        .unwrap();
    let root = handle.id().clone();
    // Start returns at the start checkpoint; the Wait parks the root shortly after.
    assert_eq!(engine.inspect_head(&root).unwrap().root().status, Status::Running);
    w.sim.settle();
    let head = engine.inspect_head(&root).expect("acknowledged head");
    assert_eq!(head.root().status, Status::Waiting);
    let wait = head.root().current_wait_id.clone().expect("current wait");
    // Capture of an unchanged tree returns the same acknowledged head.
    let captured = w.sim.block_on(engine.capture_tree(&root)).unwrap();
    assert_eq!(captured.digest(), head.digest());
    let accepted = w
        .sim
        .block_on(handle.deliver_signals(vec![answer(&wait, "signal:a1", "yes")]))
        .unwrap();
    assert!(accepted);
    let result = w.sim.block_on(handle.await_result()).unwrap();
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output(&result), r#"[{"payload":"yes"}]"#);
    w.sim.block_on(handle.join()).unwrap();
    // Unknown roots are typed errors.
    let other = ProcessId::root_from_hex(&"f".repeat(32)).unwrap();
    assert!(matches!(
        w.sim.block_on(engine.capture_tree(&other)),
        Err(EngineError::NotFound(_))
    ));
    assert!(engine.lookup(&other).is_none());
}

#[test]
fn a_rejected_signal_is_a_typed_command_error() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    let unaddressed = SignalRequest::new(
        SignalId::external("signal:u").unwrap(),
        None,
        Payload::from_json(Json::str("x")).unwrap(),
    )
    .unwrap();
    let err = w
        .sim
        .block_on(handle.deliver_signals(vec![unaddressed]))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Command(CommandError::Signal(_))),
        "{err:?}"
    );
}

/// A dispatcher whose attempts finish only when the test opens the gate.
struct Gated {
    gate: CancelToken,
    calls: Arc<AtomicU64>,
}
impl Dispatcher for Gated {
    fn policy(&self, _: &Payload) -> DispatchPolicy {
        DispatchPolicy::never()
    }
    fn dispatch<'a>(
        &'a self,
        r: EffectRequest,
        _: DispatchContext,
    ) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let gate = self.gate.clone();
        Box::pin(async move {
            gate.cancelled().await;
            Ok(Settlement {
                status: SettlementStatus::Succeeded,
                payload: r.payload,
            })
        })
    }
}

#[test]
fn commands_are_served_while_a_dispatch_is_in_flight() {
    let gate = CancelToken::new();
    let calls = Arc::new(AtomicU64::new(0));
    let w = with_dispatcher(
        Arc::new(Gated {
            gate: gate.clone(),
            calls: calls.clone(),
        }),
        calls,
        Default::default(),
    );
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("slow")])))
        .unwrap();
    let mut result = pin!(handle.await_result());
    assert!(w.sim.run_until_stalled(result.as_mut()).is_pending());
    assert_eq!(w.dispatches(), 1, "the attempt is running");
    // Capture is answered while the attempt runs: the pending boundary is the head.
    let captured = w.sim.block_on(engine.capture_tree(handle.id())).unwrap();
    assert_eq!(
        captured.root().prepared.as_ref().unwrap().effects[0].phase,
        EffectPhase::Pending
    );
    gate.cancel();
    let Poll::Ready(result) = w.sim.run_until_stalled(result.as_mut()) else {
        panic!("not finished")
    };
    assert_eq!(
        output(&result.unwrap()),
        r#"[{"payload":"slow","status":"succeeded"}]"#
    );
}

#[test]
fn events_carry_per_process_sequences_from_one_in_publication_order() {
    let w = echo_world();
    let engine = w.engine();
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[dispatch("a")])))
        .unwrap();
    let events = w.events.events();
    assert!(!events.is_empty());
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.process_sequence, i as u64 + 1, "consecutive from 1: {}", e.name);
        assert_eq!(e.process_id, result.process_id);
        assert!(e.tree_incarnation_id.is_some());
    }
    assert_eq!(events.first().unwrap().name, names::PROCESS_STARTED);
    assert_eq!(events.last().unwrap().name, names::PROCESS_FINISHED);
    let started = events
        .iter()
        .find(|e| e.name == names::EFFECT_STARTED)
        .expect("effect.started");
    assert_eq!(started.phase, EventPhase::Attempt);
    assert!(
        started.effect_id.is_some() && started.step_sequence.is_some(),
        "effect scope"
    );
    assert!(events.windows(2).all(|p| p[0].occurred_at <= p[1].occurred_at));
}

#[test]
fn listener_panics_are_counted_and_never_alter_execution() {
    let w = echo_world();
    let engine = w.engine_with(1, vec![Arc::new(Panicking), w.events.clone()]);
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[dispatch("a")])))
        .unwrap();
    assert_eq!(result.status(), Status::Completed);
    let seen = w.events.events().len() as u64;
    assert!(seen > 0);
    let failures = engine.observation_failures();
    assert_eq!(
        failures.event_listener_panics, seen,
        "one contained panic per event"
    );
    assert!(failures
        .last_event_listener_diagnostic
        .unwrap()
        .contains("listener bug"));
}

#[test]
fn a_dispatcher_panic_becomes_an_unknown_the_host_resolves() {
    let w = world(Arc::new(|_| panic!("tool exploded")));
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap();
    let mut result = pin!(handle.await_result());
    assert!(
        w.sim.run_until_stalled(result.as_mut()).is_pending(),
        "parked on the unknown"
    );
    let head = engine.inspect_head(handle.id()).unwrap();
    let prepared = head.root().prepared.clone().expect("batch retained");
    assert_eq!(prepared.effects[0].phase, EffectPhase::Unknown);
    assert_eq!(
        prepared.effects[0].diagnostic.as_ref().unwrap().code.as_str(),
        "engine.dispatch.panicked"
    );
    let effect = prepared.unknown_ids()[0].clone();
    w.sim
        .block_on(handle.resolve_unknown_effect(effect, settlement("by host")))
        .unwrap();
    let Poll::Ready(result) = w.sim.run_until_stalled(result.as_mut()) else {
        panic!("not finished")
    };
    assert_eq!(
        output(&result.unwrap()),
        r#"[{"payload":"by host","status":"succeeded"}]"#
    );
    assert_eq!(w.dispatches(), 1);
}

#[test]
fn a_commit_failure_stops_the_tree_and_every_waiter_gets_the_runtime_error() {
    let w = echo_world();
    w.committer.set_fault_plan(Box::new(|call| {
        if fails_settled(&call.kind) {
            Fault::FailBefore
        } else {
            Fault::Pass
        }
    }));
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap();
    let err = w.sim.block_on(handle.await_result()).unwrap_err();
    assert_eq!(&err.root_id, handle.id());
    assert_eq!(
        err.unresolved_effect_ids.len(),
        1,
        "the effect whose settled commit failed"
    );
    assert!(err.cause.contains("fail-before"), "{}", err.cause);
    let head = engine.inspect_head(handle.id()).unwrap();
    assert_eq!(
        err.head_digest,
        Some(head.digest()),
        "the last head acknowledged to this instance"
    );
    assert_eq!(w.sim.block_on(handle.join()), Err(err.clone()));
    assert_eq!(engine.runtime_error(handle.id()), Some(err.clone()));
    let last = w.events.events().last().cloned().unwrap();
    assert_eq!(last.name, names::RUNTIME_STOPPED);
    // Commands after the stop are refused with the same error.
    let kill = w.sim.block_on(handle.kill("late")).unwrap_err();
    assert!(
        matches!(&kill, EngineError::Command(CommandError::Stopped(Some(e))) if **e == err),
        "{kill:?}"
    );
    assert!(matches!(
        w.sim.block_on(engine.capture_tree(handle.id())),
        Err(EngineError::Command(CommandError::Stopped(_)))
    ));
    assert!(matches!(
        w.sim
            .block_on(engine.run(w.deployment.clone(), script_input(&[dispatch("y")]))),
        Err(EngineError::Stopped(_))
    ));
}

#[test]
fn load_and_restore_continues_from_the_head_without_redispatch() {
    let w = echo_world();
    w.committer.set_fault_plan(Box::new(|call| {
        if fails_settled(&call.kind) {
            Fault::FailBefore
        } else {
            Fault::Pass
        }
    }));
    let first = w.engine();
    let old = w
        .sim
        .block_on(first.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap();
    let root = old.id().clone();
    assert!(w.sim.block_on(old.await_result()).is_err());
    w.committer.clear_fault_plan();
    // A new engine (a new host) restores the authoritative head.
    let second = w.engine_with(2, vec![]);
    let handle = w
        .sim
        .block_on(second.load_and_restore(w.deployment.clone(), &root))
        .unwrap();
    assert_eq!(handle.id(), &root);
    w.sim.settle();
    let head = second.inspect_head(&root).unwrap();
    assert_ne!(
        Some(&head.incarnation),
        w.memory.history(&root).first().map(|r| &r.incarnation)
    );
    let prepared = head.root().prepared.clone().unwrap();
    assert_eq!(
        prepared.effects[0].phase,
        EffectPhase::Unknown,
        "a restored pending attempt (replay never) is unknown"
    );
    w.sim
        .block_on(handle.resolve_unknown_effect(prepared.effects[0].id.clone(), settlement("reconciled")))
        .unwrap();
    let result = w.sim.block_on(handle.await_result()).unwrap();
    assert_eq!(
        output(&result),
        r#"[{"payload":"reconciled","status":"succeeded"}]"#
    );
    assert_eq!(w.dispatches(), 1, "never dispatched twice");
    assert_eq!(
        w.boundaries(&root),
        [
            "start",
            "pending",
            "activation",
            "settled",
            "resolved",
            "terminal"
        ]
    );
    // The dead instance still reports its RuntimeError.
    assert!(w.sim.block_on(old.await_result()).is_err());
    // Loading an unknown root is NotFound.
    let other = ProcessId::root_from_hex(&"e".repeat(32)).unwrap();
    assert!(matches!(
        w.sim
            .block_on(second.load_and_restore(w.deployment.clone(), &other)),
        Err(EngineError::NotFound(_))
    ));
}

/// A restore that takes the records a stopped writer's head holds (instead of parsing them
/// again) restores exactly the strict decoding of the stored head: with the store's head equal
/// to that writer's last head (`FailBefore`: every record reused) and one commit ahead of it
/// (`LoseAck`: the changed record parsed, the rest reused).
#[test]
fn a_restore_reusing_the_stopped_writers_head_equals_the_decoding_of_the_stored_head() {
    for fault in ["fail-before", "lose-ack"] {
        let w = echo_world();
        w.committer.set_fault_plan(Box::new(move |call| match fails_settled(&call.kind) {
            true if fault == "fail-before" => Fault::FailBefore,
            true => Fault::LoseAck,
            false => Fault::Pass,
        }));
        let first = w.engine();
        let old = w.sim.block_on(first.start(w.deployment.clone(), script_input(&[dispatch("x")]))).unwrap();
        let root = old.id().clone();
        assert!(w.sim.block_on(old.await_result()).is_err());
        w.committer.clear_fault_plan();
        let known = first.inspect_head(&root).expect("the stopped writer's last head");
        let stored = TreeSnapshot::from_cut(&w.memory.head(&root).unwrap().cut).unwrap();
        assert_eq!(stored.digest() == known.digest(), fault == "fail-before", "{fault}: the store's head");
        let second = w.engine_with(2, vec![]);
        w.sim.block_on(second.load_and_restore_reusing(w.deployment.clone(), &root, Some(&known))).unwrap();
        let restored = second.inspect_head(&root).expect("the activation head");
        // The activation changes only the writer: the records are the stored head's.
        let activation = TreeSnapshot::from_cut(&w.memory.head(&root).unwrap().cut).unwrap();
        assert_eq!(activation.digest(), restored.digest(), "{fault}: the activation is the store's head");
        assert_eq!(restored.processes(), stored.processes(), "{fault}: restored records equal the stored head's decoding");
        assert_eq!(restored.processes(), activation.processes(), "{fault}");
        assert_eq!(restored.residues(), stored.residues(), "{fault}");
        let reused = restored.processes().iter().filter(|p| known.processes().iter().any(|k| std::sync::Arc::ptr_eq(k, p))).count();
        if fault == "fail-before" {
            assert_eq!(reused, restored.processes().len(), "every record was taken from the known head");
        }
    }
}

#[test]
fn of_two_concurrent_restores_exactly_one_wins() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    let root = handle.id().clone();
    w.sim.settle();
    let (a, b) = (w.engine_with(2, vec![]), w.engine_with(3, vec![]));
    let (ra, rb) = w.sim.block_on(futures::future::join(
        a.load_and_restore(w.deployment.clone(), &root),
        b.load_and_restore(w.deployment.clone(), &root),
    ));
    let loser = match (ra, rb) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
        other => panic!("exactly one restore must win: {other:?}"),
    };
    assert!(
        matches!(
            loser,
            EngineError::Commit(CommitError::TreeIncarnationConflict { .. })
        ),
        "{loser:?}"
    );
    // The original writer is fenced: its next commit fails and its waiters get the error.
    let wait = engine
        .inspect_head(&root)
        .unwrap()
        .root()
        .current_wait_id
        .clone()
        .unwrap();
    let refused = w
        .sim
        .block_on(handle.deliver_signals(vec![answer(&wait, "signal:a", "late")]))
        .unwrap_err();
    assert!(
        matches!(refused, EngineError::Command(CommandError::Stopped(_))),
        "{refused:?}"
    );
    let err = w.sim.block_on(handle.await_result()).unwrap_err();
    assert!(err.cause.contains("incarnation"), "{}", err.cause);
}

#[test]
fn restoring_a_live_tree_in_the_same_engine_is_refused() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    w.sim.settle();
    let snapshot = (*engine.inspect_head(handle.id()).unwrap()).clone();
    let err = w
        .sim
        .block_on(engine.restore(w.deployment.clone(), snapshot))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::TreeActive(ref r) if r == handle.id()),
        "{err:?}"
    );
    assert_eq!(
        w.boundaries(handle.id()),
        ["start", "parked"],
        "nothing was activated"
    );
}

#[test]
fn restore_with_another_root_deployment_is_refused() {
    let w = echo_world();
    let engine = w.engine();
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[])))
        .unwrap();
    let snapshot = (*engine.inspect_head(&result.process_id).unwrap()).clone();
    let other = script_deployment("keel.test.other", None, vec![]);
    let err = w
        .sim
        .block_on(w.engine_with(5, vec![]).restore(other, snapshot))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::Restore(RestoreError::RootMismatch)),
        "{err:?}"
    );
}

#[test]
fn a_restored_finished_tree_publishes_its_results_immediately() {
    let w = echo_world();
    let engine = w.engine();
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[dispatch("a")])))
        .unwrap();
    let second = w.engine_with(9, vec![]);
    let handle = w
        .sim
        .block_on(second.load_and_restore(w.deployment.clone(), &result.process_id))
        .unwrap();
    assert_eq!(w.sim.block_on(handle.await_result()).unwrap(), result);
    w.sim.block_on(handle.join()).unwrap();
    assert_eq!(w.dispatches(), 1);
}

#[test]
fn join_waits_for_children_and_children_are_lookup_able() {
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::new(Arc::new(move |_, _| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(settlement("child-work"))
    })));
    let child = script_deployment("keel.test.child", Some(dispatcher), vec![]);
    let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
    let mut w = echo_world();
    w.resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
    let engine = w.engine();
    let ops = [Op::Child {
        deployment: child.reference().clone(),
        script: vec![dispatch("c")],
        key: "worker".into(),
        budget: Budget::finite(5, 2, 5),
    }];
    let handle = w.sim.block_on(engine.start(parent, script_input(&ops))).unwrap();
    w.sim.block_on(handle.join()).unwrap();
    let result = w.sim.block_on(handle.await_result()).unwrap();
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let head = engine.inspect_head(handle.id()).unwrap();
    let kid = head
        .processes()
        .iter()
        .find(|p| !p.relation.is_root())
        .expect("child in the head")
        .id
        .clone();
    let kid = engine.lookup(&kid).expect("children are published");
    assert_eq!(kid.relation().parent_id.as_ref(), Some(handle.id()));
    assert_eq!(kid.budget(), &Budget::finite(5, 2, 5));
    assert_eq!(
        w.sim.block_on(kid.await_result()).unwrap().status(),
        Status::Completed
    );
    // Events of the child have their own sequence.
    let child_events: Vec<u64> = w
        .events
        .events()
        .iter()
        .filter(|e| &e.process_id == kid.id())
        .map(|e| e.process_sequence)
        .collect();
    assert_eq!(child_events, (1..=child_events.len() as u64).collect::<Vec<_>>());
}

#[test]
fn kill_terminates_a_waiting_process() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    w.sim.block_on(handle.kill("operator")).unwrap();
    let result = w.sim.block_on(handle.await_result()).unwrap();
    assert_eq!(result.termination.cause, Cause::EngineKill);
    w.sim.block_on(handle.join()).unwrap();
}

#[test]
fn cancellation_terminates_a_waiting_process() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    w.sim
        .block_on(handle.request_cancellation("no longer needed"))
        .unwrap();
    let result = w.sim.block_on(handle.await_result()).unwrap();
    assert_eq!(result.termination.cause, Cause::HostCancellation);
}

#[test]
fn a_finished_tree_answers_commands_from_the_registry_and_can_be_released() {
    let w = echo_world();
    let engine = w.engine();
    let result = w
        .sim
        .block_on(engine.run(w.deployment.clone(), script_input(&[])))
        .unwrap();
    let root = result.process_id.clone();
    let handle = engine.lookup(&root).unwrap();
    let err = w.sim.block_on(handle.kill("late")).unwrap_err();
    assert!(
        matches!(err, EngineError::Command(CommandError::ProcessFinished(ref p)) if *p == root),
        "{err:?}"
    );
    let captured = w.sim.block_on(engine.capture_tree(&root)).unwrap();
    assert_eq!(
        Some(captured.digest()),
        engine.inspect_head(&root).map(|h| h.digest())
    );
    assert_eq!(captured.root().status, Status::Completed);
    w.sim.block_on(engine.release_tree(&root)).unwrap();
    assert!(engine.lookup(&root).is_none());
    assert!(engine.inspect_head(&root).is_none());
    assert_eq!(
        w.sim.block_on(handle.await_result()).unwrap(),
        result,
        "old handles stay readable"
    );
}

#[test]
fn an_executor_shutdown_stops_the_tree_instead_of_hanging_waiters() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    w.sim.shutdown();
    let err = w.sim.block_on(handle.await_result()).unwrap_err();
    assert!(err.cause.contains("owner task ended"), "{}", err.cause);
    assert_eq!(
        err.incarnation,
        engine.inspect_head(handle.id()).unwrap().incarnation
    );
    let refused = w.sim.block_on(handle.kill("after shutdown")).unwrap_err();
    assert!(
        matches!(refused, EngineError::Command(CommandError::Stopped(Some(_)))),
        "{refused:?}"
    );
}

#[test]
fn an_owner_task_whose_intake_closes_stops_the_tree() {
    let w = echo_world();
    let engine = w.engine();
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[Op::Wait("k".into())])))
        .unwrap();
    let tree = engine.tree_of(handle.id()).unwrap();
    tree.sender().expect("live").close_channel();
    assert!(w.sim.block_on(handle.await_result()).is_err());
    assert!(tree.is_exited());
    assert!(tree.sender().is_none());
}

#[test]
fn the_same_engine_can_restore_a_tree_whose_writer_stopped() {
    let w = echo_world();
    w.committer.set_fault_plan(Box::new(|call| {
        if fails_settled(&call.kind) {
            Fault::FailBefore
        } else {
            Fault::Pass
        }
    }));
    let engine = w.engine();
    let old = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap();
    let root = old.id().clone();
    assert!(w.sim.block_on(old.await_result()).is_err());
    w.committer.clear_fault_plan();
    let handle = w
        .sim
        .block_on(engine.load_and_restore(w.deployment.clone(), &root))
        .unwrap();
    w.sim.settle();
    assert!(
        engine.runtime_error(&root).is_none(),
        "lookup now reaches the new activation"
    );
    let effect = engine
        .inspect_head(&root)
        .unwrap()
        .root()
        .prepared
        .as_ref()
        .unwrap()
        .unknown_ids()[0]
        .clone();
    let fresh = engine.lookup(&root).expect("published again");
    w.sim
        .block_on(fresh.resolve_unknown_effect(effect, settlement("ok")))
        .unwrap();
    assert_eq!(
        w.sim.block_on(handle.await_result()).unwrap().status(),
        Status::Completed
    );
    assert!(
        w.sim.block_on(old.await_result()).is_err(),
        "the old activation's handle keeps its error"
    );
}

/// A committer that panics on effect boundaries (a backend bug).
struct PanickingCommitter(Memory);
impl Committer for PanickingCommitter {
    fn commit_checkpoint(
        &self,
        c: &crate::kernel::commit::Checkpoint,
    ) -> BoxFuture<'_, Result<(), CommitError>> {
        self.0.commit_checkpoint(c)
    }
    fn commit_effect(
        &self,
        _: &crate::kernel::commit::EffectBoundary,
    ) -> BoxFuture<'_, Result<(), CommitError>> {
        panic!("backend bug")
    }
    fn activate_tree(&self, a: &crate::kernel::commit::Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.0.activate_tree(a)
    }
    fn load_tree(
        &self,
        root: &ProcessId,
    ) -> BoxFuture<'_, Result<Option<crate::kernel::commit::Head>, CommitError>> {
        self.0.load_tree(root)
    }
}

#[test]
fn a_committer_panic_is_a_storage_failure_that_stops_the_tree() {
    let w = echo_world();
    let env = Env::new(
        Arc::new(StepClock(AtomicU64::new(0))),
        Arc::new(w.sim.clone()),
        Arc::new(SeededRng::new(4)),
    );
    let engine = Engine::new(EngineConfig {
        env,
        committer: Arc::new(PanickingCommitter(w.memory.clone())),
        resolver: w.resolver.clone(),
        root: RootConfig {
            budget: Budget::unlimited(),
            capabilities: CapabilitySet::empty(),
            limits: TreeLimits::default(),
        },
        listeners: vec![],
    });
    let handle = w
        .sim
        .block_on(engine.start(w.deployment.clone(), script_input(&[dispatch("x")])))
        .unwrap();
    let err = w.sim.block_on(handle.await_result()).unwrap_err();
    assert!(err.cause.contains("backend bug"), "{}", err.cause);
    assert!(
        err.unresolved_effect_ids.is_empty(),
        "a failed pending commit adds nothing: {err:?}"
    );
    assert_eq!(
        w.dispatches(),
        0,
        "nothing dispatched without an acknowledged pending boundary"
    );
}
