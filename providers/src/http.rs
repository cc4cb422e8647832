//! The HTTP exchange of one model call: send with retries, read a bounded body, or stream the
//! body chunk by chunk, every wait on the client's [`Pacing`] clock.

use crate::error::{bounded, ProviderError, MAX_ERROR_TEXT_BYTES};
use crate::retry::{is_retryable_status, retry_after, Pacing};
use crate::transport::{HttpRequest, HttpResponse, HttpTransport, ReqwestTransport, SendError};
use futures::future::{select, Either};
use futures::{Stream, StreamExt};
use keel::env::Timestamp;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Largest complete (non-streamed) response body read.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

/// How long a connection attempt may take before it counts as refused (a failed connection
/// sent nothing, so it is retried). Enforced by the HTTP client on the real runtime.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One provider's HTTP side: a transport (by default a reqwest connection pool) plus its
/// pacing.
pub(crate) struct Transport {
    pub provider: &'static str,
    http: Arc<dyn HttpTransport>,
    pub pacing: Pacing,
}

/// A streamed body: chunks, each awaited with the idle timeout.
pub(crate) type Chunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, ProviderError>> + Send>>;

impl Transport {
    pub fn new(provider: &'static str, pacing: Pacing) -> Result<Transport, ProviderError> {
        let http = ReqwestTransport::new(CONNECT_TIMEOUT).map_err(|detail| ProviderError::Config { provider, detail })?;
        Ok(Transport { provider, http: Arc::new(http), pacing })
    }

    /// Over another transport (recorded exchanges under the simulator, a proxy, ...).
    pub fn with(provider: &'static str, pacing: Pacing, http: Arc<dyn HttpTransport>) -> Transport {
        Transport { provider, http, pacing }
    }

    /// Sends `body` to `url` until a 2xx arrives, retrying only outcomes that prove the
    /// request had no effect. Returns the response with only its head read, and when the
    /// attempt that got it was sent.
    pub async fn send(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<(HttpResponse, Timestamp), ProviderError> {
        let clock = &self.pacing.clock;
        let policy = &self.pacing.retry;
        let started = clock.now();
        let attempts = policy.attempts();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let request = HttpRequest {
                url: url.to_owned(),
                headers: headers.iter().map(|(n, v)| ((*n).to_owned(), v.clone())).collect(),
                body: body.clone(),
            };
            let sent_at = clock.now();
            let (error, wait, response) = match self.within(self.pacing.timeouts.response, self.http.send(request)).await {
                None => {
                    return Err(ProviderError::Timeout {
                        provider: self.provider,
                        stage: "response",
                        after: self.pacing.timeouts.response,
                    })
                }
                Some(Err(SendError::Connect(detail))) => {
                    let detail = bounded(detail);
                    (ProviderError::Connect { provider: self.provider, url: url.to_owned(), attempts: attempt, detail }, None, None)
                }
                Some(Err(SendError::Lost(detail))) => {
                    return Err(ProviderError::ConnectionLost { provider: self.provider, detail: bounded(detail) })
                }
                Some(Ok(response)) if (200..300).contains(&response.status) => return Ok((response, sent_at)),
                Some(Ok(response)) => {
                    let status = response.status;
                    if !is_retryable_status(status) {
                        return Err(self.status_error(response, attempt).await);
                    }
                    let wait = retry_after(
                        response.header("retry-after-ms"),
                        response.header("retry-after"),
                        response.header("date"),
                        clock.now(),
                    );
                    let placeholder = ProviderError::Status { provider: self.provider, status, attempts: attempt, body: String::new() };
                    (placeholder, wait, Some(response))
                }
            };
            let wait = wait.unwrap_or_else(|| policy.backoff(attempt, &*self.pacing.rng));
            let elapsed = clock.now().saturating_duration_since(started);
            let out_of_time = elapsed.saturating_add(wait) > policy.total_deadline;
            if attempt >= attempts || out_of_time {
                return Err(match response {
                    Some(response) => self.status_error(response, attempt).await,
                    None => error,
                });
            }
            // The refused response is dropped unread: its body is never consumed.
            drop(response);
            clock.sleep(wait).await;
        }
    }

    /// Reads the whole body of a 2xx response, bounded, within what is left of the response
    /// timeout of the attempt sent at `sent_at`.
    pub async fn read_body(&self, response: HttpResponse, sent_at: Timestamp) -> Result<Vec<u8>, ProviderError> {
        let after = self.pacing.timeouts.response;
        let left = after.saturating_sub(self.pacing.clock.now().saturating_duration_since(sent_at));
        let provider = self.provider;
        let read = async move {
            let mut body = Vec::new();
            let mut stream = response.body;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| ProviderError::ConnectionLost { provider, detail: bounded(e.to_string()) })?;
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(ProviderError::malformed(
                        provider,
                        format!("response body larger than {MAX_RESPONSE_BYTES} bytes"),
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        };
        match self.within(left, read).await {
            Some(result) => result,
            None => Err(ProviderError::Timeout { provider, stage: "complete response body", after }),
        }
    }

    /// The body of a 2xx response as chunks, each within the stream idle timeout.
    pub fn chunks(&self, response: HttpResponse) -> Chunks {
        let provider = self.provider;
        let clock = self.pacing.clock.clone();
        let idle = self.pacing.timeouts.stream_idle;
        let body = response.body;
        Box::pin(futures::stream::unfold(Some(body), move |state| {
            let clock = clock.clone();
            async move {
                let mut body = state?;
                let next = std::pin::pin!(body.next());
                match select(next, clock.sleep(idle)).await {
                    Either::Left((None, _)) => None,
                    Either::Left((Some(Ok(chunk)), _)) => Some((Ok(chunk), Some(body))),
                    Either::Left((Some(Err(e)), _)) => {
                        let lost = ProviderError::ConnectionLost { provider, detail: bounded(e.to_string()) };
                        Some((Err(lost), None))
                    }
                    Either::Right(((), _)) => {
                        Some((Err(ProviderError::Timeout { provider, stage: "stream chunk", after: idle }), None))
                    }
                }
            }
        }))
    }

    /// A definite status failure with the start of the error body (read within a short,
    /// bounded window; an unreadable body leaves the text empty).
    async fn status_error(&self, response: HttpResponse, attempts: u32) -> ProviderError {
        let status = response.status;
        let read = async move {
            let mut body = Vec::new();
            let mut stream = response.body;
            while let Some(Ok(chunk)) = stream.next().await {
                body.extend_from_slice(&chunk);
                if body.len() >= MAX_ERROR_TEXT_BYTES {
                    break;
                }
            }
            body
        };
        let body = self.within(ERROR_BODY_WAIT, read).await.unwrap_or_default();
        let body = bounded(String::from_utf8_lossy(&body).trim().to_owned());
        ProviderError::Status { provider: self.provider, status, attempts, body }
    }

    /// `work`'s output, or `None` once `after` passed on the pacing clock.
    async fn within<F: Future>(&self, after: Duration, work: F) -> Option<F::Output> {
        let work = std::pin::pin!(work);
        match select(work, self.pacing.clock.sleep(after)).await {
            Either::Left((output, _)) => Some(output),
            Either::Right(((), _)) => None,
        }
    }
}

/// How long an error body is awaited for its text; the status alone already decides.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(5);
