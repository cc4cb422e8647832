//! A recorded-exchange HTTP server for tests, examples and the simulator: it serves fixture
//! files written from the providers' documented wire formats, checks each request, and
//! replays responses byte for byte (streams chunk by chunk, errors, Retry-After, stalls,
//! dropped connections). See [`fixture`] for the file format.
//!
//! Runs on the real tokio runtime (it binds a real socket), never under madsim.

pub mod fixture;
mod exchanges;
pub mod recorded;
mod server;

pub use fixture::{Exchange, ExpectedRequest, Fixture, FixtureError, ReplayBody, ReplayResponse, Stall, MAX_FIXTURE_EXCHANGES};
pub use exchanges::ExchangeTransport;
pub use server::{FixtureServer, ReceivedRequest, MAX_FIXTURE_REQUEST_BYTES};
