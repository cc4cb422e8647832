//! A small connection pool: at most `size` connections, each with the store's schema as its
//! search path, reused while open. A transaction needs a connection of its own, so concurrent
//! commits of different trees run on different connections; callers past `size` wait for a
//! free one (the bound keeps many workers within the server's `max_connections`).

use crate::error::{describe, PostgresError};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, Config, NoTls, Statement};

/// How long the server lets a session sit inside a transaction without sending anything.
/// A commit's transaction sends its statements back to back, so only a stalled client reaches it.
const IDLE_IN_TRANSACTION_MILLIS: u32 = 5_000;

pub(crate) struct Pool {
    config: Config,
    schema: String,
    idle: Mutex<Vec<Pooled>>,
    permits: Semaphore,
}

/// An open connection and the statements prepared on it (a prepared statement belongs to its
/// connection): a commit batch sends each of its statements without a round trip to parse it.
struct Pooled {
    client: Client,
    statements: BTreeMap<&'static str, Statement>,
}

/// A connection borrowed from the pool; returned on drop if still open.
pub(crate) struct Conn<'a> {
    client: Option<Pooled>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    pub(crate) fn new(config: Config, schema: String, size: usize) -> Pool {
        Pool {
            config,
            schema,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(size),
        }
    }

    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection: an idle open one, or a new one.
    pub(crate) async fn get(&self) -> Result<Conn<'_>, PostgresError> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| PostgresError::Connect {
                message: "the pool is closed".into(),
            })?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            idle.retain(|c| !c.client.is_closed());
            idle.pop()
        };
        let client = match reused {
            Some(client) => client,
            None => Pooled { client: self.connect().await?, statements: BTreeMap::new() },
        };
        Ok(Conn {
            client: Some(client),
            pool: self,
            _permit: permit,
        })
    }

    /// A new connection whose driver task runs on the current tokio runtime.
    pub(crate) async fn connect(&self) -> Result<Client, PostgresError> {
        let handle =
            tokio::runtime::Handle::try_current().map_err(|e| PostgresError::NoRuntime {
                message: e.to_string(),
            })?;
        let (client, connection) =
            self.config
                .connect(NoTls)
                .await
                .map_err(|e| PostgresError::Connect {
                    message: describe(&e),
                })?;
        // The connection task ends when the client is dropped or the server goes away; its
        // error then surfaces on the client's next query.
        drop(handle.spawn(async move {
            let _ = connection.await;
        }));
        // The schema name was validated as a plain identifier; quoting keeps it literal. A
        // worker paused or cut off inside a transaction would keep its head row locked and
        // stall every other worker's takeover of that tree: the server ends such a session
        // after IDLE_IN_TRANSACTION_MILLIS (its commit then fails, unacknowledged).
        client
            .batch_execute(&format!(
                "SET search_path TO \"{}\"; SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MILLIS}",
                self.schema
            ))
            .await
            .map_err(PostgresError::query)?;
        Ok(client)
    }
}

impl Conn<'_> {
    fn pooled(&mut self) -> &mut Pooled {
        // Present from construction until drop.
        self.client
            .as_mut()
            .unwrap_or_else(|| unreachable!("a pooled connection has a client"))
    }

    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.pooled().client
    }

    /// `sql` prepared on this connection, once per connection.
    pub(crate) async fn prepared(&mut self, sql: &'static str) -> Result<Statement, tokio_postgres::Error> {
        let pooled = self.pooled();
        if let Some(statement) = pooled.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = pooled.client.prepare(sql).await?;
        pooled.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if !client.client.is_closed() {
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(client);
            }
        }
    }
}
