//! The bodies of the fuzz targets in `fuzz/fuzz_targets/`, as plain functions so that
//! `cargo test` replays the committed corpus through exactly the same checks
//! (`tests/tests/fuzz_corpus.rs`) and proptest can reuse them.
//!
//! Every function takes raw fuzzer bytes and panics only when a property breaks: rejecting
//! input is always fine, panicking inside a decoder or accepting input that does not
//! round-trip is a bug.

pub mod arbitrary_json;
pub mod hosted;
pub mod interaction_corpus;
pub mod interaction_mutation;
pub mod interaction_protocol;
pub mod interaction_runs;
pub mod interaction_state;
pub mod interaction_world;
pub mod runs;

pub use interaction_mutation::interaction_mutation;
pub use interaction_protocol::{interaction_protocol, PROTOCOL_TYPES};
pub use interaction_state::{interaction_state, STATE_SELECTORS};

use arbitrary::{Arbitrary, Unstructured};
use keel::env::BoxFuture;
use keel::json::{self, Digest, FromJson, Json, ParseLimits, Payload, ToJson};
use keel::kernel::commit::{Activation, Checkpoint, CommitError, Committer, EffectBoundary, Head};
use keel::kernel::direct::DirectRunner;
use keel::kernel::ids::{IncarnationId, ProcessId};
use keel::kernel::owner::{Command, Owner};
use keel::kernel::snapshot::TreeSnapshot;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

/// The names of the fuzz targets, which are also the corpus directory names.
pub const TARGETS: &[&str] = &[
    "json_parse",
    "tree_snapshot",
    "kernel_values",
    "chat_types",
    "tool_input_request",
    "snapshot_mutation",
    "interaction_state",
    "interaction_protocol",
    "interaction_mutation",
    "commit_log",
    "process_record",
];

/// Runs the property of the target called `name` on `data` (`false` if there is no such target).
pub fn run_target(name: &str, data: &[u8]) -> bool {
    match name {
        "json_parse" => json_parse(data),
        "tree_snapshot" => tree_snapshot(data),
        "kernel_values" => kernel_values(data),
        "chat_types" => chat_types(data),
        "tool_input_request" => tool_input_request(data),
        "snapshot_mutation" => snapshot_mutation(data),
        "interaction_state" => interaction_state(data),
        "interaction_protocol" => interaction_protocol(data),
        "interaction_mutation" => interaction_mutation(data),
        "commit_log" => commit_log(data),
        "process_record" => process_record(data),
        _ => return false,
    }
    true
}

/// `process_record`: the oracle's fast Process record decoder
/// (`kernel::record_decoder::decode_process_record`) never panics and agrees with the strict
/// decoder (parse, then `Process::decode_record`): what it accepts, the strict decoder
/// accepts as an equal Process (payload values included); what the strict decoder accepts in
/// canonical text, it accepts too. It does not check the members around the payloads
/// canonical itself: its caller compares the accepted record's encoding with the input, so
/// that comparison must hold exactly when the input is canonical text. Segment references
/// resolve to no segments on both sides.
pub fn process_record(data: &[u8]) {
    use keel::kernel::process::Process;
    let mut resolve = |_: &Json| Ok(Vec::new());
    let fast = keel::kernel::record_decoder::decode_process_record(data, &mut resolve);
    let unbounded = ParseLimits { max_bytes: usize::MAX, ..Default::default() };
    let parsed = json::parse_with(data, &unbounded);
    let strict = parsed.as_ref().ok().map(|v| Process::decode_record(v, &mut resolve));
    let canonical = parsed.as_ref().is_ok_and(|v| v.to_canonical_bytes() == data);
    match (fast, strict) {
        (Some(p), Some(Ok(q))) => {
            assert_eq!(p, q, "the two decoders disagree");
            assert_eq!(p.committed_state.payload.value(), q.committed_state.payload.value());
            let candidates = |x: &Process| x.prepared.as_ref().map(|s| s.candidate_state.payload.value().clone());
            assert_eq!(candidates(&p), candidates(&q));
            assert_eq!(p.to_record_json(), q.to_record_json());
            // The caller's proof of canonical form: the accepted record's encoding is the input.
            let same_bytes = p.to_record_json().to_canonical_bytes() == data;
            assert!(!same_bytes || canonical, "the re-encoding comparison accepted non-canonical text");
        }
        (Some(_), strict) => panic!("the fast decoder accepted what the strict one refuses: {strict:?}"),
        (None, Some(Ok(_))) => assert!(!canonical, "the fast decoder declined canonical text the strict one accepts"),
        (None, _) => {}
    }
}

/// `commit_log`: the file store's v3 record decoder and the whole-cut splitter never panic; an
/// accepted record re-encodes byte-identically; an accepted whole cut reassembles into exactly
/// its input, splits again into an equal cut, keeps its tree digest as a delta against itself
/// and resolves back; where the snapshot decoder also accepts the bytes, both agree on the
/// tree digest.
pub fn commit_log(data: &[u8]) {
    use keel::kernel::commit::TreeCut;
    if let Ok(again) = keel::kernel::commit::file::reencode_payload(data) {
        assert_eq!(again, data, "an accepted log record re-encodes byte-identically");
    }
    if let Ok(cut) = TreeCut::from_whole(data) {
        let bytes = cut.bytes().unwrap_or_else(|e| panic!("a split cut is whole: {e}"));
        assert_eq!(&bytes[..], data, "a split cut reassembles into its input");
        let again = TreeCut::from_whole(&bytes).unwrap_or_else(|e| panic!("a reassembled cut splits: {e}"));
        assert_eq!(again, cut);
        let delta = cut.delta_from(&cut);
        assert_eq!(delta.digest, cut.digest);
        assert_eq!(delta.carried().count(), 0);
        assert_eq!(delta.resolve(Some(&cut)).unwrap_or_else(|e| panic!("a delta resolves against its base: {e}")), cut);
        if let Ok(snap) = TreeSnapshot::decode(data) {
            assert_eq!(snap.digest(), cut.digest, "snapshot and cut agree on the tree digest");
        }
    }
}

/// Parses without the payload size cap (re-encodings of accepted values are re-read with it).
fn parse_unbounded(bytes: &[u8]) -> Json {
    json::parse_with(bytes, &ParseLimits { max_bytes: usize::MAX, ..Default::default() })
        .unwrap_or_else(|e| panic!("canonical bytes must parse: {e}"))
}

/// `json::parse` never panics; accepted input has a canonical form that parses back to the
/// same value and is a fixed point of parse ∘ encode; Payload and the depth limit agree.
pub fn json_parse(data: &[u8]) {
    let Ok(value) = json::parse(data) else { return };
    let canonical = value.to_canonical_bytes();
    assert_eq!(canonical.len(), value.canonical_len(), "canonical_len is the encoded length");
    assert!(canonical.len() <= data.len(), "canonical form is never longer than parsed input");
    let reparsed = json::parse(&canonical).unwrap_or_else(|e| panic!("canonical bytes must parse: {e}"));
    assert_eq!(reparsed, value, "parse(canonical) == value");
    assert_eq!(reparsed.to_canonical_bytes(), canonical, "canonical(parse(canonical)) == canonical");
    let payload = Payload::from_bytes(data).unwrap_or_else(|e| panic!("parsed input is a payload: {e}"));
    assert_eq!(payload.canonical().as_bytes(), &canonical[..]);
    assert_eq!(payload.digest(), Digest::of(&canonical));
    assert_eq!(Digest::of_json(&value), Digest::of(&canonical));
    // The depth limit is exact: the value's own depth passes, one less fails.
    let depth = value.depth();
    let limits = |max_depth| ParseLimits { max_depth, ..Default::default() };
    assert!(json::parse_with(data, &limits(depth)).is_ok(), "depth {depth} passes a limit of {depth}");
    if depth > 0 {
        assert!(json::parse_with(data, &limits(depth - 1)).is_err(), "depth {depth} fails a limit of {}", depth - 1);
    }
}

/// Decoding + full validation never panics; an accepted snapshot is its own canonical bytes,
/// re-encodes and rebuilds identically, and restores into an owner that runs without panics.
pub fn tree_snapshot(data: &[u8]) {
    let Ok(snap) = TreeSnapshot::decode(data) else { return };
    check_snapshot(&snap, data);
}

fn check_snapshot(snap: &TreeSnapshot, data: &[u8]) {
    assert_eq!(&snap.bytes()[..], data, "accepted snapshot bytes are canonical");
    assert_eq!(Some(snap.digest()), keel::kernel::commit::TreeCut::from_whole(data).ok().map(|c| c.digest), "the digest is the tree digest of the records");
    assert_eq!(snap.to_json().to_canonical_bytes(), data, "re-encoding is byte-identical");
    let again = TreeSnapshot::decode(&snap.to_json().to_canonical_bytes()).expect("re-encoding decodes");
    assert_eq!(&again, snap);
    let rebuilt = TreeSnapshot::build(snap.root_id.clone(), snap.incarnation.clone(), snap.limits, snap.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>(), snap.residues().iter().map(|r| (**r).clone()))
        .expect("an accepted snapshot rebuilds");
    assert_eq!(&rebuilt, snap);
    for p in snap.processes() {
        round_trip::<keel::kernel::process::Process>(&p.to_json());
        if let Ok(Some(children)) = keel::interaction::active_delegates::active_delegate_children(p) {
            assert!(children.iter().all(|c| c.is_valid()), "active delegate children re-derive their keys");
        }
    }
    for r in snap.residues() {
        round_trip::<keel::kernel::retired::RetiredChild>(&r.to_json());
    }
    check_pending_inputs(snap);
    restore_and_run(snap);
}

/// A host discovering tool input waits never panics; each one found is parked on the wait its
/// Process is waiting on, and an answer that passes the local schema check is a wait-addressed
/// input response the tool child will accept.
fn check_pending_inputs(snap: &TreeSnapshot) {
    use keel::interaction::pending_inputs::pending_tool_inputs;
    use keel::interaction::protocol::InputResponse;
    use keel::interaction::wire::Wire;
    let Ok(pending) = pending_tool_inputs(snap) else { return };
    for input in &pending {
        let process = snap.processes().iter().find(|p| &p.id == input.process_id()).expect("a pending input names a process");
        assert_eq!(process.current_wait_id.as_ref(), Some(input.wait_id()));
        let id = keel::kernel::ids::SignalId::external("signal:answer").expect("static id");
        for candidate in [input.prompt().value(), input.response_schema().value(), &Json::str("yes"), &Json::Null] {
            let Ok(request) = input.response_signal(id.clone(), candidate) else { continue };
            assert_eq!(request.wait_id(), Some(input.wait_id()));
            let answer = InputResponse::from_payload(request.payload()).expect("an answer decodes");
            assert_eq!(answer.response.value(), candidate);
        }
    }
}

/// A committer that acknowledges everything and stores nothing: restored owners of any
/// accepted snapshot get to run (the kernel validates every cut itself before committing).
struct AcceptAll;

impl Committer for AcceptAll {
    fn commit_checkpoint(&self, _: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(async { Ok(()) })
    }
    fn commit_effect(&self, _: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(async { Ok(()) })
    }
    fn activate_tree(&self, _: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        Box::pin(async { Ok(()) })
    }
    fn load_tree(&self, _: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        Box::pin(async { Ok(None) })
    }
}

fn fuzz_world() -> &'static runs::World {
    static WORLD: OnceLock<runs::World> = OnceLock::new();
    WORLD.get_or_init(|| runs::World::new(&[]))
}

/// Restores `snap` (if it names the fuzz deployments: the testkit world's or the Interaction
/// world's), runs it to idle, kills the root and runs again; every cut the owner commits must
/// decode and re-encode byte-identically.
fn restore_and_run(snap: &TreeSnapshot) {
    let Ok(incarnation) = IncarnationId::from_hex(&format!("{:032x}", 0xfeed_u64)) else { return };
    let interaction = interaction_world::fuzz_world();
    let (resolver, root) = match interaction.root_for(&snap.root().deployment_ref) {
        Some(root) => (interaction.resolver.clone() as Arc<dyn keel::kernel::binding::DeploymentResolver>, root.clone()),
        None => (fuzz_world().resolver.clone() as Arc<dyn keel::kernel::binding::DeploymentResolver>, fuzz_world().root.clone()),
    };
    let Ok(owner) = Owner::restore(resolver, root, snap, incarnation, runs::now()) else { return };
    let mut runner = DirectRunner::new(owner, Arc::new(AcceptAll), runs::now());
    runner.run_to_idle();
    let root = runner.owner.root_id().clone();
    let _ = runner.command(Command::Kill { process: root, reason: "fuzz".into() });
    runner.run_to_idle();
    let whole = runner.acknowledged_cuts();
    assert_eq!(whole.len(), runner.commits.len(), "every commit resolves against the head before it");
    for cut in whole {
        let bytes = cut.bytes().unwrap_or_else(|e| panic!("a resolved cut is whole: {e}"));
        let snap = TreeSnapshot::decode(&bytes).unwrap_or_else(|e| panic!("a committed cut must decode: {e}"));
        assert_eq!(snap.to_json().to_canonical_bytes(), &bytes[..]);
        assert_eq!(snap.digest(), cut.digest, "the committed digest is the tree digest of the records");
    }
}

/// `T::from_json` never panics; an accepted value re-encodes to canonical bytes that decode
/// to an equal value with identical bytes.
pub fn round_trip<T: FromJson + ToJson + PartialEq + Debug>(value: &Json) -> Option<T> {
    let decoded = T::from_json(value).ok()?;
    let first = decoded.to_json().to_canonical_bytes();
    let again = T::from_json(&parse_unbounded(&first))
        .unwrap_or_else(|e| panic!("re-encoding of an accepted {} must decode: {e}", std::any::type_name::<T>()));
    assert_eq!(again, decoded, "decode(encode(v)) == v for {}", std::any::type_name::<T>());
    assert_eq!(again.to_json().to_canonical_bytes(), first, "encoding is stable for {}", std::any::type_name::<T>());
    Some(decoded)
}

/// The kernel FromJson types, in the order of the selector byte of [`kernel_values`].
pub const KERNEL_TYPES: &[&str] = &[
    "Process",
    "Mailbox",
    "Signal",
    "SignalRequest",
    "Transition",
    "Effect",
    "ChildStartResult",
    "ChildOutcome",
    "WaitOpened",
    "ChildWaitOpened",
    "ChildWaitSatisfied",
    "Settlement",
    "Failure",
    "ProcessResult",
    "TreeLimits",
    "Budget",
    "ChildSpec",
    "ChildWaitSpec",
    "SignalRecord",
    "ExecutionState",
    "PendingControl",
    "Termination",
    "DeploymentRef",
    "CapabilitySet",
];

/// First byte selects a kernel type (modulo [`KERNEL_TYPES`]), the rest is JSON for it.
pub fn kernel_values(data: &[u8]) {
    use keel::kernel::*;
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(value) = json::parse(rest) else { return };
    match usize::from(selector) % KERNEL_TYPES.len() {
        0 => drop(round_trip::<process::Process>(&value)),
        1 => {
            if let Some(mailbox) = round_trip::<mailbox::Mailbox>(&value) {
                // Rebuilding from the decoded history is the same check decoding ran.
                let rebuilt = mailbox::Mailbox::from_retained(mailbox.records().to_vec(), mailbox.cursor(), mailbox.len())
                    .expect("a decoded mailbox's history is valid");
                assert_eq!(rebuilt, mailbox);
                assert!(mailbox.cursor() <= mailbox.len());
                assert_eq!(mailbox.pending_window().len() as u64, mailbox.pending_count());
            }
        }
        2 => drop(round_trip::<signal::Signal>(&value)),
        3 => {
            if let Some(request) = round_trip::<signal::SignalRequest>(&value) {
                assert!(!request.id().is_engine_owned(), "host requests never use the Engine namespace");
            }
        }
        4 => drop(round_trip::<transition::Transition>(&value)),
        5 => drop(round_trip::<effect::Effect>(&value)),
        6 => drop(round_trip::<engine_signal::ChildStartResult>(&value)),
        7 => drop(round_trip::<engine_signal::ChildOutcome>(&value)),
        8..=10 => {
            let Some(signal) = round_trip::<signal::Signal>(&value) else { return };
            // An Engine Signal body is strict: what parses re-renders to the same payload.
            let rendered = match usize::from(selector) % KERNEL_TYPES.len() {
                8 => engine_signal::WaitOpened::parse(&signal)
                    .ok()
                    .map(|w| engine_signal::WaitOpened::payload_json(&w.key, w.payload.as_ref())),
                9 => engine_signal::ChildWaitOpened::parse(&signal)
                    .ok()
                    .map(|w| engine_signal::ChildWaitOpened::payload_json(&w.spec)),
                _ => engine_signal::ChildWaitSatisfied::parse(&signal).ok().map(|w| w.payload_json()),
            };
            if let Some(rendered) = rendered {
                assert_eq!(rendered.to_canonical_string(), signal.payload().canonical(), "engine signal body re-renders");
            }
        }
        11 => drop(round_trip::<effect::Settlement>(&value)),
        12 => drop(round_trip::<failure::Failure>(&value)),
        13 => drop(round_trip::<result::ProcessResult>(&value)),
        14 => drop(round_trip::<tree_limits::TreeLimits>(&value)),
        15 => drop(round_trip::<resource::Budget>(&value)),
        16 => drop(round_trip::<child::ChildSpec>(&value)),
        17 => drop(round_trip::<child::ChildWaitSpec>(&value)),
        18 => drop(round_trip::<mailbox::SignalRecord>(&value)),
        19 => drop(round_trip::<waist::ExecutionState>(&value)),
        20 => drop(round_trip::<status::PendingControl>(&value)),
        21 => drop(round_trip::<status::Termination>(&value)),
        22 => drop(round_trip::<deployment::DeploymentRef>(&value)),
        _ => drop(round_trip::<capability::CapabilitySet>(&value)),
    }
}

/// The chat types, in the order of the selector byte of [`chat_types`].
pub const CHAT_TYPES: &[&str] = &[
    "Request",
    "Response",
    "ResponseDelta",
    "Message",
    "Part",
    "ToolCall",
    "ToolResult",
    "ToolDefinition",
    "Options",
    "ToolChoice",
    "Usage",
    "FinishReason",
    "ToolCallDelta",
    "ToolOutput",
];

/// First byte selects a chat type (modulo [`CHAT_TYPES`]), the rest is JSON for it. Decoded
/// values are valid and round-trip; a decoded Response survives split → accumulate.
pub fn chat_types(data: &[u8]) {
    use keel::chat::*;
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(value) = json::parse(rest) else { return };
    fn valid(result: Result<(), ChatError>) {
        if let Err(e) = result {
            panic!("a decoded chat value is valid: {e}");
        }
    }
    match usize::from(selector) % CHAT_TYPES.len() {
        0 => {
            if let Some(v) = round_trip::<Request>(&value) {
                valid(v.validate())
            }
        }
        1 => {
            if let Some(v) = round_trip::<Response>(&value) {
                valid(v.validate());
                // Chunk size from the selector's high bits: 1..=32 bytes.
                let chunk = usize::from(selector >> 3) + 1;
                let normal = Accumulator::accumulate(&ResponseDelta::split(&v, chunk))
                    .unwrap_or_else(|e| panic!("a valid response streams and accumulates: {e}"));
                let again = Accumulator::accumulate(&ResponseDelta::split(&normal, chunk + 1))
                    .unwrap_or_else(|e| panic!("an accumulated response streams again: {e}"));
                assert_eq!(again, normal, "accumulate ∘ split is idempotent");
            }
        }
        2 => {
            if let Some(v) = round_trip::<ResponseDelta>(&value) {
                valid(v.validate());
                // A single valid delta may still contradict itself (two ids for one call
                // index): the accumulator refuses that, but never panics.
                let mut acc = Accumulator::new();
                if acc.push(&v).is_ok() {
                    let _ = acc.finish();
                }
            }
        }
        3 => {
            if let Some(v) = round_trip::<Message>(&value) {
                valid(v.validate())
            }
        }
        4 => {
            if let Some(v) = round_trip::<Part>(&value) {
                valid(v.validate())
            }
        }
        5 => {
            if let Some(v) = round_trip::<ToolCall>(&value) {
                valid(v.validate())
            }
        }
        6 => {
            if let Some(v) = round_trip::<ToolResult>(&value) {
                valid(v.validate())
            }
        }
        7 => {
            if let Some(v) = round_trip::<ToolDefinition>(&value) {
                valid(v.validate())
            }
        }
        8 => {
            if let Some(v) = round_trip::<Options>(&value) {
                valid(v.validate())
            }
        }
        9 => drop(round_trip::<ToolChoice>(&value)),
        10 => drop(round_trip::<Usage>(&value)),
        11 => drop(round_trip::<FinishReason>(&value)),
        12 => {
            if let Some(v) = round_trip::<ToolCallDelta>(&value) {
                valid(v.validate())
            }
        }
        _ => {
            if let Some(v) = round_trip::<ToolOutput>(&value) {
                valid(v.validate())
            }
        }
    }
}

/// `ToolInputRequest` decoding (which compiles the response schema) never panics; accepted
/// requests round-trip, and validating their own members against the schema never panics.
pub fn tool_input_request(data: &[u8]) {
    use keel::tool::ToolInputRequest;
    let Ok(value) = json::parse(data) else { return };
    let Some(request) = round_trip::<ToolInputRequest>(&value) else { return };
    for candidate in [request.prompt(), request.continuation_state(), request.response_schema()] {
        if let Ok(continuation) = request.resume_with(candidate.value()) {
            assert_eq!(continuation.response(), candidate, "a validated response is kept as given");
            assert_eq!(continuation.state(), request.continuation_state());
        }
    }
}

/// The captured seed snapshots that [`snapshot_mutation`] edits.
pub fn mutation_bases() -> &'static [Json] {
    static BASES: OnceLock<Vec<Json>> = OnceLock::new();
    BASES.get_or_init(|| runs::seed_cuts().into_iter().map(|(_, bytes)| parse_unbounded(&bytes)).collect())
}

/// Structured: the bytes drive an [`arbitrary_json::SnapshotMutation`] of a real captured
/// snapshot; whatever the edits produce, decoding never panics and an accepted result obeys
/// every [`tree_snapshot`] property.
pub fn snapshot_mutation(data: &[u8]) {
    let Ok(mutation) = arbitrary_json::SnapshotMutation::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let bases = mutation_bases();
    let Some(base) = bases.get(usize::from(mutation.base) % bases.len().max(1)) else { return };
    let mut tree = base.clone();
    for edit in mutation.edits.iter().take(arbitrary_json::MAX_EDITS) {
        arbitrary_json::apply(&mut tree, edit);
    }
    let bytes = tree.to_canonical_bytes();
    if let Ok(snap) = TreeSnapshot::decode(&bytes) {
        check_snapshot(&snap, &bytes);
    }
}
