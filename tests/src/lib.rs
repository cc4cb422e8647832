//! Workspace integration tests live in `tests/tests/`; `durable_world` is shared by the
//! crash child binary and the durable kill test; `fuzz_props` holds the fuzz target bodies
//! that `tests/tests/fuzz_corpus.rs` replays over the committed corpus; `store_fixtures` are
//! the temp directory and lock retry of tests that open stores while spawning processes.

pub mod durable_world;
pub mod fuzz_props;
pub mod store_fixtures;
