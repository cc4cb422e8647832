//! Commits per second through the PostgreSQL committer, on the tool-loop workload the other
//! stores are measured on: the real Interaction on the real Engine over `TokioEnv`, a scripted
//! model asking for one `echo` call per round and answering after `ROUNDS` rounds. Every commit
//! goes through a counting wrapper (commits and cut bytes).
//!
//! Run: `bash .ci/postgres.sh start`, then
//! `KEEL_TEST_POSTGRES="$(bash .ci/postgres.sh url)" cargo bench -p keel-store-postgres --bench commits`
//!
//! Printed:
//! * `commits_per_second_postgres`: one run at a time (each commit waits for the previous one,
//!   as within one tree), commits over wall time;
//! * `commits_per_second_postgres_parallel_8`: eight runs at once (eight trees commit
//!   concurrently, as a worker drives many runs);
//! * `commits_per_second_postgres_50` and `group_gain_postgres_50`: fifty runs at once, and
//!   that rate over the single run's (concurrent commits of different trees share one
//!   transaction: group commit);
//! * `bytes_per_round_postgres`: cut bytes committed per tool round;
//! * `commits_per_second_memory`: the same single-run loop on the MemoryCommitter (the
//!   Engine's own cost, for scale).

use keel::chat::{FinishReason, Message, Request, Response, Role, ToolCall, Usage};
use keel::env::{BoxFuture, TokioEnv};
use keel::interaction::model::{ModelCallContext, ModelClient, ModelError};
use keel::kernel::commit::{
    Activation, Checkpoint, CommitError, CommitRequest, Committer, EffectBoundary, Head, MemoryCommitter,
};
use keel::kernel::ids::ProcessId;
use keel::prelude::*;
use keel_store_postgres::{PostgresCommitter, PostgresOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const ROUNDS: usize = 50;
const PARALLEL: usize = 8;
/// Runs at once for the group commit line.
const AGENTS: usize = 50;

/// Asks for one `echo` call per round until `ROUNDS` tool results are in the context.
struct Looping;

impl ModelClient for Looping {
    fn call<'a>(
        &'a self,
        _: &'a ModelCallContext,
        request: Request,
    ) -> BoxFuture<'a, Result<Response, ModelError>> {
        let done = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count();
        let response = if done < ROUNDS {
            let call = ToolCall::new(
                format!("call-{done}"),
                "echo",
                format!(r#"{{"q":"round {done}"}}"#),
            );
            Response::new(
                Message::assistant_with_calls("", vec![call]),
                FinishReason::ToolCalls,
                Usage::new(1, 1),
            )
        } else {
            Response::new(
                Message::assistant("done"),
                FinishReason::Stop,
                Usage::new(1, 1),
            )
        };
        Box::pin(async move { Ok(response) })
    }
}

struct Counting<C> {
    inner: C,
    commits: AtomicU64,
    bytes: AtomicU64,
}

impl<C: Committer> Counting<C> {
    fn count(&self, r: Result<(), CommitError>, bytes: usize) -> Result<(), CommitError> {
        if r.is_ok() {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<C: Committer> Committer for Counting<C> {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        let c = c.clone();
        Box::pin(
            async move { self.count(self.inner.commit_checkpoint(&c).await, c.cut.carried_bytes() as usize) },
        )
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        let b = b.clone();
        Box::pin(async move { self.count(self.inner.commit_effect(&b).await, b.cut.carried_bytes() as usize) })
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        let a = a.clone();
        Box::pin(async move { self.count(self.inner.activate_tree(&a).await, a.cut.carried_bytes() as usize) })
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.inner.load_tree(root)
    }
    // Forwarded whole, as the Engine sends it: one submission (one transaction) for the chain.
    fn commit_chain<'a>(&'a self, chain: &'a [CommitRequest]) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(async move {
            let outcome = self.inner.commit_chain(chain).await;
            if outcome.is_ok() {
                self.commits.fetch_add(chain.len() as u64, Ordering::Relaxed);
                let bytes: u64 = chain.iter().map(|r| r.cut().carried_bytes()).sum();
                self.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            outcome
        })
    }
}

fn agent() -> Agent {
    let echo = tool_fn(
        "echo",
        "Echoes its arguments.",
        r#"{"type":"object"}"#,
        |args| async move { Ok(args.to_canonical_string()) },
    );
    Agent::builder("bench")
        .version("1")
        .model(Looping)
        .tool_with(echo, ToolOptions::new().idempotent())
        .max_model_calls(u32::try_from(ROUNDS + 2).unwrap())
        .build()
        .unwrap()
}

/// Runs `runs` tool loops at once; returns (commits per second, cut bytes per round).
async fn measure<C: Committer + 'static>(store: C, runs: usize) -> (f64, f64) {
    let counting = Arc::new(Counting {
        inner: store,
        commits: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let env = TokioEnv::current().unwrap().env();
    let runtime = Runtime::with_store(agent(), counting.clone(), env);
    let started = Instant::now();
    let tasks = (0..runs).map(|_| {
        let runtime = runtime.clone();
        async move {
            let run = runtime.start("go").await.unwrap();
            let result = run.result().await.unwrap();
            assert!(result.is_completed(), "{result:?}");
        }
    });
    futures::future::join_all(tasks).await;
    let seconds = started.elapsed().as_secs_f64();
    let commits = counting.commits.load(Ordering::Relaxed) as f64;
    let bytes = counting.bytes.load(Ordering::Relaxed) as f64;
    (commits / seconds, bytes / (runs * ROUNDS) as f64)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Ok(url) = std::env::var("KEEL_TEST_POSTGRES") else {
            println!("commits bench skipped: set KEEL_TEST_POSTGRES (bash .ci/postgres.sh url)");
            return;
        };
        let schema = format!("keel_bench_{}", std::process::id());
        let options = PostgresOptions {
            schema: schema.clone(),
            ..PostgresOptions::default()
        };
        let store = PostgresCommitter::connect_with(&url, options)
            .await
            .unwrap();
        let (memory, _) = measure(MemoryCommitter::new(), 1).await;
        let (single, bytes) = measure(store.clone(), 1).await;
        let (parallel, _) = measure(store.clone(), PARALLEL).await;
        let (many, _) = measure(store.clone(), AGENTS).await;
        let (batches, requests) = store.group_stats();
        println!("commits_per_second_postgres = {single:.0}");
        println!("commits_per_second_postgres_parallel_{PARALLEL} = {parallel:.0}");
        println!("commits_per_second_postgres_{AGENTS} = {many:.0}");
        println!("group_gain_postgres_{AGENTS} = {:.2}", many / single);
        println!("# {requests} commits in {batches} transactions ({:.1} per transaction)", requests as f64 / batches as f64);
        println!("bytes_per_round_postgres = {bytes:.0}");
        println!("commits_per_second_memory = {memory:.0}");
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let task = tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .await
            .unwrap();
        drop(client);
        let _ = task.await;
    });
}
