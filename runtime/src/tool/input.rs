//! Tool input waits: a tool asks for external input, the call pauses, and the tool
//! is called again from the start with the validated answer and its own continuation state.

use super::ToolError;
use crate::json::{
    DecodeError, FromJson, Json, JsonError, ObjectBuilder, ObjectReader, Payload, ToJson,
};
use crate::schema::{Schema, SchemaError, SchemaViolation};

/// An immutable, validated request for external input:
/// * `prompt`: any one JSON value for whoever answers;
/// * `response_schema`: a JSON Schema; it is authoritative, every answer is checked against it;
/// * `continuation_state`: any one JSON value, returned only to the same tool on re-entry and
///   never exposed to consumers (its contents are left out of `Debug` too).
///
/// Each part is strict JSON within [`crate::limits::MAX_PAYLOAD_BYTES`] both as supplied and
/// after normalization (exact number text kept). The request carries no Process or Wait
/// identity: the Engine mints those, and a tool must not be able to forge them.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolInputRequest {
    prompt: Payload,
    response_schema: Payload,
    schema: Schema,
    continuation_state: Payload,
}

/// Which part of a [`ToolInputRequest`] was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestPart {
    Prompt,
    ResponseSchema,
    ContinuationState,
}

impl std::fmt::Display for RequestPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestPart::Prompt => "prompt",
            RequestPart::ResponseSchema => "response schema",
            RequestPart::ContinuationState => "continuation state",
        })
    }
}

/// Why a tool's input request was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidToolInputRequest {
    /// A part is not one strict JSON value within the size limits.
    #[error("invalid tool input request: {part}: {error}")]
    Json { part: RequestPart, error: JsonError },
    /// The response schema is JSON but not a schema that compiles.
    #[error("invalid tool input request: response schema: {0}")]
    Schema(SchemaError),
}

/// Why an answer to a [`ToolInputRequest`] was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidToolInputResponse {
    #[error("invalid tool input response: {0}")]
    Json(JsonError),
    #[error("invalid tool input response: {0}")]
    Schema(SchemaViolation),
}

impl ToolInputRequest {
    /// Validates raw JSON bytes for each part (limits checked on raw and normalized sizes).
    pub fn new(
        prompt: &[u8],
        response_schema: &[u8],
        continuation_state: &[u8],
    ) -> Result<ToolInputRequest, InvalidToolInputRequest> {
        let part = |part, bytes: &[u8]| {
            Payload::from_bytes(bytes)
                .map_err(|error| InvalidToolInputRequest::Json { part, error })
        };
        let prompt = part(RequestPart::Prompt, prompt)?;
        let response_schema = part(RequestPart::ResponseSchema, response_schema)?;
        let continuation_state = part(RequestPart::ContinuationState, continuation_state)?;
        ToolInputRequest::from_payloads(prompt, response_schema, continuation_state)
    }

    /// Validates in-memory values (the normalized-size limit applies; there is no raw form).
    pub fn from_values(
        prompt: Json,
        response_schema: Json,
        continuation_state: Json,
    ) -> Result<ToolInputRequest, InvalidToolInputRequest> {
        let part = |part, value: Json| {
            Payload::from_json(value).map_err(|error| InvalidToolInputRequest::Json { part, error })
        };
        let prompt = part(RequestPart::Prompt, prompt)?;
        let response_schema = part(RequestPart::ResponseSchema, response_schema)?;
        let continuation_state = part(RequestPart::ContinuationState, continuation_state)?;
        ToolInputRequest::from_payloads(prompt, response_schema, continuation_state)
    }

    fn from_payloads(
        prompt: Payload,
        response_schema: Payload,
        continuation_state: Payload,
    ) -> Result<ToolInputRequest, InvalidToolInputRequest> {
        let schema =
            Schema::compile(response_schema.value()).map_err(InvalidToolInputRequest::Schema)?;
        Ok(ToolInputRequest {
            prompt,
            response_schema,
            schema,
            continuation_state,
        })
    }

    pub fn prompt(&self) -> &Payload {
        &self.prompt
    }
    /// The normalized schema source.
    pub fn response_schema(&self) -> &Payload {
        &self.response_schema
    }
    /// The compiled response schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    pub fn continuation_state(&self) -> &Payload {
        &self.continuation_state
    }

    /// Normalizes `response` and checks it against the response schema.
    pub fn validate_response(&self, response: &Json) -> Result<Payload, InvalidToolInputResponse> {
        let payload =
            Payload::from_json(response.clone()).map_err(InvalidToolInputResponse::Json)?;
        self.schema
            .validate(payload.value())
            .map_err(InvalidToolInputResponse::Schema)?;
        Ok(payload)
    }

    /// The continuation for re-entering the tool with `response`, validated first.
    pub fn resume_with(
        &self,
        response: &Json,
    ) -> Result<ToolInputContinuation, InvalidToolInputResponse> {
        let response = self.validate_response(response)?;
        Ok(ToolInputContinuation {
            state: self.continuation_state.clone(),
            response,
        })
    }
}

impl std::fmt::Debug for ToolInputRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolInputRequest")
            .field("prompt", &self.prompt)
            .field("response_schema", &self.response_schema)
            .field(
                "continuation_state",
                &format_args!("<{} bytes>", self.continuation_state.len()),
            )
            .finish()
    }
}

/// `{"prompt", "response_schema", "continuation_state"}`, each the normalized value.
impl ToJson for ToolInputRequest {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .value("prompt", self.prompt.value().clone())
            .value("response_schema", self.response_schema.value().clone())
            .value(
                "continuation_state",
                self.continuation_state.value().clone(),
            )
            .build()
    }
}

/// Strict: all three members required (each may be any JSON value, `null` included, as far as
/// decoding goes), unknown members rejected, and the request is fully re-validated.
impl FromJson for ToolInputRequest {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let prompt = r
            .nullable_value("prompt")
            .map_err(|e| e.in_member("prompt"))?;
        let response_schema = r
            .nullable_value("response_schema")
            .map_err(|e| e.in_member("response_schema"))?;
        let continuation_state = r
            .nullable_value("continuation_state")
            .map_err(|e| e.in_member("continuation_state"))?;
        r.finish()?;
        ToolInputRequest::from_values(
            prompt.clone(),
            response_schema.clone(),
            continuation_state.clone(),
        )
        .map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

/// Builds the error a tool returns to pause for input: [`ToolError::InputRequired`] when the
/// request is valid, [`ToolError::InvalidInputRequest`] (which leaves the call unknown)
/// otherwise. Return it before any external side effect, or after recording enough
/// continuation state for a safe re-entry.
pub fn require_tool_input(
    prompt: &[u8],
    response_schema: &[u8],
    continuation_state: &[u8],
) -> ToolError {
    match ToolInputRequest::new(prompt, response_schema, continuation_state) {
        Ok(request) => ToolError::InputRequired(request),
        Err(invalid) => ToolError::InvalidInputRequest(invalid),
    }
}

/// The tool-owned state captured at the pause and the schema-validated answer, attached to the
/// context only while re-entering the tool that asked. Built by
/// [`ToolInputRequest::resume_with`], so the response has always been validated.
#[derive(Clone, PartialEq, Eq)]
pub struct ToolInputContinuation {
    state: Payload,
    response: Payload,
}

impl ToolInputContinuation {
    /// The continuation state the tool supplied when it asked for input.
    pub fn state(&self) -> &Payload {
        &self.state
    }
    /// The validated, normalized answer.
    pub fn response(&self) -> &Payload {
        &self.response
    }
}

impl std::fmt::Debug for ToolInputContinuation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolInputContinuation")
            .field("state", &format_args!("<{} bytes>", self.state.len()))
            .field("response", &self.response)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_PAYLOAD_BYTES;

    const SCHEMA: &[u8] =
        br#"{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}"#;

    fn json_part(err: InvalidToolInputRequest) -> RequestPart {
        match err {
            InvalidToolInputRequest::Json { part, .. } => part,
            other => panic!("expected a JSON error, got {other:?}"),
        }
    }

    /// A JSON string literal of exactly `len` raw bytes.
    fn string_literal(len: usize) -> Vec<u8> {
        let mut v = vec![b'"'];
        v.extend(std::iter::repeat_n(b'a', len - 2));
        v.push(b'"');
        v
    }

    #[test]
    fn valid_request_keeps_exact_numbers() {
        let r = ToolInputRequest::new(
            br#" {"q": 9007199254740993, "big": 1e400} "#,
            SCHEMA,
            br#"{"step":18446744073709551615,"d":0.10000000000000000000001}"#,
        )
        .unwrap();
        assert_eq!(
            r.prompt()
                .value()
                .get("q")
                .and_then(Json::as_number)
                .unwrap()
                .as_str(),
            "9007199254740993"
        );
        assert_eq!(
            r.prompt()
                .value()
                .get("big")
                .and_then(Json::as_number)
                .unwrap()
                .as_str(),
            "1e400"
        );
        assert_eq!(
            r.continuation_state()
                .value()
                .get("d")
                .and_then(Json::as_number)
                .unwrap()
                .as_str(),
            "0.10000000000000000000001"
        );
        // Any single JSON value is a prompt, null included.
        assert!(ToolInputRequest::new(b"null", SCHEMA, b"1").is_ok());
    }

    #[test]
    fn each_part_must_be_one_strict_json_value() {
        for bad in [
            &b""[..],
            b"{",
            b"1 2",
            br#"{"a":1,"a":2}"#,
            br#""\ud800""#,
            b"\xff",
        ] {
            assert_eq!(
                json_part(ToolInputRequest::new(bad, SCHEMA, b"{}").unwrap_err()),
                RequestPart::Prompt
            );
            assert_eq!(
                json_part(ToolInputRequest::new(b"{}", bad, b"{}").unwrap_err()),
                RequestPart::ResponseSchema
            );
            assert_eq!(
                json_part(ToolInputRequest::new(b"{}", SCHEMA, bad).unwrap_err()),
                RequestPart::ContinuationState
            );
        }
    }

    #[test]
    fn schema_must_compile() {
        let err = ToolInputRequest::new(b"{}", br#"{"type":5}"#, b"{}").unwrap_err();
        assert!(matches!(err, InvalidToolInputRequest::Schema(_)));
        let err = ToolInputRequest::new(b"{}", br#"{"$ref":"https://example.com/x"}"#, b"{}")
            .unwrap_err();
        assert!(matches!(err, InvalidToolInputRequest::Schema(_)));
    }

    #[test]
    fn raw_limit() {
        // Exactly at the limit passes; one byte more fails.
        let at = string_literal(MAX_PAYLOAD_BYTES);
        assert!(ToolInputRequest::new(&at, SCHEMA, b"{}").is_ok());
        assert!(ToolInputRequest::new(b"{}", SCHEMA, &at).is_ok());
        let over = string_literal(MAX_PAYLOAD_BYTES + 1);
        assert_eq!(
            json_part(ToolInputRequest::new(&over, SCHEMA, b"{}").unwrap_err()),
            RequestPart::Prompt
        );
        assert_eq!(
            json_part(ToolInputRequest::new(b"{}", SCHEMA, &over).unwrap_err()),
            RequestPart::ContinuationState
        );
        // Whitespace counts against the raw limit even though normalization drops it.
        let mut padded = vec![b' '; MAX_PAYLOAD_BYTES];
        padded.extend_from_slice(b"{}");
        assert_eq!(
            json_part(ToolInputRequest::new(&padded, SCHEMA, b"{}").unwrap_err()),
            RequestPart::Prompt
        );
        assert_eq!(
            json_part(ToolInputRequest::new(b"{}", SCHEMA, &padded).unwrap_err()),
            RequestPart::ContinuationState
        );
    }

    #[test]
    fn normalized_limit() {
        // In-memory values have no raw form: only the normalized size is checked.
        let big = Json::str("a".repeat(MAX_PAYLOAD_BYTES));
        let schema = crate::json::parse(SCHEMA).unwrap();
        let err =
            ToolInputRequest::from_values(big.clone(), schema.clone(), Json::Null).unwrap_err();
        assert_eq!(json_part(err), RequestPart::Prompt);
        let err = ToolInputRequest::from_values(Json::Null, schema.clone(), big).unwrap_err();
        assert_eq!(json_part(err), RequestPart::ContinuationState);
        let fits = Json::str("a".repeat(MAX_PAYLOAD_BYTES - 2));
        assert!(ToolInputRequest::from_values(fits, schema, Json::Null).is_ok());
    }

    #[test]
    fn normalization_growth_counts() {
        // When the canonical encoding escapes a character that is raw in the input, a value can
        // fit the raw limit and still exceed the normalized one. Which characters grow depends
        // on the canonical encoder, so find one rather than assume it.
        let Some(c) = ['<', '>', '&', '\u{2028}', '\u{7f}', 'é']
            .into_iter()
            .find(|c| Json::str(c.to_string()).canonical_len() > c.len_utf8() + 2)
        else {
            return; // The encoder never grows a string: only the raw limit can bind.
        };
        let count = MAX_PAYLOAD_BYTES / c.len_utf8() - 1;
        let mut raw = String::from("\"");
        raw.extend(std::iter::repeat_n(c, count));
        raw.push('"');
        assert!(raw.len() <= MAX_PAYLOAD_BYTES);
        assert_eq!(
            json_part(ToolInputRequest::new(raw.as_bytes(), SCHEMA, b"{}").unwrap_err()),
            RequestPart::Prompt
        );
    }

    #[test]
    fn responses_are_validated() {
        let r = ToolInputRequest::new(b"\"approve?\"", SCHEMA, br#"{"at":1}"#).unwrap();
        let good = crate::json::parse(br#"{"ok":true}"#).unwrap();
        assert_eq!(r.validate_response(&good).unwrap().value(), &good);
        let bad = crate::json::parse(br#"{"ok":"yes"}"#).unwrap();
        assert!(matches!(
            r.validate_response(&bad),
            Err(InvalidToolInputResponse::Schema(_))
        ));
        let continuation = r.resume_with(&good).unwrap();
        assert_eq!(continuation.state(), r.continuation_state());
        assert_eq!(continuation.response().value(), &good);
        assert!(r.resume_with(&bad).is_err());
    }

    #[test]
    fn json_round_trip_is_strict() {
        let r = ToolInputRequest::new(b"null", SCHEMA, br#"{"n":1.50}"#).unwrap();
        let j = r.to_json();
        assert_eq!(ToolInputRequest::from_json(&j).unwrap(), r);
        let text = j.to_canonical_string();
        assert_eq!(
            ToolInputRequest::from_json_bytes(text.as_bytes()).unwrap(),
            r
        );

        let missing = crate::json::parse(br#"{"prompt":1,"response_schema":true}"#).unwrap();
        assert!(ToolInputRequest::from_json(&missing).is_err());
        let unknown = crate::json::parse(
            br#"{"prompt":1,"response_schema":true,"continuation_state":2,"wait_id":"w"}"#,
        )
        .unwrap();
        assert!(
            ToolInputRequest::from_json(&unknown).is_err(),
            "a request carries no wait identity"
        );
        let bad_schema = crate::json::parse(
            br#"{"prompt":1,"response_schema":{"type":5},"continuation_state":2}"#,
        )
        .unwrap();
        assert!(ToolInputRequest::from_json(&bad_schema).is_err());
    }

    #[test]
    fn require_tool_input_classifies() {
        assert!(matches!(
            require_tool_input(b"1", SCHEMA, b"2"),
            ToolError::InputRequired(_)
        ));
        assert!(matches!(
            require_tool_input(b"1", b"{", b"2"),
            ToolError::InvalidInputRequest(_)
        ));
    }

    #[test]
    fn debug_hides_continuation_state() {
        let r = ToolInputRequest::new(b"1", b"true", br#""secret""#).unwrap();
        assert!(!format!("{r:?}").contains("secret"));
        let c = r.resume_with(&Json::Bool(true)).unwrap();
        assert!(!format!("{c:?}").contains("secret"));
    }
}
