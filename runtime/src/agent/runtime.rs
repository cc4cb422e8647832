//! The runtime: one agent over one store, starting and resuming runs.

use super::builder::Agent;
use super::recovery::UnknownEffect;
use super::run::{Run, RunId};
use super::run_error::{RestoreRefused, RunError};
use super::tracker::RunShared;
use crate::chat::Message;
use crate::env::Env;
use super::versions::Versions;
use crate::interaction::protocol::{InteractionInput, Lineage};
use crate::interaction::state::ParentState;
use crate::interaction::wire::Wire;
use crate::kernel::capability::CapabilitySet;
use crate::kernel::commit::{Committer, MemoryCommitter};
use crate::kernel::effect::EffectPhase;
use crate::kernel::engine::{Engine, EngineConfig};
use crate::kernel::event::{names, Event, EventListener};
use crate::kernel::ids::EffectId;
use crate::kernel::owner::RootConfig;
use crate::kernel::resource::Budget;
use crate::kernel::snapshot::TreeSnapshot;
use crate::kernel::tree_limits::TreeLimits;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

/// Runs one [`Agent`] over one store. Cheap to clone.
///
/// Every run is durable in the store: [`resume`](Runtime::resume) continues it in a new
/// process after an exit or a crash, under the same agent configuration and version.
///
/// ```
/// use keel::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// use keel::env::TokioEnv;
/// use keel::kernel::commit::{Committer, MemoryCommitter};
/// use std::sync::Arc;
/// let agent = || {
///     Agent::builder("concierge")
///         .version("1")
///         .model(ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("Booked."))
///         .tool(AskHuman::new("ask_user", "Asks the user a question."))
///         .build()
/// };
/// // One store (here in memory; `Runtime::on_disk(agent, dir)` in a real program).
/// let store: Arc<dyn Committer> = Arc::new(MemoryCommitter::new());
/// let env = TokioEnv::current()?.env();
/// let first = Runtime::with_store(agent()?, store.clone(), env.clone());
/// let run = first.start("Book me a hotel.").await?;
/// assert!(matches!(run.idle().await?, Idle::NeedsInput(_)));
/// let id = run.id(); // all another process needs
/// drop((run, first)); // the program exits while the run waits for its answer
///
/// let second = Runtime::with_store(agent()?, store, env);
/// let run = second.resume(&id).await?;
/// let question = run.pending_inputs().remove(0); // the question is durable too
/// run.answer_text(&question, "Lyon").await?;
/// assert_eq!(run.result().await?.text(), "Booked.");
/// # Ok(()) })
/// # }
/// ```
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

pub(crate) struct RuntimeInner {
    /// The version new runs start under (also `versions`' first).
    pub(crate) agent: Agent,
    /// Every registered version of the agent (`versions.rs`).
    pub(crate) versions: Arc<Versions>,
    pub(crate) engine: Engine,
    pub(crate) committer: Arc<dyn Committer>,
    pub(crate) env: Env,
    listener: Arc<Listener>,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        // The listener lives inside the engine; dropping its engine handle breaks the cycle.
        *self.listener.engine.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("agent", &self.inner.agent).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Runs `agent` over an in-memory store on the current tokio runtime (runs do not
    /// survive the process).
    #[cfg(feature = "tokio")]
    pub fn in_memory(agent: Agent) -> Result<Runtime, RunError> {
        let env = crate::env::TokioEnv::current().map_err(|e| RunError::Engine(e.to_string()))?.env();
        Ok(Runtime::with_store(agent, Arc::new(MemoryCommitter::new()), env))
    }

    /// Runs `agent` over an on-disk store in `dir` (created if missing) on the current tokio
    /// runtime. One process at a time may open a directory.
    #[cfg(feature = "tokio")]
    pub fn on_disk(agent: Agent, dir: impl AsRef<std::path::Path>) -> Result<Runtime, RunError> {
        let env = crate::env::TokioEnv::current().map_err(|e| RunError::Engine(e.to_string()))?.env();
        use crate::kernel::commit::OpenError;
        let store = crate::kernel::commit::FileCommitter::open(dir.as_ref()).map_err(|e| match e {
            // Another process writes this directory: a conflict between writers, not an I/O failure.
            OpenError::Locked { .. } => RunError::Conflict(e.to_string()),
            e => RunError::Store(e.to_string()),
        })?;
        Ok(Runtime::with_store(agent, Arc::new(store), env))
    }

    /// Runs `agent` over any store and environment (a simulated one, for example).
    pub fn with_store(agent: Agent, committer: Arc<dyn Committer>, env: Env) -> Runtime {
        agent.inner.set_env(&env);
        let versions = Arc::new(Versions::new(agent.clone()));
        let listener = Arc::new(Listener { versions: versions.clone(), env: env.clone(), engine: Mutex::new(None) });
        let engine = Engine::new(EngineConfig {
            env: env.clone(),
            committer: committer.clone(),
            resolver: versions.clone(),
            root: RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits: TreeLimits::default() },
            listeners: vec![listener.clone()],
        });
        *listener.engine.lock().unwrap_or_else(PoisonError::into_inner) = Some(engine.clone());
        Runtime { inner: Arc::new(RuntimeInner { agent, versions, engine, committer, env, listener }) }
    }

    /// Adds another version of the agent (same name, another [`version`](super::AgentBuilder::version)),
    /// so that runs it started are resumed under it; new runs still start under the version
    /// the runtime was built with. Registering the same agent twice is harmless; another
    /// configuration under a version already registered, or another agent, is refused.
    ///
    /// ```
    /// use keel::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let v1 = Agent::builder("support").version("1").model(ScriptedModel::new().then_text("v1")).build()?;
    /// let v2 = Agent::builder("support").version("2").model(ScriptedModel::new().then_text("v2")).build()?;
    /// let runtime = Runtime::in_memory(v2)?; // new runs start under version 2
    /// runtime.register(&v1)?; // runs stored under version 1 resume under version 1
    /// assert_eq!(runtime.versions(), vec!["2".to_owned(), "1".to_owned()]);
    /// # Ok(()) })
    /// # }
    /// ```
    pub fn register(&self, agent: &Agent) -> Result<(), RunError> {
        self.inner.versions.register(agent)?;
        agent.inner.set_env(&self.inner.env);
        Ok(())
    }

    /// The registered versions, the one new runs start under first.
    pub fn versions(&self) -> Vec<String> {
        self.inner.versions.all().iter().map(|a| a.version().to_owned()).collect()
    }

    /// The agent new runs start under.
    pub fn agent(&self) -> &Agent {
        &self.inner.agent
    }

    /// The underlying engine (for programs that need the kernel API).
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Starts a run with one user message. Returns once the run is durable in the store.
    pub async fn start(&self, user_message: impl Into<String>) -> Result<Run, RunError> {
        self.start_messages(vec![Message::user(user_message)]).await
    }

    /// Starts a run with a whole conversation (the last message usually from the user).
    pub async fn start_messages(&self, messages: Vec<Message>) -> Result<Run, RunError> {
        let agent = &self.inner.agent;
        let input = self
            .timed(InteractionInput::new(messages).with_lineage(Lineage::first(agent.version())))
            .to_payload()
            .map_err(|e| RunError::Input(e.to_string()))?;
        let handle = self.inner.engine.start(agent.deployment().clone(), input).await.map_err(|e| engine_error("(new run)", e))?;
        let shared = agent.inner.hub.get_or_create(handle.id());
        Ok(Run::new(self.clone(), handle, shared, agent.clone()))
    }

    /// Starts a run under an id chosen in advance ([`RunId::from_key`]), for work queues that
    /// name a run before any worker starts it. A second start of the same id fails with
    /// [`RunError::AlreadyExists`] (the store refuses a start over an existing head): use
    /// [`resume`](Runtime::resume) for a run that exists.
    pub async fn start_with_id(&self, id: &RunId, user_message: impl Into<String>) -> Result<Run, RunError> {
        let agent = &self.inner.agent;
        let input = self
            .timed(InteractionInput::new(vec![Message::user(user_message)]).with_lineage(Lineage::first(agent.version())))
            .to_payload()
            .map_err(|e| RunError::Input(e.to_string()))?;
        let handle = self
            .inner
            .engine
            .start_root(id.process_id().clone(), agent.deployment().clone(), input)
            .await
            .map_err(|e| engine_error(id.process_id().as_str(), e))?;
        let shared = agent.inner.hub.get_or_create(handle.id());
        Ok(Run::new(self.clone(), handle, shared, agent.clone()))
    }

    /// `input` recording the start instant on this runtime's clock when the agent has a time
    /// budget (it counts from there, across every restore); unchanged otherwise.
    fn timed(&self, input: InteractionInput) -> InteractionInput {
        match self.inner.agent.inner.budget_time_ms {
            Some(_) => input.started_at(self.inner.env.clock.now().as_millis()),
            None => input,
        }
    }

    /// Continues a stored run under a new writer (after an exit or a crash).
    ///
    /// Returns once every call that was in flight when the previous writer stopped is visible
    /// to the host: settled by its policy ([`UnknownPolicy`](super::UnknownPolicy)), or held
    /// and listed by [`Run::unknowns`] with a [`RunEvent::Unknown`](super::RunEvent::Unknown) event.
    ///
    /// The run continues under the version it recorded when it started, whichever version
    /// new runs start under ([`register`](Runtime::register) the older ones). A run whose
    /// version is not registered is refused with [`RunError::VersionNotRegistered`], listing
    /// the registered versions; a run stored by another configuration under a registered
    /// version is refused with [`RestoreRefused`], naming both deployments.
    ///
    /// A run that calls another model than this agent is refused with
    /// [`ModelChanged`](super::ModelChanged), naming both models, unless the agent
    /// [allows a model switch](super::AgentBuilder::allow_model_switch).
    pub async fn resume(&self, id: &RunId) -> Result<Run, RunError> {
        let root = id.process_id();
        let head = self
            .inner
            .committer
            .load_tree(root)
            .await
            .map_err(|e| RunError::from_commit(root.as_str(), e))?
            .ok_or_else(|| RunError::NotFound(id.to_string()))?;
        let damaged = |detail: String| {
            RunError::Damaged(format!(
                "the stored record of run {id} is damaged ({detail}); the store's other runs are unaffected: inspect it \
                 with `keel-store show` and restore the store from a backup"
            ))
        };
        let snapshot = TreeSnapshot::from_cut(&head.cut).map_err(|e| damaged(format!("it does not decode: {e}")))?;
        if snapshot.digest() != head.cut.digest || snapshot.root_id != *root {
            return Err(damaged("it does not match its digest or run id".into()));
        }
        let agent = self.agent_of(id, &snapshot)?;
        super::model_switch::check_models(&id.to_string(), &snapshot, &agent.inner.models)?;
        let in_flight: BTreeSet<EffectId> = snapshot
            .processes()
            .iter()
            .filter_map(|p| p.prepared.as_ref())
            .flat_map(|s| s.effects.iter())
            .filter(|e| e.phase == EffectPhase::Pending)
            .map(|e| e.id.clone())
            .collect();
        let shared = agent.inner.hub.reset(root);
        // Switches recorded before this resume were reported by their writer.
        shared.lock().note_switches(&snapshot);
        let handle = self
            .inner
            .engine
            .restore(agent.deployment().clone(), snapshot)
            .await
            .map_err(|e| engine_error(root.as_str(), e))?;
        let run = Run::new(self.clone(), handle, shared.clone(), agent);
        recovered(&shared, &in_flight).await;
        Ok(run)
    }

    /// The registered agent a stored run continues under: the one of its exact deployment.
    fn agent_of(&self, id: &RunId, snapshot: &TreeSnapshot) -> Result<Agent, RunError> {
        let versions = &self.inner.versions;
        let stored = &snapshot.root().deployment_ref;
        if let Some(agent) = versions.by_ref(stored) {
            return Ok(agent);
        }
        let recorded = ParentState::from_execution_state(&snapshot.root().committed_state).ok().and_then(|s| s.lineage);
        let primary = &self.inner.agent;
        let same_name = stored.name().as_str() == primary.name();
        // Compared with the registered agent of the run's own version when there is one.
        let nearest = match recorded.as_ref().map(|l| l.version.as_str()) {
            Some(version) if same_name => match versions.by_version(version) {
                Some(agent) => agent,
                None => {
                    return Err(RunError::VersionNotRegistered {
                        run: id.to_string(),
                        agent: primary.name().to_owned(),
                        version: version.to_owned(),
                        registered: versions.listed(),
                    })
                }
            },
            _ => primary.clone(),
        };
        let model = nearest.model_identity().to_string();
        Err(RestoreRefused::new(id.to_string(), stored.clone(), nearest.deployment_ref().clone(), &model).into())
    }
}

/// Waits (no polling: woken by each acknowledged head) until no call that was in flight at
/// the restore is still pending and no Unknown policy is being applied.
async fn recovered(shared: &RunShared, in_flight: &BTreeSet<EffectId>) {
    super::run::wait_until(shared, |s| {
        s.result.is_some()
            || s.stopped.is_some()
            || (s.head.is_some() && s.resolving.is_empty() && in_flight.iter().all(|e| !s.pending.contains(e)))
    })
    .await;
}

/// The error of an engine operation on `run`: conflicts between writers named as such, a store
/// failure only for I/O.
pub(crate) fn engine_error(run: &str, e: crate::kernel::engine::EngineError) -> RunError {
    use crate::kernel::engine::EngineError as E;
    use crate::kernel::owner::CommandError;
    match e {
        E::Commit(c) => RunError::from_commit(run, c),
        E::Stopped(s) | E::Command(CommandError::Stopped(Some(s))) => stopped_error(&s),
        E::TreeActive(root) => RunError::Conflict(format!(
            "run {root} is already running in this `Runtime`; use the `Run` handle that started or resumed it"
        )),
        other => RunError::Engine(other.to_string()),
    }
}

/// The error of a run whose writer stopped: a commit the store refused says why (another
/// writer, damage, I/O), anything else is a stopped writer to resume.
pub(crate) fn stopped_error(error: &crate::kernel::owner::RuntimeError) -> RunError {
    match &error.commit {
        Some(commit) => RunError::from_commit(error.root_id.as_str(), commit.clone()),
        None => RunError::Stopped(error.to_string()),
    }
}

/// Projects every acknowledged head into its run and applies Unknown policies.
struct Listener {
    versions: Arc<Versions>,
    env: Env,
    engine: Mutex<Option<Engine>>,
}

impl EventListener for Listener {
    fn on_event(&self, event: &Event) {
        if self.engine.lock().unwrap_or_else(PoisonError::into_inner).is_none() {
            return; // this runtime was dropped: a newer one owns its runs
        }
        if event.name == names::RUNTIME_STOPPED && event.relation.is_root() {
            for agent in self.versions.all() {
                if let Some(run) = agent.inner.hub.get(&event.process_id) {
                    let cause = event.payload.get("cause").and_then(|c| c.as_str()).unwrap_or("runtime stopped");
                    run.stop(cause.to_owned());
                }
            }
        }
    }

    fn on_head(&self, head: &Arc<TreeSnapshot>) {
        let Some(engine) = self.engine.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
            return; // this runtime was dropped: a newer one owns its runs
        };
        // The registered version whose deployment the run's root runs.
        let Some(agent) = self.versions.by_ref(&head.root().deployment_ref) else { return };
        let run = agent.inner.hub.get_or_create(&head.root_id);
        let act = run.project(head, &agent.inner.policies);
        for unknown in act {
            let task = apply_policy(engine.clone(), agent.clone(), run.clone(), unknown);
            drop(self.env.executor.spawn(Box::pin(task)));
        }
        // A run that handed over: its successor starts without the host (continue-as-new
        // goes on by itself; `Run::successor` finds it, or starts it if this could not).
        if let Some(task) = super::upgrade::successor_task(&engine, &self.versions, &agent, &run, head) {
            drop(self.env.executor.spawn(task));
        }
    }
}

/// Applies a non-Hold policy; an Unknown that cannot be settled that way is held.
async fn apply_policy(engine: Engine, agent: Agent, run: Arc<RunShared>, unknown: UnknownEffect) {
    use super::policy::UnknownPolicy;
    let settlement = match unknown.policy {
        UnknownPolicy::ReportToModel => unknown.report_settlement(),
        UnknownPolicy::Retry => match agent.deployments().iter().find(|d| d.reference() == &unknown.deployment_ref) {
            Some(d) => unknown.retry(d).await,
            None => Err("no deployment of this agent runs it".into()),
        },
        UnknownPolicy::Hold => Err("held".into()),
    };
    let settled = match (settlement, engine.lookup(&unknown.process)) {
        (Ok(s), Some(handle)) => handle.resolve_unknown_effect(unknown.effect.clone(), s).await.map_err(|e| e.to_string()),
        (Err(e), _) => Err(e),
        (Ok(_), None) => Err(format!("process {} is not live in this runtime", unknown.process)),
    };
    if let Err(why) = settled {
        let reason = format!(
            "its Unknown policy ({}) could not settle it ({why}): settle it with `Run::resolve`",
            unknown.policy.as_str()
        );
        run.hold(unknown.clone(), reason);
    }
    run.done_resolving(&unknown.effect);
}
