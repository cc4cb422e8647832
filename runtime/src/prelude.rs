//! Everything a program that runs agents usually needs: `use keel::prelude::*;`.

pub use crate::agent::{
    tool, tool_fn, Agent, AgentBuilder, AnswerError, AskHuman, Budget, BudgetAnswer, BudgetExtension, BudgetKind, BudgetQuestion, BuildError, Price, Prices, ContextPolicy, ContinueAsNew, Summarize, Events, FnTool, Idle, InputRequest, OutputError, Resolution,
    ModelErrorPolicy, OnExhausted, RestoreRefused, Run, RunError, RunEvent, RunFailure, RunId, RunResult, Runtime, ScriptedModel, ToolConcurrency, ToolOptions,
    UnknownEffect, UnknownKind, UnknownPolicy,
};
pub use crate::chat::Message;
pub use crate::interaction::model::{ModelCallContext, ModelClient, ModelError, ModelStreamer};
pub use crate::json::Json;
pub use crate::tool::{Tool, ToolContext, ToolError};
pub use futures::StreamExt;
