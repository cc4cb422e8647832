//! Fuzz target `json_parse`: the property is `keel_tests::fuzz_props::json_parse` (replayed over
//! `fuzz/corpus/json_parse/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::json_parse(data));
