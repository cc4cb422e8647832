//! Fuzz target `interaction_mutation` (structured): the bytes drive an `arbitrary`-built
//! `SnapshotMutation` of a real captured Interaction input (state, Step window, protocol
//! payload, Signal or tree snapshot); the property is
//! `keel_tests::fuzz_props::interaction_mutation`. Taking the raw bytes keeps the corpus
//! replayable by `cargo test -p keel-tests --test fuzz_corpus`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_tests::fuzz_props::interaction_mutation(data));
