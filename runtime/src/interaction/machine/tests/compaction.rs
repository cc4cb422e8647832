//! The size of a long tool loop's cut: with compaction a cut is bounded by what is live, not
//! by how many rounds ran. Prints `cut_bytes_200 = N` and `cut_ratio_200_over_20 = X`.

use super::*;
use crate::json::ToJson;
use crate::kernel::status::Status;

/// The final cut's bytes after `rounds` model calls that each run one weather tool child,
/// then an answer; also the root's mailbox, committed state and retired-children bytes.
fn cut_bytes_after(rounds: u32) -> (usize, usize, usize, usize) {
    let mut script: Vec<Response> = (0..rounds)
        .map(|n| calls_response(vec![call(&format!("c{n:04}"), "weather", r#"{"city":"Oslo"}"#)]))
        .collect();
    script.push(answer("done"));
    let h = harness(script, |c| c.max_model_calls = rounds + 1);
    // No oracle re-check here: it decodes every cut again, which dominates long loops.
    let mut r = h.start("go");
    r.run_to_idle();
    let result = root_result(&r).expect("finished");
    assert_eq!(result.status(), Status::Completed);
    assert_eq!(output_of(&result).model_calls, rounds + 1);
    let head = h.head();
    let root = head.root();
    let len = |j: crate::json::Json| j.to_canonical_bytes().len();
    (head.bytes().len(), len(root.mailbox.to_json()), root.committed_state.payload.canonical().len(), len(root.retired.to_json()))
}

#[test]
#[ignore = "long: run with --ignored to measure the cut of a 200-round tool loop"]
fn cut_size_of_a_long_tool_loop() {
    let (short, ..) = cut_bytes_after(20);
    let (long, mailbox, state, retired) = cut_bytes_after(200);
    println!("cut_bytes_20 = {short}");
    println!("cut_bytes_200 = {long}");
    println!("cut_ratio_200_over_20 = {:.2}", long as f64 / short as f64);
    println!("root_mailbox_bytes_200 = {mailbox}");
    println!("root_state_bytes_200 = {state}");
    println!("root_retired_bytes_200 = {retired}");
}

#[test]
fn the_root_mailbox_of_a_tool_loop_stays_bounded() {
    // Every round leaves consumed Engine records in the root (the model call's settlement,
    // the tool child's start result, the child wait's opening and answer): compaction drops
    // them, so the mailbox does not grow with the rounds (without it, about 3 records a round).
    let (_, mailbox_16, _, retired_16) = cut_bytes_after(16);
    let (_, mailbox_64, _, retired_64) = cut_bytes_after(64);
    assert!(
        mailbox_64 as f64 <= mailbox_16 as f64 * 1.1,
        "root mailbox: {mailbox_16} bytes after 16 rounds, {mailbox_64} after 64"
    );
    // Each retired tool child is a residue record of its own; the root keeps a count and the
    // debit aggregate, which gain digits at most.
    assert!(retired_64 <= retired_16 + 4, "root retired_children: {retired_16} bytes after 16 rounds, {retired_64} after 64");
}
