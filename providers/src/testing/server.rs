//! [`FixtureServer`]: a real HTTP/1.1 server on 127.0.0.1 replaying a [`Fixture`].

use super::fixture::{Exchange, Fixture, ReplayBody, Stall};
use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Largest request body the server reads.
pub const MAX_FIXTURE_REQUEST_BYTES: usize = 8 << 20;

/// A request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct State {
    exchanges: Vec<Exchange>,
    next: usize,
    received: Vec<ReceivedRequest>,
    mismatches: Vec<String>,
}

/// Serves the exchanges of a fixture, in order, to whoever connects.
///
/// Each request is checked against the next exchange. A request that does not match is
/// answered `418` with the reason in the body (no provider uses 418 and no client retries it,
/// so the client reports a definite failure quoting the reason) and recorded in
/// [`FixtureServer::mismatches`]; the exchange stays next. Dropping the server stops it and releases stalled responses.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use keel_providers::testing::{Fixture, FixtureServer};
/// let server = FixtureServer::start(Fixture::load("tests/fixtures/openai/tool_round.json")?).await?;
/// let base_url = format!("{}/v1", server.url());
/// // ... point a client at base_url and run ...
/// server.check_done()?;
/// # Ok(()) }
/// ```
pub struct FixtureServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
    _stop: watch::Sender<()>,
}

impl FixtureServer {
    /// Starts serving on a free port of 127.0.0.1.
    pub async fn start(fixture: Fixture) -> std::io::Result<FixtureServer> {
        FixtureServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), fixture).await
    }

    /// Starts serving on `addr`.
    pub async fn start_on(addr: SocketAddr, fixture: Fixture) -> std::io::Result<FixtureServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State { exchanges: fixture.exchanges, ..State::default() }));
        let (stop, stopped) = watch::channel(());
        let accept = tokio::spawn(accept_loop(listener, state.clone(), stopped));
        Ok(FixtureServer { addr, state, accept, _stop: stop })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Exchanges served so far.
    pub fn served(&self) -> usize {
        self.lock().next
    }

    /// Every request received, matching or not, in arrival order.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        self.lock().received.clone()
    }

    /// Why each mismatching request did not match.
    pub fn mismatches(&self) -> Vec<String> {
        self.lock().mismatches.clone()
    }

    /// `Ok` when every exchange was served and no request mismatched.
    pub fn check_done(&self) -> Result<(), String> {
        let state = self.lock();
        if let Some(first) = state.mismatches.first() {
            return Err(format!("{} mismatching request(s); first: {first}", state.mismatches.len()));
        }
        if state.next != state.exchanges.len() {
            return Err(format!("served {} of {} exchanges", state.next, state.exchanges.len()));
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>, stopped: watch::Receiver<()>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let state = state.clone();
        let stopped = stopped.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| handle(request, state.clone(), stopped.clone()));
            // A connection error (the client went away) ends only this connection.
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

async fn handle(
    request: Request<Incoming>,
    state: Arc<Mutex<State>>,
    mut stopped: watch::Receiver<()>,
) -> Result<Response<Body>, Infallible> {
    let method = request.method().to_string();
    let path = request.uri().path_and_query().map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = match Limited::new(request.into_body(), MAX_FIXTURE_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(e) => return Ok(text(418, format!("fixture server: cannot read the request body: {e}"))),
    };
    let received = ReceivedRequest { method, path, headers, body };
    let exchange = {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        s.received.push(received.clone());
        let checked = match s.exchanges.get(s.next) {
            None => Err(format!("no exchange left for {} {} (all {} served)", received.method, received.path, s.next)),
            Some(expected) => matches(expected, &received).map(|()| expected.clone()),
        };
        match checked {
            Ok(exchange) => {
                s.next += 1;
                exchange
            }
            Err(reason) => {
                let reason = format!("exchange {}: {reason}", s.next);
                s.mismatches.push(reason.clone());
                return Ok(text(418, format!("fixture mismatch: {reason}")));
            }
        }
    };
    let reply = exchange.response;
    if reply.stall == Some(Stall::BeforeHeaders) {
        // Never answer; the stop signal (server dropped) releases the task.
        let _ = stopped.changed().await;
        return Ok(text(503, "fixture server stopped".into()));
    }
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    let streamed = matches!(reply.body, ReplayBody::Chunks(_)) || reply.disconnect || reply.stall.is_some();
    let body: Body = match reply.body {
        ReplayBody::Whole(b) if !streamed => Full::new(Bytes::from(b)).map_err(|never| match never {}).boxed_unsync(),
        body => {
            let chunks = match body {
                ReplayBody::Whole(b) => vec![b],
                ReplayBody::Chunks(c) => c,
            };
            let (tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
            tokio::spawn(replay(chunks, reply.chunk_delay_ms, reply.stall, reply.disconnect, tx, stopped));
            BodyExt::boxed_unsync(StreamBody::new(rx))
        }
    };
    Ok(builder.body(body).unwrap_or_else(|e| text(418, format!("fixture response is not valid HTTP: {e}"))))
}

async fn replay(
    chunks: Vec<String>,
    delay_ms: u64,
    stall: Option<Stall>,
    disconnect: bool,
    mut tx: futures::channel::mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    mut stopped: watch::Receiver<()>,
) {
    use futures::SinkExt;
    for chunk in chunks {
        if tx.send(Ok(Frame::data(Bytes::from(chunk)))).await.is_err() {
            return;
        }
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
    if disconnect {
        // An error frame makes hyper abort the connection mid-body.
        let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "fixture disconnect"))).await;
        return;
    }
    if stall == Some(Stall::AfterBody) {
        let _ = stopped.changed().await;
    }
}

fn text(status: u16, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
}

/// Whether `received` is what `expected` describes; the first difference otherwise.
pub(crate) fn matches(expected: &Exchange, received: &ReceivedRequest) -> Result<(), String> {
    let want = &expected.request;
    if !want.method.eq_ignore_ascii_case(&received.method) || want.path != received.path {
        return Err(format!("expected {} {}, got {} {}", want.method, want.path, received.method, received.path));
    }
    for (name, value) in &want.headers {
        let got = received.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        if got != Some(value.as_str()) {
            return Err(format!("header `{name}`: expected {value:?}, got {got:?}"));
        }
    }
    if let Some(body) = &want.body {
        let got: Value = serde_json::from_slice(&received.body)
            .map_err(|e| format!("request body is not JSON ({e}) but the fixture expects JSON"))?;
        if &got != body {
            return Err(format!("request body differs: {}", first_difference(body, &got, "$")));
        }
    }
    Ok(())
}

/// The path and values of the first difference between two JSON values.
fn first_difference(want: &Value, got: &Value, at: &str) -> String {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    None => return format!("{at}.{k} is missing"),
                    Some(gv) if gv != wv => return first_difference(wv, gv, &format!("{at}.{k}")),
                    Some(_) => {}
                }
            }
            match g.keys().find(|k| !w.contains_key(*k)) {
                Some(k) => format!("{at}.{k} is unexpected"),
                None => format!("{at} differs"),
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                if wv != gv {
                    return first_difference(wv, gv, &format!("{at}[{i}]"));
                }
            }
            format!("{at} differs")
        }
        _ => format!("{at}: expected {want}, got {got}"),
    }
}
