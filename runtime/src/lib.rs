//! keel: a durable runtime for AI agents.
//!
//! Start with [`agent`] (and `use keel::prelude::*;`): an agent built from a model client,
//! tools and limits, run durably over a store, with its events, human input and crash recovery.
//!
//! ```
//! use keel::prelude::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder("hello")
//!     .version("1.0.0")
//!     .model(ScriptedModel::new().then_text("Hello!"))
//!     .build()?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! let text = rt.block_on(async {
//!     let run = Runtime::in_memory(agent)?.start("Hi.").await?;
//!     Ok::<_, RunError>(run.result().await?.text())
//! })?;
//! assert_eq!(text, "Hello!");
//! # Ok(())
//! # }
//! ```
//!
//! Layers (arrows point down): `interaction` → `kernel` → `chat`, `tool` → `json`, `schema`,
//! `env`. See ARCHITECTURE.md for the map, glossary and invariants.
#![forbid(unsafe_code)]

pub mod chat;
pub mod env;
pub mod interaction;
pub mod json;
pub mod kernel;
pub mod limits;
#[cfg(feature = "mutations")]
pub mod mutation;
pub mod schema;
pub mod text;
pub mod tool;
pub mod transcript;
pub mod agent;
pub mod prelude;
