//! `keel-sim replay --html FILE`: the run's timeline as one self-contained page, checked as
//! text (lanes, spans, ticks and marks for what the run did; same bytes for the same seed) and
//! rendered in headless Chromium, whose DOM must show the page drawn with the expected lanes
//! and marks.
//!
//! Chromium is Debian's `chromium` package. Without it the browser half is skipped with a
//! note, unless `KEEL_REQUIRE_CHROMIUM=1` (CI sets it), where a missing browser fails.

use std::path::{Path, PathBuf};
use std::process::Command;

fn keel_sim(args: &[&str]) -> (Option<i32>, String, String) {
    let run = Command::new(env!("CARGO_BIN_EXE_keel-sim"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the keel-sim binary runs");
    (run.status.code(), String::from_utf8_lossy(&run.stdout).into_owned(), String::from_utf8_lossy(&run.stderr).into_owned())
}

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("keel-sim-timeline-{}-{name}", std::process::id()));
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

/// The crash-and-Unknown replay the README's picture shows: three tool calls whose Effects
/// end Unknown (host failure, deadline, cancellation), a crash after the `child_start` commit
/// and a lost acknowledgement of a `pending` commit; the host restores twice and settles
/// every Unknown from truth.
const CRASH_REPLAY: &[&str] =
    &["replay", "--seed", "1", "--scenario", "tool-host-failure-unknown", "--schedule", "4:crash_after,9:lose_ack"];

fn replay_html(dir: &TempDir, file: &str, args: &[&str]) -> (String, String, Option<i32>) {
    let path = dir.0.join(file);
    let mut all: Vec<&str> = args.to_vec();
    let p = path.to_str().unwrap().to_owned();
    all.extend(["--html", &p]);
    let (code, out, err) = keel_sim(&all);
    let html = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("no page written ({e}): {out}\n{err}"));
    (html, out, code)
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn the_page_shows_lanes_spans_ticks_and_marks_of_the_run() {
    let dir = TempDir::new("crash");
    let (html, out, code) = replay_html(&dir, "crash.html", CRASH_REPLAY);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("timeline       "), "{out}");
    // Self-contained: nothing fetched from anywhere.
    for external in ["src=\"http", "href=\"http", "@import", "url(http", "<link"] {
        assert!(!html.contains(external), "external reference {external}");
    }
    // Lanes: the host, the store, the root Process and one per tool call child.
    for lane in ["host", "store", "root", "tool h1 · send_host", "tool t1 · send_deadline", "tool x1 · send_cancel"] {
        assert!(html.contains(&format!("data-lane=\"{lane}\"")), "lane {lane} missing");
    }
    assert_eq!(count(&html, "data-lane=\""), 6);
    // Spans: two model calls, the tool calls, and the three Unknowns, each settled.
    assert_eq!(count(&html, "data-span=\"model\""), 2);
    assert!(count(&html, "data-span=\"tool\"") >= 3);
    assert_eq!(count(&html, "data-span=\"unknown\" data-outcome=\"settled\""), 3);
    // Commits as ticks (22 commits, the crashed and lost ones not acknowledged).
    assert_eq!(count(&html, "data-commit=\""), 22, "one tick per commit");
    assert_eq!(count(&html, "data-acknowledged=\"false\""), 2);
    // Marks: the crash, the lost acknowledgement, two restores, three settlements.
    assert_eq!(count(&html, "data-mark=\"crash\""), 1);
    assert_eq!(count(&html, "data-mark=\"lost-ack\""), 1);
    assert_eq!(count(&html, "data-mark=\"restore\""), 2);
    assert_eq!(count(&html, "data-mark=\"settle\""), 3);
    assert_eq!(count(&html, "data-mark=\"violation\""), 0);
    assert!(html.contains("id=\"result\">PASS<"));

    // Deterministic: the same seed draws the same bytes.
    let (again, _, _) = replay_html(&dir, "again.html", CRASH_REPLAY);
    assert_eq!(html, again, "the page differs between two replays of one seed");

    let dom = chromium_dom(&dir, "crash.html");
    if let Some(dom) = dom {
        assert!(dom.contains("data-rendered=\"yes\""), "the page's script did not run:\n{dom}");
        let rendered = rendered_line(&dom);
        for want in ["lanes=6 ", "mark.crash=1", "mark.lost-ack=1", "mark.restore=2", "mark.settle=3", "commits=22 "] {
            assert!(rendered.contains(want), "rendered `{rendered}` lacks `{want}`");
        }
    }
}

#[test]
fn a_failing_run_pins_the_broken_invariant() {
    let dir = TempDir::new("fail");
    let scenario = dir.0.join("wrong.json");
    std::fs::write(
        &scenario,
        r#"{
  "name": "wrong-expectation",
  "user": "What is the weather in Oslo?",
  "model": {"turns": [
    {"calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}]},
    {"text": "Cold."}
  ]},
  "tools": [{"name": "weather", "pauses": 1}],
  "host": [{"at": {"tool_call": "c1"}, "do": {"steer": {"id": "s1", "text": "in celsius"}}}],
  "expect": {"status": "completed", "output_text": "Warm."}
}"#,
    )
    .unwrap();
    let file = scenario.to_str().unwrap().to_owned();
    let (html, out, code) = replay_html(&dir, "fail.html", &["replay", "--seed", "3", "--scenario", &file]);
    assert_eq!(code, Some(1), "the expectation is wrong on purpose: {out}");
    assert!(html.contains("id=\"result\">FAIL<"));
    assert!(count(&html, "data-mark=\"violation\"") >= 1, "no pinned invariant");
    assert!(html.contains("data-invariant=\""), "the broken invariant is not listed");
    // The tool paused for input (a wait span answered by the host) and the steer is a span
    // from its delivery to the model call that applied it.
    assert_eq!(count(&html, "data-span=\"wait\" data-outcome=\"answered\""), 1, "{html}");
    assert_eq!(count(&html, "data-span=\"steer\" data-outcome=\"applied\""), 1);

    if let Some(dom) = chromium_dom(&dir, "fail.html") {
        let rendered = rendered_line(&dom);
        assert!(rendered.contains("mark.violation="), "rendered `{rendered}`");
    }
}

#[test]
fn a_world_without_a_timeline_says_so() {
    let dir = TempDir::new("none");
    let path = dir.0.join("k.html");
    let (code, _, err) = keel_sim(&["replay", "--seed", "1", "--scenario", "kernel-swarm", "--html", path.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("records no timeline"), "{err}");
    assert!(!path.exists());
}

/// The `#rendered` text the page's script wrote.
fn rendered_line(dom: &str) -> String {
    let start = dom.find("id=\"rendered\">").expect("#rendered in the DOM") + "id=\"rendered\">".len();
    let end = dom[start..].find('<').unwrap() + start;
    dom[start..end].to_owned()
}

/// The browser to render with, if installed.
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].iter().map(PathBuf::from).find(|p| p.exists())
}

/// The DOM of `file` (in `dir`) after headless Chromium loaded it and ran its script; `None`
/// (with a note) when Chromium is missing and not required.
fn chromium_dom(dir: &TempDir, file: &str) -> Option<String> {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("KEEL_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "KEEL_REQUIRE_CHROMIUM=1 but chromium is not installed (apt-get install -y chromium)"
        );
        eprintln!("note: chromium not installed; the page was checked as text only");
        return None;
    };
    let profile = dir.0.join(format!("profile-{file}"));
    let url = format!("file://{}", dir.0.join(file).display());
    let run = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "chromium failed: {}", String::from_utf8_lossy(&run.stderr));
    assert!(dom.contains("id=\"timeline\""), "no timeline in the rendered DOM:\n{dom}");
    Some(dom)
}
