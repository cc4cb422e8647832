//! The cost of a tool loop as it ages: the real Interaction on the real `Engine` over
//! `TokioEnv`, a scripted model that asks for one tool call per round and answers with final
//! text after R rounds, one trivial tool, R = 20 and 200, on the MemoryCommitter and on the
//! FileCommitter (a fresh directory under the system temp dir, fsync'd appends).
//!
//! Run: `cargo bench -p keel-runtime --bench tool_round` (release profile; no bench crate).
//!
//! Printed (MemoryCommitter; the same lines prefixed `file_` for the FileCommitter):
//! * `round_ratio_200_over_20`: wall time per round at R=200 over the same at R=20 (1 means a
//!   round costs the same however old the loop is);
//! * `bytes_per_round_200`: cut bytes committed per round at R=200 (every commit's cut);
//! * `cut_ratio_200_over_20`: final cut size at R=200 over R=20;
//! * `ms_per_round_200`: wall milliseconds per round at R=200 (what a peer is compared to).
//!
//! * `commits_per_round_200`: durable commits per round at R=200 (each one `fsync` on the
//!   FileCommitter; a chain of boundaries is one commit).
//!
//! Comment lines (`#`) also break the final cut down by kind of record (context segments,
//! retired-child residues, live Processes, envelope): what makes `cut_ratio` grow with R;
//! and count commits and the boundaries they carry per round.
//!
//! Each (store, R) figure is the median of a few runs; both R run in the same process, one
//! after the other per repeat, so drift hits both alike.

use keel::chat::{FinishReason, Message, Request, Response, Role, ToolCall, ToolOutput, Usage};
use keel::env::{BoxFuture, Env, SeededRng, TokioEnv};
use keel::interaction::config::DefinitionConfig;
use keel::interaction::definition::Definition;
use keel::interaction::model::{DispatcherConfig, ModelCallContext, ModelClient, ModelDispatcher, ModelError};
use keel::interaction::protocol::InteractionInput;
use keel::interaction::toolset::{ToolSet, ToolSetConfig};
use keel::interaction::wire::Wire;
use keel::json::{Digest, Json};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::{Activation, Checkpoint, CommitError, CommitRequest, Committer, EffectBoundary, FileCommitter, Head, MemoryCommitter};
use keel::kernel::engine::{Engine, EngineConfig};
use keel::kernel::ids::ProcessId;
use keel::kernel::owner::RootConfig;
use keel::kernel::resource::Budget;
use keel::kernel::tree_limits::TreeLimits;
use keel::tool::{Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: [u64; 2] = [20, 200];
const REPEATS: usize = 3;

/// Asks for one `echo` call per round until `rounds` tool results are in the context.
struct Scripted {
    rounds: u64,
}

impl ModelClient for Scripted {
    fn call<'a>(&'a self, _: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        let done = request.messages.iter().filter(|m| m.role == Role::Tool).count() as u64;
        let response = if done < self.rounds {
            let call = ToolCall::new(format!("call-{done}"), "echo", format!(r#"{{"q":"round {done}"}}"#));
            Response::new(Message::assistant_with_calls("", vec![call]), FinishReason::ToolCalls, Usage::new(1, 1))
        } else {
            Response::new(Message::assistant(format!("done after {done} rounds")), FinishReason::Stop, Usage::new(1, 1))
        };
        Box::pin(async move { Ok(response) })
    }
}

/// Answers with its argument.
struct Echo;

impl Tool for Echo {
    fn spec(&self) -> ToolDefinitionInput {
        ToolDefinitionInput {
            name: "echo".into(),
            description: "Echoes its argument.".into(),
            input_schema: keel::json::parse(br#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#)
                .unwrap_or_else(|_| Json::object()),
        }
    }
    fn call<'a>(&'a self, invocation: &'a Invocation, _: ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let q = invocation.arguments_json().get("q").and_then(Json::as_str).unwrap_or_default().to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("echo: {q}"))) })
    }
}

/// Counts the bytes every commit it forwards carries (a delta: only its changed records).
struct Counting<C> {
    inner: C,
    bytes: AtomicU64,
    /// Commit calls (each one `fsync` on the FileCommitter; a chain is one).
    commits: AtomicU64,
    /// Boundaries (checkpoints, Effect boundaries, activations) those commits carried.
    boundaries: AtomicU64,
}

impl<C> Counting<C> {
    fn count(&self, bytes: u64, boundaries: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.boundaries.fetch_add(boundaries, Ordering::Relaxed);
    }
}

impl<C: Committer> Committer for Counting<C> {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.count(c.cut.carried_bytes(), 1);
        self.inner.commit_checkpoint(c)
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.count(b.cut.carried_bytes(), 1);
        self.inner.commit_effect(b)
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.count(a.cut.carried_bytes(), 1);
        self.inner.activate_tree(a)
    }
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        self.count(chain.iter().map(|r| r.cut().carried_bytes()).sum(), chain.len() as u64);
        self.inner.commit_chain(chain)
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.inner.load_tree(root)
    }
}

fn deployments(rounds: u64) -> (Deployment, Arc<DeploymentSet>) {
    let toolset = ToolSet::new(ToolSetConfig {
        name: "bench.tools".into(),
        description: "Runs one echo call.".into(),
        tools: vec![Arc::new(Echo)],
        deferred_tools: vec![],
        observer: None,
        implementation_digest: Digest::of(b"bench.tools.impl"),
        configuration_digest: Digest::of(b"bench.tools.config"),
    })
    .expect("tool set");
    let tools = toolset.deployment().clone();
    let config = DefinitionConfig {
        name: "bench.tool_round".into(),
        description: "The tool loop under benchmark.".into(),
        max_model_calls: u32::try_from(rounds + 1).expect("rounds fit"),
        tools: Some(toolset),
        tool_budget: Some(Budget::unlimited()),
        max_concurrent_tool_calls: 1,
        ..DefinitionConfig::default()
    };
    let definition = Definition::new(config).expect("definition");
    let dispatcher = ModelDispatcher::new(definition.model_manifest(), DispatcherConfig::complete(Arc::new(Scripted { rounds })))
        .expect("dispatcher");
    let parent = Deployment::new(
        Arc::new(definition),
        Some(Arc::new(dispatcher)),
        Digest::of(b"keel.interaction"),
        Digest::of(b"bench.tool_round.config"),
    );
    let resolver = Arc::new(DeploymentSet::new().with(parent.clone()).with(tools));
    (parent, resolver)
}

struct Sample {
    elapsed: Duration,
    committed_bytes: u64,
    commits: u64,
    boundaries: u64,
    final_cut: u64,
    parts: CutParts,
}

/// What the final cut holds, by kind of record: the explanation of `cut_ratio`.
#[derive(Default)]
struct CutParts {
    /// Context segment records (the conversation), count and bytes.
    segments: (u64, u64),
    /// Retired-child residue records (one per finished tool child), count and bytes.
    residues: (u64, u64),
    /// Live Process records (the root, and any child not retired), count and bytes.
    processes: (u64, u64),
    /// The envelope and the separators between records.
    envelope: u64,
}

impl CutParts {
    fn of(cut: &keel::kernel::commit::TreeCut) -> CutParts {
        let mut parts = CutParts { envelope: cut.envelope().len() as u64, ..CutParts::default() };
        parts.envelope += cut.entries().len().saturating_sub(1) as u64;
        for entry in cut.entries() {
            let len = entry.bytes().map_or(0, |b| b.len() as u64);
            let is_residue = || {
                entry.bytes().and_then(|b| keel::json::parse(b).ok()).is_some_and(|v| v.get("retired") == Some(&Json::Bool(true)))
            };
            let slot = if entry.key().starts_with("segment:") {
                &mut parts.segments
            } else if is_residue() {
                &mut parts.residues
            } else {
                &mut parts.processes
            };
            slot.0 += 1;
            slot.1 += len;
        }
        parts
    }

    fn describe(&self) -> String {
        format!(
            "{} segment records {} B, {} residue records {} B, {} Process records {} B, envelope {} B",
            self.segments.0, self.segments.1, self.residues.0, self.residues.1, self.processes.0, self.processes.1, self.envelope
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    Memory,
    File,
}

fn one_run(store: Store, rounds: u64, run: u64) -> Sample {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("tokio runtime");
    let dir = std::env::temp_dir().join(format!("keel-tool-round-{}-{rounds}-{run}", std::process::id()));
    let sample = rt.block_on(async {
        let tokio_env = Arc::new(TokioEnv::current().expect("tokio env"));
        let env = Env::new(tokio_env.clone(), tokio_env, Arc::new(SeededRng::new(run)));
        let (parent, resolver) = deployments(rounds);
        let inner: Arc<dyn Committer> = match store {
            Store::Memory => Arc::new(MemoryCommitter::new()),
            Store::File => {
                let _ = std::fs::remove_dir_all(&dir);
                Arc::new(FileCommitter::open(&dir).expect("file committer"))
            }
        };
        let counting =
            Arc::new(Counting { inner, bytes: AtomicU64::new(0), commits: AtomicU64::new(0), boundaries: AtomicU64::new(0) });
        let engine = Engine::new(EngineConfig {
            env,
            committer: counting.clone(),
            resolver,
            root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            listeners: vec![],
        });
        let input = InteractionInput::new(vec![Message::user("run the loop")]).to_payload().expect("input");
        let started = Instant::now();
        let handle = engine.start(parent, input).await.expect("start");
        let result = handle.await_result().await.expect("the loop finished");
        let elapsed = started.elapsed();
        assert!(result.output.is_some(), "the loop completed: {:?}", result.termination);
        let head = counting.load_tree(handle.id()).await.expect("load").expect("a head");
        Sample {
            elapsed,
            committed_bytes: counting.bytes.load(Ordering::Relaxed),
            commits: counting.commits.load(Ordering::Relaxed),
            boundaries: counting.boundaries.load(Ordering::Relaxed),
            final_cut: head.cut.whole_len().unwrap_or(0),
            parts: CutParts::of(&head.cut),
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    sample
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by_key(|s| s.elapsed);
    let mid = v.len() / 2;
    v.swap_remove(mid)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once as a smoke test.
    let quick = !std::env::args().any(|a| a == "--bench");
    // `TOOL_ROUND_PROFILE=R:N` runs only the MemoryCommitter loop of R rounds, N times (a
    // profiler's workload: compare two R under `perf record`), and prints its time per round;
    // `R:N:file` runs the FileCommitter loop instead.
    if let Some((r, n, store)) = std::env::var("TOOL_ROUND_PROFILE").ok().and_then(|v| {
        let mut parts = v.split(':');
        let r = parts.next()?.parse::<u64>().ok()?;
        let n = parts.next()?.parse::<u64>().ok()?;
        let store = if parts.next() == Some("file") { Store::File } else { Store::Memory };
        Some((r, n, store))
    }) {
        let started = Instant::now();
        for run in 0..n {
            one_run(store, r, run);
        }
        println!("# profile R={r} x{n}: {:.3} ms/round", started.elapsed().as_secs_f64() * 1e3 / (r * n.max(1)) as f64);
        return;
    }
    let repeats = if quick { 1 } else { REPEATS };
    for store in [Store::Memory, Store::File] {
        let prefix = if store == Store::File { "file_" } else { "" };
        let mut samples: Vec<Vec<Sample>> = ROUNDS.iter().map(|_| Vec::new()).collect();
        for run in 0..repeats {
            for (i, r) in ROUNDS.iter().enumerate() {
                samples[i].push(one_run(store, *r, run as u64));
            }
        }
        let [small, large]: [Sample; 2] = samples.into_iter().map(median).collect::<Vec<_>>().try_into().ok().expect("two sizes");
        let per_round = |s: &Sample, r: u64| s.elapsed.as_secs_f64() / r as f64;
        let (r0, r1) = (ROUNDS[0], ROUNDS[1]);
        println!(
            "# {} R={r0}: {:.3} ms/round, {} B/round, final cut {} B; R={r1}: {:.3} ms/round, {} B/round, final cut {} B",
            if store == Store::File { "FileCommitter" } else { "MemoryCommitter" },
            per_round(&small, r0) * 1e3,
            small.committed_bytes / r0,
            small.final_cut,
            per_round(&large, r1) * 1e3,
            large.committed_bytes / r1,
            large.final_cut,
        );
        for (s, r) in [(&small, r0), (&large, r1)] {
            println!("# final cut R={r}: {}", s.parts.describe());
            println!(
                "# commits R={r}: {:.2} per round, carrying {:.2} boundaries per round",
                s.commits as f64 / r as f64,
                s.boundaries as f64 / r as f64
            );
        }
        println!("{prefix}round_ratio_{r1}_over_{r0} = {:.2}", per_round(&large, r1) / per_round(&small, r0));
        println!("{prefix}bytes_per_round_{r1} = {}", large.committed_bytes / r1);
        println!("{prefix}cut_ratio_{r1}_over_{r0} = {:.2}", large.final_cut as f64 / small.final_cut as f64);
        println!("{prefix}ms_per_round_{r1} = {:.3}", per_round(&large, r1) * 1e3);
        println!("{prefix}commits_per_round_{r1} = {:.2}", large.commits as f64 / r1 as f64);
    }
}
