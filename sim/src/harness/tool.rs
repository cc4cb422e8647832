//! The dispatch boundary around a user's real tool: seeded faults before and after the tool's
//! own code, and a ledger entry for every run of that code.

use super::double::{needs_tokio_runtime, Double};
use super::faults::FaultKind;
use super::world::{ToolRun, World};
use futures::FutureExt;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use crate::swarm_rng::SwarmRng;
use keel::agent::{ToolOptions, UnknownPolicy};
use keel::chat::ToolOutput;
use keel::env::BoxFuture;
use keel::interaction::attribution::ToolInvocation;
use keel::tool::{Concurrency, Invocation, Tool, ToolContext, ToolDefinitionInput, ToolError};
use std::sync::Arc;
use std::time::Duration;

/// Longest injected delay, in simulated milliseconds.
const MAX_DELAY_MS: u64 = 40;

pub(crate) struct FaultyTool {
    pub inner: Arc<dyn Tool>,
    pub policy: UnknownPolicy,
    pub world: Arc<World>,
    /// What runs instead of the tool's own code under the simulator, if the campaign doubles it.
    pub double: Option<Double>,
}

/// The invariant a tool that needs Tokio's reactor breaks: a harness configuration error.
pub(crate) const TOOL_NEEDS_DOUBLE: &str = "tool_needs_double";

impl FaultyTool {
    pub fn wrap(
        world: Arc<World>,
        doubles: Arc<BTreeMap<String, Double>>,
    ) -> impl Fn(Arc<dyn Tool>, &ToolOptions) -> Arc<dyn Tool> + Send + Sync + 'static {
        move |inner, options| {
            let double = doubles.get(&inner.spec().name).cloned();
            Arc::new(FaultyTool {
                inner,
                policy: options.unknown_policy(),
                world: world.clone(),
                double,
            }) as Arc<dyn Tool>
        }
    }

    /// The user's code, or its double. A panic saying the code needs Tokio's reactor (real
    /// network or timer I/O under madsim) becomes a named harness configuration error and a
    /// failure of the call, not a crash of the run.
    async fn user_code(&self, invocation: &Invocation, cx: ToolContext) -> Result<ToolOutput, ToolError> {
        let tool = invocation.name();
        if let Some(double) = &self.double {
            return match double.answer(tool, invocation.arguments_json()) {
                Ok(Ok(text)) => Ok(ToolOutput::text(text)),
                Ok(Err(text)) => Err(ToolError::failed(text)),
                Err(missing) => {
                    self.world.violation(crate::world::Violation::new(TOOL_NEEDS_DOUBLE, missing.clone()));
                    Err(ToolError::failed(missing))
                }
            };
        }
        match AssertUnwindSafe(self.inner.call(invocation, cx)).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => {
                let message = crate::world::panic_message(payload.as_ref());
                if !needs_tokio_runtime(&message) {
                    std::panic::resume_unwind(payload);
                }
                crate::panics::forget_last(&message);
                let detail = format!(
                    "tool `{tool}` does real I/O through Tokio (it panicked: \"{message}\"), which cannot run under the simulator: a harness configuration error, not a bug of the agent. Give the campaign a double for it, `Campaign::double(\"{tool}\", |args| Ok(...))`, or serve its results from a recorded run, `Campaign::recorded_tools(&transcript)`; the agent's definition stays as it is"
                );
                self.world.violation(crate::world::Violation::new(TOOL_NEEDS_DOUBLE, detail.clone()));
                // A definite failure the model sees: the run goes on and ends, and the report
                // names the configuration error once.
                Err(ToolError::failed(detail))
            }
        }
    }
}

fn describe(outcome: &Result<ToolOutput, ToolError>) -> String {
    match outcome {
        Ok(out) => format!("ok: {}", out.content),
        Err(ToolError::InputRequired(_)) => "input requested".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

/// A seed for one entry into the boundary: the run's seed, the Effect and how many times it
/// was entered before, so a call's faults do not depend on the order calls start in.
fn call_rng(seed: u64, effect: &str, entry: usize) -> SwarmRng {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in effect.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    SwarmRng::new(seed ^ h, 0x7001 + entry as u64)
}

impl FaultyTool {
    async fn run_user_code(
        &self,
        invocation: &Invocation,
        cx: ToolContext,
        effect: &keel::kernel::ids::EffectId,
        probe: bool,
    ) -> Result<ToolOutput, ToolError> {
        let name = invocation.name().to_owned();
        let index = self.world.begin_run(
            effect,
            ToolRun {
                tool: name,
                policy: self.policy,
                outcome: None,
                probe,
            },
        );
        struct Dropped<'a>(&'a World, bool);
        impl Drop for Dropped<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.drop_run();
                }
            }
        }
        let mut guard = Dropped(&self.world, false);
        if !probe {
            // Host actions the campaign performs while this tool runs (steer_during).
            self.world.hook_tool(invocation.name()).await;
        }
        let outcome = self.user_code(invocation, cx).await;
        guard.1 = true;
        self.world.end_run(effect, index, describe(&outcome));
        outcome
    }

    async fn dispatch(
        &self,
        invocation: &Invocation,
        cx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(effect) = ToolInvocation::from_context(&cx).map(|i| i.effect_id().clone()) else {
            // Not dispatched by the tool child (a direct call): nothing to attribute.
            return self.user_code(invocation, cx).await;
        };
        let _inside = self.world.enter_dispatch();
        let earlier = self.world.runs_of(&effect);
        let entry = earlier.iter().filter(|r| !r.probe).count();
        let mut rng = call_rng(self.world.seed, effect.as_str(), entry);
        let fault = self.world.plan.tool_fault(&mut rng);
        let after = rng.percent(50);
        let tool = invocation.name().to_owned();
        self.world.trace(format!(
            "tool {tool} {} entry {entry} fault {}",
            invocation.id(),
            fault.map_or("none", FaultKind::as_str)
        ));
        if let Some(kind) = fault {
            self.world.fired(kind.as_str());
        }
        if cx.continuation().is_some() {
            self.world.input_waits(invocation.id(), false);
        }
        if fault == Some(FaultKind::Delay) {
            let ms = 1 + rng.below(MAX_DELAY_MS);
            self.world.env.clock.sleep(Duration::from_millis(ms)).await;
        }
        let failure = match fault {
            Some(FaultKind::Panic) => Some(FaultKind::Panic),
            Some(FaultKind::HostFailure) => Some(FaultKind::HostFailure),
            Some(FaultKind::Cancel) => Some(FaultKind::Cancel),
            Some(FaultKind::Deadline) => Some(FaultKind::Deadline),
            _ => None,
        };
        if failure.is_some() && self.world.other_input_waits(invocation.id()) {
            self.world.reached(super::states::UNKNOWN_WHILE_INPUT_WAITS);
        }
        if let (Some(kind), false) = (failure, after) {
            return fail(kind, &tool);
        }
        let outcome = self
            .run_user_code(invocation, cx.clone(), &effect, false)
            .await;
        let input = matches!(outcome, Err(ToolError::InputRequired(_)));
        if input {
            self.world.input_waits(invocation.id(), true);
        }
        if fault == Some(FaultKind::Repeat) && self.policy == UnknownPolicy::Retry && !input {
            // An idempotent tool may be run twice for one call; both runs must agree.
            let again = self.run_user_code(invocation, cx, &effect, true).await;
            self.world.check();
            let (first, second) = (describe(&outcome), describe(&again));
            if first != second {
                self.world.violation(crate::world::Violation::new(
                    "idempotent_declared",
                    format!(
                        "tool `{tool}` is declared idempotent (Unknown policy retry), but two runs of call {} returned `{first}` then `{second}`: its effect happened twice",
                        invocation.id()
                    ),
                ));
            }
        }
        if fault == Some(FaultKind::Reorder) {
            let ms = 1 + rng.below(MAX_DELAY_MS);
            self.world.env.clock.sleep(Duration::from_millis(ms)).await;
        }
        if let Some(kind) = failure {
            // The tool's code ran and took effect; the report of it is lost.
            return fail(kind, &tool);
        }
        outcome
    }
}

fn fail(kind: FaultKind, tool: &str) -> Result<ToolOutput, ToolError> {
    match kind {
        // Silent on purpose: a simulated fault, not a bug (see `crate::panics`).
        FaultKind::Panic => crate::panics::simulated_panic(format!(
            "simulated panic at the dispatch boundary of tool {tool}"
        )),
        FaultKind::HostFailure => Err(ToolError::host_failure(
            "simulated host failure at the dispatch boundary",
        )),
        FaultKind::Cancel => Err(ToolError::Canceled),
        _ => Err(ToolError::DeadlineExceeded),
    }
}

impl Tool for FaultyTool {
    fn spec(&self) -> ToolDefinitionInput {
        self.inner.spec()
    }

    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        cx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.dispatch(invocation, cx))
    }

    fn concurrency(&self, invocation: &Invocation) -> Option<Concurrency> {
        self.inner.concurrency(invocation)
    }

    fn returns_direct_result(&self) -> bool {
        self.inner.returns_direct_result()
    }
}
