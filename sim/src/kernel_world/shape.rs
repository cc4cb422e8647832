//! The generated workload: a random script tree (testkit scripts and fan-out scripts, children
//! with finite budgets, depth ≤ [`MAX_TREE_DEPTH`]) and the deployments that run it.

use super::bounds::{MAX_BATCH, MAX_OPS_PER_SCRIPT, MAX_PROCESSES, MAX_SPAWN, MAX_TREE_DEPTH};
use super::dispatcher::{effect_payload, SimDispatcher};
use super::strategy::{ChildPlan, FanOp, FanoutDefinition};
use super::swarm::{below, between, chance, weighted, ShapeParams};
use keel::env::SeededRng;
use keel::json::{Digest, Json, ToJson};
use keel::kernel::binding::{Deployment, DeploymentSet};
use keel::kernel::child::Boundary;
use keel::kernel::dispatcher::{Dispatcher, ReplayPolicy};
use keel::kernel::resource::{Budget, Quota};
use keel::kernel::testkit::{script_deployment, Op};
use std::sync::Arc;

/// Which strategy runs a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Testkit,
    Fanout,
}

/// One Process of the generated tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub depth: u32,
    pub ops: Vec<NodeOp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildNode {
    pub node: Node,
    pub key: String,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeOp {
    Dispatch(Json),
    /// Fan-out only.
    Batch(Vec<Json>),
    Wait(String),
    /// Fan-out only: a wait whose opening is consumed by a checkpoint Step before the
    /// Process parks (the head then shows the wait open while the Process still runs).
    LazyWait(String),
    /// A testkit child (runs alone, parent waits for it to drain).
    Child(Box<ChildNode>),
    /// Fan-out only: concurrent children.
    Spawn { children: Vec<ChildNode>, boundary: Boundary },
    Checkpoint,
    Fail(String),
}

/// The deployments of a world: per depth one testkit and one fan-out deployment, each able to
/// start both kinds one level deeper.
pub struct Deployments {
    testkit: Vec<Deployment>,
    fanout: Vec<Deployment>,
    pub resolver: Arc<DeploymentSet>,
}

impl Deployments {
    /// The world's deployments, built once per process: they are immutable and identical
    /// for every run (descriptor schemas are costly to compile in debug builds).
    pub fn shared() -> &'static Deployments {
        static SHARED: std::sync::OnceLock<Deployments> = std::sync::OnceLock::new();
        SHARED.get_or_init(Deployments::new)
    }

    pub fn new() -> Deployments {
        let dispatcher: Arc<dyn Dispatcher> = Arc::new(SimDispatcher);
        let mut testkit = Vec::new();
        let mut fanout = Vec::new();
        let mut set = DeploymentSet::new();
        for depth in (0..=MAX_TREE_DEPTH).rev() {
            let children = match (testkit.last(), fanout.last()) {
                (Some(t), Some(f)) => vec![Deployment::reference(t).clone(), Deployment::reference(f).clone()],
                _ => vec![],
            };
            let t = script_deployment(&format!("keel.sim.script.d{depth}"), Some(dispatcher.clone()), children.clone());
            let name = format!("keel.sim.fanout.d{depth}");
            // The names and schemas are static and valid: construction cannot fail.
            let definition = FanoutDefinition::new(&name, children).unwrap_or_else(|e| panic!("fan-out descriptor: {e}"));
            let f = Deployment::new(
                Arc::new(definition),
                Some(dispatcher.clone()),
                Digest::of(b"keel.sim.fanout.implementation"),
                Digest::of(name.as_bytes()),
            );
            set.insert(t.clone());
            set.insert(f.clone());
            testkit.push(t);
            fanout.push(f);
        }
        testkit.reverse();
        fanout.reverse();
        Deployments { testkit, fanout, resolver: Arc::new(set) }
    }

    /// The deployment running `kind` at `depth` (depths beyond the deepest reuse the deepest).
    pub fn of(&self, kind: NodeKind, depth: u32) -> &Deployment {
        let list = match kind {
            NodeKind::Testkit => &self.testkit,
            NodeKind::Fanout => &self.fanout,
        };
        let i = (depth as usize).min(list.len() - 1);
        &list[i]
    }
}

impl Default for Deployments {
    fn default() -> Self {
        Deployments::new()
    }
}

/// Per-dimension estimate of what a subtree needs: [steps, effects, signals].
type Need = [u64; 3];

fn add(a: Need, b: Need) -> Need {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn budget_of(n: Need) -> Budget {
    Budget::finite(n[0], n[1], n[2])
}

fn grant_need(b: &Budget) -> Need {
    let m = |q: Quota| q.maximum().unwrap_or(0);
    [m(b.steps), m(b.effects), m(b.signals)]
}

/// What a node's own Steps, Effects and Signals cost, plus the grants of its children.
pub fn estimate(node: &Node) -> Need {
    let mut need = [1, 0, 0]; // the completing Step
    for op in &node.ops {
        let (own, children): (Need, Vec<&ChildNode>) = match op {
            NodeOp::Dispatch(_) => ([1, 1, 1], vec![]),
            NodeOp::Batch(ps) => ([1, ps.len() as u64, ps.len() as u64], vec![]),
            NodeOp::Wait(_) => ([2, 1, 2], vec![]),
            NodeOp::LazyWait(_) => ([3, 1, 2], vec![]),
            NodeOp::Child(c) => ([3, 2, 3], vec![c.as_ref()]),
            NodeOp::Spawn { children, .. } => {
                let n = children.len() as u64;
                ([3, n + 1, n + 2], children.iter().collect())
            }
            NodeOp::Checkpoint | NodeOp::Fail(_) => ([1, 0, 0], vec![]),
        };
        need = add(need, own);
        for c in children {
            need = add(need, grant_need(&c.budget));
        }
        if matches!(op, NodeOp::Fail(_)) {
            break;
        }
    }
    need
}

struct Generator<'a> {
    rng: &'a SeededRng,
    params: &'a ShapeParams,
    next_effect: u64,
    processes: u32,
}

impl Generator<'_> {
    fn payload(&mut self) -> Json {
        self.next_effect += 1;
        let replay = if chance(self.rng, self.params.same_identity) { ReplayPolicy::SameIdentity } else { ReplayPolicy::Never };
        effect_payload(self.next_effect, replay)
    }

    fn child(&mut self, depth: u32, key: String, kind: NodeKind) -> ChildNode {
        self.processes += 1;
        let node = self.node(depth, kind);
        let mut need = estimate(&node);
        // Usually generous; sometimes one dimension falls short (a limit failure to survive).
        if chance(self.rng, self.params.tight_budget) {
            let d = below(self.rng, 3) as usize;
            need[d] = need[d].saturating_sub(1 + below(self.rng, 2));
        } else {
            for n in &mut need {
                *n += below(self.rng, 3);
            }
        }
        ChildNode { node, key, budget: budget_of(need) }
    }

    fn node(&mut self, depth: u32, kind: NodeKind) -> Node {
        let max_ops = if depth == 0 { MAX_OPS_PER_SCRIPT } else { MAX_OPS_PER_SCRIPT - 1 };
        let count = between(self.rng, 1, max_ops);
        let mut ops = Vec::new();
        for i in 0..count {
            let mut weights = self.params.op_weights;
            if kind == NodeKind::Testkit {
                weights[1] = 0; // batches are fan-out only
            }
            if depth >= self.params.max_depth || self.processes >= MAX_PROCESSES {
                weights[3] = 0;
            }
            let op = match weighted(self.rng, &weights) {
                Some(1) => {
                    let n = between(self.rng, 2, MAX_BATCH);
                    NodeOp::Batch((0..n).map(|_| self.payload()).collect())
                }
                Some(2) if kind == NodeKind::Fanout && chance(self.rng, 500) => NodeOp::LazyWait(format!("w{i}")),
                Some(2) => NodeOp::Wait(format!("w{i}")),
                Some(3) if kind == NodeKind::Testkit => {
                    // A testkit child's script is a testkit script.
                    NodeOp::Child(Box::new(self.child(depth + 1, format!("c{i}"), NodeKind::Testkit)))
                }
                Some(3) => {
                    let room = u64::from(MAX_PROCESSES.saturating_sub(self.processes).clamp(1, MAX_SPAWN));
                    let n = 1 + below(self.rng, room);
                    let children = (0..n)
                        .map(|k| {
                            let kind = self.kind();
                            self.child(depth + 1, format!("c{i}-{k}"), kind)
                        })
                        .collect();
                    let boundary = if chance(self.rng, 500) { Boundary::SubtreeDrained } else { Boundary::TerminalResult };
                    NodeOp::Spawn { children, boundary }
                }
                Some(4) => NodeOp::Checkpoint,
                Some(5) => NodeOp::Fail(format!("scripted failure {i}")),
                _ => NodeOp::Dispatch(self.payload()),
            };
            let fail = matches!(op, NodeOp::Fail(_));
            ops.push(op);
            if fail {
                break;
            }
        }
        Node { kind, depth, ops }
    }

    fn kind(&self) -> NodeKind {
        if chance(self.rng, self.params.fanout) {
            NodeKind::Fanout
        } else {
            NodeKind::Testkit
        }
    }
}

/// A generated workload: the root node and its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub root: Node,
    pub root_budget: Budget,
}

impl Workload {
    pub fn generate(rng: &SeededRng, params: &ShapeParams) -> Workload {
        let mut g = Generator { rng, params, next_effect: 0, processes: 1 };
        let kind = g.kind();
        let root = g.node(0, kind);
        let root_budget = if params.finite_root {
            let need = estimate(&root);
            budget_of(need.map(|n| n + 2 + below(rng, n + 1)))
        } else {
            Budget::unlimited()
        };
        Workload { root, root_budget }
    }

    /// A fixed workload (fixed-shape scenarios).
    pub fn fixed(root: Node) -> Workload {
        Workload { root, root_budget: Budget::unlimited() }
    }

    /// The root's Start input.
    pub fn input(&self, deployments: &Deployments) -> Json {
        compile(&self.root, deployments)
    }

    /// A compact description of the tree, printed with the swarm options: `T`/`F` testkit or
    /// fan-out node; ops `d` dispatch (`d*` same-identity), `bN` batch, `w` wait, `W` lazy wait, `k(..)`
    /// testkit child, `s(..)`/`S(..)` spawn waiting for results/drained subtrees, `c`
    /// checkpoint, `f` fail; `/steps.effects.signals` child budgets.
    pub fn describe(&self) -> String {
        fn child(c: &ChildNode) -> String {
            let m = grant_need(&c.budget);
            format!("{}/{}.{}.{}", node(&c.node), m[0], m[1], m[2])
        }
        fn node(n: &Node) -> String {
            let ops: Vec<String> = n
                .ops
                .iter()
                .map(|op| match op {
                    NodeOp::Dispatch(p) => {
                        if p.get("replay").and_then(Json::as_str) == Some("same_identity") { "d*".into() } else { "d".into() }
                    }
                    NodeOp::Batch(ps) => format!("b{}", ps.len()),
                    NodeOp::Wait(_) => "w".into(),
                    NodeOp::LazyWait(_) => "W".into(),
                    NodeOp::Child(c) => format!("k({})", child(c)),
                    NodeOp::Spawn { children, boundary } => {
                        let letter = if *boundary == Boundary::SubtreeDrained { "S" } else { "s" };
                        format!("{letter}({})", children.iter().map(child).collect::<Vec<_>>().join(","))
                    }
                    NodeOp::Checkpoint => "c".into(),
                    NodeOp::Fail(_) => "f".into(),
                })
                .collect();
            let kind = if n.kind == NodeKind::Testkit { "T" } else { "F" };
            format!("{kind}[{}]", ops.join(","))
        }
        node(&self.root)
    }

    /// Whether any script has a lazy wait.
    pub fn has_lazy_waits(&self) -> bool {
        fn any(n: &Node) -> bool {
            n.ops.iter().any(|op| match op {
                NodeOp::LazyWait(_) => true,
                NodeOp::Child(c) => any(&c.node),
                NodeOp::Spawn { children, .. } => children.iter().any(|c| any(&c.node)),
                _ => false,
            })
        }
        any(&self.root)
    }

    /// How many processes the tree would have if every start succeeds.
    pub fn process_count(&self) -> u32 {
        fn count(n: &Node) -> u32 {
            1 + n
                .ops
                .iter()
                .map(|op| match op {
                    NodeOp::Child(c) => count(&c.node),
                    NodeOp::Spawn { children, .. } => children.iter().map(|c| count(&c.node)).sum(),
                    _ => 0,
                })
                .sum::<u32>()
        }
        count(&self.root)
    }
}

/// The Start input of `node` for its deployment.
pub fn compile(node: &Node, deployments: &Deployments) -> Json {
    match node.kind {
        NodeKind::Testkit => Json::Array(testkit_ops(node, deployments).iter().map(ToJson::to_json).collect()),
        NodeKind::Fanout => Json::Array(fanout_ops(node, deployments).iter().map(ToJson::to_json).collect()),
    }
}

fn testkit_ops(node: &Node, deployments: &Deployments) -> Vec<Op> {
    node.ops
        .iter()
        .filter_map(|op| match op {
            NodeOp::Dispatch(p) => Some(Op::Dispatch(p.clone())),
            NodeOp::Wait(k) => Some(Op::Wait(k.clone())),
            NodeOp::Child(c) => Some(Op::Child {
                deployment: deployments.of(NodeKind::Testkit, c.node.depth).reference().clone(),
                script: testkit_ops(&c.node, deployments),
                key: c.key.clone(),
                budget: c.budget,
            }),
            NodeOp::Checkpoint => Some(Op::Checkpoint),
            NodeOp::Fail(m) => Some(Op::Fail(m.clone())),
            // Not generated for testkit nodes.
            NodeOp::Batch(_) | NodeOp::LazyWait(_) | NodeOp::Spawn { .. } => None,
        })
        .collect()
}

fn fanout_ops(node: &Node, deployments: &Deployments) -> Vec<FanOp> {
    node.ops
        .iter()
        .filter_map(|op| match op {
            NodeOp::Dispatch(p) => Some(FanOp::Dispatch(p.clone())),
            NodeOp::Batch(ps) => Some(FanOp::Batch(ps.clone())),
            NodeOp::Wait(k) => Some(FanOp::Wait(k.clone())),
            NodeOp::LazyWait(k) => Some(FanOp::LazyWait(k.clone())),
            NodeOp::Spawn { children, boundary } => Some(FanOp::Spawn {
                children: children
                    .iter()
                    .map(|c| ChildPlan {
                        // Index into the fan-out deployment's children: [testkit, fan-out].
                        deployment: match c.node.kind {
                            NodeKind::Testkit => 0,
                            NodeKind::Fanout => 1,
                        },
                        input: compile(&c.node, deployments),
                        key: c.key.clone(),
                        budget: c.budget,
                    })
                    .collect(),
                boundary: *boundary,
            }),
            NodeOp::Checkpoint => Some(FanOp::Checkpoint),
            NodeOp::Fail(m) => Some(FanOp::Fail(m.clone())),
            NodeOp::Child(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_world::swarm::Swarm;

    #[test]
    fn generated_trees_respect_the_bounds() {
        for seed in 0..200 {
            let rng = SeededRng::new(seed);
            let swarm = Swarm::draw(&rng);
            let w = Workload::generate(&rng, &swarm.shape);
            assert!(w.process_count() <= MAX_PROCESSES + MAX_SPAWN, "seed {seed}: {}", w.process_count());
            fn depth(n: &Node) -> u32 {
                n.ops
                    .iter()
                    .map(|op| match op {
                        NodeOp::Child(c) => depth(&c.node),
                        NodeOp::Spawn { children, .. } => children.iter().map(|c| depth(&c.node)).max().unwrap_or(0),
                        _ => n.depth,
                    })
                    .max()
                    .unwrap_or(n.depth)
                    .max(n.depth)
            }
            assert!(depth(&w.root) <= MAX_TREE_DEPTH);
        }
    }

    #[test]
    fn deployments_bind_and_resolve() {
        let d = Deployments::new();
        for depth in 0..=MAX_TREE_DEPTH {
            for kind in [NodeKind::Testkit, NodeKind::Fanout] {
                let dep = d.of(kind, depth);
                assert!(dep.check_binding().is_ok());
                assert!(keel::kernel::binding::DeploymentResolver::resolve(d.resolver.as_ref(), dep.reference()).is_some());
            }
        }
    }
}
