//! The `keel-sim` binary as a user meets it: commands it prints run as printed, misspelt flags
//! are named, bundled scenario files are listed and a directory of them runs, a user's own
//! scenario file is judged only on what it declares.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the binary this test built with `args`, from the repository root (like `cargo run`
/// there), with no stored seeds read or recorded unless `args` say otherwise.
fn keel_sim(args: &[&str]) -> (Option<i32>, String, String) {
    let run = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the keel-sim binary runs");
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn temp_dir(name: &str) -> TestDir {
    let dir = std::env::temp_dir().join(format!("keel-sim-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TestDir(dir)
}

/// A test's directory, removed when the test is done with it (also when it panics).
struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for TestDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The arguments of a printed `cargo run -p keel-sim -- ...` command (no quoting needed for
/// the paths these tests use).
fn printed_args(command: &str) -> Vec<String> {
    let args = command
        .trim()
        .strip_prefix("cargo run -p keel-sim -- ")
        .unwrap_or_else(|| panic!("not a keel-sim command: {command}"));
    assert!(!args.contains('\''), "quoted argument: {args}");
    args.split_whitespace().map(String::from).collect()
}

/// A user's scenario: one tool round, then an answer; `expect` may be made to fail.
fn user_scenario(output_text: &str) -> String {
    format!(
        r#"{{
  "name": "my-agent",
  "user": "What is the weather in Oslo?",
  "model": {{"turns": [
    {{"calls": [{{"id": "c1", "name": "weather", "arguments": {{"city": "Oslo"}}}}]}},
    {{"text": "Cold."}}
  ]}},
  "tools": [{{"name": "weather"}}],
  "expect": {{"status": "completed", "output_text": "{output_text}"}}
}}"#
    )
}

#[test]
fn a_file_scenario_failure_replays_and_minimizes_exactly_as_printed() {
    let dir = temp_dir("replay");
    let file = dir.join("my-agent.json");
    std::fs::write(&file, user_scenario("Warm.")).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = keel_sim(&["run", "--seeds", "2", "--scenario", path, "--no-regressions"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let fail = out.lines().position(|l| l.starts_with("FAIL seed=0 scenario=my-agent")).expect(&out);
    let replay = out.lines().nth(fail + 1).unwrap();
    assert!(replay.contains(&format!("--scenario {path}")), "the command names the file:\n{replay}");
    let args = printed_args(replay);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, replayed, err) = keel_sim(&args);
    assert_eq!(code, Some(1), "the printed replay command runs and fails the same way:\n{replayed}{err}");
    assert!(replayed.contains("scenario       my-agent\nseed           0\n"), "{replayed}");
    let invariant = out.lines().nth(fail).unwrap().split("invariant=").nth(1).unwrap().split(':').next().unwrap();
    assert!(replayed.contains(invariant), "{invariant} not in\n{replayed}");

    let (code, minimized, err) = keel_sim(&["minimize", "--seed", "0", "--scenario", path]);
    assert_eq!(code, Some(0), "{minimized}{err}");
    let line = minimized.lines().find_map(|l| l.strip_prefix("replay: ")).expect(&minimized);
    let args = printed_args(line);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, replayed, err) = keel_sim(&args);
    assert_eq!(code, Some(1), "the minimized replay command runs and fails:\n{replayed}{err}");
}

#[test]
fn a_bundled_scenario_replays_by_name_from_any_directory() {
    let run = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(["replay", "--seed", "1", "--scenario", "tool-loop"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&run.stderr));
    assert!(out.contains("scenario       tool-loop\n"), "{out}");
}

#[test]
fn a_misspelt_flag_is_reported_first_with_the_nearest_flag() {
    let (code, out, err) = keel_sim(&["run", "--sedes", "10"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(
        err.starts_with("error: `run` does not take `--sedes` (did you mean `--seeds`?)\n"),
        "{err}"
    );
}

#[test]
fn list_names_the_bundled_files_and_a_directory_runs_every_file_in_name_order() {
    let (code, out, _) = keel_sim(&["list"]);
    assert_eq!(code, Some(0));
    let bundled = out.split_once("scenario files (").expect(&out).1;
    for entry in std::fs::read_dir(repo().join("sim/scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            assert!(bundled.lines().any(|l| l.starts_with(&format!("{name} "))), "{name} not listed:\n{out}");
        }
    }
    assert!(bundled.lines().count() > 29, "{out}");

    let dir = temp_dir("dir");
    std::fs::write(dir.join("b.json"), user_scenario("Cold.").replace("my-agent", "second")).unwrap();
    std::fs::write(dir.join("a.json"), user_scenario("Cold.").replace("my-agent", "first")).unwrap();
    std::fs::write(dir.join("notes.md"), "not a scenario").unwrap();
    let (code, out, err) =
        keel_sim(&["run", "--seeds", "2", "--scenario", dir.to_str().unwrap(), "--no-regressions"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("scenarios      first second\n"), "{out}");
    assert!(out.contains("runs           4\n"), "{out}");
    let (code, _, err) = keel_sim(&["replay", "--seed", "1", "--scenario", dir.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is a directory"), "{err}");
    let empty = temp_dir("empty-dir");
    let (code, _, err) = keel_sim(&["run", "--seeds", "1", "--scenario", empty.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("holds no `*.json` scenario files"), "{err}");
}

#[test]
fn a_user_scenario_is_judged_on_what_it_declares() {
    let dir = temp_dir("coverage");
    let file = dir.join("simple.json");
    std::fs::write(&file, user_scenario("Cold.")).unwrap();
    let (code, out, err) =
        keel_sim(&["run", "--seeds", "5", "--scenario", file.to_str().unwrap(), "--no-regressions"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!out.contains("never fired"), "a simple scenario run is clean:\n{out}");
    assert!(!out.contains("undeclared"), "{out}");
    assert!(out.contains("faults fired\n  interaction\n    tool.text  5\n"), "{out}");

    // A declared feature the script never reaches is a gap.
    let unreached = user_scenario("Cold.").replace(
        r#""tools": [{"name": "weather"}],"#,
        r#""tools": [{"name": "weather"}], "host": [{"at": {"tool_call": "c9"}, "do": "cancel"}],"#,
    );
    std::fs::write(&file, unreached).unwrap();
    let (_, out, err) = keel_sim(&["run", "--seeds", "2", "--scenario", file.to_str().unwrap(), "--no-regressions"]);
    assert!(out.contains("    host.cancel  0  never fired\n"), "{out}{err}");
}

#[test]
fn a_failing_file_seed_is_recorded_by_absolute_path_and_never_blocks_other_campaigns() {
    let dir = temp_dir("record-file");
    let regressions = dir.join("regressions");
    std::fs::create_dir_all(&regressions).unwrap();
    let file = dir.join("my-agent.json");
    std::fs::write(&file, user_scenario("Warm.")).unwrap();
    let regs = regressions.to_str().unwrap();
    // Run from the file's directory, by a relative path.
    let run = |args: &[&str], cwd: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_keel-sim")).args(args).current_dir(cwd).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(&["run", "--seeds", "1", "--scenario", "my-agent.json", "--regressions", regs], &dir);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("recorded       1 failing seed(s)"), "{out}");
    let stored = std::fs::read_to_string(regressions.join("seeds.txt")).unwrap();
    let absolute = std::fs::canonicalize(&file).unwrap();
    assert!(stored.starts_with(&format!("{} 0  # ", absolute.display())), "{stored}");
    // The same file by another path: replayed first.
    let (_, out) = run(&["run", "--seeds", "0", "--scenario", file.to_str().unwrap(), "--regressions", regs], &repo());
    assert!(out.contains("regressions    1 replayed first, 1 failed"), "{out}");
    // Another scenario, the file gone: the stored seed is skipped, the campaign runs.
    std::fs::remove_file(&file).unwrap();
    let (code, out) = run(&["run", "--seeds", "1", "--scenario", "clock-and-rng", "--regressions", regs], &repo());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("regressions    0 replayed first"), "{out}");
}
