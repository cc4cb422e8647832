//! Fuzz target `snapshot_mutation`: the property is `keel_tests::fuzz_props::snapshot_mutation` (replayed over
//! `fuzz/corpus/snapshot_mutation/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::snapshot_mutation(data));
