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
    assert_eq!(s.digest(), crate::json::Digest::of(s.bytes()));
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
