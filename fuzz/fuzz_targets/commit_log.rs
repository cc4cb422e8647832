//! Fuzz target `commit_log`: the property is `keel_tests::fuzz_props::commit_log` (replayed over
//! `fuzz/corpus/commit_log/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::commit_log(data));
