//! `provider-adapters`: the real OpenAI and Anthropic adapters (`keel-providers`) in place of
//! the scripted model, on the `keel::agent` facade and the Engine under madsim. Their HTTP
//! goes through `testing::ExchangeTransport`, which serves the recorded fixture exchanges from
//! memory with their chunk boundaries, so the adapters' request building, response parsing
//! and mapping run on simulated time and seeded scheduling.
//!
//! Per seed: the provider, and whether the run's store crashes after one of its commits (the
//! writer stops; a new runtime resumes the run from the store's head and the model call or
//! tool call that was in flight is performed again under the `Retry` Unknown policy, which
//! the exchange transport answers with the same recorded response). Every run must end
//! completed with the recorded answer.

use std::sync::Arc;

use keel::kernel::commit::{CommitCall, CommitCallKind, Fault, FaultyCommitter, MemoryCommitter};
use keel::prelude::*;
use keel_providers::anthropic::{AnthropicClient, AnthropicConfig};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{ExchangeTransport, Fixture};
use keel_providers::Pacing;

use crate::coverage::Coverage;
use crate::swarm_rng::SwarmRng;
use crate::trace::Trace;
use crate::world::{RunOptions, RunReport, Scenario, Violation};

// The recorded exchanges, embedded (by `keel-providers`, whose package holds them) so the
// binary runs from any directory.
use keel_providers::testing::recorded::{ANTHROPIC_TOOL_ROUND, OPENAI_TOOL_ROUND};

/// Commits a run makes at most before a crash is drawn among them.
const CRASH_WINDOW: u64 = 12;
/// Percent of seeds whose store crashes once.
const CRASH_PERCENT: u64 = 50;
/// The commit boundaries of a tool round's first commits, where the store may crash. (No
/// `progress`: the parent's parked child wait is committed with the tool child's start.)
const BOUNDARIES: &[&str] = &["start", "pending", "settled", "child_start", "terminal"];
/// Resumes one run may need (one crash, then a clean writer).
const MAX_RESUMES: u32 = 3;

/// `provider-adapters`.
pub struct ProviderAdapters;

#[derive(Clone, Copy, Debug)]
enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The recorded answer every run must end with.
    fn answer(self) -> &'static str {
        match self {
            Provider::OpenAi => "It is 18°C and clear in Paris.",
            Provider::Anthropic => "18°C and clear.",
        }
    }
}

fn weather() -> impl Tool {
    tool_fn(
        "weather",
        "Current weather in a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |args| async move {
            let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
            Ok(format!("{city}: 18°C, clear"))
        },
    )
}

/// The agent over `provider`'s adapter sending through `transport`.
fn agent(provider: Provider, env: &keel::env::Env, transport: Arc<ExchangeTransport>) -> Result<(Agent, Vec<Message>), String> {
    let tool = ToolOptions::new().on_unknown(UnknownPolicy::Retry);
    let (builder, messages) = match provider {
        Provider::OpenAi => {
            let config =
                OpenAiConfig::compatible("http://fixture.invalid/v1", "gpt-4o-mini", Pacing::new(env)).with_api_key("test-key");
            let client = OpenAiClient::with_transport(config, transport).map_err(|e| e.to_string())?;
            (Agent::builder("weather").model(client), vec![Message::user("What is the weather in Paris?")])
        }
        Provider::Anthropic => {
            let mut config =
                AnthropicConfig::at("http://fixture.invalid", "claude-sonnet-4-5", Pacing::new(env)).with_api_key("test-key");
            config.max_tokens = 1024;
            let client = AnthropicClient::with_transport(config, transport).map_err(|e| e.to_string())?;
            let messages =
                vec![Message::system("You are a terse weather assistant."), Message::user("What is the weather in Paris?")];
            (Agent::builder("example.weather").model(client), messages)
        }
    };
    let agent = builder
        .version("1")
        .on_model_unknown(UnknownPolicy::Retry)
        .tool_with(weather(), tool)
        .max_model_calls(4)
        .build()
        .map_err(|e| e.to_string())?;
    Ok((agent, messages))
}

/// What one run did.
struct Ran {
    text: Result<String, String>,
    served: usize,
    /// The boundary of the commit the store crashed after.
    crashed_at: Option<&'static str>,
    resumes: u32,
}

async fn drive(provider: Provider, crash_at: Option<u64>, trace: &mut Trace) -> Ran {
    let env = match keel::env::MadsimEnv::current() {
        Ok(m) => m.env(),
        Err(e) => return Ran { text: Err(format!("no madsim environment: {e}")), served: 0, crashed_at: None, resumes: 0 },
    };
    let fixture_text = match provider {
        Provider::OpenAi => OPENAI_TOOL_ROUND,
        Provider::Anthropic => ANTHROPIC_TOOL_ROUND,
    };
    let fixture = match Fixture::parse(fixture_text) {
        Ok(f) => f,
        Err(e) => return Ran { text: Err(format!("fixture: {e}")), served: 0, crashed_at: None, resumes: 0 },
    };
    let transport = Arc::new(ExchangeTransport::new(fixture, env.clock.clone()));
    let store = Arc::new(FaultyCommitter::new(MemoryCommitter::new()));
    let fired = Arc::new(std::sync::Mutex::new(None));
    let plan_fired = fired.clone();
    let mut commits = 0u64;
    store.set_fault_plan(Box::new(move |call: &CommitCall| {
        if matches!(call.kind, CommitCallKind::Load) {
            return Fault::Pass;
        }
        let index = commits;
        commits += 1;
        let mut slot = plan_fired.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() && Some(index) == crash_at {
            let boundary = match &call.kind {
                CommitCallKind::Checkpoint(k) => k.as_str(),
                CommitCallKind::Effect { kind, .. } => kind.as_str(),
                CommitCallKind::Activation | CommitCallKind::Load => "activation",
            };
            *slot = Some(boundary);
            return Fault::CrashAfter;
        }
        Fault::Pass
    }));
    let mut resumes = 0;
    let mut id = None;
    let text = loop {
        let (agent, messages) = match agent(provider, &env, transport.clone()) {
            Ok(a) => a,
            Err(e) => break Err(e),
        };
        let runtime = Runtime::with_store(agent, store.clone(), env.clone());
        let run = match &id {
            None => runtime.start_messages(messages).await,
            Some(id) => runtime.resume(id).await,
        };
        let outcome = match run {
            Ok(run) => {
                id = Some(run.id());
                // A run that ended without completing is an outcome, not a stopped writer.
                run.result().await.or_else(|e| match e {
                    keel::agent::RunError::NotCompleted(failure) => Ok(failure.result().clone()),
                    e => Err(e.to_string()),
                })
            }
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(result) if result.is_completed() => break Ok(result.text()),
            Ok(result) => break Err(format!("the run ended {:?}: {}", result.status(), result.reason())),
            Err(e) if resumes < MAX_RESUMES && fired.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some() => {
                trace.push(format!("writer stopped ({e}); resume"));
                resumes += 1;
            }
            Err(e) => break Err(e),
        }
    };
    let crashed_at = *fired.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Ran { text, served: transport.served(), crashed_at, resumes }
}

/// What the `provider-adapters` campaign reports: which adapter ran and where the store
/// crashed (every boundary a tool round's first commits cross).
pub static COVERAGE: Coverage = Coverage {
    world: "providers",
    fault_kinds: &["commit.crash_after", "provider.anthropic", "provider.openai"],
    boundaries: BOUNDARIES,
    boundary_faults: &["crash_after"],
};

impl Scenario for ProviderAdapters {
    fn name(&self) -> &str {
        "provider-adapters"
    }

    fn coverage(&self) -> Option<&'static Coverage> {
        Some(&COVERAGE)
    }

    fn description(&self) -> &str {
        "the OpenAI and Anthropic adapters in place of the scripted model (recorded exchanges served in memory) on the facade under madsim, crashed after a commit and resumed"
    }

    fn run(&self, seed: u64, options: &RunOptions) -> RunReport {
        let mut report = RunReport::new(self.name(), seed);
        let mut rng = SwarmRng::new(seed, 0x9A0D);
        let provider = if rng.percent(50) { Provider::OpenAi } else { Provider::Anthropic };
        let crash_at = rng.percent(CRASH_PERCENT).then(|| rng.below(CRASH_WINDOW));
        report.swarm.insert("provider".into(), provider.name().into());
        report.swarm.insert("crash_at".into(), crash_at.map_or_else(|| "none".into(), |c| c.to_string()));
        let mut trace = Trace::new(options.keep_trace);
        trace.push(format!("provider {} seed {seed} crash_at {crash_at:?}", provider.name()));
        let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
        let ran = rt.block_on(async move {
            let ran = drive(provider, crash_at, &mut trace).await;
            (ran, trace)
        });
        let (ran, mut trace) = ran;
        *report.faults_fired.entry(format!("provider.{}", provider.name())).or_insert(0) += 1;
        if let Some(boundary) = ran.crashed_at {
            *report.faults_fired.entry("commit.crash_after".into()).or_insert(0) += 1;
            *report.crash_points_hit.entry(format!("{boundary}.crash_after")).or_insert(0) += 1;
        }
        report.invariants_checked = 2;
        match &ran.text {
            Ok(text) if text == provider.answer() => {}
            Ok(text) => report.violations.push(Violation::new(
                "provider_recorded_answer",
                format!("{} ended with {text:?}, the recording with {:?}", provider.name(), provider.answer()),
            )),
            Err(e) => report.violations.push(Violation::new("provider_run_completes", format!("{}: {e}", provider.name()))),
        }
        if ran.served < 2 {
            report.violations.push(Violation::new(
                "provider_exchanges_served",
                format!("{} of 2 recorded exchanges were requested", ran.served),
            ));
        }
        trace.push(format!("end {:?} served {} resumes {}", ran.text, ran.served, ran.resumes));
        report.outcome = format!("{}: {} exchanges served, {} resumes", provider.name(), ran.served, ran.resumes);
        trace.finish_into(&mut report);
        report
    }
}
