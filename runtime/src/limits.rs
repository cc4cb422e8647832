//! Every named limit of the runtime, in one place (TigerBeetle style: a limit on everything).
//!
//! Layers import these constants; nothing hard-codes a size elsewhere.

/// Maximum bytes of one JSON payload crossing a boundary, checked on the raw input
/// and again on the canonical encoding.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Maximum nesting depth of any JSON value (arrays + objects).
pub const MAX_JSON_DEPTH: usize = 128;

/// Maximum bytes of a bounded diagnostic (schema errors, tool error texts, failure messages
/// produced from external error text).
pub const MAX_DIAGNOSTIC_BYTES: usize = 2048;

/// Maximum bytes of a bounded human text field (descriptions, reasons, failure messages).
pub const MAX_TEXT_BYTES: usize = 4096;

/// Maximum bytes of a qualified name (`[a-z][a-z0-9._-]*`).
pub const MAX_QUALIFIED_NAME_BYTES: usize = 128;

/// Maximum bytes of an identity text (`[A-Za-z0-9-_.:]+`).
pub const MAX_IDENTITY_BYTES: usize = 256;

/// Maximum number of individual schema errors listed in one bounded diagnostic (the rest are
/// only counted). Each listed error gets an equal share of [`MAX_DIAGNOSTIC_BYTES`].
pub const MAX_SCHEMA_ERRORS_LISTED: usize = 8;

/// Backtracking budget of one `pattern`/`patternProperties` match that needs the backtracking
/// regex engine (look-around, back-references); exceeding it is a validation failure.
/// A step count, not a time limit, so the outcome is deterministic.
pub const MAX_SCHEMA_REGEX_BACKTRACKS: usize = 1_000_000;
/// Maximum bytes of a tool name. Names match `^[A-Za-z0-9_-]{1,64}$`, the intersection of what
/// the major model providers accept for function names.
pub const MAX_TOOL_NAME_BYTES: usize = 64;

/// Maximum bytes of a model-assigned tool call id.
pub const MAX_TOOL_CALL_ID_BYTES: usize = 256;

/// Maximum bytes of a model name in chat options.
pub const MAX_MODEL_NAME_BYTES: usize = 256;

/// Maximum number of stop sequences in chat options.
pub const MAX_STOP_SEQUENCES: usize = 16;

/// Maximum number of tool definitions in one chat request (the common provider ceiling).
pub const MAX_REQUEST_TOOLS: usize = 128;

/// Maximum number of parts in one chat message (so at most this many tool calls per response
/// and tool results per tool message).
pub const MAX_MESSAGE_PARTS: usize = 1024;

/// Maximum number of tool calls in one model response (each is a message part). Bounds every
/// per-round scan, such as concurrency-window planning.
pub const MAX_TOOL_CALLS_PER_RESPONSE: usize = MAX_MESSAGE_PARTS;
/// Default `TreeLimits::max_pending_signals` (also what a zero configures).
pub const DEFAULT_MAX_PENDING_SIGNALS: u32 = 10_000;

/// Default `TreeLimits::max_depth`, root-relative (also what a zero configures).
pub const DEFAULT_MAX_DEPTH: u32 = 16;

/// Default `TreeLimits::max_active_children` per Process (also what a zero configures).
pub const DEFAULT_MAX_ACTIVE_CHILDREN: u32 = 16;
/// Longest single sleep an environment performs; longer requests are clamped (about 30 years,
/// tokio's own "far future"), so a huge user-supplied deadline cannot overflow a timer.
pub const MAX_SLEEP: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 24 * 60 * 60);


/// Default bound of one record in the durable commit log: a tree cut of up to 64 MiB plus
/// room for the record's metadata (identities, digests, framing).
pub const DEFAULT_MAX_COMMIT_RECORD_BYTES: usize = (64 << 20) + (64 << 10);
/// Maximum pause count of one tool call's input checkpoints (the counter never wraps
/// around, so every pause keeps a distinct wait key). A
/// checkpoint at `u32::MAX` is rejected, so this is the largest count a checkpoint may hold.
pub const MAX_TOOL_INPUT_PAUSES: u32 = u32::MAX - 1;

/// Maximum bytes of a completion validator's rejection feedback.
pub const MAX_COMPLETION_FEEDBACK_BYTES: usize = MAX_TEXT_BYTES;

/// Default bound of an Interaction's working context: the canonical bytes of all its messages
/// together (each message is bounded on its own by [`MAX_PAYLOAD_BYTES`]). Exceeding it is the
/// failure `interaction.limit.context`; `AgentBuilder::max_context_bytes` changes it.
pub const DEFAULT_MAX_CONTEXT_BYTES: u64 = 64 << 20;

/// The largest working-context bound a configuration may choose: a cut must still fit
/// `MAX_CUT_BYTES`-sized stores.
pub const MAX_CONTEXT_BYTES_CEILING: u64 = 256 << 20;

/// Maximum number of segments one execution state lists (at most one per committed Step that
/// appended, so far beyond any step budget in practice).
pub const MAX_STATE_SEGMENTS: usize = 1 << 20;
