//! Mailbox rules. Every rejection rule has a test that fails if the rule breaks.
//! These tests build Payloads and Digests, so they need the json module's bodies.

use super::*;
use crate::json::{Digest, FromJson, Json, Payload, ToJson};
use crate::kernel::ids::EffectId;
use crate::kernel::signal::{SettlementStatus, SignalRequest, SignalSource};

// ---- fixtures --------------------------------------------------------------------------------

fn p(text: &str) -> Payload {
    Payload::from_json(Json::str(text)).unwrap()
}
fn sid(text: &str) -> SignalId {
    SignalId::parse(text).unwrap()
}
fn effect(n: u32) -> EffectId {
    EffectId::parse(&format!("effect:e{n}")).unwrap()
}
fn wait(n: u32) -> WaitId {
    WaitId::of_effect(&effect(n))
}
fn key(text: &str) -> WaitKey {
    WaitKey::parse(text).unwrap()
}
fn req(id: &str, wait_id: Option<WaitId>, payload: &str) -> SignalRequest {
    SignalRequest::new(sid(id), wait_id, p(payload)).unwrap()
}
fn ext_opening(n: u32, k: &str) -> Admission {
    Admission::opening(wait(n), WaitOpening::External { key: key(k) }, p("opened"))
}
fn child_opening(n: u32, k: &str) -> Admission {
    let spec = Json::Array(vec![Json::str("process:c1")]);
    Admission::opening(wait(n), WaitOpening::Children { key: key(k), spec }, p("child-opened"))
}
fn child_answer(n: u32) -> Admission {
    Admission::child_wait_answer(wait(n), p("satisfied"))
}
fn settle(n: u32, status: Option<SettlementStatus>) -> Admission {
    Admission::settlement(&effect(n), p("settled"), status)
}

fn accept_all(_: &Json) -> bool {
    true
}

fn ctx() -> AdmissionContext<'static> {
    AdmissionContext {
        terminal: false,
        current_wait_id: None,
        signal_schema: &accept_all,
        max_pending_signals: 64,
        prepared_consumption: 0,
        prepared_reserved_settlements: 0,
        signals_quota: SignalsQuota::default(),
    }
}
fn waiting_on(current: &WaitId) -> AdmissionContext<'_> {
    AdmissionContext { current_wait_id: Some(current), ..ctx() }
}

fn rejected(result: Result<AdmitOutcome, AdmissionError>) -> RejectReason {
    match result {
        Err(AdmissionError::Rejected { reason, .. }) => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// A mailbox holding an open external wait 1 (key `k1`) and an open child wait 2 (key `k2`).
fn with_waits() -> Mailbox {
    let mut m = Mailbox::new();
    m.admit(&[ext_opening(1, "k1"), child_opening(2, "k2")], &ctx()).unwrap();
    m
}

// ---- record shape ----------------------------------------------------------------------------

#[test]
fn record_shape_rules() {
    let pending = || RecordBody::Pending(p("x"));
    let opens = || Some(WaitOpening::External { key: key("k") });
    let st = Some(SettlementStatus::Succeeded);
    // Status only on unaddressed Engine settlements.
    assert!(SignalRecord::new(SignalId::settlement(&effect(1)), None, st, None, pending()).is_ok());
    assert!(matches!(
        SignalRecord::new(sid("s1"), None, st, None, pending()),
        Err(RecordError::StatusNotAllowed { .. })
    ));
    assert!(matches!(
        SignalRecord::new(SignalId::wait_opening(&wait(1)), Some(wait(1)), st, opens(), pending()),
        Err(RecordError::StatusNotAllowed { .. })
    ));
    // `opens` exactly on openings.
    assert!(matches!(
        SignalRecord::new(SignalId::wait_opening(&wait(1)), Some(wait(1)), None, None, pending()),
        Err(RecordError::OpeningWithoutOpens { .. })
    ));
    assert!(matches!(
        SignalRecord::new(SignalId::settlement(&effect(1)), None, None, opens(), pending()),
        Err(RecordError::OpensOnNonOpening { .. })
    ));
    assert!(matches!(
        SignalRecord::new(sid("s1"), Some(wait(1)), None, opens(), pending()),
        Err(RecordError::OpensOnNonOpening { .. })
    ));
    // Engine answers carry the derived satisfaction id.
    assert!(matches!(
        SignalRecord::new(SignalId::settlement(&effect(1)), Some(wait(1)), None, None, pending()),
        Err(RecordError::UnderivedAnswerId { .. })
    ));
    let answer = SignalRecord::new(
        SignalId::child_wait_satisfied(&wait(1)),
        Some(wait(1)),
        None,
        None,
        pending(),
    )
    .unwrap();
    assert_eq!(answer.source(), SignalSource::ChildWaitAnswer);
    assert!(answer.is_answer());
}

// ---- admission: atomicity, dedup, conflict ---------------------------------------------------

#[test]
fn empty_batch_is_rejected() {
    let mut m = Mailbox::new();
    assert_eq!(m.admit_external(&[], &ctx()), Err(AdmissionError::Empty));
    assert_eq!(m.admit(&[], &ctx()), Err(AdmissionError::Empty));
}

#[test]
fn batch_is_atomic() {
    let mut m = with_waits();
    let before = m.clone();
    let batch = [req("a", None, "1"), req("b", None, "2"), req("c", Some(wait(9)), "3")];
    assert!(matches!(rejected(m.admit_external(&batch, &ctx())), RejectReason::UnknownWait { .. }));
    assert_eq!(m, before, "a rejected batch must append nothing");

    let out = m.admit_external(&batch[..2], &ctx()).unwrap();
    assert_eq!(out.appended, vec![3, 4]);
    assert!(out.accepted());
    assert_eq!(m.len(), 4);
    assert_eq!(m.record(3).unwrap().id(), &sid("a"));
    assert_eq!(m.record(4).unwrap().id(), &sid("b"));
}

#[test]
fn internal_batch_is_atomic() {
    let mut m = Mailbox::new();
    let batch = [settle(1, Some(SettlementStatus::Succeeded)), child_answer(7)];
    assert!(matches!(rejected(m.admit(&batch, &ctx())), RejectReason::UnknownWait { .. }));
    assert!(m.is_empty());
}

#[test]
fn identical_duplicate_is_skipped_without_charge() {
    let mut m = Mailbox::new();
    m.admit_external(&[req("a", None, "1")], &ctx()).unwrap();
    // The quota is exhausted: a charge would fail, a skip must not.
    let full = AdmissionContext {
        signals_quota: SignalsQuota { accepted: 5, allocated: 0, maximum: Some(1) },
        max_pending_signals: 1,
        ..ctx()
    };
    let out = m.admit_external(&[req("a", None, "1")], &full).unwrap();
    assert_eq!(out, AdmitOutcome { appended: vec![], duplicates: 1, released_current_wait: false });
    assert!(!out.accepted());
    assert_eq!(m.len(), 1);
    // Still identical after consumption (compared by digest).
    m.consume(1).unwrap();
    let out = m.admit_external(&[req("a", None, "1")], &full).unwrap();
    assert_eq!(out.duplicates, 1);
    assert_eq!(m.len(), 1);
    // Internal re-deliveries dedup the same way.
    let s = settle(1, Some(SettlementStatus::Failed));
    m.admit(std::slice::from_ref(&s), &ctx()).unwrap();
    assert_eq!(m.admit(&[s], &full).unwrap().duplicates, 1);
    assert_eq!(m.len(), 2);
}

#[test]
fn different_content_under_admitted_id_conflicts() {
    let mut m = with_waits();
    m.admit_external(&[req("a", None, "1")], &ctx()).unwrap();
    let before = m.clone();
    let conflict = |r| matches!(r, Err(AdmissionError::Conflict { .. }));
    assert!(conflict(m.admit_external(&[req("a", None, "2")], &ctx())), "payload differs");
    assert!(conflict(m.admit_external(&[req("a", Some(wait(1)), "1")], &ctx())), "wait differs");
    m.consume(3).unwrap();
    let consumed = m.clone();
    assert!(conflict(m.admit_external(&[req("a", None, "2")], &ctx())), "after consumption");
    assert_eq!(m, consumed);
    assert_ne!(m, before);

    let mut m = Mailbox::new();
    m.admit(&[settle(1, Some(SettlementStatus::Succeeded))], &ctx()).unwrap();
    assert!(conflict(m.admit(&[settle(1, Some(SettlementStatus::Failed))], &ctx())), "status");
    assert!(conflict(m.admit(&[settle(1, None)], &ctx())), "status presence");
    let mut m = with_waits();
    let other = Admission::opening(wait(1), WaitOpening::External { key: key("k9") }, p("opened"));
    assert!(conflict(m.admit(&[other], &ctx())), "opening differs");
}

#[test]
fn duplicate_never_excuses_a_later_conflict_or_bad_address() {
    let mut m = Mailbox::new();
    m.admit_external(&[req("a", None, "1"), req("b", None, "1")], &ctx()).unwrap();
    let before = m.clone();
    let batch = [req("a", None, "1"), req("b", None, "other")];
    assert_eq!(m.admit_external(&batch, &ctx()), Err(AdmissionError::Conflict { id: sid("b") }));
    let batch = [req("a", None, "1"), req("c", Some(wait(1)), "1")];
    assert!(matches!(rejected(m.admit_external(&batch, &ctx())), RejectReason::UnknownWait { .. }));
    assert_eq!(m, before);
}

#[test]
fn same_id_twice_in_one_batch_conflicts() {
    let mut m = Mailbox::new();
    let batch = [req("a", None, "1"), req("a", None, "1")];
    assert_eq!(m.admit_external(&batch, &ctx()), Err(AdmissionError::Conflict { id: sid("a") }));
    // Even when the first copy is an already-admitted duplicate.
    m.admit_external(&batch[..1], &ctx()).unwrap();
    assert_eq!(m.admit_external(&batch, &ctx()), Err(AdmissionError::Conflict { id: sid("a") }));
    let s = settle(1, None);
    assert!(matches!(m.admit(&[s.clone(), s], &ctx()), Err(AdmissionError::Conflict { .. })));
    assert_eq!(m.len(), 1);
}

#[test]
fn internal_path_requires_engine_ids_and_valid_shapes() {
    let mut m = with_waits();
    let external_id =
        Admission { id: sid("host"), wait_id: None, payload: p("x"), status: None, opens: None };
    assert_eq!(rejected(m.admit(&[external_id], &ctx())), RejectReason::NotEngineOwned);
    let mut status_on_opening = ext_opening(3, "k3");
    status_on_opening.status = Some(SettlementStatus::Succeeded);
    assert!(matches!(
        rejected(m.admit(&[status_on_opening], &ctx())),
        RejectReason::Malformed(RecordError::StatusNotAllowed { .. })
    ));
    let mut bare_opening = ext_opening(3, "k3");
    bare_opening.opens = None;
    assert!(matches!(
        rejected(m.admit(&[bare_opening], &ctx())),
        RejectReason::Malformed(RecordError::OpeningWithoutOpens { .. })
    ));
    let mut underived = child_answer(2);
    underived.id = SignalId::settlement(&effect(2));
    assert!(matches!(
        rejected(m.admit(&[underived], &ctx())),
        RejectReason::Malformed(RecordError::UnderivedAnswerId { .. })
    ));
    assert_eq!(m.len(), 2);
}

#[test]
fn terminal_process_rejects_external_and_skips_internal() {
    let mut m = with_waits();
    let terminal = AdmissionContext { terminal: true, ..ctx() };
    assert_eq!(m.admit_external(&[req("a", None, "1")], &terminal), Err(AdmissionError::Terminal));
    assert_eq!(m.admit(&[settle(5, None)], &terminal), Ok(AdmitOutcome::default()));
    assert_eq!(m.len(), 2);
}

// ---- admission: waits -------------------------------------------------------------------------

#[test]
fn answers_need_an_existing_wait() {
    let mut m = with_waits();
    assert_eq!(
        rejected(m.admit_external(&[req("a", Some(wait(9)), "1")], &ctx())),
        RejectReason::UnknownWait { wait_id: wait(9) }
    );
    assert!(matches!(
        rejected(m.admit(&[child_answer(9)], &ctx())),
        RejectReason::UnknownWait { .. }
    ));
}

#[test]
fn waits_are_answered_only_by_their_source() {
    let mut m = with_waits();
    // A child wait cannot be answered by Host input...
    assert!(matches!(
        rejected(m.admit_external(&[req("a", Some(wait(2)), "1")], &ctx())),
        RejectReason::WrongSource {
            kind: WaitKind::Children,
            source_kind: SignalSource::External,
            ..
        }
    ));
    // ...and an external wait not by an Engine satisfaction.
    assert!(matches!(
        rejected(m.admit(&[child_answer(1)], &ctx())),
        RejectReason::WrongSource {
            kind: WaitKind::External,
            source_kind: SignalSource::ChildWaitAnswer,
            ..
        }
    ));
    m.admit_external(&[req("a", Some(wait(1)), "1")], &ctx()).unwrap();
    m.admit(&[child_answer(2)], &ctx()).unwrap();
    assert_eq!(m.wait(&wait(1)).unwrap().answered_by, Some(3));
    assert_eq!(m.wait(&wait(2)).unwrap().answered_by, Some(4));
}

#[test]
fn a_wait_is_answered_at_most_once() {
    let mut m = with_waits();
    m.admit_external(&[req("a", Some(wait(1)), "1")], &ctx()).unwrap();
    assert_eq!(
        rejected(m.admit_external(&[req("b", Some(wait(1)), "1")], &ctx())),
        RejectReason::AlreadyAnswered { wait_id: wait(1) }
    );
    m.admit(&[child_answer(2)], &ctx()).unwrap();
    // The derived satisfaction id makes a second child answer a duplicate or a conflict.
    let mut again = child_answer(2);
    again.payload = p("other");
    assert!(matches!(m.admit(&[again], &ctx()), Err(AdmissionError::Conflict { .. })));
    assert_eq!(m.len(), 4);
}

#[test]
fn a_wait_is_answered_at_most_once_per_batch() {
    let mut m = with_waits();
    let batch = [req("a", Some(wait(1)), "1"), req("b", Some(wait(1)), "2")];
    assert_eq!(
        rejected(m.admit_external(&batch, &ctx())),
        RejectReason::AnsweredTwiceInBatch { wait_id: wait(1) }
    );
    assert_eq!(m.len(), 2);
}

#[test]
fn opening_and_answer_in_one_internal_batch() {
    // Registration of an already-satisfied child wait appends the satisfaction immediately.
    let mut m = Mailbox::new();
    let out = m.admit(&[child_opening(3, "k"), child_answer(3)], &ctx()).unwrap();
    assert_eq!(out.appended, vec![1, 2]);
    assert_eq!(m.wait(&wait(3)).unwrap().answered_by, Some(2));
}

#[test]
fn wait_keys_are_never_open_twice() {
    let mut m = with_waits();
    assert_eq!(
        rejected(m.admit(&[ext_opening(3, "k1")], &ctx())),
        RejectReason::WaitKeyOpen { key: key("k1"), open: wait(1) }
    );
    // Also within one batch.
    assert!(matches!(
        rejected(m.admit(&[ext_opening(3, "k3"), child_opening(4, "k3")], &ctx())),
        RejectReason::WaitKeyOpen { .. }
    ));
    // Answered is not closed: the answer must be consumed first.
    m.admit_external(&[req("a", Some(wait(1)), "1")], &ctx()).unwrap();
    assert!(matches!(
        rejected(m.admit(&[ext_opening(3, "k1")], &ctx())),
        RejectReason::WaitKeyOpen { .. }
    ));
    m.consume(3).unwrap();
    assert!(m.wait(&wait(1)).unwrap().closed);
    m.admit(&[ext_opening(3, "k1")], &ctx()).unwrap();
    assert_eq!(m.open_wait_with_key(&key("k1")), Some(&wait(3)));
}

// ---- admission: current-wait gating -----------------------------------------------------------

#[test]
fn current_wait_rejects_answers_to_other_waits() {
    let mut m = with_waits();
    m.admit(&[ext_opening(3, "k3")], &ctx()).unwrap();
    let current = wait(1);
    assert_eq!(
        rejected(m.admit_external(&[req("a", Some(wait(3)), "1")], &waiting_on(&current))),
        RejectReason::NotCurrentWait { wait_id: wait(3), current: wait(1) }
    );
    // Without a current wait an early answer is fine and releases nothing.
    let out = m.admit_external(&[req("a", Some(wait(3)), "1")], &ctx()).unwrap();
    assert!(!out.released_current_wait);
}

#[test]
fn current_external_wait_blocks_unaddressed_input_until_answered() {
    let mut m = with_waits();
    let current = wait(1);
    let c = waiting_on(&current);
    assert_eq!(
        rejected(m.admit_external(&[req("x", None, "1")], &c)),
        RejectReason::BlockedByCurrentWait { current: wait(1) }
    );
    // The answer must come first in the batch.
    let late = [req("x", None, "1"), req("a", Some(wait(1)), "1")];
    assert!(matches!(
        rejected(m.admit_external(&late, &c)),
        RejectReason::BlockedByCurrentWait { .. }
    ));
    let early = [req("a", Some(wait(1)), "1"), req("x", None, "1")];
    let out = m.admit_external(&early, &c).unwrap();
    assert!(out.released_current_wait);
    assert_eq!(out.appended, vec![3, 4]);
}

#[test]
fn child_waits_do_not_block_unaddressed_input() {
    let mut m = with_waits();
    let current = wait(2);
    let c = waiting_on(&current);
    let out = m.admit_external(&[req("x", None, "1")], &c).unwrap();
    assert!(!out.released_current_wait);
    // Answers to other waits are still gated.
    assert!(matches!(
        rejected(m.admit_external(&[req("a", Some(wait(1)), "1")], &c)),
        RejectReason::NotCurrentWait { .. }
    ));
    // The satisfaction releases the current child wait.
    assert!(m.admit(&[child_answer(2)], &c).unwrap().released_current_wait);
}

#[test]
fn internal_deliveries_are_not_gated() {
    // Child completions queue while the parent waits on a different wait.
    let mut m = with_waits();
    let current = wait(1);
    let out = m.admit(&[child_answer(2), settle(5, None)], &waiting_on(&current)).unwrap();
    assert_eq!(out.appended, vec![3, 4]);
    assert!(!out.released_current_wait);
}

// ---- admission: schema and capacity -----------------------------------------------------------

#[test]
fn unaddressed_external_payloads_must_satisfy_the_signal_schema() {
    fn only_ok(j: &Json) -> bool {
        j.as_str() == Some("ok")
    }
    let mut m = with_waits();
    let c = AdmissionContext { signal_schema: &only_ok, ..ctx() };
    assert_eq!(
        rejected(m.admit_external(&[req("x", None, "bad")], &c)),
        RejectReason::SchemaMismatch
    );
    m.admit_external(&[req("x", None, "ok")], &c).unwrap();
    // Answers and internal deliveries are not schema-checked.
    m.admit_external(&[req("a", Some(wait(1)), "bad")], &c).unwrap();
    m.admit(&[settle(1, None)], &c).unwrap();
    assert_eq!(m.len(), 5);
}

#[test]
fn pending_capacity_is_enforced() {
    let mut m = Mailbox::new();
    m.admit_external(&[req("a", None, "1")], &ctx()).unwrap();
    let c = AdmissionContext { max_pending_signals: 2, ..ctx() };
    assert_eq!(
        m.admit_external(&[req("b", None, "1"), req("c", None, "1")], &c),
        Err(AdmissionError::LimitExceeded {
            reason: LimitReason::MaxPendingSignals { pending: 1, incoming: 2, max: 2 }
        })
    );
    // Internal deliveries count too.
    assert!(matches!(
        m.admit(&[settle(1, None), settle(2, None)], &c),
        Err(AdmissionError::LimitExceeded { .. })
    ));
    // Consumption frees capacity; duplicates are not counted.
    m.consume(1).unwrap();
    let out =
        m.admit_external(&[req("a", None, "1"), req("b", None, "1"), req("c", None, "1")], &c);
    assert_eq!(out.unwrap().appended, vec![2, 3]);
}

#[test]
fn prepared_reservations_count_against_capacity() {
    let mut m = Mailbox::new();
    m.admit_external(&[req("a", None, "1")], &ctx()).unwrap();
    let fits = AdmissionContext {
        max_pending_signals: 2,
        prepared_consumption: 1,
        prepared_reserved_settlements: 1,
        ..ctx()
    };
    let overfull = AdmissionContext { prepared_reserved_settlements: 2, ..fits };
    assert_eq!(
        m.clone().admit_external(&[req("b", None, "1")], &overfull),
        Err(AdmissionError::LimitExceeded {
            reason: LimitReason::PreparedReservations {
                remaining: 0,
                reserved: 2,
                incoming: 1,
                max: 2
            }
        })
    );
    let no_consumption = AdmissionContext { prepared_consumption: 0, ..fits };
    assert!(matches!(
        m.clone().admit_external(&[req("b", None, "1")], &no_consumption),
        Err(AdmissionError::LimitExceeded { reason: LimitReason::PreparedReservations { .. } })
    ));
    m.admit_external(&[req("b", None, "1")], &fits).unwrap();
}

#[test]
fn signals_quota_is_enforced() {
    let mut m = Mailbox::new();
    let c = AdmissionContext {
        prepared_reserved_settlements: 1,
        signals_quota: SignalsQuota { accepted: 2, allocated: 1, maximum: Some(5) },
        ..ctx()
    };
    assert_eq!(
        m.admit_external(&[req("a", None, "1"), req("b", None, "1")], &c),
        Err(AdmissionError::LimitExceeded {
            reason: LimitReason::SignalsQuota { charged: 4, incoming: 2, maximum: 5 }
        })
    );
    m.admit_external(&[req("a", None, "1")], &c).unwrap();
    let zero = AdmissionContext {
        signals_quota: SignalsQuota { accepted: 0, allocated: 0, maximum: Some(0) },
        ..ctx()
    };
    assert!(matches!(
        m.admit(&[settle(1, None)], &zero),
        Err(AdmissionError::LimitExceeded { .. })
    ));
    let unlimited = AdmissionContext {
        signals_quota: SignalsQuota { accepted: u64::MAX, allocated: u64::MAX, maximum: None },
        ..ctx()
    };
    m.admit(&[settle(1, None)], &unlimited).unwrap();
}

// ---- cursor and window -----------------------------------------------------------------------

#[test]
fn cursor_is_monotone_and_releases_payloads() {
    let mut m = Mailbox::new();
    m.admit_external(&[req("a", None, "1"), req("b", None, "2"), req("c", None, "3")], &ctx())
        .unwrap();
    m.consume(0).unwrap();
    assert_eq!(m.cursor(), 0);
    m.consume(2).unwrap();
    assert_eq!((m.cursor(), m.pending_count(), m.len()), (2, 1, 3));
    for arrival in 1..=2 {
        let r = m.record(arrival).unwrap();
        assert!(r.is_consumed() && r.pending_payload().is_none());
    }
    assert_eq!(m.record(1).unwrap().body(), &RecordBody::Consumed(p("1").digest()));
    assert_eq!(m.record(3).unwrap().pending_payload(), Some(&p("3")));
    assert_eq!(m.consume(2), Err(ConsumeError::BeyondPending { requested: 2, pending: 1 }));
    assert_eq!(m.cursor(), 2);
    m.consume(1).unwrap();
    assert_eq!(m.pending_count(), 0);
    assert!(m.record(0).is_none() && m.record(4).is_none());
}

#[test]
fn window_is_the_pending_suffix_in_arrival_order() {
    let mut m = with_waits();
    m.admit(&[settle(7, Some(SettlementStatus::Failed))], &ctx()).unwrap();
    m.admit_external(&[req("a", Some(wait(1)), "answer"), req("b", None, "free")], &ctx()).unwrap();
    let window = m.pending_window();
    let ids: Vec<_> = window.iter().map(|s| s.id().clone()).collect();
    assert_eq!(
        ids,
        vec![
            SignalId::wait_opening(&wait(1)),
            SignalId::wait_opening(&wait(2)),
            SignalId::settlement(&effect(7)),
            sid("a"),
            sid("b"),
        ]
    );
    assert_eq!(window[0].wait_id(), Some(&wait(1)));
    assert_eq!(window[2].status(), Some(SettlementStatus::Failed));
    assert_eq!(window[3].payload(), &p("answer"));
    assert_eq!(window[3].source(), SignalSource::External);
    m.consume(3).unwrap();
    let ids: Vec<_> = m.pending_window().iter().map(|s| s.id().clone()).collect();
    assert_eq!(ids, vec![sid("a"), sid("b")]);
    assert_eq!(m.pending_records().len(), 2);
}

#[test]
fn waits_close_when_their_answer_is_consumed() {
    let mut m = with_waits();
    m.admit_external(&[req("x", None, "1"), req("a", Some(wait(1)), "1")], &ctx()).unwrap();
    let state = m.wait(&wait(1)).unwrap();
    assert_eq!(
        state,
        WaitState {
            key: key("k1"),
            kind: WaitKind::External,
            opening_arrival: 1,
            answered_by: Some(4),
            closed: false
        }
    );
    assert_eq!(m.wait(&wait(2)).unwrap().kind, WaitKind::Children);
    assert!(matches!(m.wait_opening(&wait(2)), Some(WaitOpening::Children { .. })));
    m.consume(3).unwrap();
    assert!(!m.wait(&wait(1)).unwrap().closed, "the answer is not consumed yet");
    m.consume(1).unwrap();
    assert!(m.wait(&wait(1)).unwrap().closed);
    let open: Vec<_> = m.open_waits().map(|(id, _)| id.clone()).collect();
    assert_eq!(open, vec![wait(2)]);
    assert_eq!(m.waits().count(), 2);
    // The opening survives consumption, so the wait table survives too.
    assert_eq!(m.wait_opening(&wait(1)), Some(&WaitOpening::External { key: key("k1") }));
    assert!(m.wait(&wait(9)).is_none());
}

// ---- history validation ----------------------------------------------------------------------

fn pending_rec(id: SignalId, wait_id: Option<WaitId>, opens: Option<WaitOpening>) -> SignalRecord {
    SignalRecord::new(id, wait_id, None, opens, RecordBody::Pending(p("x"))).unwrap()
}
fn consumed_rec(id: SignalId, wait_id: Option<WaitId>, opens: Option<WaitOpening>) -> SignalRecord {
    SignalRecord::new(id, wait_id, None, opens, RecordBody::Consumed(p("x").digest())).unwrap()
}
fn opening_rec(n: u32, k: &str, consumed: bool) -> SignalRecord {
    let opens = Some(WaitOpening::External { key: key(k) });
    let id = SignalId::wait_opening(&wait(n));
    if consumed {
        consumed_rec(id, Some(wait(n)), opens)
    } else {
        pending_rec(id, Some(wait(n)), opens)
    }
}

#[test]
fn history_round_trips_through_from_records() {
    let mut m = with_waits();
    m.admit_external(&[req("a", Some(wait(1)), "1"), req("x", None, "1")], &ctx()).unwrap();
    m.admit(&[child_answer(2)], &ctx()).unwrap();
    m.consume(3).unwrap();
    m.admit(&[ext_opening(3, "k1")], &ctx()).unwrap();
    let rebuilt = Mailbox::from_records(m.records().to_vec(), m.cursor()).unwrap();
    assert_eq!(rebuilt, m);
}

#[test]
fn history_rejects_cursor_contradictions() {
    let r = || pending_rec(sid("a"), None, None);
    assert_eq!(
        Mailbox::from_records(vec![r()], 2),
        Err(MailboxError::CursorBeyondEnd { cursor: 2, len: 1 })
    );
    assert_eq!(
        Mailbox::from_records(vec![r()], 1),
        Err(MailboxError::PendingBeforeCursor { arrival: 1 })
    );
    let c = consumed_rec(sid("b"), None, None);
    assert_eq!(
        Mailbox::from_records(vec![r(), c], 0),
        Err(MailboxError::ConsumedAfterCursor { arrival: 2 })
    );
}

#[test]
fn history_rejects_duplicate_ids() {
    let r = || pending_rec(sid("a"), None, None);
    assert_eq!(
        Mailbox::from_records(vec![r(), r()], 0),
        Err(MailboxError::DuplicateId { id: sid("a"), arrival: 2 })
    );
}

#[test]
fn history_rejects_answers_without_prior_opening() {
    let answer = pending_rec(sid("a"), Some(wait(1)), None);
    assert_eq!(
        Mailbox::from_records(vec![answer.clone()], 0),
        Err(MailboxError::AnswerWithoutOpening { wait_id: wait(1), arrival: 1 })
    );
    assert_eq!(
        Mailbox::from_records(vec![answer, opening_rec(1, "k", false)], 0),
        Err(MailboxError::AnswerWithoutOpening { wait_id: wait(1), arrival: 1 })
    );
}

#[test]
fn history_rejects_answers_from_the_wrong_source() {
    let answer = pending_rec(SignalId::child_wait_satisfied(&wait(1)), Some(wait(1)), None);
    assert!(matches!(
        Mailbox::from_records(vec![opening_rec(1, "k", false), answer], 0),
        Err(MailboxError::WrongSource { kind: WaitKind::External, arrival: 2, .. })
    ));
    let child_opening = pending_rec(
        SignalId::wait_opening(&wait(2)),
        Some(wait(2)),
        Some(WaitOpening::Children { key: key("c"), spec: Json::object() }),
    );
    let external_answer = pending_rec(sid("a"), Some(wait(2)), None);
    assert!(matches!(
        Mailbox::from_records(vec![child_opening, external_answer], 0),
        Err(MailboxError::WrongSource { kind: WaitKind::Children, .. })
    ));
}

#[test]
fn history_rejects_a_wait_answered_twice() {
    let records = vec![
        opening_rec(1, "k", false),
        pending_rec(sid("a"), Some(wait(1)), None),
        pending_rec(sid("b"), Some(wait(1)), None),
    ];
    assert_eq!(
        Mailbox::from_records(records, 0),
        Err(MailboxError::AnsweredTwice { wait_id: wait(1), arrival: 3 })
    );
}

#[test]
fn history_rejects_a_wait_key_open_twice() {
    let key_clash = |e| matches!(e, Err(MailboxError::WaitKeyOpenTwice { arrival: 3, .. }));
    // The earlier wait was never answered.
    let records = vec![
        opening_rec(1, "k", true),
        pending_rec(sid("x"), None, None),
        opening_rec(2, "k", false),
    ];
    assert!(key_clash(Mailbox::from_records(records, 1)));
    // Answered, but the answer was never consumed.
    let records = vec![
        opening_rec(1, "k", false),
        pending_rec(sid("a"), Some(wait(1)), None),
        opening_rec(2, "k", false),
    ];
    assert!(key_clash(Mailbox::from_records(records, 0)));
    // Answered only after the second opening.
    let records = vec![
        opening_rec(1, "k", true),
        consumed_rec(sid("x"), None, None),
        opening_rec(2, "k", true),
        consumed_rec(sid("a"), Some(wait(1)), None),
    ];
    assert!(key_clash(Mailbox::from_records(records, 4)));
    // Answer consumed before the reuse: fine.
    let records = vec![
        opening_rec(1, "k", true),
        consumed_rec(sid("a"), Some(wait(1)), None),
        opening_rec(2, "k", false),
    ];
    let m = Mailbox::from_records(records, 2).unwrap();
    assert_eq!(m.open_wait_with_key(&key("k")), Some(&wait(2)));
}

// ---- receipts --------------------------------------------------------------------------------

#[test]
fn receipts_list_every_record_and_prove_external_admission() {
    let mut m = with_waits();
    let answer = req("a", Some(wait(1)), "1");
    let free = req("x", None, "2");
    m.admit_external(&[answer.clone(), free.clone()], &ctx()).unwrap();
    m.admit(&[settle(3, Some(SettlementStatus::Succeeded))], &ctx()).unwrap();
    let receipts = m.receipts();
    assert_eq!(receipts.len(), 5);
    assert_eq!(
        receipts.iter().map(|r| r.arrival_sequence).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    let r = &receipts[2];
    assert_eq!((r.id.clone(), r.wait_id.clone(), r.consumed), (sid("a"), Some(wait(1)), false));
    assert_eq!(r.payload_digest, p("1").digest());
    assert_eq!(r.pending_payload, Some(p("1")));
    assert!(r.matches(&answer));
    assert!(!r.matches(&free));
    assert!(!r.matches(&req("a", None, "1")), "wait_id differs");
    assert!(!r.matches(&req("a", Some(wait(1)), "other")), "payload differs");
    assert_eq!(receipts[4].status, Some(SettlementStatus::Succeeded));
    // Engine-owned records never prove an external delivery.
    let opening = &receipts[0];
    assert!(opening.id.is_engine_owned());
    assert!(receipts
        .iter()
        .filter(|r| r.id.is_engine_owned())
        .all(|r| !r.matches(&answer) && !r.matches(&free)));

    m.consume(4).unwrap();
    let r = m.receipt(&sid("a")).unwrap();
    assert!(r.consumed && r.pending_payload.is_none());
    assert!(r.matches(&answer), "receipts prove admission after consumption");
    assert!(m.receipt(&sid("x")).unwrap().consumed);
    assert!(m.receipt(&sid("nope")).is_none());
}

// ---- codec -----------------------------------------------------------------------------------

fn sample() -> Mailbox {
    let mut m = with_waits();
    m.admit(&[settle(3, Some(SettlementStatus::Failed))], &ctx()).unwrap();
    m.admit_external(&[req("a", Some(wait(1)), "1"), req("x", None, "2")], &ctx()).unwrap();
    m.consume(2).unwrap();
    m
}

#[test]
fn mailbox_codec_round_trips() {
    let m = sample();
    let json = m.to_json();
    assert_eq!(Mailbox::from_json(&json).unwrap(), m);
    assert_eq!(Mailbox::from_json(&json).unwrap().to_json(), json);
    for record in m.records() {
        // A record's own form carries no arrival: the mailbox places it.
        let mut decoded = SignalRecord::from_json(&record.to_json()).unwrap();
        assert_eq!(decoded.arrival(), 0);
        decoded.set_arrival(record.arrival());
        assert_eq!(&decoded, record);
    }
    let empty = Mailbox::new();
    assert_eq!(Mailbox::from_json(&empty.to_json()).unwrap(), empty);
}

fn edit(value: &Json, f: impl FnOnce(&mut crate::json::Object)) -> Json {
    let mut value = value.clone();
    if let Json::Object(o) = &mut value {
        f(o);
    }
    value
}

#[test]
fn record_codec_is_strict() {
    let m = sample();
    let pending = m.record(3).unwrap().to_json();
    let consumed = m.record(1).unwrap().to_json();
    assert!(consumed.get("payload_digest").is_some() && consumed.get("opens").is_some());
    let digest = Json::String(p("1").digest().to_string());
    // Exactly one of payload / payload_digest.
    assert!(SignalRecord::from_json(&edit(&pending, |o| {
        o.insert("payload_digest".into(), digest.clone());
    }))
    .is_err());
    assert!(SignalRecord::from_json(&edit(&pending, |o| {
        o.remove("payload");
    }))
    .is_err());
    // Malformed digest, unknown member, explicit null, opens on a non-opening.
    assert!(SignalRecord::from_json(&edit(&consumed, |o| {
        o.insert("payload_digest".into(), Json::str("sha256:zz"));
    }))
    .is_err());
    assert!(SignalRecord::from_json(&edit(&pending, |o| {
        o.insert("extra".into(), Json::Bool(true));
    }))
    .is_err());
    assert!(SignalRecord::from_json(&edit(&pending, |o| {
        o.insert("status".into(), Json::Null);
    }))
    .is_err());
    assert!(SignalRecord::from_json(&edit(&pending, |o| {
        o.insert("opens".into(), WaitOpening::External { key: key("k") }.to_json());
    }))
    .is_err());
    // An opening without opens.
    assert!(SignalRecord::from_json(&edit(&consumed, |o| {
        o.remove("opens");
    }))
    .is_err());
}

#[test]
fn mailbox_decode_validates_history() {
    let json = sample().to_json();
    let bad_cursor = edit(&json, |o| {
        o.insert("cursor".into(), Json::u64(1));
    });
    assert!(Mailbox::from_json(&bad_cursor).is_err(), "pending record before the cursor");
    let beyond = edit(&json, |o| {
        o.insert("cursor".into(), Json::u64(99));
    });
    assert!(Mailbox::from_json(&beyond).is_err());
    let extra = edit(&json, |o| {
        o.insert("pending".into(), Json::u64(1));
    });
    assert!(Mailbox::from_json(&extra).is_err());
    let missing = edit(&json, |o| {
        o.remove("cursor");
    });
    assert!(Mailbox::from_json(&missing).is_err());
}

#[test]
fn wait_opening_codec() {
    let ext = WaitOpening::External { key: key("k") };
    let child = WaitOpening::Children { key: key("k"), spec: Json::Array(vec![Json::Bool(true)]) };
    for o in [ext, child] {
        assert_eq!(WaitOpening::from_json(&o.to_json()).unwrap(), o);
    }
    assert!(WaitOpening::from_json(&Json::object()).is_err());
    let with_null = edit(&WaitOpening::External { key: key("k") }.to_json(), |o| {
        o.insert("spec".into(), Json::Null);
    });
    assert!(WaitOpening::from_json(&with_null).is_err());
}

#[test]
fn digest_text_form_is_what_the_wire_holds() {
    let d = p("1").digest();
    assert_eq!(Digest::parse(&d.to_string()), Ok(d));
}

// ---- compaction ------------------------------------------------------------------------------

/// Every kind of record, all consumed: settlement (1), child wait 2 opened and answered,
/// external wait 3 opened and answered by `a`, unaddressed `u`, and the opening of external
/// wait 4, which stays open. Arrivals: opening 2 = 1, opening 3 = 2, settlement = 3,
/// child answer = 4, `a` = 5, `u` = 6, opening 4 = 7.
fn consumed_history() -> Mailbox {
    let mut m = Mailbox::new();
    m.admit(&[child_opening(2, "k2"), ext_opening(3, "k3")], &ctx()).unwrap();
    m.admit(&[settle(1, Some(SettlementStatus::Succeeded)), child_answer(2)], &ctx()).unwrap();
    m.admit_external(&[req("a", Some(wait(3)), "1"), req("u", None, "2")], &ctx()).unwrap();
    m.admit(&[ext_opening(4, "k4")], &ctx()).unwrap();
    m.consume(7).unwrap();
    m
}

#[test]
fn compaction_keeps_external_records_and_open_waits_only() {
    let mut m = consumed_history();
    let twin = m.clone();
    assert!(m.has_droppable() && !m.is_compacted());
    assert_eq!(m.compact(), 4, "settlement, child opening and answer, opening of closed wait 3");
    assert_eq!(m.compact(), 0, "idempotent");
    assert!(!m.has_droppable() && m.is_compacted());
    let kept: Vec<(u64, SignalId)> = m.records().iter().map(|r| (r.arrival(), r.id().clone())).collect();
    assert_eq!(kept, vec![(5, sid("a")), (6, sid("u")), (7, SignalId::wait_opening(&wait(4)))]);
    // Counts, cursor and usage are those of the whole history.
    assert_eq!((m.len(), m.cursor(), m.pending_count()), (twin.len(), twin.cursor(), 0));
    // The kept external records are exactly {id, wait_id?, payload_digest}.
    let a = m.record(5).unwrap();
    assert_eq!((a.wait_id(), a.status(), a.opens()), (Some(&wait(3)), None, None));
    assert_eq!(a.body(), &RecordBody::Consumed(p("1").digest()));
    // The open wait survives with its opening; closed waits are gone from the table but an
    // externally answered one is still answered.
    assert_eq!(m.open_waits().map(|(w, _)| w.clone()).collect::<Vec<_>>(), vec![wait(4)]);
    assert_eq!(m.wait(&wait(4)), twin.wait(&wait(4)));
    assert!(m.wait(&wait(2)).is_none() && m.wait(&wait(3)).is_none());
    assert!(m.is_answered(&wait(3)) && twin.is_answered(&wait(3)));
    assert!(!m.contains(&SignalId::settlement(&effect(1))));
    // Receipts: every external record keeps one, with its arrival.
    let receipts: Vec<(u64, SignalId)> = m.receipts().into_iter().map(|r| (r.arrival_sequence, r.id)).collect();
    assert_eq!(&receipts[..2], &[(5, sid("a")), (6, sid("u"))]);
    assert!(m.receipt(&sid("a")).unwrap().matches(&req("a", Some(wait(3)), "1")));
    // New records continue the arrival sequence.
    let out = m.admit_external(&[req("b", None, "3")], &ctx()).unwrap();
    assert_eq!(out.appended, vec![8]);
    assert_eq!(m.pending_window().len(), 1);
}

#[test]
fn compaction_keeps_pending_records_and_unconsumed_answers() {
    let mut m = Mailbox::new();
    m.admit(&[child_opening(2, "k2")], &ctx()).unwrap();
    m.admit(&[settle(1, None), child_answer(2)], &ctx()).unwrap();
    m.consume(2).unwrap();
    // The answer to wait 2 is pending: the wait is open, so its opening stays.
    assert_eq!(m.compact(), 1, "only the settlement");
    assert_eq!(m.wait_opening(&wait(2)).map(WaitOpening::kind), Some(WaitKind::Children));
    assert_eq!(m.pending_records().len(), 1);
    m.consume(1).unwrap();
    assert_eq!(m.compact(), 2);
    assert!(m.records().is_empty() && m.len() == 3 && m.cursor() == 3);
}

/// The decisions a Host sees for redeliveries: duplicates skip, conflicts refuse, a second
/// answer to the closed wait is refused, all without appending.
fn assert_dedup_holds(m: &mut Mailbox) {
    let before = m.clone();
    let out = m.admit_external(&[req("a", Some(wait(3)), "1"), req("u", None, "2")], &ctx()).unwrap();
    assert_eq!((out.appended.len(), out.duplicates), (0, 2), "identical redeliveries are duplicates");
    for conflicting in [req("a", Some(wait(3)), "other"), req("a", None, "1"), req("u", None, "other")] {
        assert_eq!(
            m.admit_external(&[conflicting.clone()], &ctx()),
            Err(AdmissionError::Conflict { id: conflicting.id().clone() })
        );
    }
    assert!(matches!(
        rejected(m.admit_external(&[req("a2", Some(wait(3)), "1")], &ctx())),
        RejectReason::AlreadyAnswered { .. }
    ));
    assert_eq!(*m, before, "nothing was appended");
}

#[test]
fn redelivery_after_compaction_is_still_a_duplicate_or_a_conflict() {
    let mut twin = consumed_history();
    let mut m = twin.clone();
    m.compact();
    assert_dedup_holds(&mut twin);
    assert_dedup_holds(&mut m);
    // Also after a snapshot/restore of the compacted mailbox.
    let mut restored = Mailbox::from_json(&m.to_json()).unwrap();
    assert_eq!(restored, m);
    assert_dedup_holds(&mut restored);
}

#[test]
fn compacted_codec_round_trips_and_uncompacted_bytes_are_unchanged() {
    let twin = consumed_history();
    let json = twin.to_json();
    assert!(json.get("admitted").is_none(), "an uncompacted mailbox keeps its old form");
    assert!(json.to_canonical_bytes().windows(9).all(|w| w != b"\"arrival\""));
    let mut m = twin.clone();
    m.compact();
    m.admit_external(&[req("b", None, "3")], &ctx()).unwrap();
    let json = m.to_json();
    let decoded = Mailbox::from_json(&json).unwrap();
    assert_eq!(decoded, m);
    assert_eq!(decoded.to_json(), json);
    assert_eq!(json.get("admitted"), Some(&Json::u64(8)));
    let Some(Json::Array(records)) = json.get("records") else { panic!("records") };
    let arrivals: Vec<Option<&Json>> = records.iter().map(|r| r.get("arrival")).collect();
    let (n5, n6, n7) = (Json::u64(5), Json::u64(6), Json::u64(7));
    assert_eq!(arrivals, vec![Some(&n5), Some(&n6), Some(&n7), None], "pending arrivals are implied");
    // One encoding per mailbox: every other spelling is refused.
    let edit_record = |i: usize, f: &dyn Fn(&mut crate::json::Object)| {
        edit(&json, |o| {
            if let Some(Json::Array(rs)) = o.get_mut("records") {
                if let Some(Json::Object(r)) = rs.get_mut(i) {
                    f(r);
                }
            }
        })
    };
    let refused = [
        edit(&json, |o| {
            o.insert("admitted".into(), Json::u64(4));
        }),
        edit(&json, |o| {
            o.remove("admitted");
        }),
        edit_record(0, &|r| {
            r.remove("arrival");
        }),
        edit_record(3, &|r| {
            r.insert("arrival".into(), Json::u64(8));
        }),
        edit_record(1, &|r| {
            r.insert("arrival".into(), Json::u64(5));
        }),
        edit_record(2, &|r| {
            r.insert("arrival".into(), Json::u64(9));
        }),
        edit(&json, |o| {
            o.insert("admitted".into(), Json::u64(9));
        }),
    ];
    for (i, bad) in refused.iter().enumerate() {
        assert!(Mailbox::from_json(bad).is_err(), "spelling {i} must be refused");
    }
    // An uncompacted history's records may carry no arrivals.
    let old = twin.to_json();
    let with_arrival = edit(&old, |o| {
        if let Some(Json::Array(rs)) = o.get_mut("records") {
            if let Some(Json::Object(r)) = rs.get_mut(0) {
                r.insert("arrival".into(), Json::u64(1));
            }
        }
    });
    assert!(Mailbox::from_json(&with_arrival).is_err());
}

#[test]
fn compacted_history_rules() {
    let placed = |mut r: SignalRecord, arrival: u64| {
        r.set_arrival(arrival);
        r
    };
    let answer = |id: &str| consumed_rec(sid(id), Some(wait(3)), None);
    // A consumed external answer may outlive its wait's opening.
    assert!(Mailbox::from_retained(vec![placed(answer("a"), 2)], 2, 2).is_ok());
    // ... but only once per wait,
    assert!(matches!(
        Mailbox::from_retained(vec![placed(answer("a"), 2), placed(answer("b"), 3)], 3, 3),
        Err(MailboxError::AnsweredTwice { .. })
    ));
    // only while consumed, and never as an Engine answer (dropped with its opening).
    let pending_answer = pending_rec(sid("a"), Some(wait(3)), None);
    assert!(Mailbox::from_retained(vec![placed(pending_answer, 2)], 1, 2).is_err());
    let engine_answer = consumed_rec(SignalId::child_wait_satisfied(&wait(3)), Some(wait(3)), None);
    assert!(matches!(
        Mailbox::from_retained(vec![placed(engine_answer, 2)], 2, 2),
        Err(MailboxError::OrphanAnswer { .. })
    ));
    // Pending records are never dropped: they are exactly the arrivals after the cursor.
    let free = |id: &str| pending_rec(sid(id), None, None);
    assert!(Mailbox::from_retained(vec![placed(free("x"), 3)], 2, 3).is_ok());
    assert_eq!(
        Mailbox::from_retained(vec![placed(free("x"), 3)], 1, 3),
        Err(MailboxError::PendingNotContiguous { admitted: 3 })
    );
    // Arrivals strictly increase and stay within the admitted count.
    assert!(matches!(
        Mailbox::from_retained(vec![placed(answer("a"), 2), placed(consumed_rec(sid("b"), None, None), 2)], 3, 3),
        Err(MailboxError::ArrivalOutOfOrder { .. })
    ));
    assert!(matches!(
        Mailbox::from_retained(vec![placed(answer("a"), 4)], 2, 3),
        Err(MailboxError::ArrivalOutOfOrder { .. })
    ));
}

// ---- property: admission and consumption ------------------------------------------------------

mod property {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Clone, Debug)]
    enum Op {
        External(Vec<(u8, u8, Option<u8>)>, Option<u8>),
        Open(u8, u8, bool),
        ChildAnswer(u8),
        Settle(u8, u8),
        Consume(u8),
        Compact,
    }

    /// External batch members: (id, payload variant, addressed wait).
    fn members() -> impl Strategy<Value = Vec<(u8, u8, Option<u8>)>> {
        prop::collection::vec((0u8..6, 0u8..2, prop::option::of(0u8..4)), 1..4)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (members(), prop::option::of(0u8..4)).prop_map(|(b, c)| Op::External(b, c)),
            2 => (0u8..4, 0u8..2, any::<bool>()).prop_map(|(w, k, c)| Op::Open(w, k, c)),
            1 => (0u8..4).prop_map(Op::ChildAnswer),
            1 => (0u8..3, 0u8..2).prop_map(|(e, v)| Op::Settle(e, v)),
            2 => (0u8..4).prop_map(Op::Consume),
            1 => Just(Op::Compact),
        ]
    }

    fn w(n: u8) -> WaitId {
        wait(u32::from(n))
    }

    fn external_batch(batch: &[(u8, u8, Option<u8>)]) -> Vec<SignalRequest> {
        batch.iter().map(|(id, v, a)| req(&format!("s{id}"), a.map(w), &format!("v{v}"))).collect()
    }

    /// The Engine ids an op would deliver (the kernel never delivers one again once
    /// compaction dropped it: they are derived from settled Effects and closed waits).
    fn engine_ids(op: &Op) -> Vec<SignalId> {
        match op {
            Op::Open(n, ..) => vec![SignalId::wait_opening(&w(*n))],
            Op::ChildAnswer(n) => vec![SignalId::child_wait_satisfied(&w(*n))],
            Op::Settle(e, _) => vec![SignalId::settlement(&effect(u32::from(*e) + 10))],
            _ => vec![],
        }
    }

    /// `m` is compacted whenever the op says so; `twin` never is. Admission must decide the
    /// same for both (compaction is invisible to Hosts), and `m` must always decode.
    fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut twin = Mailbox::new();
        let mut m = Mailbox::new();
        let mut admitted: BTreeSet<SignalId> = BTreeSet::new();
        let mut consumed: BTreeSet<SignalId> = BTreeSet::new();
        let small = AdmissionContext { max_pending_signals: 12, ..ctx() };
        for op in ops {
            if engine_ids(&op).iter().any(|id| admitted.contains(id) && !m.contains(id)) {
                continue;
            }
            let before = m.clone();
            let twin_result = apply(&mut twin, &op, &small);
            let result = match &op {
                // Admissions are the twin's step applied to the compacted mailbox.
                Op::External(..) | Op::Open(..) | Op::ChildAnswer(_) | Op::Settle(..) => {
                    apply(&mut m, &op, &small)
                }
                Op::Consume(n) => {
                    let old = m.cursor();
                    match m.consume(u64::from(*n)) {
                        Ok(()) => {
                            prop_assert_eq!(m.cursor(), old + u64::from(*n));
                            for arrival in old + 1..=m.cursor() {
                                let id = m.record(arrival).unwrap().id().clone();
                                prop_assert!(consumed.insert(id), "a record was consumed twice");
                            }
                        }
                        Err(_) => prop_assert_eq!(&m, &before),
                    }
                    None
                }
                Op::Compact => {
                    m.compact();
                    prop_assert!(!m.has_droppable());
                    None
                }
            };
            match (&result, &twin_result) {
                (Some(Ok(a)), Some(Ok(b))) => prop_assert_eq!(a, b, "compaction changed an admission"),
                (Some(Err(_)), Some(Err(_))) | (None, None) => {}
                (a, b) => prop_assert!(false, "compaction changed a decision: {:?} vs {:?}", a, b),
            }
            prop_assert_eq!(m.pending_window(), twin.pending_window());
            prop_assert_eq!((m.len(), m.cursor()), (twin.len(), twin.cursor()));
            let open: Vec<_> = m.open_waits().collect();
            let twin_open: Vec<_> = twin.open_waits().collect();
            prop_assert_eq!(open, twin_open);
            match result {
                Some(Ok(outcome)) => {
                    for arrival in &outcome.appended {
                        prop_assert!(admitted.insert(m.record(*arrival).unwrap().id().clone()));
                    }
                }
                Some(Err(_)) => prop_assert_eq!(&m, &before, "a refused batch changed the mailbox"),
                None => {}
            }
            // Cursor monotone, bodies on the right side of it, one record per admitted id.
            prop_assert!(m.cursor() >= before.cursor());
            prop_assert_eq!(m.len(), admitted.len() as u64);
            for r in m.records() {
                prop_assert_eq!(r.is_consumed(), r.arrival() <= m.cursor());
            }
            prop_assert_eq!(consumed.len() as u64, m.cursor());
            // Each wait answered at most once; open keys unique.
            let mut answers: BTreeMap<&WaitId, u32> = BTreeMap::new();
            for r in m.records().iter().filter(|r| r.is_answer()) {
                *answers.entry(r.wait_id().unwrap()).or_default() += 1;
            }
            prop_assert!(answers.values().all(|n| *n == 1));
            let mut keys = BTreeSet::new();
            for (_, state) in m.open_waits() {
                prop_assert!(keys.insert(state.key.clone()), "a wait key is open twice");
            }
            // Admission and history validation agree, and the wire form decodes to the same.
            let rebuilt = Mailbox::from_retained(m.records().to_vec(), m.cursor(), m.len());
            prop_assert_eq!(rebuilt.as_ref(), Ok(&m));
            let decoded = Mailbox::from_json(&m.to_json());
            prop_assert_eq!(decoded.as_ref(), Ok(&m));
            let whole = Mailbox::from_records(twin.records().to_vec(), twin.cursor());
            prop_assert_eq!(whole.as_ref(), Ok(&twin));
        }
        Ok(())
    }

    /// The twin's step: the same op without compaction.
    fn apply(
        m: &mut Mailbox,
        op: &Op,
        small: &AdmissionContext<'_>,
    ) -> Option<Result<AdmitOutcome, AdmissionError>> {
        match op {
            Op::External(batch, current) => {
                let current = current.map(w);
                let c = AdmissionContext { current_wait_id: current.as_ref(), ..*small };
                Some(m.admit_external(&external_batch(batch), &c))
            }
            Op::Open(n, k, child) => {
                let a = if *child {
                    child_opening(u32::from(*n), &format!("k{k}"))
                } else {
                    ext_opening(u32::from(*n), &format!("k{k}"))
                };
                Some(m.admit(&[a], small))
            }
            Op::ChildAnswer(n) => Some(m.admit(&[child_answer(u32::from(*n))], small)),
            Op::Settle(e, v) => {
                let mut s = settle(u32::from(*e) + 10, Some(SettlementStatus::Succeeded));
                s.payload = p(&format!("v{v}"));
                Some(m.admit(&[s], small))
            }
            Op::Consume(n) => {
                let _ = m.consume(u64::from(*n));
                None
            }
            Op::Compact => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn admission_and_consumption_keep_history_consistent(
            ops in prop::collection::vec(op(), 1..40)
        ) {
            run(ops)?;
        }
    }
}
