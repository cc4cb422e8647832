//! Fuzz target `tree_snapshot`: the property is `keel_tests::fuzz_props::tree_snapshot` (replayed over
//! `fuzz/corpus/tree_snapshot/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::tree_snapshot(data));
