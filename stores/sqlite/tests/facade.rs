//! The `keel::agent` facade on a SQLite store: a run parks on a question, its runtime (and
//! every connection) goes away, a new runtime on the same file resumes it, answers and
//! finishes, and the store's history obeys the commit rules across both writers.

use keel::kernel::commit::audit_history;
use keel::prelude::*;
use keel_store_sqlite::SqliteCommitter;
use std::sync::Arc;

fn agent() -> Agent {
    Agent::builder("concierge")
        .version("1.0.0")
        .model(
            ScriptedModel::new()
                .call_tool("ask_user", r#"{"question":"Which city are you in?"}"#)
                .then_text("Thanks, I noted your city."),
        )
        .tool(AskHuman::new("ask_user", "Ask the user a question."))
        .build()
        .unwrap()
}

fn runtime(path: &std::path::Path) -> Runtime {
    let store = SqliteCommitter::open(path).unwrap();
    Runtime::with_store(agent(), Arc::new(store), keel::env::TokioEnv::current().unwrap().env())
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn a_parked_run_resumes_from_the_sqlite_file_in_a_new_runtime() {
    let dir = std::env::temp_dir().join(format!("keel-sqlite-facade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agents.sqlite");

    let id = block_on(async {
        let runtime = runtime(&path);
        let run = runtime.start("Remember my city.").await.unwrap();
        assert!(matches!(run.idle().await.unwrap(), Idle::NeedsInput(_)));
        run.id()
    });
    let text = block_on(async {
        let runtime = runtime(&path);
        let run = runtime.resume(&id).await.unwrap();
        let inputs = run.pending_inputs();
        assert_eq!(inputs[0].prompt_text(), "Which city are you in?");
        run.answer_text(&inputs[0], "Oslo").await.unwrap();
        run.result().await.unwrap().text().to_owned()
    });
    assert_eq!(text, "Thanks, I noted your city.");

    let store = SqliteCommitter::open(&path).unwrap();
    let history = store.history(id.process_id()).unwrap();
    audit_history(&history).unwrap();
    assert!(history.iter().any(|r| matches!(r.kind, keel::kernel::commit::CommitRecordKind::Activation { .. })));
    assert!(store.damaged_trees().unwrap().is_empty());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
