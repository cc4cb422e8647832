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

/// Longest single sleep an environment performs; longer requests are clamped (about 30 years,
/// tokio's own "far future"), so a huge user-supplied deadline cannot overflow a timer.
pub const MAX_SLEEP: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 24 * 60 * 60);
