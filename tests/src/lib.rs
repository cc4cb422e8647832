//! Workspace integration tests live in `tests/tests/`; `durable_world` is shared by the
//! crash child binary and the durable kill test.

pub mod durable_world;
//! Workspace integration tests live in `tests/tests/`.

pub mod fuzz_props;
