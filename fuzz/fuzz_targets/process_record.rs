//! Fuzz target `process_record`: the property is `keel_tests::fuzz_props::process_record` (replayed over
//! `fuzz/corpus/process_record/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::process_record(data));
