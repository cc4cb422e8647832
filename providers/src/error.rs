//! How a provider call can fail, and which class each failure belongs to.

use keel::interaction::model::ModelError;
use std::time::Duration;

/// Whether a failure proves anything about the model call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeClass {
    /// The call definitely ended without an answer: settled as a failed model call
    /// ([`ModelError::Provider`]).
    Provider,
    /// The host could not even try (configuration): settled as a host failure
    /// ([`ModelError::Host`]).
    Host,
    /// The request was sent and the outcome cannot be known (timeout, connection lost): the
    /// Effect stays unknown ([`ModelError::Unknown`]) until the host resolves it.
    Unknown,
}

/// A failed provider call. [`ProviderError::class`] says what it proves; `From` turns it into
/// the [`ModelError`] the model Dispatcher expects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The client is misconfigured (no API key, unusable base URL). Nothing was sent.
    #[error("{provider} client configuration: {detail}")]
    Config { provider: &'static str, detail: String },
    /// keel's request cannot be expressed in the provider's wire format. Nothing was sent.
    #[error("{provider} cannot take this request: {detail}")]
    Request { provider: &'static str, detail: String },
    /// No connection could be made, on every attempt. Nothing was sent.
    #[error("{provider}: cannot connect to {url} ({attempts} attempt(s)): {detail}")]
    Connect { provider: &'static str, url: String, attempts: u32, detail: String },
    /// The provider answered with an error status: a definite failure. A retryable status
    /// (408, 409, 429, 5xx) reaches here only once the attempts or the deadline are used up.
    #[error("{provider} answered HTTP {status} ({attempts} attempt(s)): {body}")]
    Status { provider: &'static str, status: u16, attempts: u32, body: String },
    /// The provider answered, but not in its documented format.
    #[error("{provider} sent a malformed response: {detail}")]
    Malformed { provider: &'static str, detail: String },
    /// The provider reported an error inside a stream it had already started.
    #[error("{provider} stream error `{kind}`: {message}")]
    Stream { provider: &'static str, kind: String, message: String },
    /// No answer (or no next stream chunk) within the timeout after the request was sent.
    #[error("{provider}: no {stage} within {after:?} after the request was sent; the model may have answered")]
    Timeout { provider: &'static str, stage: &'static str, after: Duration },
    /// The connection failed after the request was sent.
    #[error("{provider}: connection lost after the request was sent ({detail}); the model may have answered")]
    ConnectionLost { provider: &'static str, detail: String },
}

impl ProviderError {
    /// What this failure proves about the call (see the crate docs for the full table).
    pub fn class(&self) -> OutcomeClass {
        match self {
            ProviderError::Config { .. } => OutcomeClass::Host,
            ProviderError::Request { .. }
            | ProviderError::Connect { .. }
            | ProviderError::Status { .. }
            | ProviderError::Malformed { .. }
            | ProviderError::Stream { .. } => OutcomeClass::Provider,
            ProviderError::Timeout { .. } | ProviderError::ConnectionLost { .. } => OutcomeClass::Unknown,
        }
    }

    /// Whether this definite failure may not happen again if the call is repeated: a
    /// retryable HTTP status that outlasted the client's own attempts (429, 5xx, ...), or an
    /// overloaded, rate-limit or server error reported inside a started stream. The facade's
    /// model error policy (`AgentBuilder::on_model_error`) repeats such calls.
    pub fn may_succeed_if_repeated(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => crate::retry::is_retryable_status(*status),
            ProviderError::Stream { kind, .. } => {
                let kind = kind.to_ascii_lowercase();
                ["overloaded", "rate_limit", "server_error", "api_error", "timeout", "unavailable"]
                    .iter()
                    .any(|k| kind.contains(k))
            }
            _ => false,
        }
    }

    pub(crate) fn malformed(provider: &'static str, detail: impl Into<String>) -> ProviderError {
        ProviderError::Malformed { provider, detail: bounded(detail.into()) }
    }

    pub(crate) fn request(provider: &'static str, detail: impl Into<String>) -> ProviderError {
        ProviderError::Request { provider, detail: bounded(detail.into()) }
    }
}

impl From<ProviderError> for ModelError {
    fn from(e: ProviderError) -> ModelError {
        let text = e.to_string();
        match e.class() {
            OutcomeClass::Provider if e.may_succeed_if_repeated() => ModelError::Transient(text),
            OutcomeClass::Provider => ModelError::Provider(text),
            OutcomeClass::Host => ModelError::Host(text),
            OutcomeClass::Unknown => ModelError::Unknown(text),
        }
    }
}

/// Longest provider text (an error body, a detail) kept in an error.
pub const MAX_ERROR_TEXT_BYTES: usize = 1024;

/// `text` cut to [`MAX_ERROR_TEXT_BYTES`] at a character boundary.
pub(crate) fn bounded(mut text: String) -> String {
    if text.len() > MAX_ERROR_TEXT_BYTES {
        let mut end = MAX_ERROR_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_map_to_the_model_errors() {
        let lost = ProviderError::ConnectionLost { provider: "openai", detail: "reset".into() };
        assert!(matches!(ModelError::from(lost), ModelError::Unknown(t) if t.contains("may have answered")));
        let timeout = ProviderError::Timeout { provider: "openai", stage: "response", after: Duration::from_secs(1) };
        assert!(matches!(ModelError::from(timeout), ModelError::Unknown(_)));
        let status = ProviderError::Status { provider: "openai", status: 400, attempts: 1, body: "bad".into() };
        assert!(matches!(ModelError::from(status), ModelError::Provider(t) if t.contains("HTTP 400")));
        let config = ProviderError::Config { provider: "openai", detail: "no key".into() };
        assert!(matches!(ModelError::from(config), ModelError::Host(_)));
        // Failures a repeat may not meet again are transient, before or inside a stream.
        let busy = ProviderError::Status { provider: "openai", status: 429, attempts: 3, body: "slow down".into() };
        assert!(matches!(ModelError::from(busy), ModelError::Transient(t) if t.contains("HTTP 429")));
        let overloaded =
            ProviderError::Stream { provider: "anthropic", kind: "overloaded_error".into(), message: "Overloaded".into() };
        assert!(matches!(ModelError::from(overloaded), ModelError::Transient(_)));
        let refused = ProviderError::Stream { provider: "openai", kind: "invalid_request_error".into(), message: "no".into() };
        assert!(matches!(ModelError::from(refused), ModelError::Provider(_)));
    }

    #[test]
    fn error_text_is_bounded_at_a_char_boundary() {
        let text = bounded("é".repeat(MAX_ERROR_TEXT_BYTES));
        assert!(text.len() <= MAX_ERROR_TEXT_BYTES + '…'.len_utf8());
        assert!(text.ends_with('…'));
        assert_eq!(bounded("short".into()), "short");
    }
}
