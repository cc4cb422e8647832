//! A server's question to the user (`elicitation/create`) as a keel input request of the tool
//! call that caused it, and the host's typed answer.
//!
//! The input request's prompt is `{"mcp_elicitation": {"server", "tool", "message",
//! "requested_schema"}}` ([`Elicitation::from_request`] reads it) and its response schema
//! admits exactly the three answers of [`ElicitationAnswer`]: `{"action": "accept",
//! "content": ...}` with content matching the server's requested schema, `{"action":
//! "decline"}`, `{"action": "cancel"}`. `run.answer` checks an answer against it before it
//! is committed, so a server never receives content its schema refuses.

use crate::transport::ElicitationQuestion;
use keel::agent::InputRequest;
use keel::json::{Json, ObjectBuilder};
use serde_json::{json, Value};

/// The prompt's member that marks an input request as an MCP server's question.
const PROMPT_KEY: &str = "mcp_elicitation";

/// An MCP server's question to the user, as the host sees it in an
/// [`InputRequest`](keel::agent::InputRequest) of the tool call that caused it.
///
/// ```no_run
/// # async fn demo(run: keel::agent::Run) -> Result<(), Box<dyn std::error::Error>> {
/// use keel_mcp::{Elicitation, ElicitationAnswer};
/// for request in run.pending_inputs() {
///     if let Some(question) = Elicitation::from_request(&request) {
///         println!("{} asks: {}", question.server, question.message);
///         let content = keel::json::parse(br#"{"name": "Ada"}"#)?;
///         run.answer(&request, ElicitationAnswer::Accept(content).to_json()).await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Elicitation {
    /// The server's name.
    pub server: String,
    /// The server's name for the tool whose call asked.
    pub tool: String,
    /// What the server asks, for a person to read.
    pub message: String,
    /// The JSON Schema the content of an accepting answer must match.
    pub requested_schema: Value,
}

impl Elicitation {
    /// The MCP question an input request carries, or `None` when the request comes from
    /// another tool.
    pub fn from_request(request: &InputRequest) -> Option<Elicitation> {
        let inner = request.prompt.get(PROMPT_KEY)?;
        let text = |key: &str| inner.get(key).and_then(Json::as_str).map(str::to_owned);
        Some(Elicitation {
            server: text("server")?,
            tool: text("tool")?,
            message: text("message")?,
            requested_schema: inner.get("requested_schema")?.to_serde_value().ok()?,
        })
    }

    pub(crate) fn prompt(&self) -> Result<Json, String> {
        let schema = Json::from_serde_value(&self.requested_schema).map_err(|e| e.to_string())?;
        let inner = ObjectBuilder::new()
            .value("server", Json::str(self.server.clone()))
            .value("tool", Json::str(self.tool.clone()))
            .value("message", Json::str(self.message.clone()))
            .value("requested_schema", schema)
            .build();
        Ok(ObjectBuilder::new().value(PROMPT_KEY, inner).build())
    }
}

/// The host's answer to an [`Elicitation`]: give it to `run.answer` as
/// [`to_json`](Self::to_json).
#[derive(Clone, Debug, PartialEq)]
pub enum ElicitationAnswer {
    /// The user answered: `content` must match the server's requested schema (an object).
    Accept(Json),
    /// The user refused to answer; the server carries on without the information.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

impl ElicitationAnswer {
    /// The answer as `run.answer` takes it: `{"action": "accept", "content": ...}`,
    /// `{"action": "decline"}` or `{"action": "cancel"}`.
    pub fn to_json(&self) -> Json {
        match self {
            ElicitationAnswer::Accept(content) => {
                ObjectBuilder::new().value("action", Json::str("accept")).value("content", content.clone()).build()
            }
            ElicitationAnswer::Decline => ObjectBuilder::new().value("action", Json::str("decline")).build(),
            ElicitationAnswer::Cancel => ObjectBuilder::new().value("action", Json::str("cancel")).build(),
        }
    }

    /// Reads an answer written by [`to_json`](Self::to_json).
    pub fn from_json(value: &Json) -> Option<ElicitationAnswer> {
        match value.get("action").and_then(Json::as_str)? {
            "accept" => Some(ElicitationAnswer::Accept(value.get("content")?.clone())),
            "decline" => Some(ElicitationAnswer::Decline),
            "cancel" => Some(ElicitationAnswer::Cancel),
            _ => None,
        }
    }

    /// The action's wire name: `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        match self {
            ElicitationAnswer::Accept(_) => "accept",
            ElicitationAnswer::Decline => "decline",
            ElicitationAnswer::Cancel => "cancel",
        }
    }
}

/// The response schema of the input request: one of the three answers, an accepting one's
/// content checked against the server's schema.
pub(crate) fn response_schema(requested: &Value) -> Value {
    json!({
        "oneOf": [
            {
                "type": "object",
                "properties": {"action": {"const": "accept"}, "content": requested},
                "required": ["action", "content"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {"action": {"enum": ["decline", "cancel"]}},
                "required": ["action"],
                "additionalProperties": false
            }
        ]
    })
}

/// One question of a call and the answer it got, kept in the continuation state so a call
/// sent again (declared retry-safe) can reuse it when the server asks the identical question.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answered {
    pub question: ElicitationQuestion,
    pub answer: Json,
}

/// What a paused MCP call keeps in its input request's continuation state: the key of the
/// in-flight call in this process's table, the question now asked, and the questions of this
/// call answered before it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PausedState {
    pub key: String,
    pub question: ElicitationQuestion,
    pub answered: Vec<Answered>,
}

fn question_json(q: &ElicitationQuestion) -> Result<Json, String> {
    Ok(ObjectBuilder::new()
        .value("message", Json::str(q.message.clone()))
        .value("requested_schema", Json::from_serde_value(&q.requested_schema).map_err(|e| e.to_string())?)
        .build())
}

fn read_question(value: &Json) -> Option<ElicitationQuestion> {
    Some(ElicitationQuestion {
        message: value.get("message").and_then(Json::as_str)?.to_owned(),
        requested_schema: value.get("requested_schema")?.to_serde_value().ok()?,
    })
}

impl PausedState {
    pub(crate) fn to_json(&self) -> Result<Json, String> {
        let mut answered = Vec::new();
        for a in &self.answered {
            answered.push(ObjectBuilder::new().value("question", question_json(&a.question)?).value("answer", a.answer.clone()).build());
        }
        let inner = ObjectBuilder::new()
            .value("key", Json::str(self.key.clone()))
            .value("question", question_json(&self.question)?)
            .value("answered", Json::Array(answered))
            .build();
        Ok(ObjectBuilder::new().value(PROMPT_KEY, inner).build())
    }

    pub(crate) fn from_json(value: &Json) -> Option<PausedState> {
        let inner = value.get(PROMPT_KEY)?;
        let mut answered = Vec::new();
        for a in inner.get("answered")?.as_array()? {
            answered.push(Answered { question: read_question(a.get("question")?)?, answer: a.get("answer")?.clone() });
        }
        Some(PausedState {
            key: inner.get("key").and_then(Json::as_str)?.to_owned(),
            question: read_question(inner.get("question")?)?,
            answered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_state_round_trip() {
        let content = keel::json::parse(br#"{"name":"Ada"}"#).unwrap();
        for answer in [ElicitationAnswer::Accept(content.clone()), ElicitationAnswer::Decline, ElicitationAnswer::Cancel] {
            assert_eq!(ElicitationAnswer::from_json(&answer.to_json()), Some(answer));
        }
        assert_eq!(ElicitationAnswer::from_json(&keel::json::parse(br#"{"action":"maybe"}"#).unwrap()), None);
        let question = ElicitationQuestion { message: "Name?".into(), requested_schema: json!({"type": "object"}) };
        let state = PausedState {
            key: "k".into(),
            question: question.clone(),
            answered: vec![Answered { question, answer: ElicitationAnswer::Decline.to_json() }],
        };
        assert_eq!(PausedState::from_json(&state.to_json().unwrap()), Some(state));
    }

    #[test]
    fn the_response_schema_checks_content_against_the_requested_schema() {
        let requested = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]});
        let schema = keel::schema::Schema::compile(&Json::from_serde_value(&response_schema(&requested)).unwrap()).unwrap();
        let ok = |text: &[u8]| schema.validate(&keel::json::parse(text).unwrap()).is_ok();
        assert!(ok(br#"{"action":"accept","content":{"n":3}}"#));
        assert!(ok(br#"{"action":"decline"}"#));
        assert!(ok(br#"{"action":"cancel"}"#));
        assert!(!ok(br#"{"action":"accept","content":{"n":0}}"#), "content outside the requested schema");
        assert!(!ok(br#"{"action":"accept"}"#), "accept without content");
        assert!(!ok(br#"{"action":"decline","content":{"n":3}}"#), "content only with accept");
        assert!(!ok(br#"{"action":"maybe"}"#));
    }
}
