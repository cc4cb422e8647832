//! The store-level conformance suite: every rule a committer
//! must keep that needs no Engine. Each scenario runs on a fresh committer from `make`. Every
//! successful commit is re-sent once (an identical retry must be acknowledged while current); a
//! failed call is never retried unless the retry is itself the point of the check.
//!
//! Cuts are synthetic but keel-shaped ([`sample_cut`]): records name (root, incarnation,
//! state), the digest is the tree digest, so a backend that keeps whole cuts and splits them
//! again (`TreeCut::from_whole`) reproduces an identical cut. Deltas ("delta rules") are
//! built with `TreeCut::delta_from` exactly as the kernel builds them.
//!
//! [`faults`] is the other half: the faults a durable store meets (reopen, a second writer, a
//! deleted lock, a takeover race, torn and damaged tails, a full disk, a failed sync, a foreign
//! file), run against every store through a fixture of its own.

use super::port::{
    Activation, Checkpoint, CheckpointKind, CommitError, Committer, EffectBoundary,
    EffectBoundaryKind, TreeCut,
};
use crate::json::Digest;
use crate::kernel::ids::{EffectId, IncarnationId, ProcessId};
use sha2::{Digest as _, Sha256};

pub mod faults;

/// Runs every scenario; the error names the scenario and the failed check.
pub async fn check_committer<C: Committer>(make: impl Fn() -> C) -> Result<(), String> {
    let fx = Fixture::new()?;
    macro_rules! run {
        ($($name:literal => $scenario:ident),* $(,)?) => {$(
            let committer = make();
            $scenario(&committer, &fx).await.map_err(|e| format!("{}: {e}", $name))?;
        )*};
    }
    run! {
        "start rules" => start_rules,
        "sequence rules" => sequence_rules,
        "same identity, different content" => content_conflicts,
        "historical replay" => historical_replay,
        "effect lifecycle" => effect_lifecycle,
        "effects across incarnations" => effects_across_incarnations,
        "activation fencing" => activation_fencing,
        "concurrent activation" => concurrent_activation,
        "load_tree" => load_tree,
        "delta rules" => delta_rules,
    }
    Ok(())
}

struct Fixture {
    root: ProcessId,
    other_root: ProcessId,
    i1: IncarnationId,
    i2: IncarnationId,
    i3: IncarnationId,
    i4: IncarnationId,
}

struct Effect {
    process_id: ProcessId,
    effect_id: EffectId,
    step_sequence: u64,
    batch_index: u32,
    digest: Digest,
}

impl Fixture {
    fn new() -> Result<Fixture, String> {
        let inc = |n: u8| IncarnationId::from_hex(&format!("{n:032x}")).map_err(|e| e.to_string());
        Ok(Fixture {
            root: ProcessId::parse("process:conformance-root").map_err(|e| e.to_string())?,
            other_root: ProcessId::parse("process:conformance-other").map_err(|e| e.to_string())?,
            i1: inc(1)?,
            i2: inc(2)?,
            i3: inc(3)?,
            i4: inc(4)?,
        })
    }

    fn cut(&self, incarnation: &IncarnationId, state: &str) -> TreeCut {
        self.cut_of(&self.root, incarnation, state)
    }

    fn cut_of(&self, root: &ProcessId, incarnation: &IncarnationId, state: &str) -> TreeCut {
        sample_cut(root, incarnation, &[(root.as_str(), state)])
    }

    fn effect(&self, step_sequence: u64, batch_index: u32) -> Effect {
        Effect {
            process_id: self.root.clone(),
            effect_id: EffectId::derive(&self.root, step_sequence, batch_index),
            step_sequence,
            batch_index,
            digest: sha256(format!("effect {step_sequence} {batch_index}").as_bytes()),
        }
    }
}

/// A small keel-shaped whole cut of `records` (key, state): each record is the canonical
/// object `{"process_id":key,"state":state}`. It survives `TreeCut::from_whole`, so stores that
/// keep whole cuts run this suite unchanged. Keys must be valid and distinct.
pub fn sample_cut(root: &ProcessId, incarnation: &IncarnationId, records: &[(&str, &str)]) -> TreeCut {
    use crate::json::ObjectBuilder;
    let entries = records
        .iter()
        .map(|(key, state)| {
            let record = ObjectBuilder::new().field("process_id", *key).field("state", *state).build();
            super::cut::CutEntry::new(*key, record.to_canonical_bytes())
        })
        .collect();
    let envelope = super::cut::CutEnvelope::keel(root, incarnation, &crate::json::Json::Null);
    TreeCut::new_unchecked(root.clone(), incarnation.clone(), envelope, entries)
}

fn sha256(bytes: &[u8]) -> Digest {
    Digest(Sha256::digest(bytes).into())
}

fn start(cut: &TreeCut) -> Checkpoint {
    Checkpoint { sequence: 1, kind: CheckpointKind::Start, previous_digest: None, cut: cut.clone() }
}

fn checkpoint(
    sequence: u64,
    kind: CheckpointKind,
    previous: &TreeCut,
    cut: &TreeCut,
) -> Checkpoint {
    Checkpoint { sequence, kind, previous_digest: Some(previous.digest), cut: cut.clone() }
}

fn progress(sequence: u64, previous: &TreeCut, cut: &TreeCut) -> Checkpoint {
    checkpoint(sequence, CheckpointKind::Progress, previous, cut)
}

fn boundary(
    sequence: u64,
    kind: EffectBoundaryKind,
    effect: &Effect,
    settlement: Option<&str>,
    previous: &TreeCut,
    cut: &TreeCut,
) -> EffectBoundary {
    EffectBoundary {
        sequence,
        kind,
        process_id: effect.process_id.clone(),
        effect_id: effect.effect_id.clone(),
        step_sequence: effect.step_sequence,
        batch_index: effect.batch_index,
        effect_digest: effect.digest,
        settlement_digest: settlement.map(|s| sha256(s.as_bytes())),
        previous_digest: previous.digest,
        cut: cut.clone(),
    }
}

fn activation(previous: &TreeCut, cut: &TreeCut) -> Activation {
    Activation {
        previous_incarnation: previous.incarnation.clone(),
        previous_digest: previous.digest,
        new_incarnation: cut.incarnation.clone(),
        cut: cut.clone(),
    }
}

#[derive(Clone, Copy)]
enum Req<'a> {
    Checkpoint(&'a Checkpoint),
    Effect(&'a EffectBoundary),
    Activation(&'a Activation),
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    Conflict,
    Fence,
    Invalid,
    /// Any typed rejection (where more than one typed answer is correct).
    Rejected,
}

async fn send<C: Committer>(c: &C, req: Req<'_>) -> Result<(), CommitError> {
    match req {
        Req::Checkpoint(x) => c.commit_checkpoint(x).await,
        Req::Effect(x) => c.commit_effect(x).await,
        Req::Activation(x) => c.activate_tree(x).await,
    }
}

/// Commits and re-sends once: both must be acknowledged.
async fn accept<C: Committer>(c: &C, req: Req<'_>, what: &str) -> Result<(), String> {
    send(c, req).await.map_err(|e| format!("{what}: expected success, got {e:?}"))?;
    send(c, req).await.map_err(|e| format!("{what}: identical retry while current failed: {e:?}"))
}

async fn reject<C: Committer>(
    c: &C,
    req: Req<'_>,
    expect: Expect,
    what: &str,
) -> Result<(), String> {
    let got = send(c, req).await;
    let ok = matches!(
        (&got, expect),
        (Err(CommitError::CommitConflict { .. }), Expect::Conflict | Expect::Rejected)
            | (Err(CommitError::TreeIncarnationConflict { .. }), Expect::Fence | Expect::Rejected)
            | (Err(CommitError::InvalidCommit { .. }), Expect::Invalid | Expect::Rejected)
    );
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: expected {expect:?}, got {got:?}"))
    }
}

async fn head_is<C: Committer>(
    c: &C,
    cut: &TreeCut,
    sequence: u64,
    what: &str,
) -> Result<(), String> {
    match c.load_tree(&cut.root_id).await {
        Ok(Some(head)) => {
            let whole = cut.resolve(None).ok();
            if !head.cut.same_cut(cut) || Some(&head.cut) != whole.as_ref() || !head.cut.is_whole() {
                Err(format!("{what}: head holds another cut"))
            } else if head.sequence != sequence {
                Err(format!("{what}: head sequence {} instead of {sequence}", head.sequence))
            } else {
                Ok(())
            }
        }
        Ok(None) => Err(format!("{what}: no head")),
        Err(e) => Err(format!("{what}: load failed: {e:?}")),
    }
}

async fn no_head<C: Committer>(c: &C, root: &ProcessId, what: &str) -> Result<(), String> {
    match c.load_tree(root).await {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err(format!("{what}: a head exists")),
        Err(e) => Err(format!("{what}: load failed: {e:?}")),
    }
}

async fn start_rules<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let p1 = fx.cut(&fx.i1, "progress");
    no_head(c, &fx.root, "before start").await?;

    let mut bad = start(&s0);
    bad.sequence = 2;
    reject(c, Req::Checkpoint(&bad), Expect::Invalid, "start at sequence 2").await?;
    let mut bad = start(&s0);
    bad.previous_digest = Some(p1.digest);
    reject(c, Req::Checkpoint(&bad), Expect::Invalid, "start with a previous digest").await?;
    let mut bad = progress(2, &s0, &p1);
    bad.previous_digest = None;
    reject(c, Req::Checkpoint(&bad), Expect::Invalid, "non-start without a previous digest")
        .await?;
    reject(c, Req::Checkpoint(&progress(2, &s0, &p1)), Expect::Fence, "advance without a head")
        .await?;
    let a = activation(&s0, &fx.cut(&fx.i2, "restored"));
    reject(c, Req::Activation(&a), Expect::Fence, "activation without a head").await?;
    no_head(c, &fx.root, "after rejected calls").await?;

    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    head_is(c, &s0, 1, "after start").await?;
    let other = fx.cut(&fx.i1, "another start");
    reject(c, Req::Checkpoint(&start(&other)), Expect::Conflict, "double start, same writer")
        .await?;
    let rival = fx.cut(&fx.i2, "start");
    reject(c, Req::Checkpoint(&start(&rival)), Expect::Fence, "start over an existing head")
        .await?;
    head_is(c, &s0, 1, "after rejected starts").await?;

    accept(c, Req::Checkpoint(&progress(2, &s0, &p1)), "advance").await?;
    reject(c, Req::Checkpoint(&start(&s0)), Expect::Conflict, "start retried after the head moved")
        .await?;
    head_is(c, &p1, 2, "end").await
}

async fn sequence_rules<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let p1 = fx.cut(&fx.i1, "progress 1");
    let p2 = fx.cut(&fx.i1, "progress 2");
    let elsewhere = fx.cut(&fx.i1, "never committed");
    let e = fx.effect(2, 0);
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;

    reject(c, Req::Checkpoint(&progress(3, &s0, &p1)), Expect::Fence, "sequence gap").await?;
    reject(c, Req::Checkpoint(&progress(u64::MAX, &s0, &p1)), Expect::Fence, "sequence u64::MAX")
        .await?;
    reject(c, Req::Checkpoint(&progress(0, &s0, &p1)), Expect::Rejected, "sequence 0 (wrap)")
        .await?;
    reject(
        c,
        Req::Checkpoint(&progress(1, &s0, &p1)),
        Expect::Rejected,
        "sequence equal to the head",
    )
    .await?;
    let stale = progress(2, &elsewhere, &p1);
    reject(c, Req::Checkpoint(&stale), Expect::Fence, "previous digest is not the head").await?;
    let same = progress(2, &s0, &s0);
    reject(c, Req::Checkpoint(&same), Expect::Invalid, "previous digest equals the new one")
        .await?;
    head_is(c, &s0, 1, "after rejected advances").await?;

    // Same identity as the rejected attempts: a failed call must have recorded no fact.
    accept(c, Req::Checkpoint(&progress(2, &s0, &p1)), "advance after rejections").await?;

    let gap = boundary(4, EffectBoundaryKind::Pending, &e, None, &p1, &p2);
    reject(c, Req::Effect(&gap), Expect::Fence, "effect boundary sequence gap").await?;
    let zero = boundary(0, EffectBoundaryKind::Pending, &e, None, &p1, &p2);
    reject(c, Req::Effect(&zero), Expect::Rejected, "effect boundary sequence 0").await?;
    let stale = boundary(3, EffectBoundaryKind::Pending, &e, None, &s0, &p2);
    reject(c, Req::Effect(&stale), Expect::Fence, "effect boundary on a stale head").await?;
    accept(
        c,
        Req::Effect(&boundary(3, EffectBoundaryKind::Pending, &e, None, &p1, &p2)),
        "pending",
    )
    .await?;
    // Checkpoints and boundaries share one sequence.
    let after = fx.cut(&fx.i1, "after pending");
    reject(c, Req::Checkpoint(&progress(3, &p2, &after)), Expect::Rejected, "sequence reused")
        .await?;
    accept(c, Req::Checkpoint(&progress(4, &p2, &after)), "checkpoint after boundary").await?;
    head_is(c, &after, 4, "end").await
}

async fn content_conflicts<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let p1 = fx.cut(&fx.i1, "progress");
    let p2 = fx.cut(&fx.i1, "pending");
    let e = fx.effect(1, 0);
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    let p = progress(2, &s0, &p1);
    accept(c, Req::Checkpoint(&p), "progress").await?;
    // The head equals the cut and the sequence matches, but the content differs.
    let mut other_kind = p.clone();
    other_kind.kind = CheckpointKind::Parked;
    reject(c, Req::Checkpoint(&other_kind), Expect::Conflict, "current checkpoint, other kind")
        .await?;

    let b = boundary(3, EffectBoundaryKind::Settled, &e, Some("ok"), &p1, &p2);
    accept(c, Req::Effect(&b), "settled").await?;
    let mut other = b.clone();
    other.settlement_digest = Some(sha256(b"different"));
    reject(c, Req::Effect(&other), Expect::Conflict, "current boundary, other settlement").await?;
    let mut other = b.clone();
    other.effect_digest = sha256(b"another effect");
    reject(c, Req::Effect(&other), Expect::Conflict, "current boundary, other effect").await?;

    let a2 = fx.cut(&fx.i2, "restored");
    let a = activation(&p2, &a2);
    accept(c, Req::Activation(&a), "activation").await?;
    let mut other = a.clone();
    other.previous_digest = s0.digest;
    reject(c, Req::Activation(&other), Expect::Conflict, "current activation, other previous")
        .await?;
    head_is(c, &a2, 0, "end").await
}

async fn historical_replay<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let paused = fx.cut(&fx.i1, "paused");
    let running = fx.cut(&fx.i1, "running");
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    let park = |seq, prev: &TreeCut| checkpoint(seq, CheckpointKind::Parked, prev, &paused);
    let resume = |seq| progress(seq, &paused, &running);
    let history = [park(2, &s0), resume(3), park(4, &running), resume(5), park(6, &running)];
    for (i, cp) in history.iter().enumerate() {
        accept(c, Req::Checkpoint(cp), &format!("cycle commit {}", i + 2)).await?;
    }
    // Sequence 4 and 6 carry identical content and the head holds that very cut: only the
    // sequence tells the replay apart.
    for cp in &history[..4] {
        let what = format!("replay of sequence {}", cp.sequence);
        reject(c, Req::Checkpoint(cp), Expect::Conflict, &what).await?;
    }
    reject(c, Req::Checkpoint(&start(&s0)), Expect::Conflict, "replay of the start").await?;
    accept(c, Req::Checkpoint(&history[4]), "retry of the current head").await?;
    head_is(c, &paused, 6, "end").await
}

async fn effect_lifecycle<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let pending = fx.cut(&fx.i1, "pending");
    let unknown = fx.cut(&fx.i1, "unknown");
    let resolved = fx.cut(&fx.i1, "resolved");
    let terminal = fx.cut(&fx.i1, "terminal");
    let e = fx.effect(1, 0);
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;

    let mut bad = boundary(2, EffectBoundaryKind::Pending, &e, Some("x"), &s0, &pending);
    reject(c, Req::Effect(&bad), Expect::Invalid, "pending with a settlement").await?;
    bad = boundary(2, EffectBoundaryKind::Settled, &e, None, &s0, &pending);
    reject(c, Req::Effect(&bad), Expect::Invalid, "settled without a settlement").await?;
    bad = boundary(2, EffectBoundaryKind::Resolved, &e, None, &s0, &pending);
    reject(c, Req::Effect(&bad), Expect::Invalid, "resolved without a settlement").await?;
    bad = boundary(2, EffectBoundaryKind::Pending, &e, None, &s0, &pending);
    bad.effect_id = EffectId::derive(&fx.root, 9, 9);
    reject(c, Req::Effect(&bad), Expect::Invalid, "effect id not derived from coordinates").await?;
    bad = boundary(2, EffectBoundaryKind::Pending, &e, None, &s0, &s0);
    reject(c, Req::Effect(&bad), Expect::Invalid, "previous digest equals the new one").await?;
    head_is(c, &s0, 1, "after invalid boundaries").await?;

    let b_pending = boundary(2, EffectBoundaryKind::Pending, &e, None, &s0, &pending);
    let b_settled =
        boundary(3, EffectBoundaryKind::Settled, &e, Some("unknown"), &pending, &unknown);
    let b_resolved = boundary(4, EffectBoundaryKind::Resolved, &e, Some("ok"), &unknown, &resolved);
    accept(c, Req::Effect(&b_pending), "pending").await?;
    accept(c, Req::Effect(&b_settled), "settled (unknown)").await?;
    accept(c, Req::Effect(&b_resolved), "resolved").await?;
    let done = checkpoint(5, CheckpointKind::Terminal, &resolved, &terminal);
    accept(c, Req::Checkpoint(&done), "terminal").await?;

    for (b, what) in [
        (&b_pending, "stale pending"),
        (&b_settled, "stale settled"),
        (&b_resolved, "stale resolved"),
    ] {
        reject(c, Req::Effect(b), Expect::Conflict, what).await?;
    }
    // A competing history: a second settled / resolved for the same Effect.
    let later = fx.cut(&fx.i1, "competing");
    let second = boundary(6, EffectBoundaryKind::Settled, &e, Some("other"), &terminal, &later);
    reject(c, Req::Effect(&second), Expect::Conflict, "second settled").await?;
    let second = boundary(6, EffectBoundaryKind::Resolved, &e, Some("other"), &terminal, &later);
    reject(c, Req::Effect(&second), Expect::Conflict, "second resolved").await?;
    let second = boundary(6, EffectBoundaryKind::Pending, &e, None, &terminal, &later);
    reject(c, Req::Effect(&second), Expect::Conflict, "second pending").await?;
    head_is(c, &terminal, 5, "after the competing history").await?;

    // Another Effect has its own boundary identities.
    let next = boundary(6, EffectBoundaryKind::Pending, &fx.effect(1, 1), None, &terminal, &later);
    accept(c, Req::Effect(&next), "pending of another effect").await?;
    head_is(c, &later, 6, "end").await
}

async fn effects_across_incarnations<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let p1 = fx.cut(&fx.i1, "pending");
    let p2 = fx.cut(&fx.i2, "pending");
    let u2 = fx.cut(&fx.i2, "unknown");
    let u3 = fx.cut(&fx.i3, "unknown");
    let x3 = fx.cut(&fx.i3, "again");
    let r3 = fx.cut(&fx.i3, "resolved");
    let e = fx.effect(1, 0);
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    accept(
        c,
        Req::Effect(&boundary(2, EffectBoundaryKind::Pending, &e, None, &s0, &p1)),
        "pending",
    )
    .await?;
    accept(c, Req::Activation(&activation(&p1, &p2)), "first restore").await?;
    // The restored pending Effect becomes Unknown under the new writer.
    let settled = boundary(1, EffectBoundaryKind::Settled, &e, Some("unknown"), &p2, &u2);
    accept(c, Req::Effect(&settled), "settled by the second writer").await?;
    accept(c, Req::Activation(&activation(&u2, &u3)), "second restore").await?;

    reject(c, Req::Effect(&settled), Expect::Fence, "previous writer re-sends its settled").await?;
    let again = boundary(1, EffectBoundaryKind::Settled, &e, Some("definite"), &u3, &x3);
    reject(c, Req::Effect(&again), Expect::Conflict, "second settled in a later incarnation")
        .await?;
    let again = boundary(1, EffectBoundaryKind::Pending, &e, None, &u3, &x3);
    reject(c, Req::Effect(&again), Expect::Conflict, "second pending in a later incarnation")
        .await?;
    head_is(c, &u3, 0, "after rejected boundaries").await?;
    let resolved = boundary(1, EffectBoundaryKind::Resolved, &e, Some("definite"), &u3, &r3);
    accept(c, Req::Effect(&resolved), "resolved by the third writer").await?;
    head_is(c, &r3, 1, "end").await
}

async fn activation_fencing<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let p = fx.cut(&fx.i1, "progress");
    let q = fx.cut(&fx.i1, "old writer continues");
    let a2 = fx.cut(&fx.i2, "progress");
    let b2 = fx.cut(&fx.i2, "new writer continues");
    let e = fx.effect(3, 0);
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    let old_last = progress(2, &s0, &p);
    accept(c, Req::Checkpoint(&old_last), "progress").await?;

    let mut bad = activation(&p, &a2);
    bad.cut = fx.cut(&fx.i3, "progress");
    reject(c, Req::Activation(&bad), Expect::Invalid, "cut not stamped with the new incarnation")
        .await?;
    let same_writer = activation(&p, &fx.cut(&fx.i1, "restamped"));
    reject(c, Req::Activation(&same_writer), Expect::Invalid, "activation keeps the writer")
        .await?;
    let stale = activation(&s0, &a2);
    reject(c, Req::Activation(&stale), Expect::Fence, "activation from a stale digest").await?;
    let mut wrong_writer = activation(&p, &a2);
    wrong_writer.previous_incarnation = fx.i4.clone();
    reject(c, Req::Activation(&wrong_writer), Expect::Fence, "activation from another writer")
        .await?;
    head_is(c, &p, 2, "after rejected activations").await?;

    let act = activation(&p, &a2);
    accept(c, Req::Activation(&act), "activation").await?;
    head_is(c, &a2, 0, "after activation").await?;

    reject(c, Req::Checkpoint(&old_last), Expect::Fence, "old writer re-sends its last commit")
        .await?;
    reject(c, Req::Checkpoint(&progress(3, &p, &q)), Expect::Fence, "old writer advances").await?;
    // An old writer that learned the new head still does not own it.
    let chasing = boundary(1, EffectBoundaryKind::Pending, &e, None, &a2, &q);
    reject(c, Req::Effect(&chasing), Expect::Fence, "old writer chases the new head").await?;
    let mut chasing = activation(&a2, &fx.cut(&fx.i3, "hijack"));
    chasing.previous_incarnation = fx.i1.clone();
    reject(c, Req::Activation(&chasing), Expect::Fence, "activation naming the old writer").await?;
    head_is(c, &a2, 0, "after fenced commits").await?;

    reject(
        c,
        Req::Checkpoint(&progress(2, &a2, &b2)),
        Expect::Fence,
        "new writer skips sequence 1",
    )
    .await?;
    accept(c, Req::Checkpoint(&progress(1, &a2, &b2)), "new writer's first commit").await?;
    reject(c, Req::Activation(&act), Expect::Conflict, "activation replayed after the head moved")
        .await?;
    head_is(c, &b2, 1, "end").await
}

async fn concurrent_activation<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let s0 = fx.cut(&fx.i1, "start");
    let c3 = fx.cut(&fx.i3, "start");
    let c4 = fx.cut(&fx.i4, "start");
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    let (a3, a4) = (activation(&s0, &c3), activation(&s0, &c4));
    let (r3, r4) = futures::future::join(c.activate_tree(&a3), c.activate_tree(&a4)).await;
    let (winner, loser, loser_cut) = match (&r3, &r4) {
        (Ok(()), Err(CommitError::TreeIncarnationConflict { .. })) => (&a3, &a4, &c4),
        (Err(CommitError::TreeIncarnationConflict { .. }), Ok(())) => (&a4, &a3, &c3),
        _ => {
            return Err(format!(
                "expected exactly one winner and one fencing loser, got {r3:?} and {r4:?}"
            ))
        }
    };
    accept(c, Req::Activation(winner), "winner retries").await?;
    reject(c, Req::Activation(loser), Expect::Fence, "loser retries").await?;
    let after = fx.cut(&loser.new_incarnation, "after");
    reject(c, Req::Checkpoint(&progress(1, loser_cut, &after)), Expect::Fence, "loser commits")
        .await?;
    head_is(c, &winner.cut, 0, "end").await
}

async fn load_tree<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    no_head(c, &fx.root, "unknown root").await?;
    // Text that needs escaping, and several records: reloaded records equal the sent ones.
    let s0 = sample_cut(
        &fx.root,
        &fx.i1,
        &[(fx.root.as_str(), "quote \" backslash \\ nul \u{0} é"), ("process:conformance-child", "child")],
    );
    let o0 = fx.cut_of(&fx.other_root, &fx.i1, "start");
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    head_is(c, &s0, 1, "binary cut round trip").await?;
    no_head(c, &fx.other_root, "other root before its start").await?;
    // The same incarnation and sequence under another root is another identity.
    accept(c, Req::Checkpoint(&start(&o0)), "start of another root").await?;
    let p = fx.cut(&fx.i1, "progress");
    accept(c, Req::Checkpoint(&progress(2, &s0, &p)), "advance the first root").await?;
    head_is(c, &o0, 1, "other root untouched").await?;
    head_is(c, &p, 2, "first root").await?;
    // Loads take no ownership: the writer continues.
    let q = fx.cut(&fx.i1, "after load");
    accept(c, Req::Checkpoint(&progress(3, &p, &q)), "advance after load").await?;
    head_is(c, &q, 3, "end").await
}

/// Deltas: a delta advances the head to the whole cut it names; a retry of it is acknowledged
/// while current; a delta keeping a record the head lacks (or holds with another digest) is
/// refused with `MissingRecord` and stores nothing; a start cannot be a delta.
async fn delta_rules<C: Committer>(c: &C, fx: &Fixture) -> Result<(), String> {
    let (root, i1) = (&fx.root, &fx.i1);
    let child = "process:conformance-child";
    let s0 = sample_cut(root, i1, &[(root.as_str(), "a"), (child, "a")]);
    let ghost = sample_cut(root, i1, &[("process:conformance-ghost", "g")]);
    let lacking = sample_cut(root, i1, &[(root.as_str(), "a"), ("process:conformance-ghost", "g")]).delta_from(&ghost);
    let got = c.commit_checkpoint(&start(&lacking)).await;
    if !matches!(got, Err(CommitError::MissingRecord { .. })) {
        return Err(format!("a start delta: expected MissingRecord, got {got:?}"));
    }
    no_head(c, root, "after a refused start delta").await?;
    accept(c, Req::Checkpoint(&start(&s0)), "start").await?;
    let s1 = sample_cut(root, i1, &[(root.as_str(), "b"), (child, "a")]);
    let d1 = s1.delta_from(&s0);
    if d1.is_whole() || d1.carried().count() != 1 {
        return Err("the delta should carry exactly the changed record".into());
    }
    accept(c, Req::Checkpoint(&progress(2, &s0, &d1)), "advance by a delta").await?;
    head_is(c, &s1, 2, "delta resolved into the whole cut").await?;
    // Keeps the child "as in s0", but names a digest the head does not hold for it.
    let s2 = sample_cut(root, i1, &[(root.as_str(), "c"), (child, "z")]);
    let stale = s2.delta_from(&sample_cut(root, i1, &[(root.as_str(), "x"), (child, "z")]));
    let got = c.commit_checkpoint(&progress(3, &s1, &stale)).await;
    if !matches!(&got, Err(CommitError::MissingRecord { key, .. }) if key == child) {
        return Err(format!("a delta keeping an unknown record: expected MissingRecord, got {got:?}"));
    }
    head_is(c, &s1, 2, "nothing stored by a refused delta").await?;
    let e = fx.effect(3, 0);
    let s3 = sample_cut(root, i1, &[(root.as_str(), "c"), (child, "b")]);
    let b = boundary(3, EffectBoundaryKind::Pending, &e, None, &s1, &s3.delta_from(&s1));
    accept(c, Req::Effect(&b), "effect boundary by a delta").await?;
    head_is(c, &s3, 3, "effect delta resolved").await?;
    let a1 = sample_cut(root, &fx.i2, &[(root.as_str(), "c"), (child, "b")]);
    accept(c, Req::Activation(&activation(&s3, &a1.delta_from(&s3))), "activation by a delta").await?;
    head_is(c, &a1, 0, "activation delta resolved").await
}
