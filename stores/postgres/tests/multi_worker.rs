//! Many workers, one PostgreSQL store, workers killed with SIGKILL.
//!
//! Three worker processes (this executable, started with the `worker` argument) run 50 agents
//! with the real Interaction: a scripted model that asks for two payments and one lookup, a
//! payment tool that appends to a ledger file outside the store and then takes its time (so a
//! kill often lands mid-call), and a replayable lookup tool. A seeded schedule kills a worker
//! with SIGKILL and starts a fresh one, a few times, and once pauses one (SIGSTOP) while one of
//! its payments is in flight, past its lease, and wakes it (SIGCONT) after its runs were taken
//! over and that payment's run restored by another worker. Afterwards:
//!
//! * every agent finished, or waits for the host with its Unknown calls listed;
//! * no acknowledged commit is lost: every commit a worker saw acknowledged is in the store's
//!   history, and every history obeys the commit rules;
//! * no payment (not replayable) was dispatched twice, by the ledger;
//! * every run ends closed, owned by one worker, with no live lease, and no run was restored
//!   more often than it was claimed;
//! * the paused worker, once awake, was fenced by the database at least once (the commit of its
//!   late payment result names the incarnation the takeover replaced).
//!
//! The executable has its own `main` (no test harness) so that it can be its own worker.

mod support;

use keel::chat::{FinishReason, Message, Request, Response, Role, ToolCall, Usage};
use keel::env::BoxFuture;
use keel::interaction::model::{ModelCallContext, ModelClient, ModelError};
use keel::kernel::commit::{
    audit_history, Activation, Checkpoint, CommitError, CommitRecordKind, Committer,
    EffectBoundary, Head, TreeCut,
};
use keel::kernel::ids::ProcessId;
use keel::kernel::snapshot::TreeSnapshot;
use keel::prelude::*;
use keel_store_postgres::{
    LeaseState, Leases, PostgresCommitter, PostgresOptions, Worker, WorkerConfig,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const AGENTS: usize = 50;
const WORKERS: usize = 3;
/// Kills in the schedule (each followed by a fresh worker).
const KILLS: usize = 5;
const SEED: u64 = 0x6b65_656c_0014;
/// The whole test gives up after this long.
const DEADLINE: Duration = Duration::from_secs(150);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        worker_main(&args[2..]);
        return;
    }
    let started = Instant::now();
    support::runtime().block_on(multi_worker());
    println!(
        "test multi_worker ... ok ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    println!("1 passed, 0 failed");
}

// ---------------------------------------------------------------- the agent every worker runs

/// The scripted model: the agent's key is its first user message; call 1 pays once, call 2
/// pays again and looks something up (two calls in one batch), call 3 answers.
struct LedgerModel;

impl ModelClient for LedgerModel {
    fn call<'a>(
        &'a self,
        cx: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<Response, ModelError>> {
        let agent = request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(Message::text)
            .unwrap_or_default();
        let sequence = cx.invocation.model_call_sequence();
        let args = |n: u32| format!("{{\"agent\":\"{agent}\",\"n\":{n}}}");
        let calls = |list: Vec<(&str, String)>| {
            let calls = list
                .into_iter()
                .enumerate()
                .map(|(i, (name, a))| ToolCall::new(format!("call_{sequence}_{i}"), name, a))
                .collect();
            Response::new(
                Message::assistant_with_calls("", calls),
                FinishReason::ToolCalls,
                Usage::new(1, 1),
            )
        };
        let response = match sequence {
            1 => calls(vec![("pay", args(1))]),
            2 => calls(vec![("pay", args(2)), ("lookup", args(2))]),
            _ => Response::new(
                Message::assistant(format!("done {agent}")),
                FinishReason::Stop,
                Usage::new(1, 1),
            ),
        };
        Box::pin(async move { Ok(response) })
    }
}

fn append(path: &Path, line: &str) -> Result<(), String> {
    // One short O_APPEND write per line: lines from several processes never interleave. A
    // SIGKILL loses no written line (the kernel holds it), so no fsync is needed here.
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())
}

/// The directory (under the test's) holding one file per payment in flight, named
/// `<pid> <agent> <n>`.
const IN_FLIGHT: &str = "in-flight";

/// A payment in flight: its file exists from before the ledger line until the call returns or
/// is dropped.
struct InFlight(PathBuf);

impl InFlight {
    fn mark(path: &Path) -> Result<InFlight, String> {
        std::fs::File::create(path).map_err(|e| e.to_string())?;
        Ok(InFlight(path.to_owned()))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn agent(dir: &Path) -> Agent {
    let ledger = dir.join("ledger.txt");
    let in_flight = dir.join(IN_FLIGHT);
    let pay = tool_fn(
        "pay",
        "Pays once; never call twice.",
        r#"{"type":"object"}"#,
        move |args| {
            let (ledger, in_flight) = (ledger.clone(), in_flight.clone());
            async move {
                let agent = args
                    .get("agent")
                    .and_then(|a| a.as_str())
                    .unwrap_or("?")
                    .to_owned();
                let n = args
                    .get("n")
                    .map(|n| n.to_canonical_string())
                    .unwrap_or_default();
                let pid = std::process::id();
                // Marks the call in flight until it returns (or its future is dropped): the
                // test pauses a worker only while one of its payments is in this window.
                let _in_flight = InFlight::mark(&in_flight.join(format!("{pid} {agent} {n}")))?;
                append(&ledger, &format!("pay {agent} {n} {pid}"))?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(format!("paid {n}"))
            }
        },
    );
    let lookups = dir.join("lookups.txt");
    let lookup = tool_fn(
        "lookup",
        "Reads a record (safe to repeat).",
        r#"{"type":"object"}"#,
        move |args| {
            let lookups = lookups.clone();
            async move {
                append(&lookups, &args.to_canonical_string())?;
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok("found".to_owned())
            }
        },
    );
    Agent::builder("payer")
        .version("1.0.0")
        .model(LedgerModel)
        .tool_with(pay, ToolOptions::new().on_unknown(UnknownPolicy::Hold))
        .tool_with(lookup, ToolOptions::new().idempotent())
        .max_model_calls(4)
        .build()
        .expect("the agent builds")
}

/// Records every acknowledged commit (root, sequence, incarnation, cut digest) in a file of
/// this worker's, after the store acknowledged it.
struct AckLog {
    inner: PostgresCommitter,
    file: Mutex<std::fs::File>,
}

impl AckLog {
    fn ack(
        &self,
        result: Result<(), CommitError>,
        sequence: u64,
        cut: &TreeCut,
    ) -> Result<(), CommitError> {
        let fenced = matches!(result, Err(CommitError::TreeIncarnationConflict { .. }));
        if result.is_ok() || fenced {
            let tag = if fenced { "FENCED" } else { "ACK" };
            let (root, inc, digest) = (&cut.root_id, &cut.incarnation, cut.digest);
            let line = format!("{tag} {root} {sequence} {inc} {digest}\n");
            let mut file = self
                .file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            file.write_all(line.as_bytes())
                .map_err(|e| CommitError::Storage {
                    message: e.to_string(),
                })?;
        }
        result
    }
}

impl Committer for AckLog {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let c = c.clone();
        Box::pin(
            async move { self.ack(self.inner.commit_checkpoint(&c).await, c.sequence, &c.cut) },
        )
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let b = b.clone();
        Box::pin(async move { self.ack(self.inner.commit_effect(&b).await, b.sequence, &b.cut) })
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let a = a.clone();
        Box::pin(async move { self.ack(self.inner.activate_tree(&a).await, 0, &a.cut) })
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.inner.load_tree(root)
    }
}

fn worker_config(name: &str) -> WorkerConfig {
    WorkerConfig {
        lease_ttl: Duration::from_millis(1500),
        renew_every: Duration::from_millis(300),
        poll_every: Duration::from_millis(100),
        max_runs: 12,
        ..WorkerConfig::new(name)
    }
}

/// `worker <url> <schema> <dir> <name>`: runs until killed.
fn worker_main(args: &[String]) {
    let [url, schema, dir, name] = args else {
        panic!("usage: worker <url> <schema> <dir> <name>")
    };
    let dir = PathBuf::from(dir);
    support::runtime().block_on(async {
        let options = PostgresOptions {
            schema: schema.clone(),
            max_connections: 8,
        };
        let store = PostgresCommitter::connect_with(url, options)
            .await
            .expect("worker opens the store");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("acks-{name}.txt")))
            .unwrap();
        let committer = Arc::new(AckLog {
            inner: store.clone(),
            file: Mutex::new(file),
        });
        let worker =
            Worker::with_committer(store, committer, agent(&dir), worker_config(name)).unwrap();
        println!("READY");
        worker
            .run(futures::future::pending())
            .await
            .expect("worker runs");
    });
}

// ---------------------------------------------------------------- the test

struct Workers {
    url: String,
    schema: String,
    dir: PathBuf,
    live: Vec<(String, Child)>,
    stopped: Vec<(String, Child)>,
    started: usize,
}

impl Workers {
    fn spawn(&mut self) {
        self.started += 1;
        let name = format!("w{}", self.started);
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["worker", &self.url, &self.schema])
            .arg(&self.dir)
            .arg(&name)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn a worker");
        self.live.push((name, child));
    }

    fn kill(&mut self, index: usize) -> String {
        let (name, mut child) = self.live.remove(index);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        name
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (_, child) in self.live.iter_mut().chain(self.stopped.iter_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The schedule step that pauses a worker instead of killing it; the worker sleeps through the
/// remaining steps and until its leases lapsed and were claimed by others. The first: a worker
/// is caught while a run's first payment is in flight, and most runs are past it a second in.
const PAUSE_AT: usize = 0;

/// The worker the schedule paused, caught with a payment in flight for `run`, whose tree it
/// holds at `incarnation` (its last acknowledged commit of that run).
struct Paused {
    name: String,
    pid: u32,
    run: RunId,
    incarnation: String,
}

/// Pauses a live worker (SIGSTOP) at a moment it provably has a first payment in flight in a
/// run it still owns: that payment's result is a commit the worker must make once awake. A worker
/// caught with none is woken at once (a pause far shorter than its lease) and the next one
/// tried, so the pause never depends on how fast a loaded machine runs the schedule.
async fn pause_mid_payment(
    workers: &mut Workers,
    leases: &Leases,
    dir: &Path,
    keys: &BTreeMap<RunId, String>,
    started: Instant,
) -> Paused {
    let runs: BTreeMap<&str, &RunId> = keys.iter().map(|(run, key)| (key.as_str(), run)).collect();
    let mut tries = 0;
    loop {
        let rows = leases.list().await.unwrap();
        let owned = |name: &str| -> Vec<RunId> {
            rows.iter()
                .filter(|r| r.state == LeaseState::Open && r.owner.as_deref() == Some(name))
                .map(|r| r.run.clone())
                .collect()
        };
        assert!(
            rows.iter().any(|r| r.state == LeaseState::Open) && started.elapsed() < DEADLINE,
            "no worker was caught with a first payment in flight in {:.1} s, and {} runs are \
             still open: the schedule pauses too late",
            started.elapsed().as_secs_f64(),
            rows.iter().filter(|r| r.state == LeaseState::Open).count()
        );
        let mut candidates: Vec<(usize, Vec<RunId>)> = (0..workers.live.len())
            .map(|i| (i, owned(&workers.live[i].0)))
            .filter(|(_, runs)| !runs.is_empty())
            .collect();
        // The busiest first: it most likely has a call in flight.
        candidates.sort_by_key(|(_, runs)| std::cmp::Reverse(runs.len()));
        for (index, owned) in candidates {
            let (name, child) = &workers.live[index];
            let pid = child.id();
            if first_payments_in_flight(dir, pid).is_empty() {
                continue; // none even before the pause: not worth stopping it
            }
            tries += 1;
            signal("STOP", pid);
            wait_stopped(pid);
            // Stopped, the worker changes no file: a marker seen now is a call not yet returned.
            let caught = first_payments_in_flight(dir, pid)
                .into_iter()
                .filter_map(|agent| runs.get(agent.as_str()).copied())
                .filter(|run| owned.contains(run))
                .find_map(|run| {
                    let incarnation = last_acked_incarnation(dir, name, run)?;
                    Some((run.clone(), incarnation))
                });
            if let Some((run, incarnation)) = caught {
                eprintln!("multi_worker: caught a payment in flight at the pause number {tries}");
                let (name, child) = workers.live.remove(index);
                workers.stopped.push((name.clone(), child));
                return Paused {
                    name,
                    pid,
                    run,
                    incarnation,
                };
            }
            signal("CONT", pid);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every thread of `pid` is stopped (SIGSTOP is delivered asynchronously).
fn wait_stopped(pid: u32) {
    let stopped = || -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return false;
        };
        tasks.filter_map(Result::ok).all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name, which may contain spaces. A
            // thread that is exiting (Z, X, or gone: no state) changes nothing either.
            let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
            matches!(state, None | Some('T' | 't' | 'Z' | 'X'))
        })
    };
    let since = Instant::now();
    while !stopped() {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "worker {pid} did not stop after SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The agents whose first payment worker process `pid` has in flight. Only the first: it is
/// the one call of its model turn, so while it runs its tree has no commit in flight (one
/// stopped inside a transaction would fail when the server ends that session, and the tree
/// would stop before the payment's result is committed). The second payment shares its turn
/// with a lookup whose result may be committing.
fn first_payments_in_flight(dir: &Path, pid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join(IN_FLIGHT)) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let parts: Vec<&str> = file.split(' ').collect();
            let [owner, agent, "1"] = parts[..] else {
                return None;
            };
            (owner.parse::<u32>().ok()? == pid).then(|| agent.to_owned())
        })
        .collect()
}

/// The incarnation of `run`'s tree in worker `name`'s memory: that of its last acknowledged
/// commit of the run.
fn last_acked_incarnation(dir: &Path, name: &str, run: &RunId) -> Option<String> {
    let acks = std::fs::read_to_string(dir.join(format!("acks-{name}.txt"))).ok()?;
    let root = run.process_id().as_str();
    acks.lines()
        .filter_map(|line| {
            let p: Vec<&str> = line.split(' ').collect();
            (p.len() == 5 && p[0] == "ACK" && p[1] == root).then(|| p[3].to_owned())
        })
        .last()
}

fn signal(name: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// A small deterministic generator for the kill schedule (splitmix64).
struct Schedule(u64);

impl Schedule {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % below
    }
}

async fn multi_worker() {
    let Some(url) = support::server().await else {
        return;
    };
    let schema = support::fresh_schema("workers");
    let dir = std::env::temp_dir().join(format!("keel-pg-workers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(IN_FLIGHT)).unwrap();
    let store = support::open(&url, &schema).await;
    let leases = Leases::new(store.clone());
    let mut keys = BTreeMap::new();
    for i in 0..AGENTS {
        let key = format!("agent-{i:02}");
        let run = RunId::from_key(&format!("{schema}/{key}"));
        assert!(leases.submit(&run, &key).await.unwrap());
        keys.insert(run, key);
    }

    let mut workers = Workers {
        url: url.clone(),
        schema: schema.clone(),
        dir: dir.clone(),
        live: Vec::new(),
        stopped: Vec::new(),
        started: 0,
    };
    for _ in 0..WORKERS {
        workers.spawn();
    }
    let mut schedule = Schedule(SEED);
    let started = Instant::now();
    let mut paused: Option<Paused> = None;
    for step in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(400 + schedule.next(600))).await;
        let victim = usize::try_from(schedule.next(workers.live.len() as u64)).unwrap();
        let at = started.elapsed().as_secs_f64();
        if step == PAUSE_AT {
            // A paused worker (SIGSTOP past its lease, then SIGCONT) is the case fencing exists
            // for: its runs are taken over while it sleeps; when it wakes, its in-flight calls
            // finish and its next commits name the old incarnation. The database must refuse
            // them. The pause is kept only once it provably landed with a payment in flight.
            let caught = pause_mid_payment(&mut workers, &leases, &dir, &keys, started).await;
            eprintln!(
                "multi_worker: SIGSTOP {} at {at:.1} s, its payment for {} in flight",
                caught.name, keys[&caught.run]
            );
            paused = Some(caught);
        } else {
            let name = workers.kill(victim);
            eprintln!("multi_worker: SIGKILL {name} at {at:.1} s");
        }
        workers.spawn();
    }
    let Paused {
        name: paused_name,
        pid: paused_pid,
        run: paused_run,
        incarnation: paused_incarnation,
    } = paused.expect("the schedule pauses one worker");
    // Wake it only once every run it owned was claimed by another worker (its lease lapsed by
    // the database clock) and the run of its payment in flight was restored under a new
    // incarnation: the commit of that payment's result must then be fenced.
    loop {
        let rows = leases.list().await.unwrap();
        let still = rows
            .iter()
            .filter(|r| r.state == LeaseState::Open && r.owner.as_deref() == Some(&paused_name))
            .count();
        let head = store.load_tree(paused_run.process_id()).await.unwrap();
        let restored = head.is_some_and(|h| h.cut.incarnation.to_string() != paused_incarnation);
        if still == 0 && restored {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "{paused_name}'s {still} leases never lapsed, or {} was never restored",
            keys[&paused_run]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    signal("CONT", paused_pid);
    let at = started.elapsed().as_secs_f64();
    eprintln!("multi_worker: SIGCONT {paused_name} at {at:.1} s");

    // Wait until no run needs a worker.
    let rows = loop {
        let rows = leases.list().await.unwrap();
        if rows.iter().all(|r| r.state != LeaseState::Open) {
            break rows;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "runs still open after {DEADLINE:?}: {:?}",
            rows.iter()
                .filter(|r| r.state == LeaseState::Open)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The paused worker woke with a payment in flight: wait for that call to return and its
    // result's commit to be answered (the check below fails if it was not refused).
    let fenced_file = dir.join(format!("acks-{paused_name}.txt"));
    while started.elapsed() < DEADLINE {
        let text = std::fs::read_to_string(&fenced_file).unwrap_or_default();
        if text.lines().any(|l| l.starts_with("FENCED ")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(workers);
    let fenced = check(&store, &dir, &keys, &rows).await;
    let paused_fenced = fenced.get(&paused_name).copied().unwrap_or(0);
    assert!(
        paused_fenced > 0,
        "the paused worker {paused_name} was never fenced: {fenced:?}"
    );
    eprintln!("multi_worker: commits fenced by the database, per worker: {fenced:?}");
    eprintln!(
        "multi_worker: {} finished, {} held with Unknowns, {} claims in all",
        rows.iter()
            .filter(|r| r.state == LeaseState::Finished)
            .count(),
        rows.iter().filter(|r| r.state == LeaseState::Held).count(),
        rows.iter().map(|r| i64::from(r.claims)).sum::<i64>(),
    );
    support::drop_schema(&url, &schema).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checks the end state; returns how many commits the database fenced, per worker.
async fn check(
    store: &PostgresCommitter,
    dir: &Path,
    keys: &BTreeMap<RunId, String>,
    rows: &[keel_store_postgres::LeaseRow],
) -> BTreeMap<String, usize> {
    assert_eq!(rows.len(), AGENTS);
    // No payment dispatched twice.
    let ledger = std::fs::read_to_string(dir.join("ledger.txt")).unwrap_or_default();
    let mut payments: BTreeMap<(String, String), usize> = BTreeMap::new();
    for line in ledger.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        *payments
            .entry((parts[1].to_owned(), parts[2].to_owned()))
            .or_default() += 1;
    }
    let twice: Vec<_> = payments.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "payments dispatched twice: {twice:?}");

    // No acknowledged commit lost.
    let mut acked: BTreeMap<String, Vec<(u64, String, String)>> = BTreeMap::new();
    let mut fenced: BTreeMap<String, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(worker) = file
            .strip_prefix("acks-")
            .and_then(|f| f.strip_suffix(".txt"))
        else {
            continue;
        };
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let p: Vec<&str> = line.split(' ').collect();
            if p[0] == "FENCED" {
                *fenced.entry(worker.to_owned()).or_default() += 1;
            } else {
                let ack = (p[2].parse().unwrap(), p[3].to_owned(), p[4].to_owned());
                acked.entry(p[1].to_owned()).or_default().push(ack);
            }
        }
    }
    let mut acks = 0;
    for row in rows {
        let key = &keys[&row.run];
        let root = row.run.process_id();
        let history = store.history(root).await.unwrap();
        audit_history(&history).unwrap_or_else(|e| panic!("{key}: {e}"));
        let recorded: Vec<(u64, String, String)> = history
            .iter()
            .map(|r| {
                (
                    r.sequence,
                    r.incarnation.to_string(),
                    r.cut_digest.to_string(),
                )
            })
            .collect();
        for ack in acked
            .get(root.as_str())
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            assert!(
                recorded.contains(ack),
                "{key}: acknowledged commit {ack:?} is not in the store"
            );
            acks += 1;
        }
        // One owner at the end, no live lease, and no more restores than claims.
        assert!(row.owner.is_some() && !row.live, "{key}: {row:?}");
        let activations = history
            .iter()
            .filter(|r| matches!(r.kind, CommitRecordKind::Activation { .. }))
            .count();
        assert!(
            activations < usize::try_from(row.claims).unwrap(),
            "{key}: {activations} restores for {} claims",
            row.claims
        );

        let head = store
            .load_tree(root)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key}: no head"));
        let snapshot = TreeSnapshot::from_cut(&head.cut)
            .unwrap_or_else(|e| panic!("{key}: head does not decode: {e}"));
        let detail = row.detail.as_deref().unwrap_or_default();
        match row.state {
            LeaseState::Finished => {
                assert!(
                    detail.starts_with("completed"),
                    "{key}: finished as {detail}"
                );
                assert!(
                    snapshot.root().is_terminal(),
                    "{key}: finished but the head is not terminal"
                );
                for n in ["1", "2"] {
                    assert_eq!(
                        payments.get(&(key.clone(), n.to_owned())),
                        Some(&1),
                        "{key}: payment {n} of a completed run"
                    );
                }
            }
            LeaseState::Held => {
                // Surfaced, not guessed: the run waits on Unknown calls, at most one payment each.
                assert!(detail.starts_with("unknown: "), "{key}: held as {detail}");
                assert!(!snapshot.root().is_terminal(), "{key}: held but terminal");
            }
            LeaseState::Open => unreachable!("waited for every run to close"),
        }
    }
    assert!(
        acks >= AGENTS * 8,
        "only {acks} acknowledged commits recorded"
    );
    fenced
}
