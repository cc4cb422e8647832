//! [`McpTransport`] over the official SDK (rmcp) on the real tokio: a stdio server as a child
//! process, or a streamable-HTTP server by URL. The session is opened on first use and opened
//! again (the process restarted, a new HTTP session) when the previous one has ended.
//!
//! A server's `elicitation/create` is routed to the call that caused it: over streamable HTTP
//! by the response stream it arrived on (the stream of that call's POST), otherwise to the one
//! call in flight on the session. The call then pauses ([`CallStep::Asked`]) with its request
//! still in flight; the call timeout does not run while the user is being asked.

use crate::elicitation::ElicitationAnswer;
use crate::transport::{CallAnswer, CallStep, ElicitationQuestion, McpTransport, PausedCall, ToolPage, TransportError};
use keel::env::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, PaginatedRequestParams, Request, RequestId,
    RequestOptionalParam, ServerResult,
};
use rmcp::service::{InboundStreamOrigin, MaybeSendFuture, NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RunningService};
use rmcp::transport::common::client_side_sse::NeverRetry;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use std::future::Future;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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

/// A question of the server on its way to the call it belongs to, with the way back.
struct Asked {
    question: ElicitationQuestion,
    reply: tokio::sync::oneshot::Sender<ElicitResult>,
}

/// One `tools/call` in flight on a session: where its server's questions go.
struct Route {
    /// The JSON-RPC id, once the request was handed over.
    request: Option<RequestId>,
    questions: tokio::sync::mpsc::UnboundedSender<Asked>,
}

/// The calls in flight on one session, by a local number.
#[derive(Default)]
struct Routes {
    next: u64,
    calls: BTreeMap<u64, Route>,
}

fn lock(routes: &Mutex<Routes>) -> MutexGuard<'_, Routes> {
    // Plain data: a panic while it was held leaves it whole.
    routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Routes {
    /// The call a question belongs to: the one whose response stream it arrived on, else the
    /// one call in flight (also while the asking call's id is not yet recorded).
    fn target(&self, origin: Option<&RequestId>) -> Result<&Route, String> {
        if let Some(id) = origin {
            if let Some(route) = self.calls.values().find(|r| r.request.as_ref() == Some(id)) {
                return Ok(route);
            }
        }
        let mut candidates = self.calls.values().filter(|r| origin.is_none() || r.request.is_none());
        match (candidates.next(), candidates.next()) {
            (Some(route), None) => Ok(route),
            (None, _) => Err("no tools/call of this client is in flight to ask for".to_owned()),
            (Some(_), Some(_)) => Err(format!(
                "{} tools/call requests are in flight on this session and the question names none of them; keel-mcp cannot tell which call asks",
                self.calls.len()
            )),
        }
    }
}

/// Removes a call's route when the call ends or is dropped.
struct RouteGuard {
    routes: Arc<Mutex<Routes>>,
    number: u64,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        lock(&self.routes).calls.remove(&self.number);
    }
}

/// Counts tool-list changes announced by the server and hands its questions to the calls.
#[derive(Clone)]
struct Handler {
    generation: Arc<AtomicU64>,
    routes: Arc<Mutex<Routes>>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.generation.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + MaybeSendFuture + '_ {
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        let routes = self.routes.clone();
        async move {
            let question = match request {
                ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => ElicitationQuestion {
                    message,
                    requested_schema: serde_json::to_value(&requested_schema)
                        .map_err(|e| ErrorData::invalid_params(format!("unreadable requestedSchema: {e}"), None))?,
                },
                // Only form mode is declared in the client's capabilities.
                _ => return Err(ErrorData::invalid_params("keel-mcp answers form elicitations only (no URL mode)", None)),
            };
            let (reply, answer) = tokio::sync::oneshot::channel();
            {
                let routes = lock(&routes);
                let route = routes.target(origin.as_ref()).map_err(|m| ErrorData::invalid_request(m, None))?;
                route
                    .questions
                    .send(Asked { question, reply })
                    .map_err(|_| ErrorData::invalid_request("the call that asked has ended", None))?;
            }
            // The call dropped unanswered (its run canceled, the process ending): `cancel`.
            Ok(answer.await.unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel)))
        }
    }

    fn get_info(&self) -> ClientConfig {
        // Form elicitation, answers checked against the requested schema before they are sent.
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::new().with_schema_validation(true)));
        ClientConfig::new(capabilities, Implementation::new("keel-mcp", env!("CARGO_PKG_VERSION")))
    }
}

struct Session {
    service: RunningService<RoleClient, Handler>,
    pid: Option<u32>,
    routes: Arc<Mutex<Routes>>,
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
    async fn peer(&self) -> Result<(Peer<RoleClient>, Arc<Mutex<Routes>>), TransportError> {
        let mut guard = self.session.lock().await;
        if let Some(session) = guard.as_ref() {
            if !session.service.is_closed() && !session.service.peer().is_transport_closed() {
                return Ok((session.service.peer().clone(), session.routes.clone()));
            }
        }
        // The old session (if any) ended: drop it (a stdio child is killed on drop) and open
        // a new one. A new server may list other tools, so the list is stale from here on.
        *guard = None;
        let routes = Arc::new(Mutex::new(Routes::default()));
        let handler = Handler { generation: self.generation.clone(), routes: routes.clone() };
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
                Session { service, pid, routes: routes.clone() }
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
                Session { service, pid: None, routes: routes.clone() }
            }
        };
        if self.sessions.fetch_add(1, Ordering::SeqCst) > 0 {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        let peer = session.service.peer().clone();
        *guard = Some(session);
        Ok((peer, routes))
    }

    /// Sends one request. `Err(TransportClosed)` from the hand-over means the session had
    /// already ended: nothing was sent. Once handed over, a missing answer is `Lost`, except
    /// a send that failed to connect at all (nothing reached the server).
    async fn request(&self, request: ClientRequest, timeout: Option<Duration>) -> Result<ServerResult, TransportError> {
        let (peer, _) = self.peer().await?;
        let options = timeout.map_or_else(PeerRequestOptions::no_options, PeerRequestOptions::with_timeout);
        let handle = self.hand_over(&peer, request, options).await?;
        handle.await_response().await.map_err(|e| classify(&self.endpoint, e))
    }

    async fn hand_over(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        options: PeerRequestOptions,
    ) -> Result<rmcp::service::RequestHandle<RoleClient>, TransportError> {
        match peer.send_request_with_option(request, options).await {
            Ok(handle) => Ok(handle),
            Err(ServiceError::TransportClosed) => {
                // Forget the ended session (unless another call already replaced it), so
                // the next attempt opens a new one.
                let mut guard = self.session.lock().await;
                if guard.as_ref().is_some_and(|s| s.service.is_closed() || s.service.peer().is_transport_closed()) {
                    guard.take();
                }
                Err(TransportError::NotSent(format!("the session with {} had ended", self.endpoint)))
            }
            Err(e) => Err(classify(&self.endpoint, e)),
        }
    }

    /// Sends a `tools/call` and waits for its first step. The call timeout is left to
    /// [`InFlight`], which stops it while the user is asked.
    async fn call(&self, request: ClientRequest) -> Result<CallStep, TransportError> {
        let (peer, routes) = self.peer().await?;
        // The route exists before the request leaves, so a question that arrives at once
        // finds its call.
        let (questions, asked) = tokio::sync::mpsc::unbounded_channel();
        let number = {
            let mut r = lock(&routes);
            let number = r.next;
            r.next += 1;
            r.calls.insert(number, Route { request: None, questions });
            number
        };
        let guard = RouteGuard { routes: routes.clone(), number };
        let handle = self.hand_over(&peer, request, PeerRequestOptions::no_options()).await?;
        if let Some(route) = lock(&routes).calls.get_mut(&number) {
            route.request = Some(handle.id.clone());
        }
        let in_flight = InFlight {
            response: Box::pin(handle.await_response()),
            asked,
            _route: guard,
            endpoint: self.endpoint.clone(),
            timeout: self.call_timeout,
        };
        in_flight.next_step().await
    }
}

/// A `tools/call` handed over and not yet answered.
struct InFlight {
    response: BoxFuture<'static, Result<ServerResult, ServiceError>>,
    asked: tokio::sync::mpsc::UnboundedReceiver<Asked>,
    _route: RouteGuard,
    endpoint: Endpoint,
    timeout: Option<Duration>,
}

enum Next {
    Answer(Box<Result<ServerResult, ServiceError>>),
    Asked(Asked),
}

impl InFlight {
    /// Waits for the answer or a question, whichever comes first; the call timeout counts
    /// from the hand-over or from the last reply to a question.
    fn next_step(self) -> BoxFuture<'static, Result<CallStep, TransportError>> {
        // Boxed: a resumed call comes back here, so the future's type must not contain itself.
        Box::pin(self.wait())
    }

    async fn wait(mut self) -> Result<CallStep, TransportError> {
        let next = {
            let wait = async {
                tokio::select! {
                    answer = &mut self.response => Next::Answer(Box::new(answer)),
                    Some(asked) = self.asked.recv() => Next::Asked(asked),
                }
            };
            match self.timeout {
                Some(limit) => match tokio::time::timeout(limit, wait).await {
                    Ok(next) => next,
                    Err(_) => {
                        return Err(TransportError::Lost(format!("{}: no answer to tools/call within {} s", self.endpoint, limit.as_secs_f64())))
                    }
                },
                None => wait.await,
            }
        };
        match next {
            Next::Answer(answer) => match *answer {
                Ok(ServerResult::CallToolResult(result)) => serde_json::to_value(&result)
                    .map(|v| CallStep::Answered(CallAnswer(v)))
                    .map_err(|e| TransportError::Lost(format!("unreadable answer: {e}"))),
                // The server answered something else: it did answer, so the call is settled
                // as an error the model sees, never retried.
                Ok(other) => Err(TransportError::Refused { code: 0, message: format!("tools/call was answered with {}", kind(&other)) }),
                Err(e) => Err(classify(&self.endpoint, e)),
            },
            Next::Asked(Asked { question, reply }) => {
                let resume: crate::transport::Resume = Box::new(move |answer: ElicitationAnswer| {
                    Box::pin(async move {
                        let result = match &answer {
                            ElicitationAnswer::Accept(content) => match content.to_serde_value() {
                                Ok(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
                                // A validated answer is within the depth this converts; should
                                // it not be, the server is told the user canceled.
                                Err(_) => ElicitResult::new(ElicitationAction::Cancel),
                            },
                            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
                            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
                        };
                        // The question's handler may have gone with its session: the call's
                        // answer (or its loss) follows below either way.
                        let _ = reply.send(result);
                        self.next_step().await
                    })
                });
                Ok(CallStep::Asked(PausedCall::new(question, resume)))
            }
        }
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

    fn call_tool(&self, name: String, arguments: Map<String, Value>) -> BoxFuture<'_, Result<CallStep, TransportError>> {
        Box::pin(async move {
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            self.call(ClientRequest::CallToolRequest(Request::new(params))).await
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

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(ids: &[Option<i64>]) -> (Routes, Vec<tokio::sync::mpsc::UnboundedReceiver<Asked>>) {
        let mut routes = Routes::default();
        let mut receivers = Vec::new();
        for (n, id) in ids.iter().enumerate() {
            let (questions, rx) = tokio::sync::mpsc::unbounded_channel();
            routes.calls.insert(n as u64, Route { request: id.map(RequestId::Number), questions });
            receivers.push(rx);
        }
        (routes, receivers)
    }

    fn target(routes: &Routes, origin: Option<i64>) -> Result<Option<RequestId>, String> {
        routes.target(origin.map(RequestId::Number).as_ref()).map(|r| r.request.clone())
    }

    #[test]
    fn a_question_goes_to_the_call_whose_stream_it_came_on_else_to_the_only_call() {
        let (two, _rx) = routes(&[Some(1), Some(2)]);
        assert_eq!(target(&two, Some(2)), Ok(Some(RequestId::Number(2))));
        assert!(target(&two, None).unwrap_err().contains("cannot tell which call asks"));
        let (one, _rx) = routes(&[Some(7)]);
        assert_eq!(target(&one, None), Ok(Some(RequestId::Number(7))));
        // The asking call's id is not recorded yet: the one call without an id.
        let (racing, _rx) = routes(&[Some(1), None]);
        assert_eq!(target(&racing, Some(5)), Ok(None));
        let (none, _rx) = routes(&[]);
        assert!(target(&none, None).unwrap_err().contains("no tools/call"));
    }
}
