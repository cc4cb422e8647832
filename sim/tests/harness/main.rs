//! Integration tests of the campaign framework (one test binary to keep link time down).

mod campaign;
mod cli;
mod determinism;
mod minimize;
mod recording;
mod regressions;
mod shards;
mod support;
