//! Fault-test your own agent: seeded campaigns over an agent built with `keel::agent`, its
//! real tools, schemas, limits, delegates, validator and Unknown policies.
//!
//! ```no_run
//! use keel::prelude::*;
//! use keel_sim::harness::{Campaign, Faults};
//!
//! fn my_agent() -> AgentBuilder {
//!     Agent::builder("weather").version("1").tool(AskHuman::new("ask_user", "Ask the user."))
//! }
//! let script = ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Done.");
//! Campaign::new(my_agent, script).seeds(0..1000).faults(Faults::all()).answers(["Paris"]).run().assert_ok();
//! ```
//!
//! Every seed runs the agent on the facade's `Runtime` under madsim (scheduling, time and ids
//! from the seed) and injects, per [`Faults`]:
//! * at the dispatch boundary around each tool call: a delay, a held-back result (calls
//!   finish out of order), a panic, a host failure, a cancellation or a deadline, each before
//!   or after the tool's own code ran, and for tools declared idempotent a second run;
//! * at every commit: a crash after it, a lost acknowledgement, a failure before it. The
//!   host then restores the run in a new `Runtime` (as a restarted process would), and the
//!   agent's declared Unknown policies apply.
//!
//! The host answers input requests from the campaign's answers (checked against each
//! request's real response schema), settles held Unknowns as failed, and steers or cancels
//! at the model calls the campaign names. The oracle (`oracle`) checks the invariants against
//! the ledger of the user's tool runs, the requests the model received and the store's
//! records. A failing seed prints a one-line replay command (`KEEL_SEED=N cargo test --test
//! NAME -- TEST --exact`) and is appended to the crate's regressions file, which later runs
//! replay first.
//!
//! Determinism needs `--cfg madsim` (in `.cargo/config.toml`: `[build] rustflags = ["--cfg",
//! "madsim"]`); keel-sim's build script refuses a build without it and says so.
//!
//! Tools that do real I/O get a double (`Campaign::double`, or `Campaign::recorded_tools` from
//! a recorded run): madsim replaces Tokio's reactor, and a tool needing it is reported as a
//! harness configuration error naming the tool, not as a failing seed. `Campaign::replay`
//! runs a recorded run (`keel::transcript`) of the user's agent under faults. Every report
//! counts the agent states its runs reached (`states`), says what would fire each reachable
//! fault or reach each state that was missed (`reach`), and can be written as an HTML index;
//! `Campaign::search` picks seeds that favor states not reached yet.
//!
//! Code map: `campaign` — the builder, the report, the replay command; `faults` — fault kinds
//! and a seed's plan; `world` — what one run shares (ledger, hooks, trace, states); `tool` — the
//! fault-injecting dispatch boundary; `double` — tool doubles; `model` — the script or the
//! recorded responses; `run` — the driver and host; `oracle` — the invariants; `reach` — what
//! an agent's shape can reach; `states` — state coverage; `search` — seed search; `html` — the
//! campaign index page; `regressions` — the user's regressions file; `builtin` — the facade
//! agent of keel-sim's own default campaign.

mod builtin;
mod campaign;
mod double;
mod faults;
mod html;
mod model;
mod oracle;
mod reach;
mod regressions;
mod run;
mod search;
mod states;
mod tool;
mod world;

pub use builtin::{facade_scenario, FacadeScenario};
pub use campaign::{Campaign, CampaignReport, HostAction, DEFAULT_REGRESSIONS, SEED_VARIABLE};
pub use faults::{FaultKind, Faults};
pub use run::HELD_UNKNOWN_TEXT;

/// Every `faults_fired` key a harness run reports.
pub const HARNESS_FAULT_KINDS: &[&str] = &[
    "tool.delay",
    "tool.reorder",
    "tool.panic",
    "tool.host_failure",
    "tool.cancel",
    "tool.deadline",
    "tool.repeat",
    "commit.crash_after",
    "commit.lose_ack",
    "commit.fail_before",
    "host.crash",
    "host.input.answer",
    "host.steer",
    "host.cancel",
    "unknown.hold",
    "unknown.report_to_model",
    "unknown.retry",
    "unknown.other",
];

/// What a harness run declares it can fire (keel-sim's default campaign judges its built-in
/// facade scenario against it).
pub static COVERAGE: crate::coverage::Coverage = crate::coverage::Coverage {
    world: "facade",
    fault_kinds: HARNESS_FAULT_KINDS,
    boundaries: crate::interaction_world::INTERACTION_BOUNDARIES,
    boundary_faults: &["crash_after", "lose_ack", "fail_before"],
};
