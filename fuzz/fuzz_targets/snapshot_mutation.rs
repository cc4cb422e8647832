//! Fuzz target `snapshot_mutation` (structured): the bytes drive an `arbitrary`-built
//! `SnapshotMutation` of a real captured snapshot (`ArbitraryJson` subtrees, copies, number
//! bumps, removals…); the property is `keel_tests::fuzz_props::snapshot_mutation`. Taking the
//! raw bytes keeps the corpus replayable by `cargo test -p keel-tests --test fuzz_corpus`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::snapshot_mutation(data));
