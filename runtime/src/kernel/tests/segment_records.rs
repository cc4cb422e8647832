//! Segments as cut records, through the real owner: a strategy that appends one segment per
//! Step (and dispatches one Effect, so every Step commits) must commit O(appended) bytes per
//! Step however old it is; cuts with segment records decode, share segments, refuse tampered
//! records, and restore.

use super::*;
use crate::json::ObjectBuilder;
use crate::kernel::commit::{CutEntry, TreeCut};
use crate::kernel::descriptor::Descriptor;
use crate::kernel::effect::Effect;
use crate::kernel::owner::{Command, Reply};
use crate::kernel::segment::Segment;
use crate::kernel::segment_record::{SegmentRecord, SegmentRecordError, KEY_PREFIX};
use crate::kernel::signal::Signal;
use crate::kernel::snapshot::SnapshotError;
use crate::kernel::status::Status;
use crate::kernel::transition::Transition;
use crate::kernel::waist::{Definition, Execution, ExecutionState, StepContext, StepError};
use crate::text::QualifiedName;

const KIND: &str = "keel.test.appender";

/// Appends one ~200-byte segment per Step and dispatches one Effect, until `target` Steps.
struct Appender;

struct Appending {
    steps: u64,
    target: u64,
    segments: Vec<Arc<Segment>>,
}

impl Execution for Appending {
    fn step(&mut self, _: &StepContext, signals: &[Signal]) -> Result<Transition, StepError> {
        let consumed = u32::try_from(signals.len()).map_err(|_| StepError::other("window"))?;
        if self.steps == self.target {
            return Ok(Transition::Complete { consumed, output: Payload::from_json(Json::u64(self.steps)).unwrap() });
        }
        let entry = ObjectBuilder::new().value("step", Json::u64(self.steps)).value("text", Json::str("x".repeat(200))).build();
        self.segments.push(Segment::seal(&Json::Array(vec![entry])));
        self.steps += 1;
        let effect = Effect::Dispatcher(Payload::from_json(Json::str("work")).unwrap());
        Ok(Transition::Continue { consumed, effects: vec![effect] })
    }

    fn snapshot(&self) -> Result<ExecutionState, StepError> {
        let payload = ObjectBuilder::new().value("steps", Json::u64(self.steps)).value("target", Json::u64(self.target)).build();
        Ok(ExecutionState {
            kind: QualifiedName::parse(KIND).unwrap(),
            payload: Payload::from_json(payload).unwrap(),
            segments: self.segments.clone(),
        })
    }
}

impl Definition for Appender {
    fn descriptor(&self) -> &Descriptor {
        static D: std::sync::OnceLock<Descriptor> = std::sync::OnceLock::new();
        D.get_or_init(|| Descriptor::new(KIND, "Appends one segment per Step.", Json::Bool(true), Json::Bool(true), None).unwrap())
    }
    fn start(&self, input: &Payload) -> Result<Box<dyn Execution>, StepError> {
        let target = input.value().as_u64().ok_or_else(|| StepError::other("input: a step count"))?;
        Ok(Box::new(Appending { steps: 0, target, segments: Vec::new() }))
    }
    fn restore(&self, _: &StepContext, state: &ExecutionState) -> Result<Box<dyn Execution>, StepError> {
        let field = |k: &str| state.payload.value().get(k).and_then(Json::as_u64).ok_or_else(|| StepError::other(k));
        let (steps, target) = (field("steps")?, field("target")?);
        if state.segments.len() as u64 != steps {
            return Err(StepError::other("one segment per Step"));
        }
        Ok(Box::new(Appending { steps, target, segments: state.segments.clone() }))
    }
}

struct Setup {
    deployment: Deployment,
    resolver: Arc<DeploymentSet>,
    committer: Arc<MemoryCommitter>,
}

fn setup() -> Setup {
    let dispatcher: Arc<dyn Dispatcher> = Arc::new(FnDispatcher::echo());
    let deployment = Deployment::new(Arc::new(Appender), Some(dispatcher), crate::json::Digest::of(b"a"), crate::json::Digest::of(b"c"));
    let resolver = Arc::new(DeploymentSet::new().with(deployment.clone()));
    Setup { deployment, resolver, committer: Arc::new(MemoryCommitter::new()) }
}

fn root() -> ProcessId {
    ProcessId::root_from_hex(&hex(1)).unwrap()
}

fn start(s: &Setup, target: u64) -> DirectRunner {
    let owner = Owner::start(
        s.resolver.clone(),
        s.deployment.clone(),
        Payload::from_json(Json::u64(target)).unwrap(),
        root(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        config(Budget::unlimited()),
        now(),
    )
    .unwrap();
    DirectRunner::new(owner, s.committer.clone() as Arc<dyn Committer>, now())
}

fn head(s: &Setup) -> TreeSnapshot {
    let head = futures::executor::block_on(s.committer.load_tree(&root())).unwrap().expect("head");
    TreeSnapshot::from_cut(&head.cut).expect("head decodes")
}

fn segment_texts(state: &ExecutionState) -> Vec<String> {
    state.segments.iter().map(|s| s.text().to_owned()).collect()
}

/// Per commit: (carried bytes of the root record, carried segment records, carried bytes).
fn carried(r: &DirectRunner) -> Vec<(usize, usize, u64)> {
    let root = root();
    r.commits
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(c, _)| {
            let cut = c.cut();
            let root_bytes = cut.entries().iter().find(|e| e.key() == root.as_str()).and_then(CutEntry::bytes).map_or(0, |b| b.len());
            let segments = cut.carried().filter(|e| e.key().starts_with(KEY_PREFIX)).count();
            (root_bytes, segments, cut.carried_bytes())
        })
        .collect()
}

#[test]
fn a_step_carries_what_it_appended_not_the_history() {
    const STEPS: u64 = 60;
    let s = setup();
    let mut r = start(&s, STEPS);
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    check_run(&r, &s.committer);
    let final_head = head(&s);
    assert_eq!(final_head.root().committed_state.segments.len() as u64, STEPS);
    assert!(final_head.bytes().len() as u64 > STEPS * 200, "the history is in the cut");

    let per_commit = carried(&r);
    assert!(per_commit.len() as u64 >= 2 * STEPS, "a pending and a settled boundary per Step");
    assert!(per_commit.iter().all(|c| c.1 <= 1), "no commit carries more than the one appended segment");
    assert_eq!(per_commit.iter().map(|c| c.1).sum::<usize>() as u64, STEPS, "each segment record is carried once");
    // The root record and each commit's carried bytes do not grow with the Step count: the
    // last Steps' commits carry no more than early ones (a few digits of counters aside).
    let early = &per_commit[6..20];
    let late = &per_commit[per_commit.len() - 14..];
    let max = |w: &[(usize, usize, u64)], f: fn(&(usize, usize, u64)) -> u64| w.iter().map(f).max().unwrap();
    let (early_root, late_root) = (max(early, |c| c.0 as u64), max(late, |c| c.0 as u64));
    let (early_bytes, late_bytes) = (max(early, |c| c.2), max(late, |c| c.2));
    assert!(late_root <= early_root + 16, "root record: {early_root} bytes early, {late_root} late");
    assert!(late_bytes <= early_bytes + 16, "carried per commit: {early_bytes} early, {late_bytes} late");
}

#[test]
fn a_state_and_its_candidate_share_their_segments_after_decoding() {
    let s = setup();
    let mut r = start(&s, 5);
    // Run until the third Step's Effect is pending: the head holds a candidate state that
    // extends the committed one by one segment.
    for _ in 0..2 {
        let mut d = r.take_dispatches();
        let (effect, outcome) = d.remove(0).run(1);
        r.complete(effect, outcome);
    }
    let snap = head(&s);
    let p = snap.root();
    let candidate = &p.prepared.as_ref().expect("a prepared Step").candidate_state;
    assert_eq!((p.committed_state.segments.len(), candidate.segments.len()), (2, 3));
    for (a, b) in p.committed_state.segments.iter().zip(&candidate.segments) {
        assert!(Arc::ptr_eq(a, b), "one Arc<Segment> per record within a decode");
    }
    let segment_records = snap.tree_cut().entries().iter().filter(|e| e.key().starts_with(KEY_PREFIX)).count();
    assert_eq!(segment_records, 3, "a record the two states share is in the cut once");
    // Whole-text split keys segment records by their digest and agrees with the snapshot.
    let split = TreeCut::from_whole(snap.bytes()).expect("splits");
    assert_eq!(&split, snap.tree_cut());
}

/// The final head's cut rebuilt with `edit` applied to its entries, as whole text.
fn edited(snap: &TreeSnapshot, edit: impl FnOnce(&mut Vec<CutEntry>)) -> Vec<u8> {
    let cut = snap.tree_cut();
    let mut entries = cut.entries().to_vec();
    edit(&mut entries);
    let edited = TreeCut::new_unchecked(cut.root_id.clone(), cut.incarnation.clone(), cut.envelope().clone(), entries);
    edited.bytes().expect("whole").to_vec()
}

fn segment_positions(entries: &[CutEntry]) -> Vec<usize> {
    entries.iter().enumerate().filter(|(_, e)| e.key().starts_with(KEY_PREFIX)).map(|(i, _)| i).collect()
}

#[test]
fn dropped_reordered_altered_miscounted_duplicated_and_orphan_segment_records_are_refused() {
    let s = setup();
    let mut r = start(&s, 4);
    r.run_to_idle();
    let snap = head(&s);
    assert_eq!(TreeSnapshot::decode(&edited(&snap, |_| {})).expect("unedited decodes").bytes(), snap.bytes());
    let segments = segment_positions(snap.tree_cut().entries());
    assert_eq!(segments.len(), 4);
    let decode = |bytes: Vec<u8>| TreeSnapshot::decode(&bytes).map(|_| ());

    let dropped = edited(&snap, |e| {
        e.remove(segments[1]);
    });
    assert!(matches!(decode(dropped), Err(SnapshotError::Segments(SegmentRecordError::MissingLink { .. }))));

    let swapped = edited(&snap, |e| e.swap(segments[0], segments[1]));
    assert!(matches!(decode(swapped), Err(SnapshotError::Tree(_))), "records in another order are not canonical");

    // Another segment in the place of one: its digest differs, so the chain misses a link.
    let altered = edited(&snap, |e| {
        let prev = crate::json::parse(e[segments[2]].bytes().unwrap()).unwrap().get("prev").cloned();
        let mut text = String::from("{\"entries\":[{\"step\":99}]");
        if let Some(Json::String(p)) = prev {
            text.push_str(&format!(",\"prev\":\"{p}\""));
        }
        text.push('}');
        let key = crate::kernel::segment_record::key_of(crate::json::Digest::of(text.as_bytes()));
        e[segments[2]] = CutEntry::new(key, text.into_bytes());
    });
    assert!(matches!(decode(altered), Err(SnapshotError::Segments(SegmentRecordError::MissingLink { .. }))));

    let duplicated = edited(&snap, |e| {
        let copy = e[segments[0]].clone();
        e.insert(segments[0], copy);
    });
    assert!(matches!(decode(duplicated), Err(SnapshotError::Segments(SegmentRecordError::Duplicate { .. }))));

    let orphan = edited(&snap, |e| {
        let extra = SegmentRecord::build(&Segment::seal(&Json::Array(vec![Json::u64(7)])), None);
        e.push(extra.entry());
    });
    assert!(matches!(decode(orphan), Err(SnapshotError::Segments(SegmentRecordError::Orphan { .. }))));

    let miscounted = edited(&snap, |e| {
        let root_at = e.iter().position(|x| x.key() == root().as_str()).unwrap();
        let text = String::from_utf8(e[root_at].bytes().unwrap().to_vec()).unwrap();
        assert!(text.contains("\"count\":4,"));
        e[root_at] = CutEntry::new(root().as_str(), text.replace("\"count\":4,", "\"count\":3,").into_bytes());
    });
    assert!(matches!(decode(miscounted), Err(SnapshotError::Segments(SegmentRecordError::CountMismatch { .. }))));
}

#[test]
fn a_restore_from_a_delta_resolved_head_finishes_with_the_same_state() {
    const STEPS: u64 = 6;
    let whole = setup();
    let mut r = start(&whole, STEPS);
    r.run_to_idle();
    let expected = head(&whole);

    // The same run, killed while its fourth Step's Effect is in flight.
    let s = setup();
    let mut r = start(&s, STEPS);
    for _ in 0..3 {
        let mut d = r.take_dispatches();
        let (effect, outcome) = d.remove(0).run(1);
        r.complete(effect, outcome);
    }
    drop(r);
    let snap = head(&s);
    let owner = Owner::restore(s.resolver.clone(), s.deployment.clone(), &snap, IncarnationId::from_hex(&hex(101)).unwrap(), now())
        .expect("restore");
    let mut r = DirectRunner::new(owner, s.committer.clone() as Arc<dyn Committer>, now());
    r.run_to_idle();
    // The in-flight Effect (never replayed) is Unknown: the host settles it as the world did.
    let unknown = head(&s).root().unknown_effect_ids();
    assert_eq!(unknown.len(), 1);
    let reply = r.command(Command::Resolve {
        process: root(),
        effect: unknown[0].clone(),
        settlement: Settlement { status: SettlementStatus::Succeeded, payload: Payload::from_json(Json::str("work")).unwrap() },
    });
    assert!(matches!(reply, Ok(Reply::Resolved)), "{reply:?}");
    r.run_to_idle();
    let restored = head(&s);
    assert_eq!(root_result(&r).expect("finished").status(), Status::Completed);
    assert_eq!(segment_texts(&restored.root().committed_state), segment_texts(&expected.root().committed_state));
    assert_eq!(restored.root().committed_state.payload, expected.root().committed_state.payload);
    check_run(&r, &s.committer);
}

#[test]
fn segment_records_no_state_references_leave_the_cut() {
    let s = setup();
    let mut r = start(&s, 3);
    r.run_to_idle();
    let snap = head(&s);
    assert_eq!(segment_positions(snap.tree_cut().entries()).len(), 3);
    // The state's context replaced by one new segment: the old records leave the cut, and the
    // delta against the old cut carries the new record and names no old one.
    let mut processes = snap.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    let replaced = Segment::seal(&Json::Array(vec![Json::str("summary")]));
    processes[0].committed_state.segments = vec![replaced.clone()];
    let next = TreeSnapshot::build(snap.root_id.clone(), snap.incarnation.clone(), snap.limits, processes, []).expect("valid");
    let keys: Vec<&str> = next.tree_cut().entries().iter().map(CutEntry::key).filter(|k| k.starts_with(KEY_PREFIX)).collect();
    assert_eq!(keys, [&**replaced.record(None).key()]);
    let delta = next.tree_cut().delta_from(snap.tree_cut());
    assert_eq!(delta.carried().filter(|e| e.key().starts_with(KEY_PREFIX)).count(), 1);
    assert_eq!(delta.entries().iter().filter(|e| e.key().starts_with(KEY_PREFIX)).count(), 1);
    assert_eq!(TreeSnapshot::decode(next.bytes()).expect("decodes"), next);
}

/// The reusing decoder (a reader following a sequence of heads) gives the whole decoder's
/// verdict on cuts with segment records, shares the segments it already decoded, and refuses
/// tampered segment records exactly like the whole decoder.
#[test]
fn decoding_reusing_the_previous_head_matches_a_whole_decode_with_segment_records() {
    let s = setup();
    let mut r = start(&s, 5);
    r.run_to_idle();
    let cuts = r.acknowledged_cuts();
    let mut shared = false;
    let last = decode_heads_both_ways(&cuts, |p, reusing| {
        let (old, new) = (&p.root().committed_state.segments, &reusing.root().committed_state.segments);
        shared |= old.iter().zip(new).any(|(a, b)| Arc::ptr_eq(a, b));
    });
    assert!(shared, "segments the previous head held were reused, not parsed again");

    let last = last.expect("heads");
    let before = TreeSnapshot::from_cut(&cuts[cuts.len() - 2]).unwrap();
    let segments = segment_positions(last.tree_cut().entries());
    let tampered: Vec<Vec<u8>> = vec![
        edited(&last, |e| {
            e.remove(segments[1]);
        }),
        edited(&last, |e| e.swap(segments[0], segments[1])),
        edited(&last, |e| e.push(SegmentRecord::build(&Segment::seal(&Json::Array(vec![Json::u64(7)])), None).entry())),
        edited(&last, |e| {
            let copy = e[segments[0]].clone();
            e.insert(segments[0], copy);
        }),
    ];
    for bytes in tampered {
        let whole = TreeSnapshot::decode(&bytes);
        assert!(whole.is_err(), "the whole decoder refuses the tampered cut");
        let Ok(cut) = TreeCut::from_whole(&bytes) else { continue };
        assert_eq!(TreeSnapshot::decode_reusing(&cut, Some(&before)), whole);
    }
}
