//! `Process::write_record` (the direct writer every cut uses) against the tree encoding it
//! replaced (`Process::to_record_json`, kept as the oracle), byte for byte: over every
//! Process of every cut some real runs commit, and over seeded variations of them that reach
//! shapes those runs do not (finite budgets, capabilities, text needing escapes, every
//! status and effect phase, pending control, a finish with an output, extreme counters).

use super::*;
use crate::kernel::child::{Boundary, Condition};
use crate::kernel::effect::EffectPhase;
use crate::kernel::failure::{codes, Failure};
use crate::kernel::ids::{EffectId, WaitId};
use crate::kernel::process::{Finish, Process};
use crate::kernel::resource::Quota;
use crate::kernel::segment_record::RecordSink;
use crate::kernel::status::Status;
use crate::kernel::testkit::ChildPlan;

fn direct(p: &Process) -> String {
    let mut out = String::new();
    p.write_record(&mut out, &mut RecordSink::default());
    out
}

fn oracle(p: &Process) -> String {
    p.to_record_json().to_canonical_string()
}

/// Every Process of every acknowledged cut of a few real runs: roots and children, waiting,
/// prepared (pending and settled effects), consumed and compacted mailboxes, finished
/// (completed and failed), and a parent holding retired children.
fn real_processes() -> Vec<Process> {
    let mut all = Vec::new();
    let w = echo_world();
    let child = |key: &str, script: Vec<Op>| {
        ChildPlan::new(key, w.deployment.reference(), script, Budget::unlimited())
    };
    let runs: Vec<Vec<Op>> = vec![
        vec![
            Op::Dispatch(Json::str("a \"quoted\"\n\u{1}é")),
            Op::Checkpoint,
            Op::Wait("key".into()),
        ],
        vec![Op::WaitAfter {
            key: "early".into(),
            then: Json::u64(7),
        }],
        vec![Op::Dispatch(Json::Null), Op::Fail("boom \\ \"why\"".into())],
        vec![Op::Children {
            children: vec![
                child("a", vec![Op::Dispatch(Json::str("x"))]),
                child("b", vec![Op::Wait("go".into())]),
            ],
            boundary: Boundary::SubtreeDrained,
            condition: Condition::Any,
        }],
        vec![
            Op::Child {
                deployment: w.deployment.reference().clone(),
                script: vec![Op::Checkpoint],
                key: "c".into(),
                budget: Budget::unlimited(),
            },
            Op::Dispatch(Json::str("after")),
        ],
    ];
    for ops in runs {
        let w = echo_world();
        let mut r = w.start(&ops, Budget::unlimited());
        r.run_to_idle();
        let head = w.head();
        if let Some(p) = head
            .processes()
            .iter()
            .find(|p| p.current_wait_id.is_some())
        {
            let id = p.id.clone();
            let _ = answer_current(&mut r, &head, &id, "signal:answer", "answer \u{7f}");
            r.run_to_idle();
        }
        for cut in r.acknowledged_cuts() {
            all.extend(
                TreeSnapshot::from_cut(&cut)
                    .expect("cut decodes")
                    .processes()
                    .iter()
                    .map(|p| (**p).clone()),
            );
        }
    }
    all
}

/// xorshift64*: a fixed seed, so every run checks the same variations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn number(&mut self) -> u64 {
        [0, 1, 9, 10, u64::from(u32::MAX), u64::MAX, self.next()][self.below(7) as usize]
    }
    fn text(&mut self) -> String {
        let pieces = [
            "plain", "\"", "\\", "\n", "\u{0}", "\u{1f}", "é", "😀", "\u{2028}", "/", " ",
        ];
        (0..self.below(6))
            .map(|_| pieces[self.below(pieces.len() as u64) as usize])
            .collect()
    }
    fn payload(&mut self) -> Payload {
        let value = match self.below(4) {
            0 => Json::str(self.text()),
            1 => Json::u64(self.number()),
            2 => crate::json::ObjectBuilder::new()
                .field("z", &self.text())
                .field("a", &self.number())
                .build(),
            _ => Json::Array(vec![
                Json::Null,
                Json::Bool(self.chance()),
                Json::str(self.text()),
            ]),
        };
        Payload::from_json(value).unwrap()
    }
    fn quota(&mut self) -> Quota {
        if self.chance() {
            Quota::Unlimited
        } else {
            Quota::Finite(self.number())
        }
    }
}

/// One seeded variation of `p` (fields changed independently; the result need not pass the
/// cut's validation: the writer must match the tree for any value).
fn vary(p: &Process, terminal: Option<&Finish>, rng: &mut Rng) -> Process {
    let mut v = p.clone();
    if rng.chance() {
        v.budget = Budget {
            steps: rng.quota(),
            effects: rng.quota(),
            signals: rng.quota(),
        };
    }
    if rng.chance() {
        v.allocated.steps = rng.number();
        v.allocated.signals = rng.number();
    }
    if rng.chance() {
        v.capabilities = CapabilitySet::from_names(
            &["keel.net", "a.b", "keel.fs.read"][..rng.below(4) as usize],
        )
        .unwrap();
    }
    if rng.chance() {
        v.committed_steps = rng.number();
        v.prepared_effects = rng.number();
        v.dropped_deltas = rng.number();
    }
    if rng.chance() {
        v.child_request_digest = if rng.chance() {
            Some(crate::json::Digest::of(&rng.next().to_le_bytes()))
        } else {
            None
        };
    }
    if rng.chance() {
        let effect = EffectId::derive(&v.id, rng.below(100) + 1, rng.below(4) as u32);
        v.current_wait_id = rng.chance().then(|| WaitId::of_effect(&effect));
    }
    if rng.chance() {
        let all = [
            Status::Running,
            Status::Waiting,
            Status::Paused,
            Status::Completed,
            Status::Failed,
            Status::Canceled,
            Status::TimedOut,
            Status::Killed,
        ];
        v.status = all[rng.below(all.len() as u64) as usize];
    }
    if rng.chance() {
        v.pending_control.kill = rng.chance().then(|| rng.text());
        v.pending_control.failure = rng
            .chance()
            .then(|| Failure::new(codes::STEP_FAILED, &rng.text()));
    }
    if let (true, Some(f)) = (rng.chance(), terminal) {
        let mut f = f.clone();
        f.output = rng.chance().then(|| rng.payload());
        v.finish = Some(f);
    }
    if rng.chance() {
        v.committed_state.payload = rng.payload();
    }
    if let Some(prepared) = v.prepared.as_mut() {
        if rng.chance() {
            prepared.candidate_state.payload = rng.payload();
        }
        for e in &mut prepared.effects {
            e.phase = match rng.below(4) {
                0 => EffectPhase::Planned,
                1 => EffectPhase::Pending,
                2 => EffectPhase::Unknown,
                _ => EffectPhase::Settled(crate::kernel::effect::Settlement {
                    status: if rng.chance() {
                        SettlementStatus::Succeeded
                    } else {
                        SettlementStatus::Failed
                    },
                    payload: rng.payload(),
                }),
            };
            e.diagnostic = rng
                .chance()
                .then(|| Failure::new(codes::STEP_FAILED, &rng.text()));
        }
    }
    v
}

#[test]
fn the_direct_writer_matches_the_tree_encoding_on_real_records() {
    let processes = real_processes();
    let count = |f: &dyn Fn(&Process) -> bool| processes.iter().filter(|p| f(p)).count();
    // The runs reach the shapes the writer has branches for.
    assert!(
        count(&|p| p.prepared.as_ref().is_some_and(|s| !s.effects.is_empty())) > 0,
        "prepared effects"
    );
    assert!(count(&|p| p.relation.parent_id.is_some()) > 0, "children");
    assert!(count(&|p| p.finish.is_some()) > 0, "finished");
    assert!(count(&|p| p.mailbox.cursor() > 0) > 0, "consumed records");
    assert!(count(&|p| p.current_wait_id.is_some()) > 0, "waiting");
    assert!(
        count(&|p| p.mailbox.is_compacted()) > 0,
        "compacted mailboxes"
    );
    assert!(count(&|p| !p.retired.is_empty()) > 0, "retired children");
    for p in &processes {
        assert_eq!(direct(p), oracle(p), "process {}", p.id);
    }
}

#[test]
fn the_direct_writer_matches_the_tree_encoding_on_seeded_variations() {
    let processes = real_processes();
    let terminal = processes.iter().find_map(|p| p.finish.clone());
    let mut rng = Rng(0x6b65_656c_5f77_7269);
    let mut checked = 0;
    for p in &processes {
        for _ in 0..24 {
            let v = vary(p, terminal.as_ref(), &mut rng);
            assert_eq!(
                direct(&v),
                oracle(&v),
                "variation of process {}: {v:?}",
                p.id
            );
            checked += 1;
        }
    }
    assert!(checked >= 24 * 20, "only {checked} variations");
}

/// `Process::clone_without_prepared` (finalization's candidate copy) equals a whole clone with
/// the prepared step removed, on the real records and seeded variations of every member.
#[test]
fn a_copy_without_the_prepared_step_keeps_every_other_member() {
    let processes = real_processes();
    let terminal = processes.iter().find_map(|p| p.finish.clone());
    let mut rng = Rng(0x636c_6f6e_655f_7072);
    let mut with_prepared = 0;
    for p in &processes {
        for v in std::iter::once(p.clone()).chain((0..8).map(|_| vary(p, terminal.as_ref(), &mut rng))) {
            with_prepared += usize::from(v.prepared.is_some());
            let mut expected = v.clone();
            expected.prepared = None;
            assert_eq!(v.clone_without_prepared(), expected, "process {}", v.id);
        }
    }
    assert!(with_prepared > 0, "some records hold a prepared step");
}

/// `EncodedProcess::encode` writes through one scratch buffer per thread: records encoded one
/// after another (largest and smallest alternating, so a short record follows a long one in
/// the same buffer) each get exactly their own bytes and size.
#[test]
fn encodings_through_the_shared_scratch_buffer_are_each_records_own_bytes() {
    let mut processes = real_processes();
    let terminal = processes.iter().find_map(|p| p.finish.clone());
    let mut rng = Rng(0x7363_7261_7463_6831);
    let variations: Vec<Process> = processes.iter().map(|p| vary(p, terminal.as_ref(), &mut rng)).collect();
    processes.extend(variations);
    processes.sort_by_key(|p| direct(p).len());
    let n = processes.len();
    let order = (0..n).map(|i| if i % 2 == 0 { n - 1 - i / 2 } else { i / 2 });
    for i in order {
        let p = &processes[i];
        let expected = direct(p);
        let encoded = crate::kernel::snapshot::EncodedProcess::encode(p);
        assert_eq!(encoded.bytes(), expected.as_bytes(), "process {}", p.id);
        assert_eq!(encoded.digest(), crate::json::Digest::of(expected.as_bytes()), "process {}", p.id);
        let segments: u64 = encoded.segments().iter().map(|r| r.len() as u64).sum();
        assert_eq!(encoded.size(), expected.len() as u64 + segments, "process {}", p.id);
    }
}
