//! Delegates through the real owner.

use super::*;
use crate::chat::ToolResult;
use crate::interaction::completion::{CompletionCandidate, CompletionDecision};
use crate::kernel::status::Status;

fn with_upper(responses: Vec<Response>, validator: bool) -> (Harness, Arc<Mutex<Vec<String>>>) {
    let upper = upper_deployment(b"upper");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let u = upper.clone();
    let h = harness_with(
        responses,
        move |c| {
            c.delegates = vec![delegate("upper", &u)];
            if validator {
                c.completion_validator = Some(Arc::new(move |candidate: &CompletionCandidate| {
                    for a in candidate.artifacts().iter() {
                        record.lock().unwrap().push(format!("{}:{}", a.delegate_name(), a.output().canonical()));
                    }
                    Ok(CompletionDecision::accept())
                }));
            }
        },
        move |set| set.insert(upper),
    );
    (h, seen)
}

#[test]
fn a_delegate_run_starts_together_and_settles_in_call_order() {
    let calls = vec![
        call("u1", "upper", r#"{"text":"first"}"#),
        call("u2", "upper", r#"{"text":"second"}"#),
        call("w", "weather", "{}"),
    ];
    let (h, seen) = with_upper(vec![calls_response(calls), answer("done")], true);
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].output.details.as_ref().unwrap().to_canonical_string(), r#"{"value":"FIRST"}"#);
    assert!(results[0].output.content.is_empty());
    assert_eq!(results[1].output.details.as_ref().unwrap().to_canonical_string(), r#"{"value":"SECOND"}"#);
    assert_eq!(results[2].id, "w");
    assert_eq!(*seen.lock().unwrap(), vec![r#"upper:{"value":"FIRST"}"#.to_owned(), r#"upper:{"value":"SECOND"}"#.to_owned()]);
    let first = h.model.request(0);
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.last(), Some(&"upper"), "delegates follow the initial tools");
}

#[test]
fn delegate_argument_errors_are_model_visible_and_start_nothing() {
    let calls = vec![call("u1", "upper", "{not json"), call("u2", "upper", r#"{"text":7}"#), call("u3", "upper", "  ")];
    let (h, _) = with_upper(vec![calls_response(calls), answer("done")], false);
    let (r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert!(results.iter().all(|r| r.is_error));
    assert!(results[0].output.content.starts_with("error: delegated worker arguments are not valid JSON: "));
    assert!(results[1]
        .output
        .content
        .starts_with("error: delegated worker arguments violate the delegated worker input contract: "));
    // Blank arguments become `{}`, which lacks the required `text`.
    assert!(results[2].output.content.contains("input contract"));
    let head = futures::executor::block_on(h.committer.load_tree(r.owner.root_id())).unwrap().unwrap();
    let snapshot = crate::kernel::snapshot::TreeSnapshot::from_cut(&head.cut).unwrap();
    assert_eq!(snapshot.processes().len(), 1, "no child was started");
}

#[test]
fn a_failed_delegate_child_is_a_model_visible_error() {
    let (h, _) = with_upper(vec![calls_response(vec![call("u1", "upper", r#"{"text":"fail"}"#)]), answer("done")], false);
    let (_r, result) = h.run("go");
    assert_eq!(result.status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert!(results[0].is_error);
    assert!(results[0].output.content.starts_with("error: delegated worker child ended with failed"), "{results:?}");
}

#[test]
fn a_delegate_start_failure_is_a_model_visible_error() {
    let upper = upper_deployment(b"upper");
    // The delegate's deployment is not resolvable.
    let h = harness_with(
        vec![calls_response(vec![call("u1", "upper", r#"{"text":"a"}"#)]), answer("done")],
        move |c| c.delegates = vec![delegate("upper", &upper)],
        |_| {},
    );
    let mut r = h.start("go");
    r.run_to_idle();
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let results: Vec<ToolResult> = results_at(&h.model.request(1), 2);
    assert!(results[0].is_error);
    assert!(
        results[0].output.content.starts_with("error: delegated worker child start failed: engine.child.deployment_unavailable"),
        "{results:?}"
    );
}

#[test]
fn a_waiting_delegate_tree_restores_without_restarting_the_child() {
    use crate::kernel::owner::Command;
    use crate::kernel::snapshot::TreeSnapshot;
    let (h, _) = with_upper(vec![calls_response(vec![call("u1", "upper", r#"{"text":"wait"}"#)]), answer("done")], false);
    let mut r = h.start("go");
    r.run_to_idle();
    assert!(root_result(&r).is_none());
    let load = |h: &Harness| {
        let head = futures::executor::block_on(h.committer.load_tree(&ProcessId::root_from_hex(&hex(1)).unwrap()));
        TreeSnapshot::from_cut(&head.unwrap().unwrap().cut).unwrap()
    };
    let before = load(&h);
    assert_eq!(before.processes().len(), 2);
    let owner = Owner::restore(h.resolver.clone(), h.parent.clone(), &before, IncarnationId::from_hex(&hex(300)).unwrap(), now())
        .unwrap();
    let mut r2 = DirectRunner::new(owner, h.committer.clone() as Arc<dyn Committer>, now());
    r2.run_to_idle();
    let after = load(&h);
    assert_eq!(after.processes().len(), 2, "no duplicate child");
    let child = after.processes().iter().find(|p| p.relation.child_key.is_some()).unwrap();
    let wait = child.current_wait_id.clone().expect("the child is parked");
    let request = crate::kernel::signal::SignalRequest::new(
        SignalId::external("signal:go").unwrap(),
        Some(wait),
        Payload::from_json(Json::str("go on")).unwrap(),
    )
    .unwrap();
    r2.command(Command::Deliver { process: child.id.clone(), requests: vec![request] }).unwrap();
    r2.run_to_idle();
    h.check(&r2);
    assert_eq!(root_result(&r2).unwrap().status(), Status::Completed);
    let results = results_at(&h.model.request(1), 2);
    assert_eq!(results[0].output.details.as_ref().unwrap().to_canonical_string(), r#"{"value":"GO ON"}"#);
}

#[test]
fn every_child_gets_exactly_its_grant_under_its_derived_key() {
    use crate::interaction::ids::{delegate_child_key, tool_child_key};
    let caps = |names: &[&str]| CapabilitySet::from_names(names).unwrap();
    let upper = upper_deployment(b"upper");
    let u = upper.clone();
    let delegate_call = call("u1", "upper", r#"{"text":"x"}"#);
    let h = harness_with(
        vec![calls_response(vec![call("w", "weather", "{}"), delegate_call.clone()]), answer("done")],
        move |c| {
            c.tool_budget = Some(Budget::finite(40, 41, 42));
            c.tool_capabilities = caps(&["net.fetch"]);
            c.delegates = vec![Delegate::new(DelegateConfig {
                name: "upper".into(),
                description: "Upper-cases.".into(),
                deployment: u,
                budget: Budget::finite(30, 31, 32),
                capabilities: caps(&["fs.read"]),
            })
            .unwrap()];
        },
        move |set| set.insert(upper),
    );
    let mut r = h.start_with("go", caps(&["fs.read", "net.fetch", "shell.exec"]));
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let children: Vec<crate::kernel::owner::ProcessInfo> = r
        .published
        .iter()
        .filter_map(|p| match p {
            Publication::Started { process, .. } if !process.relation.is_root() => Some(process.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(children.len(), 2);
    let tool = &children[0];
    assert_eq!(tool.relation.child_key, Some(tool_child_key(1, "w").unwrap()));
    assert_eq!(tool.budget, Budget::finite(40, 41, 42));
    assert_eq!(tool.capabilities, caps(&["net.fetch"]));
    let worker = &children[1];
    assert_eq!(worker.relation.child_key, Some(delegate_child_key(1, &delegate_call).unwrap()));
    assert_eq!(worker.budget, Budget::finite(30, 31, 32));
    assert_eq!(worker.capabilities, caps(&["fs.read"]));
}

#[test]
fn a_steer_arriving_during_a_delegate_batch_waits_for_the_round() {
    use crate::interaction::signals::steer_signal;
    use crate::kernel::owner::Command;
    let (h, _) = with_upper(vec![calls_response(vec![call("u1", "upper", r#"{"text":"wait"}"#)]), answer("done")], false);
    let mut r = h.start("go");
    r.run_to_idle();
    let steer = steer_signal(SignalId::parse("signal:mid").unwrap(), vec![Message::user("one word")]).unwrap();
    r.command(Command::Deliver { process: r.owner.root_id().clone(), requests: vec![steer] }).unwrap();
    r.run_to_idle();
    assert_eq!(h.model.calls(), 1, "the steer does not interrupt the delegate");
    let head = h.head();
    let child = head.processes().iter().find(|p| !p.relation.is_root()).unwrap();
    let request = crate::kernel::signal::SignalRequest::new(
        SignalId::external("signal:go").unwrap(),
        child.current_wait_id.clone(),
        Payload::from_json(Json::str("fine")).unwrap(),
    )
    .unwrap();
    r.command(Command::Deliver { process: child.id.clone(), requests: vec![request] }).unwrap();
    r.run_to_idle();
    h.check(&r);
    assert_eq!(root_result(&r).unwrap().status(), Status::Completed);
    let texts: Vec<String> = h.model.request(1).messages.iter().map(Message::text).collect();
    assert_eq!(texts.len(), 4, "[user, assistant(call), tool(artifact), user(steer)]");
    assert_eq!(texts[3], "one word");
    assert_eq!(results_at(&h.model.request(1), 2)[0].output.details.as_ref().unwrap().to_canonical_string(), r#"{"value":"FINE"}"#);
    assert_eq!(h.model.applied.lock().unwrap()[1], [SignalId::parse("signal:mid").unwrap()]);
}
