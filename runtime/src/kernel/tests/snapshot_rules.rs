//! Snapshot encoding and validation: canonical bytes, digest, strict rejection.

use super::*;

fn finished_head() -> TreeSnapshot {
    let w = echo_world();
    let mut r = w.start(&[Op::Dispatch(Json::str("x"))], Budget::unlimited());
    r.run_to_idle();
    w.check(&r);
    w.head()
}

#[test]
fn snapshot_round_trip_is_byte_stable_and_digest_is_over_canonical_bytes() {
    let s = finished_head();
    let again = TreeSnapshot::decode(s.bytes()).unwrap();
    assert_eq!(again, s);
    assert_eq!(again.bytes(), s.bytes());
    assert_eq!(s.digest(), crate::kernel::commit::TreeCut::from_whole(s.bytes()).unwrap().digest);
}

#[test]
fn non_canonical_or_tampered_snapshots_are_rejected() {
    let s = finished_head();
    let text = String::from_utf8(s.bytes().to_vec()).unwrap();
    // Whitespace makes it non-canonical.
    let spaced = format!(" {text}");
    assert!(TreeSnapshot::decode(spaced.as_bytes()).is_err());
    // An unknown member anywhere is rejected.
    let extra = text.replacen("{\"incarnation_id\"", "{\"extra\":1,\"incarnation_id\"", 1);
    assert!(TreeSnapshot::decode(extra.as_bytes()).is_err());
    // A status that contradicts the termination is rejected.
    let bad = text.replace("\"status\":\"completed\"", "\"status\":\"running\"");
    assert!(TreeSnapshot::decode(bad.as_bytes()).is_err());
    // Truncation is a typed error, never a panic.
    for cut in [1, text.len() / 2, text.len() - 1] {
        assert!(TreeSnapshot::decode(&text.as_bytes()[..cut]).is_err());
    }
}

#[test]
fn a_waiting_process_without_an_open_wait_is_rejected() {
    let w = echo_world();
    let mut r = w.start(&[Op::Wait("k".into())], Budget::unlimited());
    r.run_to_idle();
    w.check(&r);
    let text = String::from_utf8(w.head().bytes().to_vec()).unwrap();
    assert!(text.contains("\"current_wait_id\""));
    let start = text.find(",\"current_wait_id\":\"").unwrap();
    let end = text[start + 20..].find('"').unwrap() + start + 21;
    let without = format!("{}{}", &text[..start], &text[end..]);
    assert!(TreeSnapshot::decode(without.as_bytes()).is_err(), "waiting requires a current wait");
}

#[test]
fn a_cut_over_its_byte_limits_is_rejected() {
    let s = finished_head();
    let len = s.bytes().len() as u64;
    let with = |limits: TreeLimits| {
        TreeSnapshot::build_unchecked_for_tests(s.root_id.clone(), s.incarnation.clone(), limits, s.processes().iter().map(|p| (**p).clone()).collect::<Vec<_>>(), s.residues().iter().map(|r| (**r).clone()).collect())
    };
    let fits = with(TreeLimits::default().with_max_snapshot_bytes(crate::kernel::resource::Quota::Finite(len)));
    assert!(TreeSnapshot::decode(fits.bytes()).is_ok(), "a cut exactly at the limit is valid");
    let tree = with(TreeLimits::default().with_max_snapshot_bytes(crate::kernel::resource::Quota::Finite(len / 2)));
    assert!(TreeSnapshot::decode(tree.bytes()).is_err(), "tree bytes over max_snapshot_bytes");
    let per = with(TreeLimits::default().with_max_process_snapshot_bytes(crate::kernel::resource::Quota::Finite(64)));
    assert!(TreeSnapshot::decode(per.bytes()).is_err(), "process bytes over max_process_snapshot_bytes");
}

fn small_tree() -> crate::kernel::owner::RootConfig {
    let limits = TreeLimits::default().with_max_snapshot_bytes(crate::kernel::resource::Quota::Finite(4096));
    crate::kernel::owner::RootConfig { budget: Budget::unlimited(), capabilities: CapabilitySet::empty(), limits }
}

#[test]
fn an_oversized_settlement_stops_the_writer_instead_of_committing_the_cut() {
    // Dispatcher payload sizes are checked when they arrive; an oversized
    // settlement stops the writer. The pending cut fits; the settled one would not.
    let w = world(Arc::new(|_| ok_settlement(&"x".repeat(8192))));
    let mut r = w.start_with(&[Op::Dispatch(Json::str("small"))], small_tree());
    r.run_to_idle();
    for cut in r.acknowledged_cuts() {
        let len = cut.whole_len().unwrap();
        assert!(len <= 4096, "cut of {len} bytes acknowledged");
    }
    let names: Vec<&str> = r.commits.iter().map(|(c, _)| c.boundary_name()).collect();
    assert_eq!(names, ["start", "pending"], "the settled cut is never sent");
    assert!(stopped(&r), "the writer stops with a RuntimeError");
    assert!(root_result(&r).is_none());
    assert_eq!(w.head().root().prepared.as_ref().unwrap().effects[0].phase, crate::kernel::effect::EffectPhase::Pending);
    w.check(&r);
}

#[test]
fn a_root_that_does_not_fit_its_byte_limit_is_not_started() {
    let w = echo_world();
    let started = Owner::start(
        w.resolver.clone(),
        w.deployment.clone(),
        script_input(&[Op::Dispatch(Json::str("x".repeat(8192)))]),
        ProcessId::root_from_hex(&hex(1)).unwrap(),
        IncarnationId::from_hex(&hex(100)).unwrap(),
        small_tree(),
        now(),
    );
    assert!(matches!(started, Err(crate::kernel::owner::StartError::Snapshot(_))), "{:?}", started.err());
}

/// The reusing decoder gives the whole decoder's verdict on every head of a run with
/// children, waits and retirements, and on heads whose records were tampered with.
#[test]
fn decoding_a_head_reusing_the_previous_one_matches_a_whole_decode() {
    use crate::kernel::commit::{CutEntry, TreeCut};
    let cuts = super::children_run_cuts();
    assert!(cuts.len() > 4, "a run of several heads");
    let (mut reused_any, mut reused_residue) = (false, false);
    decode_heads_both_ways(&cuts, |p, reusing| {
        reused_any |= p.encoded().iter().any(|e| reusing.encoded().iter().any(|n| std::sync::Arc::ptr_eq(e, n)));
        let residues = |s: &TreeSnapshot| s.residues_encoded().to_vec();
        reused_residue |= residues(p).iter().any(|e| residues(reusing).iter().any(|n| std::sync::Arc::ptr_eq(e, n)));
    });
    assert!(reused_any, "unchanged records were reused, not decoded again");
    assert!(reused_residue, "residue records were reused, not decoded again");

    // Tampered records: the verdict is the whole decoder's.
    let widest = (1..cuts.len()).max_by_key(|i| cuts[*i].entries().len()).unwrap();
    assert!(cuts[widest].entries().len() >= 3, "the root and its two children");
    let (last, before) = (&cuts[widest], &cuts[widest - 1]);
    let before = TreeSnapshot::from_cut(before).unwrap();
    let with_record = |i: usize, bytes: Vec<u8>| {
        let mut entries: Vec<CutEntry> = last.entries().to_vec();
        entries[i] = CutEntry::new(entries[i].key().to_owned(), bytes);
        TreeCut::new(last.root_id.clone(), last.incarnation.clone(), last.envelope().clone(), entries).unwrap()
    };
    let record = |i: usize| String::from_utf8(last.entries()[i].bytes().unwrap().to_vec()).unwrap();
    let spaced = with_record(0, format!(" {}", record(0)).into_bytes());
    let unknown = with_record(0, record(0).replacen('{', "{\"extra\":1,", 1).into_bytes());
    let not_json = with_record(0, b"{".to_vec());
    let mut swapped: Vec<CutEntry> = last.entries().to_vec();
    swapped.swap(0, 1);
    let swapped = TreeCut::new(last.root_id.clone(), last.incarnation.clone(), last.envelope().clone(), swapped).unwrap();
    for tampered in [spaced, unknown, not_json, swapped] {
        let whole = TreeSnapshot::decode(&tampered.bytes().unwrap());
        let reusing = TreeSnapshot::decode_reusing(&tampered, Some(&before));
        assert!(whole.is_err(), "the whole decoder refuses the tampered cut");
        assert_eq!(reusing, whole);
    }
}
