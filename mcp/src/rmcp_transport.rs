//! [`McpTransport`] over the official SDK (rmcp) on the real tokio: a stdio server as a child
//! process, or a streamable-HTTP server by URL. The session is opened on first use and opened
//! again (the process restarted, a new HTTP session) when the previous one has ended.

use crate::transport::{CallAnswer, McpTransport, ToolPage, TransportError};
use keel::env::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, Implementation, PaginatedRequestParams, Request,
    RequestOptionalParam, ServerResult,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::common::client_side_sse::NeverRetry;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use std::future::Future;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where a server is and how to start it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Stdio { program: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Option<String> },
    Http { url: String },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Stdio { program, args, .. } => write!(f, "stdio `{program}{}`", args.iter().map(|a| format!(" {a}")).collect::<String>()),
            Endpoint::Http { url } => write!(f, "{url}"),
        }
    }
}

/// Counts tool-list changes announced by the server.
#[derive(Clone)]
struct Handler {
    generation: Arc<AtomicU64>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.generation.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("keel-mcp", env!("CARGO_PKG_VERSION")))
    }
}

struct Session {
    service: RunningService<RoleClient, Handler>,
    pid: Option<u32>,
}

/// A server reached through rmcp. Cheap to share behind an `Arc`.
pub struct RmcpTransport {
    endpoint: Endpoint,
    session: tokio::sync::Mutex<Option<Session>>,
    generation: Arc<AtomicU64>,
    sessions: AtomicU64,
    call_timeout: Option<Duration>,
}

impl RmcpTransport {
    pub(crate) fn new(endpoint: Endpoint, call_timeout: Option<Duration>) -> RmcpTransport {
        RmcpTransport {
            endpoint,
            session: tokio::sync::Mutex::new(None),
            generation: Arc::new(AtomicU64::new(0)),
            sessions: AtomicU64::new(0),
            call_timeout,
        }
    }

    /// The process id of the running stdio server, if one runs.
    pub async fn process_id(&self) -> Option<u32> {
        let guard = self.session.lock().await;
        guard.as_ref().filter(|s| !s.service.is_closed() && !s.service.peer().is_transport_closed()).and_then(|s| s.pid)
    }

    /// How many sessions were opened (a stdio server started, an HTTP session initialized).
    pub fn sessions_opened(&self) -> u64 {
        self.sessions.load(Ordering::SeqCst)
    }

    /// A live session's peer, opening a new session if there is none or it ended. Any failure
    /// here happens before the request was handed over: `NotSent`.
    async fn peer(&self) -> Result<Peer<RoleClient>, TransportError> {
        let mut guard = self.session.lock().await;
        if let Some(session) = guard.as_ref() {
            if !session.service.is_closed() && !session.service.peer().is_transport_closed() {
                return Ok(session.service.peer().clone());
            }
        }
        // The old session (if any) ended: drop it (a stdio child is killed on drop) and open
        // a new one. A new server may list other tools, so the list is stale from here on.
        *guard = None;
        let handler = Handler { generation: self.generation.clone() };
        let session = match &self.endpoint {
            Endpoint::Stdio { program, args, env, cwd } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args);
                for (k, v) in env {
                    command.env(k, v);
                }
                if let Some(dir) = cwd {
                    command.current_dir(dir);
                }
                let (child, _stderr) = TokioChildProcess::builder(command)
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| TransportError::NotSent(format!("cannot start {}: {e}", self.endpoint)))?;
                let pid = child.id();
                let service = handler
                    .serve(child)
                    .await
                    .map_err(|e| TransportError::NotSent(format!("{} did not initialize: {e}", self.endpoint)))?;
                Session { service, pid }
            }
            Endpoint::Http { url } => {
                // A response stream that broke is not resumed: the answer is lost (Unknown)
                // at once instead of after the call timeout.
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                config.retry_config = Arc::new(NeverRetry::default());
                let transport = StreamableHttpClientTransport::from_config(config);
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|e| TransportError::NotSent(format!("{} did not initialize: {e}", self.endpoint)))?;
                Session { service, pid: None }
            }
        };
        if self.sessions.fetch_add(1, Ordering::SeqCst) > 0 {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        let peer = session.service.peer().clone();
        *guard = Some(session);
        Ok(peer)
    }

    /// Sends one request. `Err(TransportClosed)` from the hand-over means the session had
    /// already ended: nothing was sent. Once handed over, a missing answer is `Lost`, except
    /// a send that failed to connect at all (nothing reached the server).
    async fn request(&self, request: ClientRequest, timeout: Option<Duration>) -> Result<ServerResult, TransportError> {
        let peer = self.peer().await?;
        let options = timeout.map_or_else(PeerRequestOptions::no_options, PeerRequestOptions::with_timeout);
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(ServiceError::TransportClosed) => {
                // Forget the ended session (unless another call already replaced it), so
                // the next attempt opens a new one.
                let mut guard = self.session.lock().await;
                if guard.as_ref().is_some_and(|s| s.service.is_closed() || s.service.peer().is_transport_closed()) {
                    guard.take();
                }
                return Err(TransportError::NotSent(format!("the session with {} had ended", self.endpoint)));
            }
            Err(e) => return Err(classify(&self.endpoint, e)),
        };
        handle.await_response().await.map_err(|e| classify(&self.endpoint, e))
    }
}

/// An error after the request was handed to the session.
fn classify(endpoint: &Endpoint, e: ServiceError) -> TransportError {
    match e {
        ServiceError::McpError(data) => TransportError::Refused { code: i64::from(data.code.0), message: data.message.to_string() },
        ServiceError::TransportSend(ref inner) if refused_connection(inner) => {
            TransportError::NotSent(format!("{endpoint} refused the connection: {e}"))
        }
        other => TransportError::Lost(format!("{endpoint}: {other}")),
    }
}

/// Whether an error's cause chain is a refused TCP connection (nothing was delivered).
fn refused_connection(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = current.source();
    }
    false
}

impl McpTransport for RmcpTransport {
    fn open(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move { self.peer().await.map(|_| ()) })
    }

    fn list_tools(&self, cursor: Option<String>) -> BoxFuture<'_, Result<ToolPage, TransportError>> {
        Box::pin(async move {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let request = ClientRequest::ListToolsRequest(RequestOptionalParam::with_param(params));
            match self.request(request, self.call_timeout).await? {
                ServerResult::ListToolsResult(result) => {
                    let tools = result.tools.iter().map(|t| serde_json::to_value(t).unwrap_or(Value::Null)).collect();
                    Ok(ToolPage { tools, next_cursor: result.next_cursor })
                }
                other => Err(TransportError::Refused { code: 0, message: format!("tools/list was answered with {}", kind(&other)) }),
            }
        })
    }

    fn call_tool(&self, name: String, arguments: Map<String, Value>) -> BoxFuture<'_, Result<CallAnswer, TransportError>> {
        Box::pin(async move {
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            let request = ClientRequest::CallToolRequest(Request::new(params));
            match self.request(request, self.call_timeout).await? {
                ServerResult::CallToolResult(result) => {
                    serde_json::to_value(&result).map(CallAnswer).map_err(|e| TransportError::Lost(format!("unreadable answer: {e}")))
                }
                // The server answered something else: it did answer, so the call is settled
                // as an error the model sees, never retried.
                other => Err(TransportError::Refused { code: 0, message: format!("tools/call was answered with {}", kind(&other)) }),
            }
        })
    }

    fn list_generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

fn kind(result: &ServerResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>().join(",")))
        .map(|keys| format!("an unexpected result ({keys})"))
        .unwrap_or_else(|| "an unexpected result".to_owned())
}
