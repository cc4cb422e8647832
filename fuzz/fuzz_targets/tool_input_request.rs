//! Fuzz target `tool_input_request`: the property is `keel_tests::fuzz_props::tool_input_request` (replayed over
//! `fuzz/corpus/tool_input_request/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::tool_input_request(data));
