//! The fixture format: a JSON file of exchanges served in order.
//!
//! ```json
//! {
//!   "description": "what this conversation exercises",
//!   "exchanges": [
//!     {
//!       "request": {
//!         "method": "POST",
//!         "path": "/v1/chat/completions",
//!         "headers": {"authorization": "Bearer test-key"},
//!         "body": {"model": "gpt-4o-mini", "messages": []}
//!       },
//!       "response": {
//!         "status": 200,
//!         "headers": {"content-type": "text/event-stream"},
//!         "chunks": ["data: {\"choices\":[{\"ind", "ex\":0}]}\n\n", "data: [DONE]\n\n"],
//!         "chunk_delay_ms": 5
//!       }
//!     }
//!   ]
//! }
//! ```
//!
//! Request members (all but `method` and `path` optional): `headers` lists headers that must
//! be present with exactly these values (names compared case-insensitively; others are
//! ignored); `body`, when present, must equal the request body compared as JSON values (so
//! member order and whitespace do not matter, number text does).
//!
//! Response members: `status` (default 200); `headers`; the body as either `body` (one
//! string, sent with a `content-length`) or `chunks` (strings written one by one with
//! chunked transfer encoding, `chunk_delay_ms` apart, default 5, so chunk boundaries reach the
//! client as separate reads, e.g. in the middle of a JSON value); `stall`:
//! `"before_headers"` (never answer) or `"after_body"` (send the chunks, then keep the body
//! open without ending it); `disconnect: true` (send the chunks, then drop the connection
//! mid-body).

use serde_json::{Map, Value};
use std::path::Path;

/// Most exchanges one fixture may hold.
pub const MAX_FIXTURE_EXCHANGES: usize = 256;

/// A parsed fixture.
#[derive(Clone, Debug, PartialEq)]
pub struct Fixture {
    pub description: String,
    pub exchanges: Vec<Exchange>,
}

/// One request the server expects and the response it replays.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub request: ExpectedRequest,
    pub response: ReplayResponse,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExpectedRequest {
    pub method: String,
    pub path: String,
    /// Lower-case names and exact values.
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReplayResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: ReplayBody,
    pub chunk_delay_ms: u64,
    pub stall: Option<Stall>,
    pub disconnect: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ReplayBody {
    /// Sent at once with a content-length.
    Whole(String),
    /// Sent chunk by chunk.
    Chunks(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    BeforeHeaders,
    AfterBody,
}

/// Why a fixture file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot read fixture {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("fixture is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("fixture {at}: {problem}")]
    Invalid { at: String, problem: String },
}

fn invalid(at: &str, problem: impl Into<String>) -> FixtureError {
    FixtureError::Invalid { at: at.to_owned(), problem: problem.into() }
}

impl Fixture {
    /// Reads and parses a fixture file.
    pub fn load(path: impl AsRef<Path>) -> Result<Fixture, FixtureError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|error| FixtureError::Read { path: path.display().to_string(), error })?;
        Fixture::parse(&text)
    }

    /// Parses fixture text.
    pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
        let value: Value = serde_json::from_str(text)?;
        let root = as_object(&value, "$")?;
        known(root, "$", &["description", "exchanges"])?;
        let description = opt_string(root, "description", "$")?.unwrap_or_default();
        let items = match root.get("exchanges") {
            Some(Value::Array(items)) => items,
            _ => return Err(invalid("$.exchanges", "must be an array")),
        };
        if items.len() > MAX_FIXTURE_EXCHANGES {
            return Err(invalid("$.exchanges", format!("more than {MAX_FIXTURE_EXCHANGES} exchanges")));
        }
        let exchanges = items.iter().enumerate().map(|(i, e)| exchange(e, &format!("$.exchanges[{i}]"))).collect::<Result<_, _>>()?;
        Ok(Fixture { description, exchanges })
    }

    /// One fixture from several files' exchanges, in order (a conversation recorded in
    /// pieces).
    pub fn concat(fixtures: impl IntoIterator<Item = Fixture>) -> Fixture {
        let mut out = Fixture { description: String::new(), exchanges: Vec::new() };
        for f in fixtures {
            if !out.description.is_empty() && !f.description.is_empty() {
                out.description.push_str("; ");
            }
            out.description.push_str(&f.description);
            out.exchanges.extend(f.exchanges);
        }
        out
    }
}

fn exchange(value: &Value, at: &str) -> Result<Exchange, FixtureError> {
    let map = as_object(value, at)?;
    known(map, at, &["request", "response"])?;
    let request_at = format!("{at}.request");
    let request = as_object(map.get("request").ok_or_else(|| invalid(at, "missing request"))?, &request_at)?;
    known(request, &request_at, &["method", "path", "headers", "body"])?;
    let expected = ExpectedRequest {
        method: opt_string(request, "method", &request_at)?.ok_or_else(|| invalid(&request_at, "missing method"))?,
        path: opt_string(request, "path", &request_at)?.ok_or_else(|| invalid(&request_at, "missing path"))?,
        headers: headers(request, &request_at)?,
        body: request.get("body").cloned(),
    };
    let response_at = format!("{at}.response");
    let response = as_object(map.get("response").ok_or_else(|| invalid(at, "missing response"))?, &response_at)?;
    known(response, &response_at, &["status", "headers", "body", "chunks", "chunk_delay_ms", "stall", "disconnect"])?;
    let status = match response.get("status") {
        None => 200,
        Some(s) => s
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .filter(|s| (100..=999).contains(s))
            .ok_or_else(|| invalid(&response_at, "status must be an HTTP status code"))?,
    };
    let body = match (response.get("body"), response.get("chunks")) {
        (Some(_), Some(_)) => return Err(invalid(&response_at, "has both body and chunks")),
        (Some(Value::String(s)), None) => ReplayBody::Whole(s.clone()),
        (Some(_), None) => return Err(invalid(&response_at, "body must be a string (the exact bytes to send)")),
        (None, Some(Value::Array(items))) => ReplayBody::Chunks(
            items
                .iter()
                .map(|c| c.as_str().map(str::to_owned).ok_or_else(|| invalid(&response_at, "every chunk must be a string")))
                .collect::<Result<_, _>>()?,
        ),
        (None, Some(_)) => return Err(invalid(&response_at, "chunks must be an array of strings")),
        (None, None) => ReplayBody::Whole(String::new()),
    };
    let stall = match opt_string(response, "stall", &response_at)?.as_deref() {
        None => None,
        Some("before_headers") => Some(Stall::BeforeHeaders),
        Some("after_body") => Some(Stall::AfterBody),
        Some(other) => return Err(invalid(&response_at, format!("unknown stall `{other}` (before_headers or after_body)"))),
    };
    let chunk_delay_ms = match response.get("chunk_delay_ms") {
        None => 5,
        Some(v) => v.as_u64().filter(|ms| *ms <= 60_000).ok_or_else(|| invalid(&response_at, "chunk_delay_ms must be 0..=60000"))?,
    };
    let disconnect = match response.get("disconnect") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid(&response_at, "disconnect must be a boolean")),
    };
    Ok(Exchange {
        request: expected,
        response: ReplayResponse { status, headers: headers(response, &response_at)?, body, chunk_delay_ms, stall, disconnect },
    })
}

fn as_object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, FixtureError> {
    value.as_object().ok_or_else(|| invalid(at, "must be an object"))
}

fn known(map: &Map<String, Value>, at: &str, members: &[&str]) -> Result<(), FixtureError> {
    match map.keys().find(|k| !members.contains(&k.as_str())) {
        Some(k) => Err(invalid(at, format!("unknown member `{k}` (known: {})", members.join(", ")))),
        None => Ok(()),
    }
}

fn opt_string(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, FixtureError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(at, format!("{key} must be a string"))),
    }
}

fn headers(map: &Map<String, Value>, at: &str) -> Result<Vec<(String, String)>, FixtureError> {
    match map.get("headers") {
        None => Ok(Vec::new()),
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| match v {
                Value::String(v) => Ok((k.to_ascii_lowercase(), v.clone())),
                _ => Err(invalid(at, format!("header `{k}` must be a string"))),
            })
            .collect(),
        Some(_) => Err(invalid(at, "headers must be an object of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example_and_rejects_typos() {
        let text = r#"{"exchanges":[{"request":{"method":"POST","path":"/x","headers":{"Authorization":"Bearer k"},"body":{"a":1}},
            "response":{"chunks":["da","ta: 1\n\n"],"stall":"after_body"}}]}"#;
        let f = Fixture::parse(text).unwrap();
        let e = &f.exchanges[0];
        assert_eq!(e.request.headers, vec![("authorization".to_owned(), "Bearer k".to_owned())]);
        assert_eq!(e.response.status, 200);
        assert_eq!(e.response.body, ReplayBody::Chunks(vec!["da".into(), "ta: 1\n\n".into()]));
        assert_eq!(e.response.stall, Some(Stall::AfterBody));
        let typo = r#"{"exchanges":[{"request":{"method":"POST","path":"/x"},"response":{"stauts":200}}]}"#;
        let err = Fixture::parse(typo).unwrap_err().to_string();
        assert!(err.contains("unknown member `stauts`"), "{err}");
        assert!(Fixture::parse(r#"{"exchanges":[{"request":{"path":"/x"},"response":{}}]}"#).is_err());
    }
}
