//! Fuzz target `kernel_values`: the property is `keel_tests::fuzz_props::kernel_values` (replayed over
//! `fuzz/corpus/kernel_values/` by `cargo test -p keel-tests --test fuzz_corpus`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::kernel_values(data));
