//! Property tests (proptest): canonical JSON, snapshot round trips over generated kernel runs,
//! and the mailbox's dedup/conflict rules for external Signals.
//!
//! Window-planning properties join these once the Interaction layer lands.

use keel::json::{self, Json, Number, Object, Payload, ToJson};
use keel::kernel::ids::{SignalId, WaitId};
use keel::kernel::mailbox::{AdmissionContext, AdmissionError, Mailbox, SignalsQuota};
use keel::kernel::resource::Budget;
use keel::kernel::signal::SignalRequest;
use keel::kernel::snapshot::TreeSnapshot;
use keel::kernel::testkit::Op;
use keel_tests::fuzz_props::{self, runs};
use proptest::prelude::*;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------------
// Canonical JSON

fn number() -> impl Strategy<Value = Json> {
    prop_oneof![
        any::<u64>().prop_map(Json::u64),
        any::<i64>().prop_map(|n| Json::Number(Number::from_i64(n))),
        "-?(0|[1-9][0-9]{0,30})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,4})?".prop_map(|t| Json::Number(Number::parse(&t).expect("grammar"))),
    ]
}

fn json_tree() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        any::<String>().prop_map(Json::String),
        "[\\x00-\\x1f\"\\\\/\u{7f}\u{2028}\u{e000}\u{10ffff}a-z]{0,8}".prop_map(Json::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8).prop_map(|m: BTreeMap<String, Json>| Json::Object(m.into_iter().collect::<Object>())),
        ]
    })
}

/// A deliberately non-canonical rendering: whitespace everywhere, members in reverse order and
/// every non-ASCII or special character as a `\u` escape (surrogate pairs above the BMP).
fn render_loose(value: &Json, out: &mut String) {
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
        out.push('"');
    }
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n.as_str()),
        Json::String(s) => string(s, out),
        Json::Array(items) => {
            out.push_str("[ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(" ,\n");
                }
                render_loose(item, out);
            }
            out.push_str("\t]");
        }
        Json::Object(object) => {
            out.push_str("{\r\n");
            for (i, (k, v)) in object.iter().rev().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string(k, out);
                out.push_str(" : ");
                render_loose(v, out);
            }
            out.push_str(" }");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn canonical_json_round_trips(value in json_tree()) {
        let canonical = value.to_canonical_bytes();
        prop_assert_eq!(canonical.len(), value.canonical_len());
        let parsed = json::parse(&canonical).expect("canonical bytes parse");
        prop_assert_eq!(&parsed, &value);
        prop_assert_eq!(parsed.to_canonical_bytes(), canonical.clone());
        fuzz_props::json_parse(&canonical);
    }

    #[test]
    fn every_rendering_of_a_tree_has_one_canonical_form(value in json_tree()) {
        let mut loose = String::new();
        render_loose(&value, &mut loose);
        let parsed = json::parse(loose.as_bytes()).expect("loose rendering parses");
        prop_assert_eq!(&parsed, &value);
        prop_assert_eq!(parsed.to_canonical_bytes(), value.to_canonical_bytes());
        fuzz_props::json_parse(loose.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshot round trip over generated kernel runs

fn leaf_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![Just(Json::Null), Just(Json::str("x")), (0u64..1000).prop_map(Json::u64), "[a-z]{0,6}".prop_map(Json::String)].prop_map(Op::Dispatch),
        3 => prop::sample::select(vec!["a", "b", "approval"]).prop_map(|k| Op::Wait(k.into())),
        2 => Just(Op::Checkpoint),
        1 => "[a-z ]{0,8}".prop_map(Op::Fail),
    ]
}

fn budget() -> impl Strategy<Value = Budget> {
    prop_oneof![Just(Budget::unlimited()), (0u64..8, 0u64..4, 0u64..8).prop_map(|(s, e, g)| Budget::finite(s, e, g))]
}

fn op(world: &'static runs::World) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => leaf_op(),
        1 => (prop::sample::select(vec!["c1", "c2"]), prop::collection::vec(leaf_op(), 0..4), budget())
            .prop_map(move |(key, script, budget)| world.child_op(key, script, budget)),
    ]
}

fn host_action() -> impl Strategy<Value = runs::HostAction> {
    use runs::HostAction::*;
    prop_oneof![
        3 => prop_oneof![Just(Json::str("yes")), Just(Json::Null), (0u64..10).prop_map(Json::u64)].prop_map(AnswerWaits),
        1 => (any::<u8>(), prop_oneof![Just(Json::str("note")), Just(Json::Null)]).prop_map(|(n, p)| Signal(n, p)),
        2 => Just(ResolveUnknowns),
        1 => any::<u8>().prop_map(Kill),
        1 => any::<u8>().prop_map(Cancel),
        2 => Just(Restore),
    ]
}

fn scenario() -> impl Strategy<Value = runs::Scenario> {
    use runs::DispatchOutcome::*;
    let world: &'static runs::World = Box::leak(Box::new(runs::World::new(&[])));
    (
        prop::collection::vec(op(world), 0..6),
        prop::collection::vec(prop::sample::select(vec![Echo, Echo, FailedSettlement, Lost, Canceled]), 0..4),
        prop::collection::vec(host_action(), 0..5),
        prop_oneof![3 => Just(Budget::unlimited()), 1 => (1u64..12, 0u64..6, 0u64..12).prop_map(|(s, e, g)| Budget::finite(s, e, g))],
    )
        .prop_map(|(ops, dispatch, host, budget)| runs::Scenario { ops, dispatch, host, budget })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every acknowledged cut of a generated run decodes, re-encodes byte-identically and
    /// passes every `tree_snapshot` fuzz property (including restore-and-run).
    #[test]
    fn every_cut_of_a_generated_run_round_trips(s in scenario()) {
        let cuts = runs::run(&s);
        prop_assert!(!cuts.is_empty() || s.budget != Budget::unlimited(), "an unlimited run commits at least its start");
        for cut in &cuts {
            let snap = TreeSnapshot::decode(cut).map_err(|e| TestCaseError::fail(format!("cut does not decode: {e}")))?;
            prop_assert_eq!(&snap.to_json().to_canonical_bytes(), cut);
            fuzz_props::tree_snapshot(cut);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Mailbox dedup / conflict rules

#[derive(Clone, Debug)]
enum MailboxStep {
    /// Admit one batch of (id index, payload index, addressed to an unknown wait).
    Admit(Vec<(u8, u8, bool)>),
    /// Consume up to n pending records.
    Consume(u8),
}

fn mailbox_steps() -> impl Strategy<Value = Vec<MailboxStep>> {
    let member = (0u8..5, 0u8..3, prop::bool::weighted(0.1));
    prop::collection::vec(
        prop_oneof![
            6 => prop::collection::vec(member, 1..4).prop_map(MailboxStep::Admit),
            1 => (0u8..4).prop_map(MailboxStep::Consume),
        ],
        1..30,
    )
}

fn request(id: u8, payload: u8, addressed: bool) -> SignalRequest {
    let wait = addressed.then(|| WaitId::parse(&format!("wait:{}", "ab".repeat(32))).expect("wait id"));
    SignalRequest::new(
        SignalId::external(&format!("signal:s{id}")).expect("external id"),
        wait,
        Payload::from_json(Json::str(format!("p{payload}"))).expect("payload"),
    )
    .expect("request")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A model of the rules: an id is admitted once; identical redelivery (same wait and
    /// payload, before or after consumption) never changes the mailbox; different content
    /// under an admitted id, or an id repeated inside one batch, is always a `Conflict`; a
    /// refused batch appends nothing.
    #[test]
    fn mailbox_dedup_and_conflict_rules(steps in mailbox_steps()) {
        let accept_all = |_: &Json| true;
        let ctx = AdmissionContext {
            terminal: false,
            current_wait_id: None,
            signal_schema: &accept_all,
            max_pending_signals: 1000,
            prepared_consumption: 0,
            prepared_reserved_settlements: 0,
            signals_quota: SignalsQuota { accepted: 0, allocated: 0, maximum: None },
        };
        let mut mailbox = Mailbox::new();
        // id → (payload, addressed) of every admitted Signal.
        let mut admitted: BTreeMap<u8, (u8, bool)> = BTreeMap::new();
        for step in steps {
            match step {
                MailboxStep::Consume(n) => {
                    let n = u64::from(n).min(mailbox.pending_count());
                    mailbox.consume(n).expect("consume within pending");
                }
                MailboxStep::Admit(members) => {
                    let batch: Vec<SignalRequest> = members.iter().map(|&(i, p, a)| request(i, p, a)).collect();
                    let before = mailbox.clone();
                    let result = mailbox.admit_external(&batch, &ctx);
                    // The model's verdict, member by member, in request order.
                    let mut seen = std::collections::BTreeSet::new();
                    let mut expected_new = Vec::new();
                    let mut duplicates = 0;
                    let mut verdict: Result<(), &str> = Ok(());
                    for &(i, p, a) in &members {
                        if !seen.insert(i) {
                            verdict = Err("conflict");
                            break;
                        }
                        match admitted.get(&i) {
                            Some(&content) if content == (p, a) => duplicates += 1,
                            Some(_) => { verdict = Err("conflict"); break; }
                            None if a => { verdict = Err("rejected"); break; }
                            None => expected_new.push((i, (p, a))),
                        }
                    }
                    match (verdict, result) {
                        (Ok(()), Ok(outcome)) => {
                            prop_assert_eq!(outcome.appended.len(), expected_new.len());
                            prop_assert_eq!(outcome.duplicates, duplicates);
                            prop_assert_eq!(mailbox.len(), before.len() + expected_new.len() as u64);
                            if expected_new.is_empty() {
                                prop_assert_eq!(&mailbox, &before, "identical redelivery changes nothing");
                            }
                            admitted.extend(expected_new);
                        }
                        (Err("conflict"), Err(AdmissionError::Conflict { .. })) | (Err("rejected"), Err(AdmissionError::Rejected { .. })) => {
                            prop_assert_eq!(&mailbox, &before, "a refused batch appends nothing");
                        }
                        (v, r) => prop_assert!(false, "model {:?} but mailbox {:?} for {:?}", v, r, members),
                    }
                }
            }
            // The mailbox always round-trips through its wire form.
            let wire = mailbox.to_json();
            let decoded = <Mailbox as keel::json::FromJson>::from_json(&wire).expect("mailbox decodes");
            prop_assert_eq!(&decoded, &mailbox);
        }
    }
}
