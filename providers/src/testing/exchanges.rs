//! Recorded exchanges served from memory through the transport seam: the same fixture files
//! the [`super::FixtureServer`] serves, with their chunk boundaries, but no socket, so the
//! adapters' request building, SSE parsing and response mapping run under the simulator
//! (madsim), timed only by keel's abstract clock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use keel::env::{BoxFuture, Clock};

use super::fixture::{Exchange, Fixture, ReplayBody, Stall};
use super::server::{matches, ReceivedRequest};
use crate::transport::{HttpRequest, HttpResponse, HttpTransport, SendError};

/// A transport answering each request with the fixture exchange it matches.
///
/// Exchanges are served in order; a request that repeats an already served one (a model call
/// re-performed after a crash) is answered with the same recorded response again, so a
/// simulated run may crash and retry freely. A request matching neither the next exchange nor
/// a served one gets a definite `400` whose body says what differed.
pub struct ExchangeTransport {
    exchanges: Vec<Exchange>,
    clock: Arc<dyn Clock>,
    next: Mutex<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The path of `url` (`/v1/chat/completions` of `http://host/v1/chat/completions`).
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or_else(|| "/".to_owned(), |i| rest[i..].to_owned())
}

impl ExchangeTransport {
    /// Serves `fixture`'s exchanges; chunk delays and stalls wait on `clock`.
    pub fn new(fixture: Fixture, clock: Arc<dyn Clock>) -> ExchangeTransport {
        ExchangeTransport { exchanges: fixture.exchanges, clock, next: Mutex::new(0) }
    }

    /// How many exchanges were served at least once.
    pub fn served(&self) -> usize {
        *lock(&self.next)
    }

    /// The exchange for `received`: the next one, or one already served.
    fn pick(&self, received: &ReceivedRequest) -> Result<Exchange, String> {
        let mut next = lock(&self.next);
        if let Some(e) = self.exchanges.get(*next) {
            match matches(e, received) {
                Ok(()) => {
                    *next += 1;
                    return Ok(e.clone());
                }
                Err(why) => {
                    if let Some(again) = self.exchanges[..*next].iter().rev().find(|e| matches(e, received).is_ok()) {
                        return Ok(again.clone());
                    }
                    return Err(format!("exchange {}: {why}", *next));
                }
            }
        }
        self.exchanges[..*next]
            .iter()
            .rev()
            .find(|e| matches(e, received).is_ok())
            .cloned()
            .ok_or_else(|| format!("no exchange left ({} served)", *next))
    }

    async fn serve(&self, request: HttpRequest) -> Result<HttpResponse, SendError> {
        let received =
            ReceivedRequest { method: "POST".into(), path: path_of(&request.url), headers: request.headers, body: request.body };
        let exchange = match self.pick(&received) {
            Ok(e) => e,
            Err(why) => {
                let body = futures::stream::iter([Ok(why.into_bytes())]);
                return Ok(HttpResponse { status: 400, headers: Vec::new(), body: Box::pin(body) });
            }
        };
        let r = exchange.response;
        if r.stall == Some(Stall::BeforeHeaders) {
            // Never answers: the adapter's response timeout (on the same clock) decides.
            futures::future::pending::<()>().await;
        }
        let chunks: Vec<Vec<u8>> = match r.body {
            ReplayBody::Whole(text) => vec![text.into_bytes()],
            ReplayBody::Chunks(chunks) => chunks.into_iter().map(String::into_bytes).collect(),
        };
        let clock = self.clock.clone();
        let delay = Duration::from_millis(r.chunk_delay_ms);
        let tail: Vec<Option<Result<Vec<u8>, SendError>>> = if r.disconnect {
            vec![Some(Err(SendError::Lost("the server closed the connection mid-body".into())))]
        } else if r.stall == Some(Stall::AfterBody) {
            vec![None]
        } else {
            Vec::new()
        };
        let items = chunks.into_iter().map(|c| Some(Ok(c))).chain(tail);
        let body = futures::stream::iter(items).then(move |item| {
            let clock = clock.clone();
            async move {
                if !delay.is_zero() {
                    clock.sleep(delay).await;
                }
                match item {
                    Some(item) => item,
                    // A stalled stream: the adapter's idle timeout decides.
                    None => futures::future::pending().await,
                }
            }
        });
        Ok(HttpResponse { status: r.status, headers: r.headers, body: Box::pin(body) })
    }
}

impl HttpTransport for ExchangeTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, SendError>> {
        Box::pin(self.serve(request))
    }
}
