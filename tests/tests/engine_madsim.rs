//! The Engine on madsim: concurrent dispatches with seeded latencies interleave for real, the
//! tree still completes, and the same seed gives the same interleaving.
#![cfg(madsim)]

use keel::env::{Env, MadsimEnv};
use keel::json::Json;
use keel::kernel::binding::DeploymentSet;
use keel::kernel::capability::CapabilitySet;
use keel::kernel::commit::MemoryCommitter;
use keel::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use keel::kernel::effect::Settlement;
use keel::kernel::engine::{Engine, EngineConfig};
use keel::kernel::owner::RootConfig;
use keel::kernel::resource::Budget;
use keel::kernel::signal::SettlementStatus;
use keel::kernel::status::Status;
use keel::kernel::testkit::{script_deployment, script_input, Op};
use keel::kernel::tree_limits::TreeLimits;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Sleeps a seeded random time, then echoes; records completion order.
struct SlowEcho {
    env: Env,
    order: Arc<Mutex<Vec<String>>>,
}

impl Dispatcher for SlowEcho {
    fn policy(&self, _: &keel::json::Payload) -> DispatchPolicy {
        DispatchPolicy::never()
    }
    fn dispatch<'a>(
        &'a self,
        request: EffectRequest,
        _cx: DispatchContext,
    ) -> keel::env::BoxFuture<'a, Result<Settlement, DispatchError>> {
        Box::pin(async move {
            let millis = self.env.rng.next_u64() % 50;
            self.env.clock.sleep(Duration::from_millis(millis)).await;
            self.order.lock().unwrap().push(request.payload.value().to_canonical_string());
            Ok(Settlement { status: SettlementStatus::Succeeded, payload: request.payload })
        })
    }
}

fn run(seed: u64) -> (Status, Vec<String>) {
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let env = MadsimEnv::current().unwrap().env();
        let order = Arc::new(Mutex::new(Vec::new()));
        let dispatcher = Arc::new(SlowEcho { env: env.clone(), order: order.clone() });
        let child = script_deployment("keel.test.child", Some(dispatcher), vec![]);
        let parent = script_deployment("keel.test.parent", None, vec![child.reference().clone()]);
        let resolver = Arc::new(DeploymentSet::new().with(child.clone()).with(parent.clone()));
        let engine = Engine::new(EngineConfig {
            env,
            committer: Arc::new(MemoryCommitter::new()),
            resolver,
            root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            listeners: vec![],
        });
        // The scripted parent starts its children one after another; two trees run at once,
        // so their dispatches interleave by seeded latency.
        let ops: Vec<Op> = (0..3)
            .map(|i| Op::Child {
                deployment: child.reference().clone(),
                script: vec![Op::Dispatch(Json::str(format!("c{i}-a"))), Op::Dispatch(Json::str(format!("c{i}-b")))],
                key: format!("worker-{i}"),
                budget: Budget::unlimited(),
            })
            .collect();
        let a = engine.start(parent.clone(), script_input(&ops)).await.unwrap();
        let b = engine.start(parent, script_input(&ops)).await.unwrap();
        let ra = a.await_result().await.unwrap();
        let rb = b.await_result().await.unwrap();
        assert_eq!(ra.status(), rb.status());
        let order = order.lock().unwrap().clone();
        (ra.status(), order)
    })
}

#[test]
fn engine_on_madsim_completes_and_is_deterministic_per_seed() {
    // Without priming, the schema engine's one-time OS-randomness draw lands inside the first
    // simulated run and shifts its random stream (this test caught exactly that).
    keel::schema::prime();
    let (status, order) = run(7);
    assert_eq!(status, Status::Completed);
    assert_eq!(order.len(), 12, "two trees × three children × two dispatches");
    assert_eq!(run(7).1, order, "same seed, same interleaving");
    let differs = (8..20).any(|s| run(s).1 != order);
    assert!(differs, "some other seed interleaves the two trees differently");
}
