//! Recorded runs as scenarios: a real agent run (the `keel::agent` facade, the OpenAI adapter
//! against the providers' recorded-exchange server on 127.0.0.1, a real tool) is recorded with
//! `keel::transcript`'s wrappers, and the written transcript runs as a keel-sim scenario: 1,000
//! seeds under commit faults and injected tool Unknowns, every fault kind it declares fired,
//! every run ending with the recorded answer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use keel::prelude::*;
use keel::transcript::{ModelOutcome, RecordingModel, RecordingTool, ToolOutcome, Transcript, TranscriptRecorder};
use keel_providers::openai::{OpenAiClient, OpenAiConfig};
use keel_providers::testing::{Fixture, FixtureServer};
use keel_providers::Pacing;

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("keel-sim-transcript-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the weather agent against the OpenAI tool-round fixture, recording it; writes the
/// transcript to `path` and returns the run's answer.
fn record(path: &Path) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let fixture = Fixture::load(repo().join("providers/tests/fixtures/openai/tool_round.json")).unwrap();
        let server = FixtureServer::start(fixture).await.unwrap();
        let env = keel::env::TokioEnv::current().unwrap().env();
        let recorder = TranscriptRecorder::new(env.clock.clone());
        let config = OpenAiConfig::compatible(format!("{}/v1", server.url()), "gpt-4o-mini", Pacing::new(&env))
            .with_api_key("test-key");
        let model = RecordingModel::new(OpenAiClient::new(config).unwrap(), recorder.clone());
        let weather = tool_fn(
            "weather",
            "Current weather in a city.",
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            |args| async move {
                let city = args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned();
                Ok(format!("{city}: 18°C, clear"))
            },
        );
        let weather = RecordingTool::new(weather, Arc::clone(&recorder));
        let agent = Agent::builder("weather").version("1").model(model).tool(weather).max_model_calls(4).build().unwrap();
        let run = Runtime::in_memory(agent).unwrap().start("What is the weather in Paris?").await.unwrap();
        let text = run.result().await.unwrap().text();
        server.check_done().unwrap();
        recorder.write(path).unwrap();
        text
    })
}

#[test]
fn a_recorded_provider_run_replays_under_1000_seeds_with_every_declared_fault() {
    let dir = TempDir::new("weather");
    let path = dir.0.join("weather-transcript.json");
    let answer = record(&path);

    // The file is a transcript of what happened: two model calls, one tool call.
    let transcript = Transcript::decode(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(transcript.model_calls.len(), 2);
    assert!(matches!(&transcript.model_calls[1].outcome, ModelOutcome::Response(r)
        if r.message.as_ref().is_some_and(|m| m.text() == answer)));
    assert_eq!(transcript.tool_calls.len(), 1);
    assert_eq!(transcript.tool_calls[0].name, "weather");
    assert_eq!(transcript.tool_calls[0].outcome, ToolOutcome::Result("Paris: 18°C, clear".into()));
    // Canonical: decoding and encoding gives the file's bytes back.
    assert_eq!(transcript.encode().as_bytes(), std::fs::read(&path).unwrap().as_slice());

    // 1,000 seeds of it as a scenario.
    let file = path.to_str().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(["run", "--seeds", "1000", "--scenario", file, "--no-regressions"])
        .current_dir(repo())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "the transcript campaign failed:\n{out}\n{err}");
    assert!(!out.contains("never fired"), "a declared fault kind never fired:\n{out}");
    for kind in ["commit.crash_after", "commit.lose_ack", "commit.fail_before", "tool.panic", "tool.host_failure", "tool.cancel", "tool.deadline"] {
        assert!(out.contains(kind), "{kind} missing from the summary:\n{out}");
    }

    // One seed replays as printed, with the recorded answer.
    let replay = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(["replay", "--seed", "7", "--scenario", file])
        .current_dir(repo())
        .output()
        .unwrap();
    let replayed = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(0), "{replayed}");
    assert!(replayed.contains(&format!("text=Some({answer:?})")), "{replayed}");
}

#[test]
fn a_transcript_with_an_unknown_model_call_is_refused_with_a_reason() {
    let dir = TempDir::new("unknown");
    let path = dir.0.join("t.json");
    std::fs::write(
        &path,
        r#"{"format":"keel.transcript.v1","model_calls":[{"sequence":1,"started_ms":0,"ended_ms":1,"request":{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]},"error":{"class":"unknown","message":"timeout"}}],"tool_calls":[]}"#,
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(["run", "--seeds", "1", "--scenario", path.to_str().unwrap(), "--no-regressions"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown outcome"), "{err}");
}
