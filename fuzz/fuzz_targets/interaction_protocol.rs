//! Fuzz target `interaction_protocol`: the property is `keel_tests::fuzz_props::interaction_protocol`
//! (replayed over `fuzz/corpus/interaction_protocol/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::interaction_protocol(data));
