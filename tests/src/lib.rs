//! Workspace integration tests live in `tests/tests/`.

pub mod fuzz_props;
