//! Workspace integration tests live in `tests/tests/`; `durable_world` is shared by the
//! crash child binary and the durable kill test; `fuzz_props` holds the fuzz target bodies
//! that `tests/tests/fuzz_corpus.rs` replays over the committed corpus.

pub mod durable_world;
pub mod fuzz_props;
