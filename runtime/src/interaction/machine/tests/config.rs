//! Construction rules of Delegate, DefinitionConfig and Definition, and the
//! kernel's Definition conformance checks.

use super::*;
use crate::interaction::error::ErrorKind;
use crate::interaction::protocol::ModelCallEffect;
use crate::kernel::conformance::check_definition;
use crate::kernel::waist::Definition as _;

type Edit = Box<dyn Fn(&mut DefinitionConfig)>;

fn delegate_config(deployment: &Deployment) -> DelegateConfig {
    DelegateConfig {
        name: "upper".into(),
        description: "Upper-cases.".into(),
        deployment: deployment.clone(),
        budget: Budget::unlimited(),
        capabilities: CapabilitySet::empty(),
    }
}

#[test]
fn delegate_construction_rules() {
    let upper = upper_deployment(b"upper");
    assert!(Delegate::new(delegate_config(&upper)).is_ok());
    let mut bad_name = delegate_config(&upper);
    bad_name.name = "invalid/name".into();
    let mut empty = delegate_config(&upper);
    empty.description = String::new();
    let mut padded = delegate_config(&upper);
    padded.description = " padded".into();
    let mut long = delegate_config(&upper);
    long.description = "x".repeat(4097);
    let mut zero = delegate_config(&upper);
    zero.budget = Budget::finite(0, 1, 1);
    // A primitive-input deployment cannot take tool arguments.
    let mut primitive = delegate_config(&upper);
    primitive.deployment = crate::kernel::testkit::script_deployment("keel.test.script", None, vec![]);
    for config in [bad_name, empty, padded, long, zero, primitive] {
        assert_eq!(Delegate::new(config).unwrap_err().kind(), ErrorKind::InvalidDelegate);
    }
    let d = Delegate::new(delegate_config(&upper)).unwrap();
    assert_eq!(d.definition().input_schema, upper.definition().descriptor().input_schema().source().clone());
}

#[test]
fn definition_config_rules() {
    let tools = tool_set();
    let upper = upper_deployment(b"upper");
    assert!(Definition::new(base_config(&tools)).is_ok());
    let mut none = base_config(&tools);
    none.tools = None;
    none.tool_budget = None;
    none.max_concurrent_tool_calls = 0;
    assert!(Definition::new(none.clone()).is_ok(), "no tools at all is fine");
    let cases: Vec<Edit> = vec![
        Box::new(|c| c.max_model_calls = 0),
        Box::new(|c| c.tool_budget = None),
        Box::new(|c| c.tool_budget = Some(Budget::finite(0, 0, 0))),
        Box::new(|c| c.name = "not a name".into()),
        Box::new(|c| c.description = String::new()),
    ];
    for case in &cases {
        let mut c = base_config(&tools);
        case(&mut c);
        assert_eq!(Definition::new(c).unwrap_err().kind(), ErrorKind::InvalidDefinitionConfig);
    }
    let policy: Vec<Edit> = vec![
        Box::new(|c| c.tool_budget = Some(Budget::unlimited())),
        Box::new(|c| c.tool_capabilities = CapabilitySet::from_names(&["net.fetch"]).unwrap()),
        Box::new(|c| c.max_concurrent_tool_calls = 2),
    ];
    for case in &policy {
        let mut c = none.clone();
        case(&mut c);
        assert_eq!(Definition::new(c).unwrap_err().kind(), ErrorKind::InvalidDefinitionConfig, "tool policy without tools");
    }
    let mut duplicate = base_config(&tools);
    duplicate.delegates = vec![delegate("upper", &upper), delegate("upper", &upper)];
    assert_eq!(Definition::new(duplicate).unwrap_err().kind(), ErrorKind::InvalidDefinitionConfig);
    let mut collision = base_config(&tools);
    collision.delegates = vec![delegate("weather", &upper)];
    assert_eq!(Definition::new(collision).unwrap_err().kind(), ErrorKind::InvalidDefinitionConfig);
    let mut deferred = base_config(&tools);
    deferred.delegates = vec![delegate("hidden", &upper)];
    assert_eq!(Definition::new(deferred).unwrap_err().kind(), ErrorKind::InvalidDefinitionConfig, "deferred names too");
}

#[test]
fn manifest_and_child_bindings() {
    let tools = tool_set();
    let upper = upper_deployment(b"upper");
    let mut config = base_config(&tools);
    config.delegates = vec![delegate("upper", &upper)];
    let d = Definition::new(config).unwrap();
    let m = d.model_manifest();
    let initial: Vec<&str> = m.initial.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(initial, TOOLS.to_vec());
    assert_eq!(m.delegates[0].name, "upper");
    assert_eq!(m.deferred.keys().collect::<Vec<_>>(), vec!["hidden"]);
    assert_eq!(d.child_deployments(), vec![tools.deployment_ref().clone(), upper.reference().clone()]);
}

#[test]
fn start_and_restore_reject_bad_input_and_foreign_state() {
    let tools = tool_set();
    let d = Definition::new(base_config(&tools)).unwrap();
    assert!(d.start(&Payload::from_bytes(br#"{"messages":[]}"#).unwrap()).is_err());
    assert!(d.start(&Payload::from_bytes(br#"{"messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}],"x":1}"#).unwrap()).is_err());
    let e = d.start(&user_input("hi")).unwrap();
    let mut state = e.snapshot().unwrap();
    assert!(d.restore(&StepContext::default(), &state).is_ok());
    state.kind = QualifiedName::parse("interaction.other").unwrap();
    assert!(d.restore(&StepContext::default(), &state).is_err());
    // A state counting more model calls than the Definition allows is rejected.
    let mut small = base_config(&tools);
    small.max_model_calls = 1;
    let small = Definition::new(small).unwrap();
    let mut e = small.start(&user_input("hi")).unwrap();
    e.step(&StepContext::default(), &[]).unwrap();
    let counted = e.snapshot().unwrap();
    let mut tiny_payload = counted.payload.value().clone();
    if let Json::Object(o) = &mut tiny_payload {
        o.insert("model_call_count".into(), Json::u64(2));
    }
    let tampered = ExecutionState { kind: counted.kind.clone(), payload: Payload::from_json(tiny_payload).unwrap(), segments: Vec::new() };
    assert!(small.restore(&StepContext::default(), &tampered).is_err());
}

#[test]
fn steps_are_pure_and_cancellation_leaves_the_state() {
    let tools = tool_set();
    let d = Definition::new(base_config(&tools)).unwrap();
    let mut e = d.start(&user_input("hi")).unwrap();
    let before = e.snapshot().unwrap();
    let cx = StepContext::default();
    cx.cancel.cancel();
    assert_eq!(e.step(&cx, &[]).unwrap_err(), StepError::Canceled);
    assert_eq!(e.snapshot().unwrap(), before);
    let t = e.step(&StepContext::default(), &[]).unwrap();
    let Transition::Continue { effects, .. } = t else { panic!("{t:?}") };
    let Effect::Dispatcher(payload) = &effects[0] else { panic!() };
    let effect = ModelCallEffect::from_payload(payload).unwrap();
    assert_eq!(effect.model_call_sequence, 1);
    let request = effect.request(&e.snapshot().unwrap().segments).unwrap();
    assert!(request.tools.is_empty(), "the working context never holds tools");
    // Another step in awaiting_model without a settlement is an error and changes nothing.
    let mid = e.snapshot().unwrap();
    assert!(e.step(&StepContext::default(), &[]).is_err());
    assert_eq!(e.snapshot().unwrap(), mid);
}

#[test]
fn conformance() {
    let tools = tool_set();
    let d = Definition::new(base_config(&tools)).unwrap();
    let steer = crate::interaction::signals::steer_signal(SignalId::parse("signal:s1").unwrap(), vec![Message::user("hey")])
        .unwrap();
    let steer = Signal::new(steer.id().clone(), None, steer.payload().clone(), None).unwrap();
    let effect = crate::kernel::ids::EffectId::derive(&ProcessId::root_from_hex(&hex(1)).unwrap(), 1, 0);
    let settled = crate::interaction::protocol::ModelResult::response(answer("done")).to_settlement().unwrap();
    let settlement =
        Signal::new(SignalId::settlement(&effect), None, settled.payload.clone(), Some(settled.status)).unwrap();
    let suffixes = vec![
        vec![vec![]],
        vec![vec![steer.clone()]],
        vec![vec![], vec![steer, settlement.clone()]],
        vec![vec![], vec![settlement]],
    ];
    check_definition(&d, &user_input("hi"), &suffixes).unwrap();
}

#[test]
fn start_input_errors_are_invalid_input() {
    let d = Definition::new(base_config(&tool_set())).unwrap();
    let user = r#"{"parts":[{"text":"a","type":"text"}],"role":"user"}"#;
    let system = r#"{"parts":[{"text":"be terse","type":"text"}],"role":"system"}"#;
    let bad = [
        "[]".to_owned(),
        r#"{"messages":[]}"#.to_owned(),
        format!(r#"{{"messages":[{user}],"x":1}}"#),
        format!(r#"{{"messages":[{user},{system}]}}"#),
        format!(r#"{{"messages":[{user}],"options":{{"temperature":"hot"}}}}"#),
        r#"{"messages":[{"parts":[],"role":"user"}]}"#.to_owned(),
    ];
    for text in &bad {
        let e = d.start(&Payload::from_bytes(text.as_bytes()).unwrap()).err().unwrap_or_else(|| panic!("{text} started"));
        assert!(e.to_string().contains("invalid input"), "{text}: {e}");
    }
    // A leading system prefix is fine.
    let ok = format!(r#"{{"messages":[{system},{user}]}}"#);
    assert!(d.start(&Payload::from_bytes(ok.as_bytes()).unwrap()).is_ok());
}
