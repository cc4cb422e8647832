//! What one Interaction-world run is made of: the scripted model, the simulated tools, the
//! delegate, the host's actions, the faults and the expectations. Built from a scenario file
//! (`spec_json`) or from a seed (`generate`); the driver only ever sees this value.

/// How the simulated model answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelMode {
    Complete,
    Stream,
}

/// A finish reason a scripted turn reports (the chat finish reasons by wire name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Refusal,
    Other,
}

impl Finish {
    pub const ALL: [Finish; 6] =
        [Finish::Stop, Finish::ToolCalls, Finish::Length, Finish::ContentFilter, Finish::Refusal, Finish::Other];

    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::ToolCalls => "tool_calls",
            Finish::Length => "length",
            Finish::ContentFilter => "content_filter",
            Finish::Refusal => "refusal",
            Finish::Other => "other",
        }
    }

    pub fn from_name(name: &str) -> Option<Finish> {
        Finish::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

/// One tool call a scripted turn asks for. `arguments` is raw JSON text (it may be invalid on
/// purpose).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSpec {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One scripted model answer, chosen by the model call's sequence number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A text answer (usually the final one).
    Text { text: String, finish: Finish },
    /// Tool calls (with an optional leading text).
    Calls { calls: Vec<CallSpec>, finish: Finish },
    /// `ModelError::Provider`: a definite failed settlement.
    ProviderError { message: String },
    /// `ModelError::Host`: a definite host-failure settlement.
    HostError { message: String },
}

/// The scripted model of one Interaction (the root, or a delegate child).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    pub mode: ModelMode,
    /// Turn `i` answers model call `i + 1`; calls beyond the script answer `fallback`.
    pub turns: Vec<Turn>,
    /// The text of the answer to calls beyond the script.
    pub fallback: String,
    /// Simulated latency range in milliseconds (inclusive).
    pub latency_ms: (u64, u64),
    /// A context reducer that replaces long contexts with one summary message.
    pub reducer: bool,
    /// Reject this many completion candidates with feedback before accepting.
    pub validator_rejections: u32,
}

/// How a tool classifies a call for the concurrency window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConcurrencySpec {
    Exclusive,
    Shared,
    /// Keyed by the string argument with this name.
    Keyed(String),
}

/// What a tool call ends with (after any input pauses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A text result `name(arguments)` (plus the answers to its pauses).
    Text,
    /// An ordinary tool error (definite error result).
    Error,
    /// A panic inside the tool (Unknown).
    Panic,
    /// `ToolError::HostFailure` (Unknown).
    HostFailure,
    /// `ToolError::Canceled` (Unknown).
    Cancel,
    /// `ToolError::DeadlineExceeded` (Unknown).
    Deadline,
}

impl ToolSpec {
    /// The recorded outcome of call `id`, if this tool came from a transcript.
    pub fn recorded(&self, id: &str) -> Option<&RecordedCall> {
        self.recorded.iter().find(|r| r.id == id)
    }

    /// What call `id` ends with: its injected fault, its recorded outcome, or the tool's.
    pub fn outcome_of(&self, id: &str) -> Outcome {
        match self.recorded(id) {
            Some(RecordedCall { fault: Some(f), .. }) => *f,
            Some(RecordedCall { result: Ok(_), .. }) => Outcome::Text,
            Some(RecordedCall { result: Err(_), .. }) => Outcome::Error,
            None => self.outcome,
        }
    }
}

impl Outcome {
    pub const ALL: [Outcome; 6] =
        [Outcome::Text, Outcome::Error, Outcome::Panic, Outcome::HostFailure, Outcome::Cancel, Outcome::Deadline];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Text => "text",
            Outcome::Error => "error",
            Outcome::Panic => "panic",
            Outcome::HostFailure => "host_failure",
            Outcome::Cancel => "cancel",
            Outcome::Deadline => "deadline",
        }
    }

    pub fn from_name(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether the tool leaves its Effect Unknown.
    pub fn is_unknown(self) -> bool {
        matches!(self, Outcome::Panic | Outcome::HostFailure | Outcome::Cancel | Outcome::Deadline)
    }
}

/// What one call of a tool did in a recorded run (a transcript): the call's own outcome,
/// replacing the tool's `outcome` for that call id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    pub id: String,
    /// The text the model saw, or the message of the tool's error.
    pub result: Result<String, String>,
    /// A fault a campaign injects on this call (an Unknown outcome); the recorded result
    /// stays the truth a host may settle from.
    pub fault: Option<Outcome>,
}

/// One simulated tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSpec {
    pub name: String,
    pub concurrency: ConcurrencySpec,
    pub latency_ms: (u64, u64),
    pub outcome: Outcome,
    /// Returns direct results.
    pub direct: bool,
    /// Input pauses before the outcome (each with a string response schema).
    pub pauses: u32,
    /// Deferred tools the call advertises on success.
    pub advertises: Vec<String>,
    /// The input schema requires a string member `q` (so other arguments are invalid).
    pub strict_arguments: bool,
    /// Per-call outcomes from a recorded run (empty for scripted tools).
    pub recorded: Vec<RecordedCall>,
}

/// A delegate: a child Interaction with its own scripted model and no tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegateSpec {
    pub name: String,
    pub model: ModelSpec,
    pub max_model_calls: u32,
    /// Steps granted to each child (`None`: unlimited).
    pub budget_steps: Option<u64>,
}

/// When a host action fires. Triggers are positions in the run, never wall time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// While the root's model call `n` (1-based) is in flight.
    ModelCall(u32),
    /// While the tool call with this call id is in flight (its first attempt).
    ToolCall(String),
    /// The `n`-th time (1-based) the host sees the tree parked on tool input waits, before
    /// answering.
    InputWait(u32),
}

/// What a host action does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A steer with this signal id suffix and user text.
    Steer { id: String, text: String },
    /// Re-deliver an earlier steer with the same id and content (must dedupe).
    DuplicateSteer { id: String },
    /// Deliver other content under an earlier steer's id (must be refused).
    ConflictSteer { id: String, text: String },
    /// Answer a wait that is no longer current (must be refused).
    StaleAnswer,
    Kill,
    Cancel,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAction {
    pub trigger: Trigger,
    pub action: Action,
}

/// Order in which the host answers the tool input waits it finds together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerOrder {
    Snapshot,
    Reverse,
}

/// How the host settles an Unknown Effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownPolicy {
    /// From ground truth: what the call produced, or perform a never-started call once.
    Truth,
    /// Settle as a definite failure.
    Fail,
    /// Kill the tree.
    Kill,
    /// Leave it unknown (the run checks it stays in every head and is never re-dispatched).
    Leave,
}

impl UnknownPolicy {
    pub const ALL: [UnknownPolicy; 4] = [UnknownPolicy::Truth, UnknownPolicy::Fail, UnknownPolicy::Kill, UnknownPolicy::Leave];

    pub fn as_str(self) -> &'static str {
        match self {
            UnknownPolicy::Truth => "truth",
            UnknownPolicy::Fail => "fail",
            UnknownPolicy::Kill => "kill",
            UnknownPolicy::Leave => "leave",
        }
    }

    pub fn from_name(name: &str) -> Option<UnknownPolicy> {
        UnknownPolicy::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// A commit fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommitFaultKind {
    CrashAfter,
    LoseAck,
    FailBefore,
}

impl CommitFaultKind {
    pub const ALL: [CommitFaultKind; 3] = [CommitFaultKind::CrashAfter, CommitFaultKind::LoseAck, CommitFaultKind::FailBefore];

    pub fn as_str(self) -> &'static str {
        match self {
            CommitFaultKind::CrashAfter => "crash_after",
            CommitFaultKind::LoseAck => "lose_ack",
            CommitFaultKind::FailBefore => "fail_before",
        }
    }

    pub fn from_name(name: &str) -> Option<CommitFaultKind> {
        CommitFaultKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Commit faults: at fixed commit indices (0-based over every commit of the run, across
/// incarnations) and/or with per-mille probabilities per commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultSpec {
    pub at: Vec<(u64, CommitFaultKind)>,
    pub crash_per_mille: u64,
    pub lose_ack_per_mille: u64,
    pub fail_before_per_mille: u64,
    /// `Some`: replaying a fault schedule — the faults are exactly these (by commit index);
    /// the draws above are still made, so nothing else shifts, but their outcome is ignored.
    pub replay: Option<Vec<(u64, CommitFaultKind)>>,
}

/// The final status a scenario expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectStatus {
    Completed,
    Failed,
    Killed,
    Canceled,
    /// The run ends with the tree still live (an Unknown left, for example).
    Stuck,
}

impl ExpectStatus {
    pub const ALL: [ExpectStatus; 5] =
        [ExpectStatus::Completed, ExpectStatus::Failed, ExpectStatus::Killed, ExpectStatus::Canceled, ExpectStatus::Stuck];

    pub fn as_str(self) -> &'static str {
        match self {
            ExpectStatus::Completed => "completed",
            ExpectStatus::Failed => "failed",
            ExpectStatus::Killed => "killed",
            ExpectStatus::Canceled => "canceled",
            ExpectStatus::Stuck => "stuck",
        }
    }

    pub fn from_name(name: &str) -> Option<ExpectStatus> {
        ExpectStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// What the scenario file promises about its fault-free run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub status: Option<ExpectStatus>,
    /// The final answer text (model completion) or, for direct results, the joined contents.
    pub output_text: Option<String>,
    /// `"model"` or `"direct_tool_results"`.
    pub output_source: Option<String>,
    pub failure_code: Option<String>,
    pub model_calls: Option<u32>,
    /// Substrings that must appear in some request the model received.
    pub model_saw: Vec<String>,
    /// Substrings that must appear in no request any model received.
    pub model_never_saw: Vec<String>,
    /// Whether a crash run (settled from truth) must end with the fault-free output.
    pub same_output_under_crash: bool,
}

/// One complete run description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub description: String,
    pub user: String,
    pub max_model_calls: u32,
    pub max_concurrent_tool_calls: u32,
    pub model: ModelSpec,
    pub tools: Vec<ToolSpec>,
    pub deferred_tools: Vec<ToolSpec>,
    pub delegate: Option<DelegateSpec>,
    pub host: Vec<HostAction>,
    pub answer_order: AnswerOrder,
    pub unknown_policy: UnknownPolicy,
    pub faults: FaultSpec,
    pub expect: Expect,
    /// The root's budget (tokens, tool calls); its delegate works within the grant.
    pub budget: Option<keel::interaction::budget::Budget>,
    /// How the host answers the run's budget questions (under `OnExhausted::AskHuman`): the
    /// n-th question of a Process gets the n-th answer; past the list, a decline.
    pub budget_answers: Vec<keel::interaction::budget_question::BudgetAnswer>,
    /// Whether the Engine retires consumed finished children (on; not part of the file
    /// format: only runs comparing a spec with its uncompacted twin turn it off).
    pub compaction: bool,
}

impl Spec {
    /// A minimal spec: one user message, a model answering `done`.
    pub fn minimal(name: &str) -> Spec {
        Spec {
            name: name.to_owned(),
            description: String::new(),
            user: "hello".into(),
            max_model_calls: 8,
            max_concurrent_tool_calls: 4,
            model: ModelSpec {
                mode: ModelMode::Complete,
                turns: Vec::new(),
                fallback: "done".into(),
                latency_ms: (1, 5),
                reducer: false,
                validator_rejections: 0,
            },
            tools: Vec::new(),
            deferred_tools: Vec::new(),
            delegate: None,
            host: Vec::new(),
            answer_order: AnswerOrder::Snapshot,
            unknown_policy: UnknownPolicy::Truth,
            faults: FaultSpec::default(),
            expect: Expect { same_output_under_crash: true, ..Expect::default() },
            compaction: true,
            budget: None,
            budget_answers: Vec::new(),
        }
    }

    /// Every tool, initial then deferred.
    pub fn all_tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().chain(&self.deferred_tools)
    }

    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.all_tools().find(|t| t.name == name)
    }
}
