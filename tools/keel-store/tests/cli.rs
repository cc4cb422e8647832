//! The `keel-store` binary on real stores written by real agent runs (the `keel::agent`
//! facade with a scripted model): one run that finished and one parked on a question, in a
//! file store and in a SQLite store.

use keel::kernel::ids::ProcessId;
use keel::prelude::*;
use keel_store_sqlite::SqliteCommitter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_keel-store");

#[path = "../../../tests/src/store_fixtures.rs"]
mod store_fixtures;
use store_fixtures::{retry_while_a_spawning_child_holds, TempDir};

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
        Kind::File => retry_while_a_spawning_child_holds(|| Runtime::on_disk(agent.clone(), &path)).unwrap(),
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
    let dir = TempDir::new("store-cli");
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
        let dir = TempDir::new("store-cli");
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

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_torn_tail_is_reported_left_in_place_and_cut_only_by_repair() {
    let dir = TempDir::new("store-cli");
    let (finished, _, unknown) = populate(Kind::File, &dir.0);
    let (_, store) = store_flag(Kind::File, &dir.0);
    let log_path = store.join("commits.log");
    let full = std::fs::read(&log_path).unwrap();
    let &(last_start, last_end) = frames(&full).last().unwrap();
    // An append interrupted 5 bytes before its end.
    std::fs::write(&log_path, &full[..last_end - 5]).unwrap();
    let torn = std::fs::read(&log_path).unwrap();
    let names = listing(&store);
    let path = store.to_str().unwrap();
    let mut first_report = None;
    for _ in 0..2 {
        let verify = run(&["verify", "--file", path]);
        assert_eq!(verify.status.code(), Some(1), "{}{}", stdout(&verify), stderr(&verify));
        let text = stdout(&verify);
        let expected = format!("TORN TAIL torn tail: {} bytes at byte {last_start}", last_end - 5 - last_start);
        assert!(text.contains(&expected), "{text}");
        assert!(text.contains(&format!("an unfinished record of tree {unknown}")), "{text}");
        assert!(text.contains("drops no acknowledged commit") && text.contains("keel-store repair"), "{text}");
        assert!(text.contains("3 trees verified, 0 damaged, the log ends in a torn tail"), "{text}");
        assert_eq!(std::fs::read(&log_path).unwrap(), torn, "verify changes no byte");
        assert_eq!(first_report.get_or_insert_with(|| text.clone()), &text, "a second verify reports the same");
    }
    let list = run(&["list", "--file", path]);
    assert_eq!(list.status.code(), Some(1));
    assert!(stderr(&list).contains("torn tail"), "{}", stderr(&list));
    let show = run(&["show", finished.as_str(), "--file", path]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(stderr(&show).contains("warning: torn tail"), "{}", stderr(&show));
    assert!(run(&["export", finished.as_str(), "--file", path]).status.success());
    assert_eq!(std::fs::read(&log_path).unwrap(), torn, "inspection changes no byte");
    assert_eq!(listing(&store), names, "inspection creates nothing");
    // repair cuts it, and only it.
    let repair = run(&["repair", "--file", path]);
    assert!(repair.status.success(), "{}{}", stdout(&repair), stderr(&repair));
    assert!(stdout(&repair).contains(&format!("cut off a torn tail of {} bytes at byte {last_start}", last_end - 5 - last_start)), "{}", stdout(&repair));
    assert_eq!(std::fs::read(&log_path).unwrap(), full[..last_start], "cut at the last complete record");
    assert!(run(&["verify", "--file", path]).status.success());
    let again = run(&["repair", "--file", path]);
    assert!(again.status.success() && stdout(&again).contains("nothing to repair"), "{}", stdout(&again));
}

#[test]
fn a_flipped_bit_in_the_last_record_is_damage_that_verify_reports_and_repair_refuses() {
    let dir = TempDir::new("store-cli");
    let (_, _, unknown) = populate(Kind::File, &dir.0);
    let (_, store) = store_flag(Kind::File, &dir.0);
    let log_path = store.join("commits.log");
    let mut bytes = std::fs::read(&log_path).unwrap();
    let &(_, last_end) = frames(&bytes).last().unwrap();
    assert_eq!(last_end, bytes.len(), "a closed log ends with its last record");
    bytes[last_end - 1] ^= 0x40;
    std::fs::write(&log_path, &bytes).unwrap();
    let path = store.to_str().unwrap();
    for _ in 0..2 {
        let verify = run(&["verify", "--file", path]);
        assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
        let text = stdout(&verify);
        assert!(text.contains(&format!("DAMAGED tree {unknown}")), "{text}");
        assert!(text.contains("not an interrupted write"), "{text}");
        assert!(text.contains("2 trees verified, 1 damaged") && !text.contains("TORN"), "{text}");
        assert_eq!(std::fs::read(&log_path).unwrap(), bytes, "verify changes no byte");
    }
    let repair = run(&["repair", "--file", path]);
    assert_eq!(repair.status.code(), Some(1), "{}", stdout(&repair));
    assert!(stderr(&repair).contains("never damage"), "{}", stderr(&repair));
    assert_eq!(std::fs::read(&log_path).unwrap(), bytes, "repair cuts no damage");
}

#[test]
fn a_running_writer_refuses_every_other_open_even_without_store_lock() {
    let dir = TempDir::new("store-cli");
    let (finished, _, _) = populate(Kind::File, &dir.0);
    let (_, store) = store_flag(Kind::File, &dir.0);
    let writer = retry_while_a_spawning_child_holds(|| keel::kernel::commit::FileCommitter::open(&store)).unwrap();
    let before = std::fs::read(store.join("commits.log")).unwrap();
    let path = store.to_str().unwrap();
    let lock_file = store.join("store.lock");
    let tamper: [(&str, &dyn Fn()); 3] = [
        ("deleted", &|| {
            let _ = std::fs::remove_file(&lock_file);
        }),
        ("renamed", &|| {
            std::fs::write(&lock_file, b"").unwrap();
            std::fs::rename(&lock_file, store.join("store.lock.old")).unwrap();
        }),
        ("recreated", &|| std::fs::write(&lock_file, b"1\n").unwrap()),
    ];
    for (what, tamper) in tamper {
        tamper();
        for args in [&["verify", "--file", path][..], &["show", finished.as_str(), "--file", path], &["repair", "--file", path], &["compact", "--file", path]] {
            let o = run(args);
            assert_eq!(o.status.code(), Some(1), "store.lock {what}, {args:?}: {}", stdout(&o));
            let expected = format!("is in use by process {}", std::process::id());
            assert!(stderr(&o).contains(&expected), "store.lock {what}, {args:?}: {}", stderr(&o));
        }
    }
    assert_eq!(std::fs::read(store.join("commits.log")).unwrap()[..before.len()], before[..]);
    drop(writer);
    // Retried only while a child another test is spawning holds a copy of the writer's log.
    let verify = retry_while_a_spawning_child_holds(|| {
        let o = run(&["verify", "--file", path]);
        if o.status.success() { Ok(o) } else { Err(format!("{}{}", stdout(&o), stderr(&o))) }
    });
    assert!(verify.is_ok(), "{verify:?}");
}

#[test]
fn paths_of_the_wrong_kind_say_what_is_wrong_and_create_nothing() {
    let dir = TempDir::new("store-cli");
    // A directory of another program, with its own commits.log.
    let foreign = dir.0.join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("commits.log"), b"not keel's log\n").unwrap();
    let f = foreign.to_str().unwrap();
    for args in [&["verify", "--file", f][..], &["repair", "--file", f], &["list", "--store", f]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains("is not a keel commit log"), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(listing(&foreign), vec!["commits.log".to_owned()], "nothing created in it");
    assert_eq!(std::fs::read(foreign.join("commits.log")).unwrap(), b"not keel's log\n");
    // --sqlite on a directory.
    let o = run(&["verify", "--sqlite", f]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is a directory, not a SQLite file"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("does not exist"), "{}", stderr(&o));
    // --file on a file, and on the log itself.
    let file = dir.0.join("notes.txt");
    std::fs::write(&file, b"hello").unwrap();
    let o = run(&["list", "--file", file.to_str().unwrap()]);
    assert!(stderr(&o).contains("is a file, not a directory; --file takes a file store directory"), "{}", stderr(&o));
    let log = foreign.join("commits.log");
    let o = run(&["list", "--file", log.to_str().unwrap()]);
    assert!(stderr(&o).contains(&format!("give the directory that holds it: --file {f}")), "{}", stderr(&o));
    // --store on something that is no store.
    let o = run(&["list", "--store", file.to_str().unwrap()]);
    assert!(stderr(&o).contains("is neither a file store directory, a keel commit log nor a SQLite file"), "{}", stderr(&o));
    let empty = dir.0.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(&["list", "--store", empty.to_str().unwrap()]);
    assert!(stderr(&o).contains("is not a file store (no commits.log in it)"), "{}", stderr(&o));
    assert!(listing(&empty).is_empty());
    // repair is for file stores.
    let o = run(&["repair", "--sqlite", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("only a file store"), "{}", stderr(&o));
}

/// `list` names each run's agent and recorded version, and links an upgraded run and its
/// successor both ways.
#[test]
fn list_shows_agent_version_and_the_upgrade_links() {
    let dir = TempDir::new("store-versions");
    let path = dir.0.join("store");
    let concierge = |version: &str, script: ScriptedModel| {
        Agent::builder("concierge").version(version).model(script).tool(AskHuman::new("ask_user", "Ask the user.")).build().unwrap()
    };
    let v1 = || concierge("1.0.0", ScriptedModel::new().call_tool("ask_user", r#"{"question":"Which city?"}"#).then_text("v1"));
    let v2 = || concierge("2.0.0", ScriptedModel::new().then_text("v2"));
    let block_on = |f: std::pin::Pin<Box<dyn std::future::Future<Output = (ProcessId, ProcessId)>>>| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    };
    // Version 1 deployed: the run parks on its question.
    let (old, _) = block_on(Box::pin(async {
        let runtime = retry_while_a_spawning_child_holds(|| Runtime::on_disk(v1(), &path)).unwrap();
        let run = runtime.start("Book.").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        (run.id().process_id().clone(), run.id().process_id().clone())
    }));
    // Version 2 deployed beside version 1: the run is upgraded after its answer.
    let (old, new) = block_on(Box::pin(async {
        let runtime = retry_while_a_spawning_child_holds(|| Runtime::on_disk(v2(), &path)).unwrap();
        runtime.register(&v1()).unwrap();
        let run = runtime.resume(&old.to_string().parse().unwrap()).await.unwrap();
        assert!(run.upgrade(&v2()).await.is_err(), "waits for the answer");
        let question = run.pending_inputs().remove(0);
        run.answer_text(&question, "Oslo").await.unwrap();
        let next = run.upgrade(&v2()).await.unwrap();
        assert_eq!(next.result().await.unwrap().text(), "v2");
        (old, next.id().process_id().clone())
    }));
    let list = run(&["list", "--file", path.to_str().unwrap()]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = stdout(&list);
    let line_of = |root: &ProcessId| text.lines().find(|l| l.starts_with(root.as_str())).unwrap_or_else(|| panic!("{root} in {text}")).to_owned();
    let old_line = line_of(&old);
    assert!(old_line.contains("agent concierge version 1.0.0  failed"), "{old_line}");
    assert!(old_line.ends_with(&format!("continued as {new} (version 2.0.0)")), "{old_line}");
    let new_line = line_of(&new);
    assert!(new_line.contains(&format!("agent concierge version 2.0.0 (continues {old}: upgrade)  completed")), "{new_line}");
}
