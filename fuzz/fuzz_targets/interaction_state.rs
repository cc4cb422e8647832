//! Fuzz target `interaction_state`: the property is `keel_tests::fuzz_props::interaction_state`
//! (replayed over `fuzz/corpus/interaction_state/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::interaction_state(data));
