//! Chained commits (`owner::chain`): an owner that sends several boundaries as one commit
//! commits exactly the boundaries of one that sends them one by one, in fewer commits, and a
//! crash at any of those boundaries restores to what the unchained owner restores to.

use super::*;
use crate::kernel::commit::{CommitError, CommitRequest, Fault, FaultyCommitter};
use crate::kernel::status::Status;

/// A tool loop in miniature: a dispatch (the model), a child that dispatches (the tool), the
/// next dispatch, a second tool child, a last dispatch.
fn ops(w: &World) -> Vec<Op> {
    let d = w.deployment.reference().clone();
    let tool = |key: &str| Op::Child {
        deployment: d.clone(),
        script: vec![Op::Dispatch(Json::str(format!("tool-{key}")))],
        key: key.into(),
        budget: Budget::unlimited(),
    };
    vec![
        Op::Dispatch(Json::str("model-1")),
        tool("a"),
        Op::Dispatch(Json::str("model-2")),
        tool("b"),
        Op::Dispatch(Json::str("model-3")),
    ]
}

fn start(w: &World, committer: Arc<dyn Committer>, chained: bool) -> DirectRunner {
    let owner = Owner::start(
        w.resolver.clone(),
        w.deployment.clone(),
        script_input(&ops(w)),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        config(Budget::unlimited()),
        now(),
    )
    .expect("start");
    DirectRunner::with_chains(owner, committer, now(), chained)
}

/// What the store holds for the tree: every installed commit (identity, sequence, cut).
fn history(w: &World) -> Vec<(String, u64, crate::json::Digest)> {
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    w.committer.history(&root).into_iter().map(|c| (c.identity, c.sequence, c.cut_digest)).collect()
}

#[test]
fn a_chaining_owner_commits_the_same_boundaries_in_fewer_commits() {
    let plain = echo_world();
    let mut a = start(&plain, plain.committer.clone(), false);
    a.run_to_idle();
    let chained = echo_world();
    let mut b = start(&chained, chained.committer.clone(), true);
    b.run_to_idle();
    assert_eq!(root_result(&a).unwrap().status(), Status::Completed);
    assert_eq!(root_result(&b).unwrap().status(), Status::Completed);
    assert_eq!(root_result(&a).unwrap().output, root_result(&b).unwrap().output);
    assert_eq!(history(&plain), history(&chained), "the same boundaries, in the same order, with the same cuts");
    assert_eq!((plain.dispatches(), chained.dispatches()), (5, 5), "three model calls, two tools");
    // Every chain ends at its only pending boundary, if it has one.
    for range in &b.chains {
        let chain = &b.commits[range.clone()];
        let pending_at: Vec<usize> = chain
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| matches!(r, CommitRequest::Effect(e) if e.kind == crate::kernel::commit::EffectBoundaryKind::Pending))
            .map(|(i, _)| i)
            .collect();
        assert!(pending_at.iter().all(|&i| i == chain.len() - 1), "a pending boundary inside a chain: {pending_at:?}");
    }
    let sent = |r: &DirectRunner| r.commits.len() - r.chains.iter().map(|c| c.len() - 1).sum::<usize>();
    // Per tool round, unchained: model pending, model settled, child start, tool pending,
    // tool settled; chained: [model settled, child start, tool pending], [tool settled, model
    // pending].
    assert_eq!(a.commits.len(), b.commits.len());
    assert!(sent(&b) + 5 <= sent(&a), "chains save commits: {} vs {}", sent(&b), sent(&a));
    assert!(b.chains.iter().any(|c| c.len() >= 3), "a chain carries settled, child start and pending: {:?}", b.chains);
    plain.check(&a);
    chained.check(&b);
}

/// The store's history and the dispatch count after a crash at the commit of `sequence`
/// (`fault`), a restore from what the store kept, and a run to rest.
fn crash_and_restore(chained: bool, sequence: u64, fault: fn() -> Fault) -> (Vec<(String, u64, crate::json::Digest)>, u64, Option<Status>) {
    let w = echo_world();
    let faulty = Arc::new(FaultyCommitter::new(w.committer.clone()));
    let mut fired = false;
    faulty.set_fault_plan(Box::new(move |call| {
        if !fired && call.sequence == Some(sequence) && call.kind != crate::kernel::commit::CommitCallKind::Activation {
            fired = true;
            return fault();
        }
        Fault::Pass
    }));
    let mut dead = start(&w, faulty as Arc<dyn Committer>, chained);
    dead.run_to_idle();
    if dead.owner.stopped().is_none() {
        return (history(&w), w.dispatches(), root_result(&dead).map(|r| r.status()));
    }
    let owner = Owner::restore(w.resolver.clone(), w.deployment.clone(), &w.head(), IncarnationId::from_hex(&hex(300)).unwrap(), now())
        .expect("the head restores");
    let mut r = DirectRunner::with_chains(owner, w.committer.clone() as Arc<dyn Committer>, now(), chained);
    r.run_to_idle();
    w.check(&r);
    (history(&w), w.dispatches(), root_result(&r).map(|r| r.status()))
}

#[test]
fn a_crash_at_any_chained_boundary_restores_like_the_unchained_run() {
    let w = echo_world();
    let mut r = start(&w, w.committer.clone(), true);
    r.run_to_idle();
    let last = history(&w).last().map(|(_, s, _)| *s).unwrap();
    let mut inside_chains = 0;
    let mut completed = 0;
    for sequence in 2..=last {
        for fault in [(|| Fault::FailBefore) as fn() -> Fault, || Fault::CrashAfter] {
            let plain = crash_and_restore(false, sequence, fault);
            let chained = crash_and_restore(true, sequence, fault);
            assert_eq!(plain, chained, "crash {:?} at sequence {sequence}", fault());
            // A pending Effect restored without a same-identity replay policy becomes Unknown
            // and waits for the host; the other crash points run to completion.
            completed += usize::from(plain.2 == Some(Status::Completed));
        }
        // Boundaries that are not the last of their chain: a store that installs a chain
        // one commit at a time can leave one of them as the head.
        let at = r.commits.iter().position(|(c, _)| c.sequence() == sequence).unwrap();
        inside_chains += usize::from(r.chains.iter().any(|c| c.contains(&at) && at + 1 < c.end));
    }
    assert!(inside_chains >= 4, "crashes inside chains were exercised: {inside_chains}");
    assert!(completed >= 4, "restored runs completed: {completed}");
}

#[test]
fn stores_install_a_chain_whole_or_not_at_all() {
    use crate::kernel::commit::{FileCommitter, MemoryCommitter};
    let w = echo_world();
    let mut r = start(&w, w.committer.clone(), true);
    r.run_to_idle();
    let groups: Vec<Vec<CommitRequest>> = {
        let mut out = Vec::new();
        let mut at = 0;
        while at < r.commits.len() {
            let end = r.chains.iter().find(|c| c.start == at).map_or(at + 1, |c| c.end);
            out.push(r.commits[at..end].iter().map(|(c, _)| c.clone()).collect());
            at = end;
        }
        out
    };
    let root = ProcessId::root_from_hex(&hex(1)).unwrap();
    let dir = std::env::temp_dir().join(format!("keel-chain-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = FileCommitter::open(&dir).unwrap();
    let memory = MemoryCommitter::new();
    let stores: [&dyn Committer; 2] = [&memory, &file];
    let mut refusals = 0;
    for store in stores {
        for group in &groups {
            if let [first, second, ..] = group.as_slice() {
                // A chain whose later commit is refused installs nothing, not even the first.
                if let Some(i) = (1..group.len()).rev().find(|&i| matches!(group[i], CommitRequest::Effect(_))) {
                    let mut broken = group[..=i].to_vec();
                    if let CommitRequest::Effect(b) = &mut broken[i] {
                        b.settlement_digest = match b.kind {
                            crate::kernel::commit::EffectBoundaryKind::Pending => Some(crate::json::Digest::of(b"x")),
                            _ => None,
                        };
                    }
                    let before = futures::executor::block_on(store.load_tree(&root)).unwrap().map(|h| h.sequence);
                    let refused = futures::executor::block_on(store.commit_chain(&broken));
                    assert!(matches!(refused, Err(CommitError::InvalidCommit { .. })), "{refused:?}");
                    let after = futures::executor::block_on(store.load_tree(&root)).unwrap().map(|h| h.sequence);
                    assert_eq!(before, after, "nothing of a refused chain is installed");
                    refusals += 1;
                }
                // Out of order is refused before any decision.
                let swapped = [second.clone(), first.clone()];
                assert!(futures::executor::block_on(store.commit_chain(&swapped)).is_err());
                futures::executor::block_on(store.commit_chain(group)).expect("the chain commits");
                // An identical retry while its last commit is the head is acknowledged.
                futures::executor::block_on(store.commit_chain(group)).expect("an identical retry");
            } else {
                futures::executor::block_on(crate::kernel::direct::commit(store, &group[0])).expect("the commit");
            }
        }
        let head = futures::executor::block_on(store.load_tree(&root)).unwrap().unwrap();
        assert_eq!(head.cut.digest, w.head().digest(), "the store holds the run's last head");
    }
    assert!(refusals >= 4, "refused chains were tried: {refusals}");
    assert_eq!(file.stats().syncs, groups.len() as u64, "one sync per chain");
    assert_eq!(memory.history(&root).len(), r.commits.len(), "each boundary installed as its own commit");
    drop(file);
    let reopened = FileCommitter::open(&dir).unwrap();
    assert_eq!(reopened.history(&root), memory.history(&root), "the log replays every chained commit");
    drop(reopened);
    let _ = std::fs::remove_dir_all(&dir);
}
