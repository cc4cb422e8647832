//! The README's MCP example is `examples/mcp_agent.rs` from its imports on, verbatim, so the
//! code a reader copies is the code CI builds and runs.

#[test]
fn the_readme_mcp_example_is_the_example_verbatim() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/mcp_agent.rs");
    let start = example.find("use keel::prelude::*;").expect("the example imports the prelude");
    let end = example[start..].find("\n}\n").map(|i| start + i + 3).expect("the example has a main");
    assert!(readme.contains(&example[start..end]), "README.md must hold mcp/examples/mcp_agent.rs from `use keel::prelude::*;` on, as written");
}
