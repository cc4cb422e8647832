//! The Interaction strategy: the model/tool loop.
//!
//! This module is the shared foundation every part of the strategy codes against:
//!
//! * [`error`]: [`InteractionError`] with one [`ErrorKind`] per error family;
//! * [`codes`]: the stable failure codes of Process termination; [`diagnostic`]: the
//!   normalization of failure and error texts;
//! * [`protocol`]: every Effect/Signal payload envelope with strict codecs;
//! * [`ids`]: the deterministic child, wait and delegate keys; [`active_delegates`]: which
//!   model ToolCall each running Delegate child answers;
//! * [`output`], [`artifact`], [`completion`]: the final Output, Delegate Artifacts, and the
//!   completion validator contract;
//! * [`signals`]: host-side Signal builders and classification of incoming Signals;
//! * [`attribution`]: the ModelInvocation / ToolInvocation values Dispatchers install;
//! * [`state`]: the parent and tool-child snapshot data models with their structural checks.
//! * [`definition`]: the Interaction [`definition::Definition`] (built from a
//!   [`config::DefinitionConfig`] with its [`delegate::Delegate`]s) and [`machine`]: the parent
//!   Execution's state machine.
//!
//! Every wire value implements [`wire::Wire`]: strict decoding that rejects unknown members at
//! every level, validation on decode, and canonical re-encoding.
//!
//! ```
//! use keel::chat::Message;
//! use keel::interaction::{protocol::Steer, signals::steer_signal, wire::Wire};
//! use keel::kernel::ids::SignalId;
//!
//! let id = SignalId::parse("signal:user-correction").unwrap();
//! let request = steer_signal(id, vec![Message::user("Use the newer requirements.")]).unwrap();
//! assert!(request.wait_id().is_none());
//! let steer = Steer::from_payload(request.payload()).unwrap();
//! assert_eq!(steer.messages[0].text(), "Use the newer requirements.");
//! ```

pub mod active_delegates;
pub mod artifact;
pub mod attribution;
pub mod budget;
pub mod budget_question;
pub mod run_clock;
pub mod codes;
pub mod completion;
pub mod config;
pub mod definition;
pub mod delegate;
pub mod diagnostic;
pub mod error;
pub mod ids;
pub mod machine;
pub mod manifest;
pub mod model;
pub mod output;
pub mod pending_inputs;
pub mod protocol;
pub mod signals;
pub mod state;
pub mod tool_child;
pub mod tool_dispatcher;
pub mod toolset;
pub mod window;
pub mod wire;

pub use error::{ErrorKind, InteractionError};

#[cfg(test)]
mod testutil;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod toolset_tests;
