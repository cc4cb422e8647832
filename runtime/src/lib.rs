//! keel: a durable runtime for AI agents.
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
pub mod agent;
pub mod prelude;
