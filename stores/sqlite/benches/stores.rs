//! Commits per second and bytes written per tool round of each store, on one workload: the
//! real Interaction tool loop (scripted model asking for one `echo` call per round, R rounds,
//! then a final answer) on the real `Engine` over `TokioEnv`, the same for every store.
//!
//! Run: `cargo bench -p keel-store-sqlite --bench stores` (release profile; no bench crate).
//!
//! Printed, per store (`memory`, `file`, `sqlite`):
//! * `commits_per_second_<store>`: acknowledged commits of the whole run over its wall time
//!   (median of a few runs);
//! * `bytes_per_tool_round_<store>` (durable stores): bytes the process handed to the OS in
//!   write calls during the run (`wchar` of `/proc/self/io`: the log's appends, SQLite's WAL
//!   frames and checkpoints alike), over R. Where `/proc/self/io` is missing, the growth of
//!   the store's files instead (printed with a note).
//!
//! Then, per durable store (`file`, `sqlite`), the same loop run by 1 and by 50 agents at
//! once (one root each, one `Engine`, `AGENT_ROUNDS` rounds each), which is what group commit
//! is for:
//! * `commits_per_second_<store>_<agents>`: acknowledged commits of all agents over the wall
//!   time until the last one finished (median of a few runs);
//! * `group_gain_<store>_50`: commits per second with 50 agents over commits per second with 1;
//! * `sync_sharing_<store>_50`: commits per sync with 50 agents over commits per sync with 1
//!   (how many times fewer syncs a commit pays; independent of how fast the disk syncs);
//! * the same three with `_threads_2` on a two-thread runtime (tokio's default kind): there the
//!   agents' own work goes on while a batch's sync blocks one thread. On the current-thread
//!   runtime every batch already holds every agent's commit (printed: commits per sync), so
//!   50 agents are bound by their own CPU work per commit, not by syncs.
//!
//! `-- group` runs only the concurrent part, `-- single` only the first part, `-- file` or
//! `-- sqlite` only that store. `-- profile` runs one 50-agent current-thread run per selected
//! durable store and prints nothing else (for a profiler such as
//! `valgrind --tool=callgrind target/release/deps/stores-* --bench profile file`).
//!
//! Stores live in fresh directories under the system temp dir, removed after each run.

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
use keel_store_sqlite::SqliteCommitter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tool rounds per run.
const ROUNDS: u64 = 50;
/// Runs per store; the median is printed.
const REPEATS: usize = 3;

/// Tool rounds per agent in the concurrent runs.
const AGENT_ROUNDS: u64 = 10;
/// Concurrent agents compared with one.
const AGENTS: usize = 50;

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

/// Counts the commits it forwards.
struct Counting {
    inner: Arc<dyn Committer>,
    commits: AtomicU64,
}

impl Committer for Counting {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.inner.commit_checkpoint(c)
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.inner.commit_effect(b)
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.inner.activate_tree(a)
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.inner.load_tree(root)
    }
    // Forwarded whole, as the Engine sends it (one submission, one sync); each of its
    // boundaries is a commit of its own.
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        self.commits.fetch_add(chain.len() as u64, Ordering::Relaxed);
        self.inner.commit_chain(chain)
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
        name: "bench.stores".into(),
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
        Digest::of(b"bench.stores.config"),
    );
    let resolver = Arc::new(DeploymentSet::new().with(parent.clone()).with(tools));
    (parent, resolver)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Store {
    Memory,
    File,
    Sqlite,
    // PostgreSQL (added with the PostgreSQL committer): a `Postgres` variant here, its
    // committer in `open`, and its name in `name`; `main` then prints
    // `commits_per_second_postgres` and `bytes_per_tool_round_postgres` like the others
    // (bytes: what the server wrote, e.g. the WAL position difference, not `wchar`).
}

impl Store {
    const ALL: [Store; 3] = [Store::Memory, Store::File, Store::Sqlite];

    fn name(self) -> &'static str {
        match self {
            Store::Memory => "memory",
            Store::File => "file",
            Store::Sqlite => "sqlite",
        }
    }

    /// The store, and how many durable syncs it has made so far (none for memory).
    fn open(self, dir: &Path) -> (Arc<dyn Committer>, Box<dyn Fn() -> u64>) {
        match self {
            Store::Memory => (Arc::new(MemoryCommitter::new()), Box::new(|| 0)),
            Store::File => {
                let store = Arc::new(FileCommitter::open(dir).expect("file committer"));
                (store.clone(), Box::new(move || store.stats().syncs))
            }
            Store::Sqlite => {
                let store = Arc::new(SqliteCommitter::open(dir.join("store.sqlite")).expect("sqlite committer"));
                (store.clone(), Box::new(move || store.syncs()))
            }
        }
    }
}

/// Bytes this process has passed to write calls so far, if the OS says.
fn written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.trim().parse().ok())
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

struct Sample {
    elapsed: Duration,
    commits: u64,
    /// Durable syncs the store made (commits per sync: the batch size group commit reached).
    syncs: u64,
    /// (bytes, measured by write calls rather than file growth)
    bytes: (u64, bool),
}

/// `agents` roots started at once on one engine over one fresh store, each running the tool
/// loop for `rounds` rounds: all their commits over the wall time until the last one finished,
/// and the bytes written meanwhile. `threads`: 0 for a current-thread runtime, else the
/// worker threads of a multi-threaded one.
fn run_agents(store: Store, agents: usize, rounds: u64, run: u64, threads: usize) -> Sample {
    let rt = match threads {
        0 => tokio::runtime::Builder::new_current_thread().enable_time().build(),
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_time().build(),
    }
    .expect("tokio runtime");
    let dir: PathBuf =
        std::env::temp_dir().join(format!("keel-bench-stores-{}-{}-{agents}-{run}", std::process::id(), store.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench directory");
    let sample = rt.block_on(async {
        let tokio_env = Arc::new(TokioEnv::current().expect("tokio env"));
        let env = Env::new(tokio_env.clone(), tokio_env, Arc::new(SeededRng::new(run)));
        let (parent, resolver) = deployments(rounds);
        let (committer, syncs) = store.open(&dir);
        let counting = Arc::new(Counting { inner: committer, commits: AtomicU64::new(0) });
        let engine = Engine::new(EngineConfig {
            env,
            committer: counting.clone(),
            resolver,
            root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            listeners: vec![],
        });
        let input = InteractionInput::new(vec![Message::user("run the loop")]).to_payload().expect("input");
        let (files_before, written_before) = (dir_bytes(&dir), written_bytes());
        let started = Instant::now();
        let handles = futures::future::join_all((0..agents).map(|_| engine.start(parent.clone(), input.clone()))).await;
        let results = futures::future::join_all(
            handles.iter().map(|h| async move { h.as_ref().expect("start").await_result().await }),
        )
        .await;
        let elapsed = started.elapsed();
        for result in results {
            let result = result.expect("the loop finished");
            assert!(result.output.is_some(), "the loop completed: {:?}", result.termination);
        }
        let bytes = match (written_before, written_bytes()) {
            (Some(before), Some(after)) => (after - before, true),
            _ => (dir_bytes(&dir).saturating_sub(files_before), false),
        };
        Sample { elapsed, commits: counting.commits.load(Ordering::Relaxed), syncs: syncs(), bytes }
    });
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
    sample
}

/// Median commits per second of `repeats` concurrent runs, and their median commits per sync.
fn concurrent_rate(store: Store, agents: usize, rounds: u64, repeats: usize, threads: usize) -> (f64, f64) {
    let mut per_sync: Vec<f64> = Vec::new();
    let mut rates: Vec<f64> = (0..repeats)
        .map(|run| {
            let Sample { elapsed, commits, syncs, .. } = run_agents(store, agents, rounds, run as u64, threads);
            println!(
                "# {} with {agents} agents ({}): {commits} commits in {:.1} ms, {syncs} syncs ({:.1} commits per sync)",
                store.name(),
                if threads == 0 { "current thread".to_string() } else { format!("{threads} worker threads") },
                elapsed.as_secs_f64() * 1e3,
                commits as f64 / syncs.max(1) as f64
            );
            per_sync.push(commits as f64 / syncs.max(1) as f64);
            commits as f64 / elapsed.as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    per_sync.sort_by(f64::total_cmp);
    (rates[rates.len() / 2], per_sync[per_sync.len() / 2])
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this once as a smoke test.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (repeats, rounds) = if quick { (1, 5) } else { (REPEATS, ROUNDS) };
    // `-- group` runs only the concurrent part, `-- file` / `-- sqlite` only that store.
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let parts = ["group", "single", "profile"];
    let wanted = |what: &str| filters.iter().all(|f| parts.contains(&f.as_str())) || filters.iter().any(|f| f == what);
    let stores: Vec<Store> = Store::ALL.into_iter().filter(|s| wanted(s.name())).collect();
    if filters.iter().any(|f| f == "profile") {
        for store in stores.into_iter().filter(|s| *s != Store::Memory) {
            let Sample { elapsed, commits, syncs, .. } = run_agents(store, AGENTS, AGENT_ROUNDS, 0, 0);
            println!("# {} profile run: {commits} commits in {:.1} ms, {syncs} syncs", store.name(), elapsed.as_secs_f64() * 1e3);
        }
        return;
    }
    for store in stores.iter().copied().filter(|_| !filters.iter().any(|f| f == "group")) {
        let mut samples: Vec<Sample> = (0..repeats).map(|run| run_agents(store, 1, rounds, run as u64, 0)).collect();
        samples.sort_by_key(|s| s.elapsed);
        let s = &samples[samples.len() / 2];
        println!(
            "# {}: {rounds} tool rounds, {} commits in {:.1} ms",
            store.name(),
            s.commits,
            s.elapsed.as_secs_f64() * 1e3
        );
        println!("commits_per_second_{} = {:.0}", store.name(), s.commits as f64 / s.elapsed.as_secs_f64());
        if store != Store::Memory {
            if !s.bytes.1 {
                println!("# {}: /proc/self/io unavailable, bytes are the growth of the store's files", store.name());
            }
            println!("bytes_per_tool_round_{} = {}", store.name(), s.bytes.0 / rounds);
        }
    }
    let (agent_rounds, agents) = if quick { (2, 4) } else { (AGENT_ROUNDS, AGENTS) };
    for store in stores.into_iter().filter(|s| *s != Store::Memory && !filters.iter().any(|f| f == "single")) {
        let (one, one_per_sync) = concurrent_rate(store, 1, agent_rounds, repeats, 0);
        let (many, many_per_sync) = concurrent_rate(store, agents, agent_rounds, repeats, 0);
        println!("commits_per_second_{}_1 = {one:.0}", store.name());
        println!("commits_per_second_{}_{agents} = {many:.0}", store.name());
        println!("group_gain_{}_{agents} = {:.2}", store.name(), many / one);
        // How many times fewer syncs each commit pays with 50 agents than with 1: what group
        // commit saves, whatever the disk. `group_gain` reaches it only while a sync costs
        // much more than the CPU work of the commits it covers; on a disk whose sync is as
        // cheap as one commit's work, the gain in commits per second is small however well
        // syncs are shared.
        println!("sync_sharing_{}_{agents} = {:.1}", store.name(), many_per_sync / one_per_sync);
        // The same on a two-thread runtime, as a host on tokio's default runtime runs: the
        // agents' own work goes on on one thread while a batch's sync blocks the other, and
        // the commits arriving meanwhile form the next batch.
        let (one, _) = concurrent_rate(store, 1, agent_rounds, repeats, 2);
        let (many, _) = concurrent_rate(store, agents, agent_rounds, repeats, 2);
        println!("commits_per_second_{}_1_threads_2 = {one:.0}", store.name());
        println!("commits_per_second_{}_{agents}_threads_2 = {many:.0}", store.name());
        println!("group_gain_{}_{agents}_threads_2 = {:.2}", store.name(), many / one);
    }
}
