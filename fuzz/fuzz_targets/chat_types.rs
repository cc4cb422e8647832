//! Fuzz target `chat_types`: the property is `keel_tests::fuzz_props::chat_types` (replayed over
//! `fuzz/corpus/chat_types/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::chat_types(data));
