//! The README's PostgreSQL worker code is the example's, verbatim, so the code a newcomer copies
//! is the code CI builds.

#[test]
fn the_readme_worker_is_the_example_verbatim() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../examples/worker.rs");
    let start = example
        .find("    let store = PostgresCommitter::connect")
        .expect("the example connects");
    let end_marker = "    worker.run(all_closed(leases.clone())).await?;\n";
    let end = example
        .find(end_marker)
        .map(|i| i + end_marker.len())
        .expect("the example runs a worker");
    assert!(
        readme.contains(&example[start..end]),
        "README.md must hold stores/postgres/examples/worker.rs's main as written"
    );
}
