//! The `keel-store` binary on real stores written by real agent runs (the `keel::agent`
//! facade with a scripted model): one run that finished and one parked on a question, in a
//! file store and in a SQLite store.

use keel::kernel::ids::ProcessId;
use keel::prelude::*;
use keel_store_sqlite::SqliteCommitter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_keel-store");

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("keel-store-cli-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn weather_agent() -> Agent {
    let weather = tool_fn(
        "get_weather",
        "The current weather of a city.",
        r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        |_| async move { Ok("sunny, 21 °C".to_owned()) },
    );
    Agent::builder("weather")
        .version("1.0.0")
        .model(
            ScriptedModel::new()
                .call_tool("get_weather", r#"{"city":"Paris"}"#)
                .then_text("It is sunny in Paris."),
        )
        .tool(weather)
        .max_model_calls(4)
        .build()
        .unwrap()
}

fn asking_agent() -> Agent {
    Agent::builder("concierge")
        .version("1.0.0")
        .model(
            ScriptedModel::new()
                .call_tool("ask_user", r#"{"question":"Which city are you in?"}"#)
                .then_text("Noted."),
        )
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .build()
        .unwrap()
}

/// A payment tool whose host fails mid-call: the outcome is unknown, and the default policy
/// (`Hold`) leaves the call Unknown for the host.
struct Charge;

impl keel::tool::Tool for Charge {
    fn spec(&self) -> keel::tool::ToolDefinitionInput {
        keel::tool::ToolDefinitionInput {
            name: "charge".into(),
            description: "Charges a card.".into(),
            input_schema: keel::json::parse(br#"{"type":"object"}"#).unwrap(),
        }
    }
    fn call<'a>(
        &'a self,
        _: &'a keel::tool::Invocation,
        _: keel::tool::ToolContext,
    ) -> keel::env::BoxFuture<'a, Result<keel::chat::ToolOutput, keel::tool::ToolError>> {
        Box::pin(async { Err(keel::tool::ToolError::host_failure("the payment gateway hung up")) })
    }
}

fn charging_agent() -> Agent {
    Agent::builder("cashier")
        .version("1.0.0")
        .model(ScriptedModel::new().call_tool("charge", "{}").then_text("Charged."))
        .tool(Charge)
        .build()
        .unwrap()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    File,
    Sqlite,
}

/// Where a store of `kind` lives under `dir`, as the flag the command takes.
fn store_flag(kind: Kind, dir: &Path) -> (String, PathBuf) {
    match kind {
        Kind::File => ("--file".into(), dir.join("store")),
        Kind::Sqlite => ("--sqlite".into(), dir.join("agents.sqlite")),
    }
}

/// Runs one agent to its end, parks another on its question and leaves a third with an
/// Unknown call; returns (finished, waiting, unknown).
/// Each run has its own tokio runtime, dropped before the next opens the store.
fn populate(kind: Kind, dir: &Path) -> (ProcessId, ProcessId, ProcessId) {
    let (_, path) = store_flag(kind, dir);
    let runtime_for = |agent: Agent| match kind {
        Kind::File => Runtime::on_disk(agent, &path).unwrap(),
        Kind::Sqlite => {
            let store = SqliteCommitter::open(&path).unwrap();
            let env = keel::env::TokioEnv::current().unwrap().env();
            Runtime::with_store(agent, Arc::new(store), env)
        }
    };
    let block_on = |f: std::pin::Pin<Box<dyn std::future::Future<Output = ProcessId>>>| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    };
    let finished = block_on(Box::pin(async {
        let runtime = runtime_for(weather_agent());
        let run = runtime.start("Weather in Paris?").await.unwrap();
        assert_eq!(run.result().await.unwrap().text(), "It is sunny in Paris.");
        run.id().process_id().clone()
    }));
    let waiting = block_on(Box::pin(async {
        let runtime = runtime_for(asking_agent());
        let run = runtime.start("Remember my city.").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        run.id().process_id().clone()
    }));
    let unknown = block_on(Box::pin(async {
        let runtime = runtime_for(charging_agent());
        let run = runtime.start("Charge me.").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsResolution(_)));
        run.id().process_id().clone()
    }));
    (finished, waiting, unknown)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn check_store(kind: Kind) {
    let dir = TempDir::new();
    let (finished, waiting, unknown) = populate(kind, &dir.0);
    let (flag, path) = store_flag(kind, &dir.0);
    let path = path.to_str().unwrap();
    let cmd = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend([flag.as_str(), path]);
        run(&all)
    };

    let list = cmd(&["list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = stdout(&list);
    assert!(text.contains("3 trees"), "{text}");
    let line_of = |root: &ProcessId| {
        text.lines().find(|l| l.starts_with(root.as_str())).unwrap_or_else(|| panic!("{root} in {text}")).to_owned()
    };
    assert!(line_of(&finished).ends_with("completed"), "{text}");
    assert!(line_of(&waiting).contains("sequence"), "{text}");

    let show = cmd(&["show", waiting.as_str()]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains(&format!("tree {waiting}")), "{text}");
    assert!(text.contains("open input waits:\n  wait:"), "{text}");
    assert!(text.contains("Which city are you in?"), "{text}");
    assert!(text.contains("unknown effects: none"), "{text}");
    let show = cmd(&["show", finished.as_str()]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(stdout(&show).contains("retired children: 1\n"), "the consumed weather tool child retired: {}", stdout(&show));
    let show = cmd(&["show", unknown.as_str()]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains("unknown effects (outcome unproven; a host must resolve each):\n  effect:"), "{text}");

    let verify = cmd(&["verify"]);
    assert!(verify.status.success(), "{}{}", stdout(&verify), stderr(&verify));
    assert!(stdout(&verify).contains("3 trees verified, 0 damaged"), "{}", stdout(&verify));

    let export = cmd(&["export", finished.as_str()]);
    assert!(export.status.success(), "{}", stderr(&export));
    let json: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
    assert!(stdout(&export).contains("\n  "), "pretty printed");
    assert!(json.to_string().contains(finished.as_str()));

    // Detection from the path alone (for a file store, its directory or its log).
    let detected = run(&["list", "--store", path]);
    assert_eq!(stdout(&detected), stdout(&list));
    if kind == Kind::File {
        let log = Path::new(path).join("commits.log");
        let detected = run(&["list", "--store", log.to_str().unwrap()]);
        assert_eq!(stdout(&detected), stdout(&list), "{}", stderr(&detected));
    }

    let compact = cmd(&["compact"]);
    assert!(compact.status.success(), "{}", stderr(&compact));
    assert!(stdout(&compact).contains("compacted"));
    assert!(cmd(&["verify"]).status.success(), "still verifies after compaction ({kind:?})");
    // The trees read back exactly as before.
    assert_eq!(stdout(&cmd(&["list"])), stdout(&list));
    assert_eq!(cmd(&["export", finished.as_str()]).stdout, export.stdout);

    let missing = cmd(&["show", "process:nosuchtree"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("no tree process:nosuchtree"), "{}", stderr(&missing));
}

#[test]
fn file_store_list_show_verify_export_compact() {
    check_store(Kind::File);
}

#[test]
fn sqlite_store_list_show_verify_export_compact() {
    check_store(Kind::Sqlite);
}

#[test]
fn unknown_flags_and_missing_stores_get_clear_errors() {
    let o = run(&["list", "--verbose", "--file", "/nonexistent"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("keel-store: unknown flag `--verbose`"), "{}", stderr(&o));
    let o = run(&["list", "--file", "/nonexistent/keel"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not a file store"), "{}", stderr(&o));
    let o = run(&["list", "--sqlite", "/nonexistent/keel.sqlite"]);
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(!Path::new("/nonexistent/keel.sqlite").exists());
}

/// The frames of a file store's log: (start, end) of each record.
fn frames(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at < log.len() {
        let len = u64::from_le_bytes(log[at + 8..at + 16].try_into().unwrap());
        let end = at + 56 + usize::try_from(len).unwrap();
        out.push((at, end));
        at = end;
    }
    out
}

#[test]
fn verify_names_the_damaged_tree_and_the_others_stay_readable() {
    for kind in [Kind::File, Kind::Sqlite] {
        let dir = TempDir::new();
        let (finished, waiting, _) = populate(kind, &dir.0);
        let (flag, path) = store_flag(kind, &dir.0);
        match kind {
            Kind::File => {
                // The waiting run wrote its records after the finished one's and before the
                // third run's: damage the last byte (its cut) of its second record.
                let log_path = path.join("commits.log");
                let mut log = std::fs::read(&log_path).unwrap();
                let all = frames(&log);
                let first = all.iter().position(|&(start, end)| {
                    String::from_utf8_lossy(&log[start..end]).contains(&format!("\"root_id\":\"{waiting}\""))
                });
                let (_, end) = all[first.expect("a record of the waiting run") + 1];
                log[end - 1] ^= 0x40;
                std::fs::write(&log_path, log).unwrap();
            }
            Kind::Sqlite => {
                let conn = rusqlite::Connection::open(&path).unwrap();
                conn.execute(
                    "UPDATE keel_heads SET cut = X'7B7D' WHERE root_id = ?1",
                    [waiting.as_str()],
                )
                .unwrap();
            }
        }
        let path = path.to_str().unwrap();
        let verify = run(&["verify", &flag, path]);
        assert_eq!(verify.status.code(), Some(1), "{kind:?}: {}", stdout(&verify));
        let text = stdout(&verify);
        assert!(text.contains(&format!("DAMAGED tree {waiting}")), "{kind:?}: {text}");
        assert!(text.contains("2 trees verified, 1 damaged"), "{kind:?}: {text}");
        let show = run(&["show", finished.as_str(), &flag, path]);
        assert!(show.status.success(), "{kind:?}: {}", stderr(&show));
        let show = run(&["show", waiting.as_str(), &flag, path]);
        assert_eq!(show.status.code(), Some(1));
        assert!(stderr(&show).contains("damaged"), "{kind:?}: {}", stderr(&show));
        let list = run(&["list", &flag, path]);
        assert_eq!(list.status.code(), Some(1));
        assert!(stdout(&list).contains(finished.as_str()), "{kind:?}");
    }
}
