//! The transport seam: "send this HTTP request, give back the status, the headers and the
//! body as a stream of chunks". The adapters build requests, retry, time out and parse on top
//! of it, so swapping the transport keeps every line of their mapping running.
//!
//! [`ReqwestTransport`] (the default) speaks HTTP on the real tokio runtime.
//! `testing::ExchangeTransport` (feature `testing`) serves recorded fixture exchanges from
//! memory with their chunk boundaries, which is how the adapters run under the simulator.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use keel::env::BoxFuture;

/// One request to send (always a POST of a JSON body in this crate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub url: String,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A response body, chunk by chunk as the transport received it.
pub type BodyChunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, SendError>> + Send>>;

/// A response whose head arrived; the body is read (or dropped unread) by the caller.
pub struct HttpResponse {
    pub status: u16,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    pub body: BodyChunks,
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse").field("status", &self.status).field("headers", &self.headers).finish_non_exhaustive()
    }
}

/// Why a request got no response, in the two classes the retry rules need.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No connection was made: nothing was sent, so the request may be retried.
    #[error("{0}")]
    Connect(String),
    /// The connection broke after the request may have been sent (or mid-body).
    #[error("{0}")]
    Lost(String),
}

/// Sends one HTTP request. Implementations must not retry (the adapters decide that) and must
/// not buffer a streamed body (chunks are handed on as they arrive).
pub trait HttpTransport: Send + Sync + 'static {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, SendError>>;
}

/// The default transport: reqwest on the real tokio runtime (https via rustls).
pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    /// A client with `connect_timeout` and redirects off (a redirect would turn the POST into
    /// a GET: the 3xx is reported instead).
    pub fn new(connect_timeout: Duration) -> Result<ReqwestTransport, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(ReqwestTransport { client })
    }
}

impl HttpTransport for ReqwestTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, SendError>> {
        let mut builder = self.client.post(&request.url).body(request.body);
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        Box::pin(async move {
            let response = builder.send().await.map_err(|e| {
                if e.is_connect() {
                    SendError::Connect(error_chain(&e))
                } else {
                    SendError::Lost(error_chain(&e))
                }
            })?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_ascii_lowercase(), v.to_owned())))
                .collect();
            let body = response.bytes_stream().map(|chunk| chunk.map(|b| b.to_vec()).map_err(|e| SendError::Lost(error_chain(&e))));
            Ok(HttpResponse { status, headers, body: Box::pin(body) })
        })
    }
}

/// An error with its sources, for diagnostics ("error sending request: connection refused").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    let mut depth = 0;
    while let Some(s) = source {
        depth += 1;
        if depth > 8 {
            break;
        }
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
