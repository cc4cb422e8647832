//! Architecture invariants, checked over the source text of `runtime/src` and `sim/src`.
//!
//! 1. Determinism: only `runtime/src/env/` may read time or randomness, spawn, or touch a
//!    runtime; nobody uses hash-ordered collections. `sim/src` may use `madsim::` (it drives
//!    the simulator), nothing else on the list.
//! 2. Layers (ARCHITECTURE.md's bird's-eye view, arrows point down): the kernel never names chat, tool or interaction;
//!    chat and tool never name kernel or interaction; the bottom layer (json, env, schema,
//!    text, limits) names none of them.
//!
//! Lines whose first non-blank characters are `//` (comments and docs) are not scanned, so
//! prose may mention the forbidden names; trailing comments and strings are scanned.

use std::fmt;
use std::path::{Path, PathBuf};

/// A forbidden text, and why.
struct Forbidden {
    pattern: &'static str,
    why: &'static str,
    /// `sim/src` may use it.
    allowed_in_sim: bool,
}

const FORBIDDEN: &[Forbidden] = &[
    Forbidden { pattern: "SystemTime", why: "wall clock: use env::Clock", allowed_in_sim: false },
    Forbidden { pattern: "Instant::now", why: "wall clock: use env::Clock", allowed_in_sim: false },
    Forbidden {
        pattern: "thread::spawn",
        why: "OS thread: use env::Executor",
        allowed_in_sim: false,
    },
    Forbidden {
        pattern: "std::thread",
        why: "OS thread: use env::Executor",
        allowed_in_sim: false,
    },
    Forbidden {
        pattern: "HashMap",
        why: "iteration order is random: use BTreeMap",
        allowed_in_sim: false,
    },
    Forbidden {
        pattern: "HashSet",
        why: "iteration order is random: use BTreeSet",
        allowed_in_sim: false,
    },
    Forbidden { pattern: "RandomState", why: "seeded from the OS", allowed_in_sim: false },
    Forbidden { pattern: "rand::", why: "randomness: use env::Rng", allowed_in_sim: false },
    Forbidden { pattern: "getrandom", why: "OS randomness: use env::Rng", allowed_in_sim: false },
    Forbidden { pattern: "tokio::spawn", why: "spawn: use env::Executor", allowed_in_sim: false },
    Forbidden { pattern: "tokio::task", why: "tasks: use env::Executor", allowed_in_sim: false },
    Forbidden { pattern: "tokio::time", why: "timers: use env::Clock", allowed_in_sim: false },
    Forbidden {
        pattern: "madsim::",
        why: "simulator internals: use keel::env",
        allowed_in_sim: true,
    },
];

/// A layer: the module roots it covers and the modules it must never name.
struct Layer {
    modules: &'static [&'static str],
    must_not_name: &'static [&'static str],
}

const LAYERS: &[Layer] = &[
    Layer { modules: &["interaction"], must_not_name: &["agent", "prelude"] },
    Layer { modules: &["kernel"], must_not_name: &["chat", "tool", "interaction", "agent", "prelude"] },
    Layer { modules: &["chat", "tool"], must_not_name: &["kernel", "interaction", "agent", "prelude"] },
    Layer {
        modules: &["json", "env", "schema", "text", "limits"],
        must_not_name: &["chat", "tool", "kernel", "interaction", "agent", "prelude"],
    },
];

#[derive(Debug, PartialEq, Eq)]
struct Hit {
    file: String,
    line: usize,
    what: String,
    text: String,
}

impl fmt::Display for Hit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}\n    {}", self.file, self.line, self.what, self.text.trim())
    }
}

fn is_comment_line(line: &str) -> bool {
    line.trim_start().starts_with("//")
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Determinism hits in one file's text.
fn determinism_hits(file: &str, text: &str, in_sim: bool) -> Vec<Hit> {
    let mut hits = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if is_comment_line(line) {
            continue;
        }
        for rule in FORBIDDEN {
            if in_sim && rule.allowed_in_sim {
                continue;
            }
            let found = line.match_indices(rule.pattern).any(|(at, _)| {
                let before = &line[..at];
                if rule.pattern == "rand::" {
                    // `operand::` is not the rand crate; `madsim::rand::` is judged as `madsim::`.
                    let glued = before.bytes().last().is_some_and(is_ident_byte);
                    !glued && !before.ends_with("madsim::")
                } else {
                    true
                }
            });
            if found {
                hits.push(Hit {
                    file: file.to_owned(),
                    line: index + 1,
                    what: format!("`{}` ({})", rule.pattern, rule.why),
                    text: line.to_owned(),
                });
            }
        }
    }
    hits
}

/// The modules a path expression or `use` names right after `crate::` / `super::`, with the
/// byte offset of each: `crate::chat::X` → chat; `crate::{json, tool::T}` → json, tool (a
/// group may span lines); `super::super::chat` → chat.
fn named_modules(code: &str) -> Vec<(usize, String)> {
    let mut named = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let prefix = ["crate::", "super::"].into_iter().find(|p| rest.starts_with(*p));
        let glued = at > 0 && is_ident_byte(bytes[at - 1]);
        let Some(prefix) = prefix.filter(|_| !glued) else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let start = at;
        let mut cursor = at + prefix.len();
        while code[cursor..].starts_with("super::") {
            cursor += "super::".len();
        }
        if code[cursor..].starts_with('{') {
            // Top-level items of the group: the first identifier after `{` and after each
            // depth-1 comma.
            let mut depth = 0;
            let mut expect_item = true;
            for (offset, c) in code[cursor..].char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        expect_item = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => expect_item = true,
                    c if expect_item && depth == 1 && (c.is_ascii_alphabetic() || c == '_') => {
                        let from = cursor + offset;
                        let ident: String = code[from..]
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        named.push((from, ident));
                        expect_item = false;
                    }
                    _ => {}
                }
            }
        } else {
            let ident: String = code[cursor..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                named.push((start, ident));
            }
        }
        at = cursor.max(start + 1);
    }
    named
}

/// Layer hits in one file of the runtime crate, given its path relative to `runtime/src`.
fn layer_hits(file: &str, relative: &Path, text: &str) -> Vec<Hit> {
    let Some(first) = relative.components().next().and_then(|c| c.as_os_str().to_str()) else {
        return Vec::new();
    };
    let module = first.strip_suffix(".rs").unwrap_or(first);
    let Some(layer) = LAYERS.iter().find(|l| l.modules.contains(&module)) else {
        return Vec::new();
    };
    // Blank out comment lines but keep offsets and line numbers.
    let code: String = text
        .split_inclusive('\n')
        .map(|line| if is_comment_line(line) { "\n".to_owned() } else { line.to_owned() })
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    let mut hits = Vec::new();
    for (offset, named) in named_modules(&code) {
        if layer.must_not_name.contains(&named.as_str()) {
            let line = code[..offset].matches('\n').count();
            hits.push(Hit {
                file: file.to_owned(),
                line: line + 1,
                what: format!("module `{module}` must not name `{named}` (layers point down)"),
                text: lines.get(line).copied().unwrap_or_default().to_owned(),
            });
        }
    }
    hits
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

#[test]
fn runtime_and_sim_respect_the_architecture() {
    let root = workspace_root();
    let runtime_src = root.join("runtime/src");
    let sim_src = root.join("sim/src");
    let env_dir = runtime_src.join("env");
    let mut hits = Vec::new();
    let mut scanned = 0;
    for (src, in_sim) in [(&runtime_src, false), (&sim_src, true)] {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        for path in files {
            let display = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{display}: {e}"));
            scanned += 1;
            // The campaign's thread pool and runs/s timing live in exactly one file; each seed's
            // run stays single-threaded and deterministic.
            let campaign_pool = display.ends_with("sim/src/campaign/parallel.rs");
            if !path.starts_with(&env_dir) && !campaign_pool {
                hits.extend(determinism_hits(&display, &text, in_sim));
            }
            if !in_sim {
                let relative = path.strip_prefix(&runtime_src).unwrap_or(&path);
                hits.extend(layer_hits(&display, relative, &text));
            }
        }
    }
    // Guards against scanning the wrong directory and passing vacuously.
    assert!(scanned >= 3, "scanned only {scanned} files under {}", root.display());
    hits.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    for hit in &hits {
        println!("{hit}");
    }
    assert!(hits.is_empty(), "{} architecture violation(s):\n{}", hits.len(), {
        hits.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    });
}

// The scanner itself: every rule must actually fire.

#[test]
fn every_forbidden_pattern_is_detected_outside_sim() {
    for rule in FORBIDDEN {
        let text = format!("fn f() {{\n    let x = {}foo();\n}}\n", rule.pattern);
        let hits = determinism_hits("runtime/src/x.rs", &text, false);
        assert_eq!(hits.len(), 1, "{} not detected", rule.pattern);
        assert_eq!((hits[0].file.as_str(), hits[0].line), ("runtime/src/x.rs", 2));
        assert!(hits[0].to_string().starts_with("runtime/src/x.rs:2: "), "{}", hits[0]);
    }
}

#[test]
fn sim_may_use_madsim_and_nothing_else() {
    assert!(determinism_hits("sim/src/a.rs", "use madsim::time::sleep;\n", true).is_empty());
    assert!(
        determinism_hits("sim/src/a.rs", "let r = madsim::rand::thread_rng();\n", true).is_empty()
    );
    assert_eq!(determinism_hits("sim/src/a.rs", "use std::collections::HashMap;\n", true).len(), 1);
    assert_eq!(determinism_hits("sim/src/a.rs", "use rand::Rng;\n", true).len(), 1);
    // In the runtime, `madsim::rand::` counts once, as `madsim::`.
    let hits = determinism_hits("runtime/src/a.rs", "let r = madsim::rand::thread_rng();\n", false);
    assert_eq!(hits.len(), 1);
    assert!(hits[0].what.contains("`madsim::`"));
}

#[test]
fn comments_are_not_scanned_but_trailing_comments_are() {
    assert!(determinism_hits("a.rs", "// a HashMap would leak order\n/// SystemTime\n", false)
        .is_empty());
    assert_eq!(determinism_hits("a.rs", "let x = 1; // HashMap\n", false).len(), 1);
    assert!(
        determinism_hits("a.rs", "use operand::X;\n", false).is_empty(),
        "`rand::` needs a boundary"
    );
}

#[test]
fn kernel_must_not_name_upper_or_sibling_layers() {
    let kernel = Path::new("kernel/driver.rs");
    for bad in [
        "use crate::chat::Message;\n",
        "fn f(t: &dyn crate::tool::Tool) {}\n",
        "use crate::interaction;\n",
        "use super::super::chat::Message;\n",
        "use crate::{json::Json, tool::Tool};\n",
        "use crate::{\n    json,\n    interaction::Strategy,\n};\n",
    ] {
        let hits = layer_hits("runtime/src/kernel/driver.rs", kernel, bad);
        assert_eq!(hits.len(), 1, "not detected: {bad:?} → {hits:?}");
    }
    let multi =
        layer_hits("k.rs", kernel, "use crate::json;\nuse crate::{\n    env,\n    chat,\n};\n");
    assert_eq!(multi.len(), 1);
    assert_eq!(multi[0].line, 4, "the line that names the module, inside the group");
    for fine in [
        "use crate::json::Json;\nuse crate::env::{Clock, Env};\n",
        "use crate::kernel::core;\n",
        "use crate::toolkit;\n", // a different module that merely starts with `tool`
        "// see crate::chat for the message types\n",
        "let s = mycrate::chat::x;\n",
    ] {
        assert!(layer_hits("k.rs", kernel, fine).is_empty(), "false positive: {fine:?}");
    }
}

#[test]
fn lower_layers_must_not_name_higher_ones() {
    let chat = Path::new("chat/mod.rs");
    assert_eq!(layer_hits("c.rs", chat, "use crate::kernel::Effect;\n").len(), 1);
    assert!(layer_hits("c.rs", chat, "use crate::tool::Tool;\nuse crate::json::Json;\n").is_empty());
    assert_eq!(layer_hits("l.rs", Path::new("limits.rs"), "use crate::chat::Message;\n").len(), 1);
    assert_eq!(
        layer_hits("j.rs", Path::new("json/value.rs"), "use crate::interaction::X;\n").len(),
        1
    );
    // The interaction layer may name everything below it.
    let top = "use crate::{chat, kernel, tool};\n";
    assert!(layer_hits("i.rs", Path::new("interaction/mod.rs"), top).is_empty());
}

/// Provider clients wait, back off and draw jitter only through the keel clock and rng they
/// are configured with, so a seeded environment reproduces every retry. The fixture server
/// (`providers/src/testing/`) is real-time test infrastructure and is exempt.
#[test]
fn providers_wait_only_on_the_keel_clock() {
    let root = workspace_root();
    let src = root.join("providers/src");
    let testing = src.join("testing");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut hits = Vec::new();
    let mut scanned = 0;
    for path in files.iter().filter(|p| !p.starts_with(&testing)) {
        let display = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{display}: {e}"));
        scanned += 1;
        hits.extend(determinism_hits(&display, &text, false));
    }
    assert!(scanned >= 5, "scanned only {scanned} files under {}", src.display());
    assert!(hits.is_empty(), "{} violation(s):\n{}", hits.len(), hits.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
}
