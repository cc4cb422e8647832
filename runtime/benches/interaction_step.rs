//! The cost of one committed Interaction step against one plain serde_json encode+decode of
//! the same parent state, at working contexts of 10, 1,000 and 10,000 messages of ~200 bytes.
//!
//! Prints `step_ratio_1000_over_10 = X`, `step_ratio_10000_over_10 = X` (median step time at
//! N over the same at 10) and `step_over_serde_10 = X` (step over serde round trip at 10). A
//! context the runtime refuses (each message is bounded by one payload, the context by
//! `max_context_bytes`, 64 MiB by default) prints `refused` instead of a ratio.
//!
//! Run: `cargo bench -p keel-runtime --bench interaction_step` (release profile; no bench crate).
//!
//! Method. For each N, K fresh interactions are started through the real owner (Owner +
//! DirectRunner + MemoryCommitter, the real ModelDispatcher over a client that answers with a
//! final text). Starting commits the initial cut and queues the one model dispatch; the bench
//! takes that dispatch and runs it itself (untimed: it is the model's cost, not the step's).
//! Only `DirectRunner::complete(effect, outcome)` is timed: feeding the settlement makes the
//! owner step the parent (step → snapshot → restore → prepare/finalize) and commit the tree
//! cut through the MemoryCommitter (as a delta: the parent's record, which names its segments
//! by count and last record digest, and the segment record the step appended; the records of
//! older segments travel as key and digest), returning after the commit acknowledgement. The
//! reported figure is the median of the K samples.
//!
//! Baseline: the parent's committed state just before that step (decoded from the last
//! committed cut, so exactly what the step restores: kind, payload and the segments holding
//! the messages, in its canonical JSON value form with the segments inline) as a
//! `serde_json::Value`, timed through
//! `serde_json::to_vec` + `serde_json::from_slice::<serde_json::Value>`, median of K' repeats.

use keel::chat::{FinishReason, Message, Request, Response, Usage};
use keel::env::{BoxFuture, Timestamp};
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::model::{DispatcherConfig, ModelCallContext, ModelClient, ModelDispatcher, ModelError};
use keel::interaction::protocol::InteractionInput;
use keel::interaction::wire::Wire;
use keel::json::{Digest, Payload};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::{Committer, MemoryCommitter};
use keel::kernel::direct::DirectRunner;
use keel::kernel::ids::{IncarnationId, ProcessId};
use keel::kernel::owner::{Owner, Publication, RootConfig};
use keel::kernel::resource::Budget;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::tree_limits::TreeLimits;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Committed-step samples per N (each a fresh interaction).
const STEP_REPEATS: usize = 31;
/// serde_json round trips per N.
const SERDE_REPEATS: usize = 201;
const CONTEXTS: [usize; 3] = [10, 1_000, 10_000];

/// Always answers with the same final text.
struct FinalAnswer;

impl ModelClient for FinalAnswer {
    fn call<'a>(&'a self, _: &'a ModelCallContext, _: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let response = Response::new(Message::assistant("done"), FinishReason::Stop, Usage::new(1, 1));
        Box::pin(async move { Ok(response) })
    }
}

struct Setup {
    parent: Deployment,
    resolver: Arc<DeploymentSet>,
}

fn setup() -> Setup {
    let config = DefinitionConfig {
        name: "bench.interaction".into(),
        description: "The interaction under benchmark.".into(),
        max_model_calls: 8,
        ..DefinitionConfig::default()
    };
    let definition = Definition::new(config).expect("definition");
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), DispatcherConfig::complete(Arc::new(FinalAnswer)))
        .expect("dispatcher");
    let parent = Deployment::new(
        Arc::new(definition),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"bench.interaction.config"),
    );
    let resolver = Arc::new(DeploymentSet::new().with(parent.clone()));
    Setup { parent, resolver }
}

/// N alternating user/assistant text messages of ~200 bytes, ending with a user message;
/// `Err` when the runtime refuses a context that large.
fn input(n: usize) -> Result<Payload, String> {
    let messages = (0..n)
        .map(|i| {
            let text = format!("message {i:05}: {}", "lorem ipsum dolor sit amet ".repeat(6));
            if (n - i) % 2 == 1 { Message::user(text) } else { Message::assistant(text) }
        })
        .collect();
    InteractionInput::new(messages).to_payload().map_err(|e| e.to_string())
}

fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000).expect("timestamp")
}

/// One fresh interaction: the timed settlement-to-commit segment and the state it restored.
fn one_step(setup: &Setup, input: &Payload) -> (Duration, String) {
    let owner = Owner::start(
        setup.resolver.clone(),
        setup.parent.clone(),
        input.clone(),
        ProcessId::root_from_hex(&format!("{:032x}", 1)).expect("root id"),
        IncarnationId::from_hex(&format!("{:032x}", 100)).expect("incarnation"),
        RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
        now(),
    )
    .expect("start");
    let committer = Arc::new(MemoryCommitter::new());
    let mut runner = DirectRunner::new(owner, committer as Arc<dyn Committer>, now());
    let before = runner.commits.len();
    let state = {
        let (_, ok) = runner.commits.last().expect("the start committed");
        assert!(ok, "the start commit was acknowledged");
        let last = runner.acknowledged_cuts().pop().expect("a whole cut");
        let snapshot = TreeSnapshot::from_cut(&last).expect("cut decodes");
        let mut text = String::new();
        snapshot.root().committed_state.write_canonical(&mut text);
        text
    };
    let mut dispatches = runner.take_dispatches();
    assert_eq!(dispatches.len(), 1, "one model dispatch");
    let (effect, outcome) = dispatches.remove(0).run(1);
    assert!(outcome.is_ok(), "the model dispatch settled");

    let started = Instant::now();
    runner.complete(effect, outcome);
    let elapsed = started.elapsed();

    let new: Vec<bool> = runner.commits[before..].iter().map(|(_, ok)| *ok).collect();
    assert!(!new.is_empty() && new.iter().all(|ok| *ok), "the step committed: {new:?}");
    assert!(
        runner.published.iter().any(|p| matches!(p, Publication::Finished { .. })),
        "the interaction finished on that step"
    );
    (elapsed, state)
}

fn serde_round_trip(value: &serde_json::Value) -> Duration {
    let started = Instant::now();
    let bytes = serde_json::to_vec(black_box(value)).expect("encode");
    let back: serde_json::Value = serde_json::from_slice(black_box(&bytes)).expect("decode");
    let elapsed = started.elapsed();
    black_box(back);
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once as a smoke test.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (step_repeats, serde_repeats) = if quick { (1, 1) } else { (STEP_REPEATS, SERDE_REPEATS) };
    let setup = setup();
    println!("{:>6} {:>12} {:>10} {:>12} {:>12}", "N", "state bytes", "step µs", "serde µs", "step/serde");
    let mut steps_at: Vec<Option<f64>> = Vec::new();
    let mut serde_at_10 = f64::NAN;
    for n in CONTEXTS {
        let input = match input(n) {
            Ok(i) => i,
            Err(e) => {
                println!("{n:>6} refused: {e}");
                steps_at.push(None);
                continue;
            }
        };
        let mut steps = Vec::with_capacity(step_repeats);
        let mut state = String::new();
        for _ in 0..step_repeats {
            let (elapsed, s) = one_step(&setup, &input);
            steps.push(elapsed);
            state = s;
        }
        let value: serde_json::Value = serde_json::from_str(&state).expect("state is JSON");
        let serde: Vec<Duration> = (0..serde_repeats).map(|_| serde_round_trip(&value)).collect();
        let (step, serde) = (micros(median(steps)), micros(median(serde)));
        println!("{n:>6} {:>12} {step:>10.1} {serde:>12.1} {:>12.1}", state.len(), step / serde);
        if n == CONTEXTS[0] {
            serde_at_10 = serde;
        }
        steps_at.push(Some(step));
    }
    let ratio = |i: usize| match (steps_at[i], steps_at[0]) {
        (Some(a), Some(b)) => format!("{:.2}", a / b),
        _ => "refused".to_owned(),
    };
    println!("step_ratio_1000_over_10 = {}", ratio(1));
    println!("step_ratio_10000_over_10 = {}", ratio(2));
    match steps_at[0] {
        Some(step) => println!("step_over_serde_10 = {:.2}", step / serde_at_10),
        None => println!("step_over_serde_10 = refused"),
    }
}
