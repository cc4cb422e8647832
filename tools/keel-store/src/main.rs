//! `keel-store`: list, show, verify, compact, export and repair keel stores (a file-store
//! directory or a SQLite file). It only reads and writes stores; it runs no agent.
//! `keel-store --help` prints the usage.
//!
//! `list`, `show`, `verify` and `export` open a file store read-only (see
//! `FileCommitter::open_read_only`): they never create, lock-file, truncate or write anything,
//! so running them twice reports the same thing. A torn tail is reported, never cut; only
//! `repair` (or a writer's open) cuts it.
//!
//! Exit codes: 0 success; 1 the store or a tree is damaged, a tree is missing, or the log ends
//! in a torn tail (`verify`, `list`); 2 a usage error or an operation the store does not
//! support.

#![forbid(unsafe_code)]

mod cli;
mod store;

use cli::{Command, Parsed};
use keel::kernel::commit::{audit_history, Head};
use keel::kernel::ids::ProcessId;
use keel::kernel::snapshot::TreeSnapshot;
use std::process::ExitCode;
use store::{Intent, Store};

/// A failed command: what to print and how to exit.
struct Failure {
    message: String,
    code: u8,
}

fn damage(message: impl Into<String>) -> Failure {
    Failure { message: message.into(), code: 1 }
}
fn usage(message: impl Into<String>) -> Failure {
    Failure { message: message.into(), code: 2 }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match cli::parse(&args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("keel-store: {message}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let Parsed::Run { command, store } = parsed else {
        println!("{}", cli::USAGE);
        return ExitCode::SUCCESS;
    };
    if command == Command::Repair && matches!(store, cli::StoreArg::Sqlite(_)) {
        eprintln!("keel-store: {}", REPAIR_FILE_ONLY);
        return ExitCode::from(2);
    }
    let intent = if command.writes() { Intent::Write } else { Intent::Inspect };
    let store = match Store::open(&store, intent) {
        Ok(store) => store,
        Err(message) => {
            eprintln!("keel-store: {message}");
            return ExitCode::from(1);
        }
    };
    let result = match command {
        Command::List => list(&store),
        Command::Show(root) => show(&store, &root),
        Command::Verify => verify(&store),
        Command::Compact => compact(&store),
        Command::Export(root) => export(&store, &root),
        Command::Repair => repair(&store),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { message, code }) => {
            eprintln!("keel-store: {message}");
            ExitCode::from(code)
        }
    }
}

// The one place that reads a head's whole cut bytes (heads are whole; an empty text, which
// no decoder accepts, stands for one that is not).
fn cut_bytes(head: &Head) -> std::sync::Arc<[u8]> {
    head.cut.bytes().unwrap_or_else(|_| std::sync::Arc::from(&[][..]))
}

fn decode(head: &Head) -> Result<TreeSnapshot, String> {
    // Decodes strictly and checks the tree digest, root and writer against the head.
    TreeSnapshot::from_cut(&head.cut).map_err(|e| format!("head cut does not decode: {e}"))
}

const REPAIR_FILE_ONLY: &str = "repair: only a file store has a tail to cut (SQLite recovers an \
    interrupted transaction from its own journal when it opens)";

/// For the commands that show one tree: a torn tail does not change what they show (it was
/// never acknowledged), so it is said on stderr and the command goes on.
fn warn_torn_tail(store: &Store) {
    if let Some(torn) = store.torn_tail() {
        eprintln!("keel-store: warning: {torn}");
    }
}

fn list(store: &Store) -> Result<(), Failure> {
    let trees = store.trees().map_err(damage)?;
    println!("{} store, {} trees", store.kind(), trees.len());
    let mut damaged = 0;
    for tree in &trees {
        match &tree.head {
            Ok(head) => {
                let status = match decode(head) {
                    Ok(snapshot) => run_line(&snapshot),
                    Err(e) => {
                        damaged += 1;
                        format!("DAMAGED ({e})")
                    }
                };
                println!(
                    "{}  sequence {}  {}  {status}",
                    tree.root, head.sequence, head.cut.incarnation
                );
            }
            Err(e) => {
                damaged += 1;
                println!("{}  DAMAGED ({e})", tree.root);
            }
        }
    }
    if damaged > 0 {
        return Err(damage(format!("{damaged} damaged trees (run `keel-store verify` for details)")));
    }
    match store.torn_tail() {
        Some(torn) => Err(damage(torn)),
        None => Ok(()),
    }
}

/// The agent, its version and links, then the status of a tree's root: `agent NAME version V
/// [(continues RUN: REASON)]  STATUS[  continued as RUN]`.
fn run_line(snapshot: &TreeSnapshot) -> String {
    let root = snapshot.root();
    let mut line = format!("agent {}", root.deployment_ref.name());
    // The Interaction state records the lineage of runs the agent facade started.
    let lineage = keel::interaction::state::ParentState::from_execution_state(&root.committed_state).ok().and_then(|s| s.lineage);
    match lineage {
        Some(l) => {
            line.push_str(&format!(" version {}", l.version));
            if let (Some(p), Some(r)) = (l.predecessor, l.reason) {
                line.push_str(&format!(" (continues {p}: {r})"));
            }
        }
        None => line.push_str(" (version not recorded)"),
    }
    line.push_str(&format!("  {}", root.status.as_str()));
    let failure = root.finish.as_ref().and_then(|f| f.termination.failure.as_ref());
    if let Some((successor, _, version)) = failure.and_then(|f| keel::agent::parse_handover_message(&root.id, f.message.as_str())) {
        line.push_str(&format!("  continued as {successor} (version {version})"));
    }
    line
}

fn parse_root(root: &str) -> Result<ProcessId, Failure> {
    ProcessId::parse(root).map_err(|e| usage(format!("`{root}` is not a process id: {e}")))
}

fn load(store: &Store, root: &ProcessId) -> Result<(Head, TreeSnapshot), Failure> {
    let head = store
        .head(root)
        .map_err(|e| damage(e.to_string()))?
        .ok_or_else(|| damage(format!("no tree {root} in this store (see `keel-store list`)")))?;
    let snapshot = decode(&head).map_err(|e| damage(format!("tree {root}: {e}")))?;
    Ok((head, snapshot))
}

fn show(store: &Store, root: &str) -> Result<(), Failure> {
    let root = parse_root(root)?;
    let (head, snapshot) = load(store, &root)?;
    warn_torn_tail(store);
    let commits = store.history(&root).map(|h| h.len().to_string()).unwrap_or_else(|e| e.to_string());
    println!("tree {root}");
    println!(
        "head: sequence {}, incarnation {}, digest {}, {} bytes, {commits} commits",
        head.sequence,
        head.cut.incarnation,
        head.cut.digest,
        cut_bytes(&head).len()
    );
    println!("processes:");
    let mut unknowns = Vec::new();
    for p in snapshot.processes() {
        let wait = p.current_wait_id.as_ref().map(|w| format!(", waiting on {w}")).unwrap_or_default();
        println!(
            "  {}  {}  {}  steps {}{wait}",
            p.id,
            p.status.as_str(),
            p.deployment_ref.name(),
            p.committed_steps
        );
        unknowns.extend(p.unknown_effect_ids().into_iter().map(|e| (p.id.clone(), e)));
    }
    // Retired children left the cut; only their residue records (id, key, Result digest) stay.
    println!("retired children: {}", snapshot.residues().len());
    match keel::interaction::pending_inputs::pending_tool_inputs(&snapshot) {
        Ok(inputs) if inputs.is_empty() => println!("open input waits: none"),
        Ok(inputs) => {
            println!("open input waits:");
            for input in inputs {
                println!(
                    "  {}  in {}  prompt {}",
                    input.wait_id(),
                    input.process_id(),
                    input.prompt().canonical()
                );
            }
        }
        Err(e) => println!("open input waits: not readable as Interaction waits ({e})"),
    }
    if unknowns.is_empty() {
        println!("unknown effects: none");
    } else {
        println!("unknown effects (outcome unproven; a host must resolve each):");
        for (process, effect) in unknowns {
            println!("  {effect}  in {process}");
        }
    }
    Ok(())
}

fn verify(store: &Store) -> Result<(), Failure> {
    let torn = store.torn_tail();
    if let Some(torn) = &torn {
        println!("TORN TAIL {torn}");
    }
    let mut problems: Vec<String> = store
        .damaged_trees()
        .map_err(damage)?
        .into_iter()
        .map(|d| d.to_string())
        .collect();
    let trees = store.trees().map_err(damage)?;
    let mut checked = 0;
    for tree in &trees {
        if problems.iter().any(|p| p.starts_with(&format!("tree {} ", tree.root))) {
            continue; // already named by the store's own check
        }
        let outcome = tree.head.as_ref().map_err(Clone::clone).and_then(|head| {
            decode(head)?;
            let root = ProcessId::parse(&tree.root).map_err(|e| e.to_string())?;
            let history = store.history(&root).map_err(|e| e.to_string())?;
            audit_history(&history).map_err(|e| format!("history: {e}"))?;
            match history.last() {
                Some(last) if last.cut_digest == head.cut.digest && last.sequence == head.sequence => {
                    Ok(())
                }
                _ => Err("the head is not the last installed commit".into()),
            }
        });
        match outcome {
            Ok(()) => checked += 1,
            Err(e) => problems.push(format!("tree {} damaged: {e}", tree.root)),
        }
    }
    for problem in &problems {
        println!("DAMAGED {problem}");
    }
    println!(
        "{} store: {checked} trees verified, {} damaged{}",
        store.kind(),
        problems.len(),
        if torn.is_some() { ", the log ends in a torn tail" } else { "" }
    );
    match (problems.len(), torn) {
        (0, None) => Ok(()),
        (0, Some(_)) => Err(damage("the log ends in a torn tail (see above); `keel-store repair` cuts it off")),
        (n, _) => Err(damage(format!("{n} damaged trees"))),
    }
}

fn repair(store: &Store) -> Result<(), Failure> {
    let Some(file) = store.file() else { return Err(usage(REPAIR_FILE_ONLY)) };
    let recovery = file.recovery();
    match &recovery.torn_tail {
        Some(torn) => {
            let record = match (&torn.root, torn.sequence) {
                (Some(root), Some(sequence)) => format!(" (an unfinished record of tree {root}, sequence {sequence})"),
                (Some(root), None) => format!(" (an unfinished record of tree {root})"),
                _ => String::new(),
            };
            println!(
                "repaired {}: cut off a torn tail of {} bytes at byte {}{record}; no acknowledged commit was in it",
                file.path().display(),
                recovery.truncated_bytes,
                torn.offset
            );
        }
        None => println!("nothing to repair in {}: the log ends with a complete record", file.path().display()),
    }
    let damaged = file.damaged_trees();
    if damaged.is_empty() {
        return Ok(());
    }
    for d in &damaged {
        println!("DAMAGED {d}");
    }
    Err(damage(format!(
        "{} damaged trees: repair cuts only an unfinished last write, never damage (a damaged \
         record may have been acknowledged); restore those trees from a backup",
        damaged.len()
    )))
}

fn compact(store: &Store) -> Result<(), Failure> {
    let Some(sqlite) = store.sqlite() else {
        let Some(file) = store.file() else { return Err(usage("compact: unknown store kind")) };
        if let Some(torn) = &file.recovery().torn_tail {
            // Opening as the writer cut it, as `repair` would have.
            println!("cut off a torn tail of {} bytes at byte {} (an unfinished last write)", torn.bytes, torn.offset);
        }
        let before = file.stats().log_bytes;
        let after = file.compact_now().map_err(|e| damage(format!("compact: {e}")))?;
        println!("compacted {}: {before} bytes before, {} after", file.path().display(), after.log_bytes);
        return Ok(());
    };
    let before = store.bytes_on_disk();
    sqlite.vacuum().map_err(|e| damage(format!("compact: {e}")))?;
    println!("compacted {}: {before} bytes before, {} after", sqlite.path().display(), store.bytes_on_disk());
    Ok(())
}

fn export(store: &Store, root: &str) -> Result<(), Failure> {
    let root = parse_root(root)?;
    let (head, _) = load(store, &root)?;
    warn_torn_tail(store);
    let json = keel::json::parse(&cut_bytes(&head)).map_err(|e| damage(format!("tree {root}: {e}")))?;
    let value = json.to_serde_value().map_err(|e| damage(format!("tree {root}: {e}")))?;
    let text = serde_json::to_string_pretty(&value).map_err(|e| damage(format!("tree {root}: {e}")))?;
    println!("{text}");
    Ok(())
}
