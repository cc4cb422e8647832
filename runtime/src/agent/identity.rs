//! Deployment identity that cannot lie: digests derived from what changes behavior.
//!
//! The configuration digest is the SHA-256 of the canonical JSON of every setting that changes
//! what a run does (tool names, descriptions, argument schemas, concurrency, direct results,
//! Unknown policies, limits, model mode, whether the model may switch, delegates' exact
//! deployments, the validator's declared identity, the instructions, the typed output's schema
//! and the context policy). The implementation digest comes from the keel version and the
//! version the user declares for their own code (model client and tool bodies, which cannot be
//! digested). A run is restored only under the exact same pair, so a changed setting can never
//! restore silently. The model's identity is not in the digest: each run records it in its
//! state, so that a deliberate switch (`AgentBuilder::allow_model_switch`) can be recorded too.

use crate::json::{Digest, Json, ObjectBuilder};

/// The configuration-encoding version: bump when the encoding below changes meaning.
const ENCODING: u64 = 1;

/// The implementation digest for a user-declared version.
pub(crate) fn implementation_digest(version: &str) -> Digest {
    let text = format!("keel.agent\0{}\0{version}", env!("CARGO_PKG_VERSION"));
    Digest::of(text.as_bytes())
}

/// The digest of a canonical configuration object.
pub(crate) fn configuration_digest(config: &Json) -> Digest {
    Digest::of_json(config)
}

/// Wraps one part of the configuration with the encoding version and its role.
pub(crate) fn tagged(role: &str, body: Json) -> Json {
    ObjectBuilder::new()
        .field("encoding", &ENCODING)
        .field("role", role)
        .value("body", body)
        .build()
}
