//! Feature `testing`: [`OtlpReceiver`], a small OTLP/HTTP receiver on 127.0.0.1 that decodes
//! each export (protobuf, `POST /v1/traces`) with the `opentelemetry-proto` messages and keeps
//! the spans, for tests and for examples that run without a collector.
//!
//! It serves one connection at a time and answers `Connection: close`, so an exporter opens a
//! connection per export; that is all a test needs and keeps it to the standard library.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The largest export body accepted (an exporter's batch is far smaller).
const MAX_BODY_BYTES: usize = 16 << 20;

/// One span as received, with the service that sent it.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// The `service.name` resource attribute of the export.
    pub service: String,
    /// The span, as decoded.
    pub span: Span,
}

impl ReceivedSpan {
    /// A string, integer or boolean attribute as text.
    pub fn attribute(&self, key: &str) -> Option<String> {
        let kv = self.span.attributes.iter().find(|kv| kv.key == key)?;
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            any_value::Value::IntValue(n) => Some(n.to_string()),
            any_value::Value::BoolValue(b) => Some(b.to_string()),
            any_value::Value::DoubleValue(d) => Some(d.to_string()),
            other => Some(format!("{other:?}")),
        }
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    /// Requests refused, with why (a wrong path, a body that does not decode).
    refused: Vec<String>,
}

/// A local OTLP/HTTP trace receiver; stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OtlpReceiver {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> std::io::Result<OtlpReceiver> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let received = Arc::new(Mutex::new(Received::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (received, stop) = (received.clone(), stop.clone());
            std::thread::Builder::new().name("otlp-receiver".into()).spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, &received);
                    }
                }
            })?
        };
        Ok(OtlpReceiver { addr, received, stop, thread: Some(thread) })
    }

    /// The traces URL to export to (`http://127.0.0.1:PORT/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.addr)
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.lock().spans.clone()
    }

    /// Requests refused so far, with why.
    pub fn refused(&self) -> Vec<String> {
        self.lock().refused.clone()
    }

    /// Waits until `done` holds for the spans received, or `timeout` passes; returns them.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() >= deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept so the thread sees the stop flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request from `stream`, records it, answers, closes.
fn serve(stream: TcpStream, received: &Mutex<Received>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let (status, refused) = match read_export(&mut reader) {
        Ok(None) => return, // a connection closed without a request (the stop wake-up)
        Ok(Some(request)) => {
            let mut r = received.lock().unwrap_or_else(PoisonError::into_inner);
            r.spans.extend(flatten(request));
            ("200 OK", None)
        }
        Err((status, why)) => (status, Some(why)),
    };
    if let Some(why) = refused {
        received.lock().unwrap_or_else(PoisonError::into_inner).refused.push(why);
    }
    // An empty body is the protobuf encoding of an empty ExportTraceServiceResponse.
    let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let mut stream = stream;
    let _ = stream.write_all(answer.as_bytes());
    let _ = stream.flush();
}

type Refusal = (&'static str, String);

fn read_export(reader: &mut impl BufRead) -> Result<Option<ExportTraceServiceRequest>, Refusal> {
    let bad = |why: String| ("400 Bad Request", why);
    let mut line = String::new();
    if reader.read_line(&mut line).map_err(|e| bad(e.to_string()))? == 0 {
        return Ok(None);
    }
    let request_line = line.trim_end().to_owned();
    let mut length = None;
    let mut content_type = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).map_err(|e| bad(e.to_string()))?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else { return Err(bad(format!("malformed header {header:?}"))) };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse::<usize>().ok(),
            "content-type" => content_type = value.trim().to_owned(),
            "content-encoding" => return Err(("415 Unsupported Media Type", format!("content-encoding {} is not supported", value.trim()))),
            _ => {}
        }
    }
    if !request_line.starts_with("POST /v1/traces ") {
        return Err(("404 Not Found", format!("unexpected request {request_line:?}")));
    }
    if content_type != "application/x-protobuf" {
        return Err(("415 Unsupported Media Type", format!("content-type {content_type:?}, expected application/x-protobuf")));
    }
    let length = length.ok_or_else(|| bad("no content-length".into()))?;
    if length > MAX_BODY_BYTES {
        return Err(("413 Payload Too Large", format!("a body of {length} bytes")));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| bad(e.to_string()))?;
    ExportTraceServiceRequest::decode(body.as_slice()).map(Some).map_err(|e| bad(format!("the body does not decode: {e}")))
}

fn flatten(request: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan { service: service.clone(), span });
            }
        }
    }
    out
}
