//! The README's provider quickstart is the top of `examples/provider_quickstart.rs`, verbatim, so the
//! code a newcomer copies is the code CI builds and runs.

#[test]
fn the_readme_provider_quickstart_is_the_example_verbatim() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/provider_quickstart.rs");
    let start = example.find("use keel::prelude::*;").expect("the example imports the prelude");
    let end = example[start..].find("\n}\n").map(|i| start + i + 3).expect("the example has a main");
    let excerpt = &example[start..end];
    assert!(excerpt.lines().count() < 30, "the provider quickstart must stay under 30 lines");
    assert!(readme.contains(excerpt), "README.md must hold providers/examples/provider_quickstart.rs's top as written");
}
