//! Recorded fixtures other crates embed (the simulator's `provider-adapters` scenario), served
//! from this package so a crate that uses them does not reach outside its own package. The
//! files stay where the providers' own tests read them: one copy.

/// `tests/fixtures/openai/tool_round.json`: one OpenAI Chat Completions tool round (a tool call,
/// then the answer).
pub const OPENAI_TOOL_ROUND: &str = include_str!("../../tests/fixtures/openai/tool_round.json");

/// `tests/fixtures/anthropic/tool_round.json`: the same tool round over Anthropic Messages.
pub const ANTHROPIC_TOOL_ROUND: &str = include_str!("../../tests/fixtures/anthropic/tool_round.json");
