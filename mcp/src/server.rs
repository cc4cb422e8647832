//! Which server to reach ([`McpServer`]) and the tools it listed ([`McpTools`]): the ones an
//! agent exposes, and which of them the user declared safe to send twice.

use crate::error::McpError;
use crate::rmcp_transport::{Endpoint, RmcpTransport};
use crate::tool::{McpTool, NotSentRetry};
use crate::transport::{list_all, McpTransport};
use keel::agent::{ToolOptions, UnknownPolicy};
use keel::env::Clock;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How long one `tools/call` (or `tools/list`) may wait for its answer by default. A call
/// that waited this long is Unknown, like any lost answer.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// An MCP server to connect to: a command speaking MCP on its stdin/stdout, or a
/// streamable-HTTP endpoint.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_mcp::McpError> {
/// use keel_mcp::McpServer;
/// let local = McpServer::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]).connect().await?;
/// let remote = McpServer::http("http://127.0.0.1:3001/mcp").name("everything").connect().await?;
/// # let _ = (local, remote); Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct McpServer {
    name: String,
    endpoint: Endpoint,
    call_timeout: Option<Duration>,
    retry: NotSentRetry,
    prefix: String,
}

impl McpServer {
    /// A server started as `program args...`, speaking MCP over its stdin and stdout. The
    /// process is started on connect and started again when it has exited before a call
    /// (a crash, a kill, or a new process resuming a run).
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> McpServer
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let program = program.into();
        let name = std::path::Path::new(&program).file_stem().and_then(|s| s.to_str()).unwrap_or("mcp").to_owned();
        McpServer::new(name, Endpoint::Stdio { program, args: args.into_iter().map(Into::into).collect(), env: Vec::new(), cwd: None })
    }

    /// A streamable-HTTP server at `url` (for example `http://127.0.0.1:3001/mcp`). Plain
    /// `http://` only: put a TLS-terminating proxy in front of a remote server.
    pub fn http(url: impl Into<String>) -> McpServer {
        let url = url.into();
        McpServer::new("mcp".to_owned(), Endpoint::Http { url })
    }

    fn new(name: String, endpoint: Endpoint) -> McpServer {
        McpServer { name, endpoint, call_timeout: Some(DEFAULT_CALL_TIMEOUT), retry: NotSentRetry::default(), prefix: String::new() }
    }

    /// The server's name in messages (default: the program's name, or `mcp` for a URL).
    pub fn name(mut self, name: impl Into<String>) -> McpServer {
        self.name = name.into();
        self
    }

    /// An environment variable for a stdio server's process.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> McpServer {
        if let Endpoint::Stdio { env, .. } = &mut self.endpoint {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio server's process.
    pub fn current_dir(mut self, dir: impl Into<String>) -> McpServer {
        if let Endpoint::Stdio { cwd, .. } = &mut self.endpoint {
            *cwd = Some(dir.into());
        }
        self
    }

    /// How long a call waits for its answer (default [`DEFAULT_CALL_TIMEOUT`]; `None`: for
    /// ever). A call that timed out is Unknown.
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> McpServer {
        self.call_timeout = timeout;
        self
    }

    /// How a call that could not be sent (the server could not be started or reached) is
    /// tried again (default: 3 attempts, waiting 200 ms then 400 ms).
    pub fn retry_not_sent(mut self, retry: NotSentRetry) -> McpServer {
        self.retry = retry;
        self
    }

    /// A prefix for the keel names of this server's tools (for example `"files_"`), so two
    /// servers' tools cannot collide. Calls still use the server's own names.
    pub fn prefix(mut self, prefix: impl Into<String>) -> McpServer {
        self.prefix = prefix.into();
        self
    }

    /// Starts (or reaches) the server, initializes the session and lists its tools (every
    /// page). Waits between retries on tokio's clock.
    pub async fn connect(self) -> Result<McpTools, McpError> {
        let clock: Arc<dyn Clock> = match keel::env::TokioEnv::current() {
            Ok(env) => Arc::new(env),
            Err(e) => return Err(McpError::Connect { server: self.name, detail: format!("connect needs a tokio runtime: {e}") }),
        };
        let transport = Arc::new(RmcpTransport::new(self.endpoint.clone(), self.call_timeout));
        let mut tools = self.connect_with(transport.clone(), clock).await?;
        tools.rmcp = Some(transport);
        Ok(tools)
    }

    /// Lists the tools of a server reached through any [`McpTransport`] (the simulator's
    /// in-process server, a transport of your own); retry waits run on `clock`.
    pub async fn connect_with(self, transport: Arc<dyn McpTransport>, clock: Arc<dyn Clock>) -> Result<McpTools, McpError> {
        let connect_error = |detail: String| McpError::Connect { server: self.name.clone(), detail };
        let mut last = String::new();
        let attempts = self.retry.attempts();
        let mut listed = None;
        for attempt in 1..=attempts {
            match transport.open().await {
                Ok(()) => {}
                Err(e) => {
                    last = e.to_string();
                    if attempt < attempts {
                        clock.sleep(self.retry.backoff(attempt)).await;
                    }
                    continue;
                }
            }
            let generation = transport.list_generation();
            match list_all(transport.as_ref()).await {
                Ok(tools) => {
                    listed = Some((tools, generation));
                    break;
                }
                Err(e) => last = e.to_string(),
            }
            if attempt < attempts {
                clock.sleep(self.retry.backoff(attempt)).await;
            }
        }
        let (raw, generation) = listed.ok_or_else(|| connect_error(format!("could not list its tools after {attempts} attempts: {last}")))?;
        let mut tools = Vec::new();
        for (index, value) in raw.into_iter().enumerate() {
            tools.push(McpToolInfo::read(&self.name, index, value)?);
        }
        Ok(McpTools {
            server: self.name,
            prefix: self.prefix,
            transport,
            clock,
            retry: self.retry,
            tools,
            generation,
            selected: None,
            options: BTreeMap::new(),
            rmcp: None,
        })
    }
}

/// The server's hints about a tool (its `annotations`). Hints only: a tool is sent twice only
/// if you declare it retry-safe ([`McpTools::retry_safe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not change its environment.
    pub read_only: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// `destructiveHint`: the tool may destroy or overwrite.
    pub destructive: Option<bool>,
    /// `openWorldHint`: the tool reaches outside entities.
    pub open_world: Option<bool>,
}

/// One tool as the server listed it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpToolInfo {
    /// The server's name for it.
    pub name: String,
    /// Its human-readable title, if any.
    pub title: Option<String>,
    /// Its description, if any.
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The server's hints.
    pub hints: ToolHints,
    /// The definition as listed (compared to notice a change).
    pub(crate) definition: Value,
}

impl McpToolInfo {
    fn read(server: &str, index: usize, value: Value) -> Result<McpToolInfo, McpError> {
        let name = value.get("name").and_then(Value::as_str).map(str::to_owned);
        let bad = |detail: &str| McpError::BadTool {
            server: server.to_owned(),
            tool: name.clone().unwrap_or_else(|| format!("#{index}")),
            detail: detail.to_owned(),
        };
        let Some(tool_name) = name.clone() else { return Err(bad("the listing has no `name`")) };
        let input_schema = value.get("inputSchema").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
        if !input_schema.is_object() {
            return Err(bad("its `inputSchema` is not a JSON object"));
        }
        let hint = |key: &str| value.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool);
        Ok(McpToolInfo {
            name: tool_name,
            title: value.get("title").and_then(Value::as_str).map(str::to_owned),
            description: value.get("description").and_then(Value::as_str).map(str::to_owned),
            input_schema,
            hints: ToolHints {
                read_only: hint("readOnlyHint"),
                idempotent: hint("idempotentHint"),
                destructive: hint("destructiveHint"),
                open_world: hint("openWorldHint"),
            },
            definition: definition_of(&value),
        })
    }

    /// Whether the server hints that sending a call twice is harmless (`readOnlyHint` or
    /// `idempotentHint`). A hint to confirm, not a declaration.
    pub fn hinted_retry_safe(&self) -> bool {
        self.hints.read_only == Some(true) || self.hints.idempotent == Some(true)
    }
}

/// What identifies a tool's behavior for the model and for keel: name, title, description,
/// input schema, annotations. Icons and `_meta` are left out.
pub(crate) fn definition_of(value: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["name", "title", "description", "inputSchema", "annotations"] {
        if let Some(v) = value.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// A connected server's tools, and the options they are exposed with. Give it to an agent
/// with [`McpExt::mcp`](crate::McpExt::mcp).
#[derive(Clone)]
pub struct McpTools {
    server: String,
    prefix: String,
    transport: Arc<dyn McpTransport>,
    clock: Arc<dyn Clock>,
    retry: NotSentRetry,
    tools: Vec<McpToolInfo>,
    generation: u64,
    selected: Option<BTreeSet<String>>,
    options: BTreeMap<String, ToolOptions>,
    rmcp: Option<Arc<RmcpTransport>>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools").field("server", &self.server).field("tools", &self.names()).finish_non_exhaustive()
    }
}

impl McpTools {
    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Every tool the server listed, in its order.
    pub fn listed(&self) -> &[McpToolInfo] {
        &self.tools
    }

    /// The names of the tools an agent gets (all listed ones unless [`select`](Self::select)ed).
    pub fn names(&self) -> Vec<String> {
        self.chosen().map(|t| t.name.clone()).collect()
    }

    /// Exposes only these tools. An unknown name is an error naming what the server lists.
    pub fn select<I, S>(mut self, names: I) -> Result<McpTools, McpError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut chosen = BTreeSet::new();
        for name in names {
            let name = name.into();
            self.check_listed(&name)?;
            chosen.insert(name);
        }
        self.selected = Some(chosen);
        Ok(self)
    }

    /// Declares these tools safe to send twice: a call whose answer was lost is sent again
    /// (keel's `UnknownPolicy::Retry`) instead of held for you. Only you can declare this;
    /// [`hinted_retry_safe`](Self::hinted_retry_safe) lists what the server claims.
    pub fn retry_safe<I, S>(mut self, names: I) -> Result<McpTools, McpError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for name in names {
            let name = name.into();
            self.check_listed(&name)?;
            let options = self.options.remove(&name).unwrap_or_default().idempotent();
            self.options.insert(name, options);
        }
        Ok(self)
    }

    /// Sets a tool's keel options (concurrency, Unknown policy) whole.
    pub fn options(mut self, name: impl Into<String>, options: ToolOptions) -> Result<McpTools, McpError> {
        let name = name.into();
        self.check_listed(&name)?;
        self.options.insert(name, options);
        Ok(self)
    }

    /// The exposed tools the server hints are read-only or idempotent: candidates for
    /// [`retry_safe`](Self::retry_safe), once you have checked them.
    pub fn hinted_retry_safe(&self) -> Vec<String> {
        self.chosen().filter(|t| t.hinted_retry_safe()).map(|t| t.name.clone()).collect()
    }

    /// The exposed tools' definitions as listed: keep it with a run (it is also part of the
    /// agent's configuration digest, so a changed list stops a resume) and compare a later
    /// listing with [`expect`](Self::expect).
    pub fn tool_list(&self) -> Value {
        Value::Array(self.chosen().map(|t| t.definition.clone()).collect())
    }

    /// Checks that the exposed tools are listed exactly as in `recorded` (from
    /// [`tool_list`](Self::tool_list)); otherwise [`McpError::ToolsChanged`] names each
    /// difference.
    pub fn expect(&self, recorded: &Value) -> Result<(), McpError> {
        let old: BTreeMap<String, &Value> = recorded
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("name").and_then(Value::as_str).map(|n| (n.to_owned(), d)))
            .collect();
        let now: BTreeMap<String, &Value> = self.chosen().map(|t| (t.name.clone(), &t.definition)).collect();
        let mut changes = Vec::new();
        for (name, before) in &old {
            match self.tools.iter().find(|t| &t.name == name) {
                None => changes.push(format!("{name}: no longer listed")),
                Some(t) => {
                    if let Some(what) = difference(before, &t.definition) {
                        changes.push(format!("{name}: {what}"));
                    }
                }
            }
        }
        for name in now.keys() {
            if !old.contains_key(name) {
                changes.push(format!("{name}: not in the recorded list"));
            }
        }
        if changes.is_empty() {
            Ok(())
        } else {
            Err(McpError::ToolsChanged { server: self.server.clone(), changes: changes.join("; ") })
        }
    }

    /// The running stdio server's process id (`None` for HTTP, a transport of your own, or
    /// while no process runs). For supervision and tests.
    pub async fn process_id(&self) -> Option<u32> {
        match &self.rmcp {
            Some(t) => t.process_id().await,
            None => None,
        }
    }

    /// How many sessions were opened with the server so far (each restart of a stdio server
    /// is one more); 0 for a transport of your own.
    pub fn sessions_opened(&self) -> u64 {
        self.rmcp.as_ref().map_or(0, |t| t.sessions_opened())
    }

    /// The keel tools with their options, in listing order.
    pub fn keel_tools(&self) -> Vec<(McpTool, ToolOptions)> {
        self.chosen()
            .map(|info| {
                let options = self.options.get(&info.name).cloned().unwrap_or_default();
                let mut tool = McpTool::new(
                    self.server.clone(),
                    format!("{}{}", self.prefix, info.name),
                    info.clone(),
                    self.transport.clone(),
                    self.clock.clone(),
                    self.retry.clone(),
                    self.generation,
                );
                tool.retry_safe = options.unknown_policy() == UnknownPolicy::Retry;
                (tool, options)
            })
            .collect()
    }

    fn chosen(&self) -> impl Iterator<Item = &McpToolInfo> {
        self.tools.iter().filter(|t| self.selected.as_ref().is_none_or(|s| s.contains(&t.name)))
    }

    fn check_listed(&self, name: &str) -> Result<(), McpError> {
        if self.tools.iter().any(|t| t.name == name) {
            Ok(())
        } else {
            Err(McpError::NoSuchTool {
                server: self.server.clone(),
                tool: name.to_owned(),
                listed: self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            })
        }
    }
}

/// What differs between two definitions of one tool, if anything.
pub(crate) fn difference(before: &Value, after: &Value) -> Option<String> {
    let mut parts = Vec::new();
    for (key, label) in [("title", "title"), ("description", "description"), ("inputSchema", "input schema"), ("annotations", "annotations")] {
        if before.get(key) != after.get(key) {
            parts.push(format!("{label} changed"));
        }
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}
