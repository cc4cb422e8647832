use std::fs;
use std::path::Path;

use keel_sim::regressions::{load_regressions, LineError, RegressionError};
use keel_sim::scenarios::builtin_registry;

use crate::support::{cli_with_regressions, temp_dir, test_registry};

#[test]
fn loads_txt_files_in_name_order_without_duplicates() {
    let dir = temp_dir("order");
    fs::write(dir.join("b.txt"), "flaky 14\nclock-and-rng 1 # again\n").unwrap();
    fs::write(
        dir.join("a.txt"),
        "# header\nclock-and-rng 1  # first\n\nflaky 7\n",
    )
    .unwrap();
    fs::write(dir.join("notes.md"), "not read 1 2 3\n").unwrap();
    let got: Vec<(String, u64, usize)> = load_regressions(&dir)
        .unwrap()
        .into_iter()
        .map(|r| (r.scenario, r.seed, r.line))
        .collect();
    assert_eq!(
        got,
        vec![
            ("clock-and-rng".into(), 1, 2),
            ("flaky".into(), 7, 4),
            ("flaky".into(), 14, 1)
        ]
    );
}

#[test]
fn a_bad_line_names_its_file_and_line() {
    let dir = temp_dir("bad-line");
    fs::write(dir.join("seeds.txt"), "flaky 1\nflaky one\n").unwrap();
    match load_regressions(&dir) {
        Err(RegressionError::Line { path, line, error }) => {
            assert!(path.ends_with("seeds.txt"));
            assert_eq!(line, 2);
            assert_eq!(error, LineError::BadSeed { text: "one".into() });
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unreadable_inputs_are_typed_errors() {
    assert!(matches!(
        load_regressions(Path::new("/nonexistent/keel-sim")),
        Err(RegressionError::Io { .. })
    ));
    let dir = temp_dir("not-utf8");
    fs::write(dir.join("x.txt"), [0x66, 0xff, 0x20, 0x31]).unwrap();
    assert!(matches!(
        load_regressions(&dir),
        Err(RegressionError::NotUtf8 { .. })
    ));
    let dir = temp_dir("too-large");
    let big = "flaky 1\n".repeat((keel_sim::limits::MAX_REGRESSION_FILE_BYTES / 8 + 1) as usize);
    fs::write(dir.join("x.txt"), big).unwrap();
    assert!(matches!(
        load_regressions(&dir),
        Err(RegressionError::TooLarge { .. })
    ));
}

#[test]
fn the_repository_regressions_load_and_name_known_scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let registry = builtin_registry();
    for r in load_regressions(&dir).unwrap() {
        assert!(
            registry.resolve(&r.scenario).is_ok(),
            "{}:{} names {}",
            r.file.display(),
            r.line,
            r.scenario
        );
    }
}

#[test]
fn cli_replays_stored_seeds_first_and_only_for_selected_scenarios() {
    let dir = temp_dir("cli-replay");
    fs::write(
        dir.join("seeds.txt"),
        "flaky 700  # multiple of 7\nclock-and-rng 5\n",
    )
    .unwrap();
    let registry = test_registry();
    let out = cli_with_regressions(
        &registry,
        "run --seeds 3 --from 1 --scenario flaky",
        dir.clone(),
    );
    assert_eq!(out.code, 1, "{}", out.err);
    assert!(
        out.out
            .contains("regressions    1 replayed first, 1 failed"),
        "{}",
        out.out
    );
    assert!(out.out.contains("FAIL seed=700 scenario=flaky invariant=synthetic: seed 700 is a multiple of 7 (regression)"));

    let out = cli_with_regressions(
        &registry,
        "run --seeds 3 --from 1 --scenario flaky --no-regressions",
        dir.clone(),
    );
    assert_eq!(out.code, 0);
    let explicit = format!(
        "run --seeds 1 --scenario clock-and-rng --regressions {}",
        dir.display()
    );
    let out = cli_with_regressions(&registry, &explicit, "/nonexistent".into());
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(out
        .out
        .contains("regressions    1 replayed first, 0 failed"));
}

#[test]
fn cli_refuses_unknown_scenarios_and_missing_directories() {
    let dir = temp_dir("cli-unknown");
    fs::write(dir.join("seeds.txt"), "\nno-such-scenario 1\n").unwrap();
    let out = cli_with_regressions(&test_registry(), "run --seeds 1", dir.to_path_buf());
    assert_eq!(out.code, 2);
    assert!(
        out.err
            .contains("seeds.txt:2: unknown scenario `no-such-scenario`"),
        "{}",
        out.err
    );
    let out = cli_with_regressions(
        &test_registry(),
        "run --seeds 1 --regressions /nonexistent/dir",
        "/x".into(),
    );
    assert_eq!(out.code, 2);
    assert!(
        out.err.starts_with("error: cannot read /nonexistent/dir"),
        "{}",
        out.err
    );
}
