//! A PostgreSQL store for keel, for many worker processes sharing one database.
//!
//! * [`PostgresCommitter`] — the `Committer`: commits grouped into server transactions, the head row
//!   locked, compared and advanced atomically, a stale writer fenced by the database.
//! * [`leases`](crate::Leases) — which worker drives which run, on the database clock.
//! * [`Worker`] — claims runs whose lease is free or lapsed, restores and drives them with the
//!   real Engine, renews its leases while it lives.
//!
//! The schema lives in SQL files embedded in the crate and is migrated on connect.
#![forbid(unsafe_code)]

mod batch;
mod committer;
mod error;
mod group;
mod leases;
mod pool;
mod schema;
mod worker;

pub use committer::{PostgresCommitter, PostgresOptions, DEFAULT_MAX_CONNECTIONS, MAX_CUT_BYTES};
pub use error::PostgresError;
pub use leases::{Claim, LeaseRow, LeaseState, Leases};
pub use schema::SCHEMA_VERSION;
pub use worker::{Worker, WorkerConfig, WorkerError};
