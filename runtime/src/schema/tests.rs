use super::*;
use crate::json::codec::DecodeErrorKind;
use crate::json::{Number, Object};
use serde_json::json;

/// Test-only bridge so schemas can be written with `json!` (the real parser is another
/// module's job and may still be a stub here).
fn j(value: serde_json::Value) -> Json {
    match value {
        serde_json::Value::Null => Json::Null,
        serde_json::Value::Bool(b) => Json::Bool(b),
        serde_json::Value::Number(n) => num(n.as_str()),
        serde_json::Value::String(s) => Json::String(s),
        serde_json::Value::Array(items) => Json::Array(items.into_iter().map(j).collect()),
        serde_json::Value::Object(members) => {
            Json::Object(members.into_iter().map(|(k, v)| (k, j(v))).collect())
        }
    }
}

fn num(text: &str) -> Json {
    Json::Number(Number(text.to_owned()))
}

fn compile(value: serde_json::Value) -> Schema {
    Schema::compile(&j(value)).expect("schema compiles")
}

fn compile_err(value: serde_json::Value) -> SchemaError {
    Schema::compile(&j(value)).expect_err("schema must be rejected")
}

fn assert_bounded(text: &str) {
    assert!(text.len() <= limits::MAX_DIAGNOSTIC_BYTES, "{} bytes", text.len());
    assert_eq!(text, text.trim());
    assert!(!text.is_empty());
}

#[test]
fn schema_is_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Schema>();
    assert_send_sync::<SchemaError>();
    assert_send_sync::<SchemaViolation>();
    let a = compile(json!({"type": "string"}));
    let b = a.clone();
    assert!(Arc::ptr_eq(&a.inner, &b.inner));
}

#[test]
fn an_equal_small_source_shares_one_compiled_schema() {
    let source = j(json!({"type": "object", "properties": {"shared_test_marker": {"maximum": 1}}}));
    let a = Schema::compile(&source).unwrap();
    let b = Schema::compile(&source.clone()).unwrap();
    assert!(Arc::ptr_eq(&a.inner, &b.inner));
    // `1` and `1.0` are different sources: each keeps its own exact text.
    let other = j(json!({"type": "object", "properties": {"shared_test_marker": {"maximum": 1.0}}}));
    let c = Schema::compile(&other).unwrap();
    assert!(!Arc::ptr_eq(&a.inner, &c.inner));
    assert_eq!(c.source(), &other);
    assert_ne!(a, c);
    // A large source is compiled afresh each time (the table stays small).
    let mut big = Object::new();
    big.insert("type".into(), Json::str("object"));
    big.insert("description".into(), Json::str("x".repeat(MAX_SHARED_SCHEMA_BYTES)));
    let big = Json::Object(big);
    let d = Schema::compile(&big).unwrap();
    let e = Schema::compile(&big).unwrap();
    assert!(!Arc::ptr_eq(&d.inner, &e.inner));
    assert_eq!(d, e);
    // A rejected source is never kept: it is rejected again.
    let bad = j(json!({"type": 5, "shared_test_marker": true}));
    assert!(Schema::compile(&bad).is_err());
    assert!(Schema::compile(&bad).is_err());
}

#[test]
fn compiles_valid_schemas_and_keeps_exact_source() {
    let source = j(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "n": {"maximum": 1.50}},
        "required": ["name"],
        "$defs": {"x": {"const": 1}}
    }));
    let schema = Schema::compile(&source).unwrap();
    assert_eq!(schema.source(), &source);
    assert_eq!(schema.to_json(), source);
    assert_eq!(schema, Schema::compile(&source).unwrap());
}

#[test]
fn rejects_invalid_schemas_without_panicking() {
    for bad in [
        json!({"type": 5}),
        json!({"type": "strin"}),
        json!({"pattern": "("}),
        json!({"patternProperties": {"[": {}}}),
        json!({"minLength": -1}),
        json!({"required": "name"}),
        json!({"properties": 5}),
        json!({"$ref": "#/nope"}),
        json!({"$ref": 5}),
        json!({"$schema": 5}),
        json!({"$defs": {"a": {"$ref": "#/$defs/missing"}}, "$ref": "#/$defs/a"}),
        json!(5),
        json!("object"),
        json!(null),
        json!([]),
    ] {
        let err = Schema::compile(&j(bad.clone())).expect_err(&format!("{bad} should not compile"));
        assert!(matches!(err, SchemaError::Invalid { .. }), "{bad}: {err:?}");
        assert!(err.diagnostic().starts_with("invalid schema"), "{bad}: {err}");
        assert_bounded(&err.diagnostic());
    }
}

#[test]
fn invalid_schema_diagnostic_names_the_location() {
    let err = compile_err(json!({"properties": {"a": {"type": 5}}}));
    assert!(err.diagnostic().starts_with("invalid schema at /properties/a/type: "), "{err}");
    // Reference errors have no location; the message names the reference instead.
    let err = compile_err(json!({"$ref": "#/nope"}));
    assert!(err.diagnostic().starts_with("invalid schema: "), "{err}");
    assert!(err.diagnostic().contains("/nope"), "{err}");
    let err = compile_err(json!({"$ref": "http://x/y"}));
    assert!(err.diagnostic().contains("http://x/y"), "{err}");
}

#[test]
fn external_refs_are_compile_errors_without_retrieval() {
    for ext in [
        json!({"$ref": "http://x/y"}),
        json!({"$ref": "https://json-schema.org/draft/2020-12/schema#/$defs/nope"}),
        json!({"$ref": "http://127.0.0.1:9/schema.json"}),
        json!({"$ref": "file:///etc/passwd"}),
        json!({"$ref": "other.json"}),
        json!({"$ref": "urn:example:thing"}),
        json!({"properties": {"a": {"$ref": "http://x/y#/a"}}}),
        json!({"$id": "http://example.com/root.json", "$ref": "item.json"}),
        json!({"$dynamicRef": "http://x/y#meta"}),
    ] {
        let err = compile_err(ext.clone());
        assert!(matches!(err, SchemaError::Invalid { .. }), "{ext}: {err:?}");
        assert_bounded(&err.diagnostic());
    }
}

#[test]
fn internal_refs_resolve() {
    let schema = compile(json!({
        "$id": "http://example.com/root.json",
        "$defs": {
            "pos": {"type": "integer", "minimum": 1},
            "named": {"$id": "named.json", "type": "string"}
        },
        "properties": {
            "a": {"$ref": "#/$defs/pos"},
            "b": {"$ref": "named.json"},
            "c": {"$ref": "http://example.com/root.json#/$defs/pos"}
        }
    }));
    assert!(schema.is_valid(&j(json!({"a": 1, "b": "x", "c": 2}))));
    assert!(!schema.is_valid(&j(json!({"a": 0}))));
    assert!(!schema.is_valid(&j(json!({"b": 1}))));
    assert!(!schema.is_valid(&j(json!({"c": 0}))));
    // The official meta-schemas ship inside the crate: referencing them needs no retrieval.
    let meta = compile(json!({"$ref": "https://json-schema.org/draft/2020-12/schema"}));
    assert!(meta.is_valid(&j(json!({"type": "string"}))));
    assert!(!meta.is_valid(&j(json!({"type": 5}))));
}

#[test]
fn recursive_refs_terminate() {
    // Structural recursion through `$ref: "#"` must validate nested instances.
    let tree = compile(json!({
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
        "additionalProperties": false
    }));
    let mut instance = j(json!({}));
    for _ in 0..40 {
        let mut o = Object::new();
        o.insert("children".into(), Json::Array(vec![instance]));
        instance = Json::Object(o);
    }
    assert!(tree.is_valid(&instance));
    assert!(!tree.is_valid(&j(json!({"children": [{"x": 1}]}))));
    // Reference cycles without progress compile and validate (or fail) without hanging.
    for cyclic in [
        json!({"$ref": "#"}),
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
    ] {
        if let Ok(schema) = Schema::compile(&j(cyclic)) {
            let _ = schema.validate(&j(json!({"a": [1, 2]})));
        }
    }
}

#[test]
fn draft_selection() {
    // Default (no $schema) is 2020-12: `prefixItems` applies, array-form `items` is invalid.
    let tuple = compile(json!({"prefixItems": [{"type": "integer"}], "items": false}));
    assert!(tuple.is_valid(&j(json!([1]))));
    assert!(!tuple.is_valid(&j(json!([1, 2]))));
    assert!(!tuple.is_valid(&j(json!(["x"]))));
    assert!(Schema::compile(&j(json!({"items": [{"type": "integer"}]}))).is_err());
    // Draft 7 named by $schema: array-form `items` is a tuple.
    let draft7 = compile(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "items": [{"type": "integer"}],
        "additionalItems": false
    }));
    assert!(draft7.is_valid(&j(json!([1]))));
    assert!(!draft7.is_valid(&j(json!([1, 2]))));
    // Explicit 2020-12 works too.
    compile(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "null"}));
    // Unknown meta-schemas would need retrieval: rejected.
    let err = compile_err(json!({"$schema": "http://example.com/custom-meta", "type": "null"}));
    assert_bounded(&err.diagnostic());
}

#[test]
fn validation_pass_and_fail() {
    let schema = compile(json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
        "additionalProperties": false
    }));
    assert_eq!(schema.validate(&j(json!({"name": "ann", "age": 3}))), Ok(()));
    assert!(schema.is_valid(&j(json!({"name": "ann"}))));

    let violation = schema.validate(&j(json!({"age": -1, "extra": true}))).unwrap_err();
    let text = violation.diagnostic();
    assert!(text.starts_with("schema violation"), "{text}");
    assert!(text.contains("at /age:"), "{text}");
    assert!(text.contains("at (root):"), "{text}");
    assert!(text.contains("\"name\" is a required property"), "{text}");
    assert_eq!(violation.error_count(), 3, "{text}");
    assert_eq!(violation.to_string(), text);
    assert!(!schema.is_valid(&j(json!({"age": -1}))));
    assert!(!schema.is_valid(&j(json!("not an object"))));
}

#[test]
fn diagnostics_are_deterministic() {
    let schema = compile(
        json!({"properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"minimum": 5}}}),
    );
    let instance = j(json!({"c": 1, "b": 2, "a": 3}));
    let first = schema.validate(&instance).unwrap_err();
    for _ in 0..5 {
        assert_eq!(
            Schema::compile(schema.source()).unwrap().validate(&instance),
            Err(first.clone())
        );
    }
    let text = first.diagnostic();
    let (a, b, c) =
        (text.find("at /a").unwrap(), text.find("at /b").unwrap(), text.find("at /c").unwrap());
    assert!(a < b && b < c, "{text}");
}

#[test]
fn false_schema_rejects_everything_true_accepts_everything() {
    let samples =
        [json!(null), json!(true), json!(0), json!(""), json!([]), json!({}), json!({"a": [1]})];
    for schema in [Schema::reject_all(), compile(json!(false)), compile(json!({"not": {}}))] {
        for s in &samples {
            let instance = j(s.clone());
            assert!(!schema.is_valid(&instance), "{s}");
            let violation = schema.validate(&instance).unwrap_err();
            assert!(violation.error_count() >= 1);
            assert_bounded(violation.diagnostic());
        }
    }
    for schema in [Schema::accept_all(), compile(json!(true)), compile(json!({}))] {
        for s in &samples {
            assert_eq!(schema.validate(&j(s.clone())), Ok(()), "{s}");
        }
    }
    assert_eq!(Schema::accept_all().source(), &Json::Bool(true));
    assert_eq!(Schema::reject_all().source(), &Json::Bool(false));
    assert_eq!(Schema::reject_all().to_json(), Json::Bool(false));
}

#[test]
fn big_numbers_compare_exactly() {
    let max = compile(json!({"maximum": 9007199254740992u64}));
    assert!(max.is_valid(&num("9007199254740992")));
    assert!(!max.is_valid(&num("9007199254740993")), "rounded through f64");
    assert!(max.validate(&num("9007199254740993")).is_err());

    let min = Schema::compile(&j(json!({"minimum": 0}))).unwrap();
    assert!(min.is_valid(&num("18446744073709551616")));
    assert!(!min.is_valid(&num("-18446744073709551616")));

    let exact = Schema::compile(&Json::Object(Object::from([(
        "const".to_owned(),
        num("9007199254740993"),
    )])))
    .unwrap();
    assert!(exact.is_valid(&num("9007199254740993")));
    assert!(!exact.is_valid(&num("9007199254740992")));

    let number = compile(json!({"type": "number"}));
    for text in ["1e400", "-1e400", "1e-400", "123456789012345678901234567890.5"] {
        assert!(number.is_valid(&num(text)), "{text}");
    }
    // `1e400` is not representable as f64 yet still a (huge) number, above any small maximum.
    let small_max = compile(json!({"maximum": 5}));
    assert!(!small_max.is_valid(&num("1e400")));
    assert!(small_max.is_valid(&num("-1e400")));

    let integer = compile(json!({"type": "integer"}));
    assert!(integer.is_valid(&num("9007199254740993")));
    assert!(integer.is_valid(&num("18446744073709551616")));
    assert!(!integer.is_valid(&num("0.5")));
}

#[test]
fn diagnostic_is_bounded_for_huge_errors() {
    // One huge error: the `enum` message echoes every allowed value.
    let long: Vec<String> = (0..200).map(|i| format!("{i}-{}", "x".repeat(200))).collect();
    let schema = compile(json!({"enum": long}));
    let violation = schema.validate(&j(json!("nope"))).unwrap_err();
    assert_bounded(violation.diagnostic());
    assert!(
        violation.diagnostic().starts_with("schema violation at (root): "),
        "{}",
        violation.diagnostic()
    );

    // Many errors with long property names: listed up to the limit, the rest counted.
    let mut props = serde_json::Map::new();
    let mut instance = serde_json::Map::new();
    for i in 0..50 {
        let name = format!("{i:02}-{}", "p".repeat(500));
        props.insert(name.clone(), json!({"type": "string"}));
        instance.insert(name, json!(i));
    }
    let schema = compile(json!({"properties": props}));
    let violation = schema.validate(&j(serde_json::Value::Object(instance))).unwrap_err();
    let text = violation.diagnostic();
    assert_bounded(text);
    assert_eq!(violation.error_count(), 50);
    assert!(text.ends_with("; and 42 more"), "{text}");
    assert_eq!(text.matches("at /").count(), limits::MAX_SCHEMA_ERRORS_LISTED, "{text}");

    // A huge schema error is bounded too.
    let err = compile_err(json!({"properties": {"x".repeat(5000): {"type": "y".repeat(5000)}}}));
    assert_bounded(&err.diagnostic());
}

#[test]
fn diagnostic_cut_is_utf8_safe() {
    // Multi-byte characters everywhere, with every alignment of the cut against a char.
    for pad in 0..4 {
        let value = format!("{}{}", "a".repeat(pad), "€😀é".repeat(2000));
        let schema = compile(json!({"const": value}));
        let violation = schema
            .validate(&j(json!(format!("{}{}", "b".repeat(pad), "😀€".repeat(2000)))))
            .unwrap_err();
        assert_bounded(violation.diagnostic());
        let err = compile_err(json!({"type": value}));
        assert_bounded(&err.diagnostic());
    }
}

#[test]
fn nesting_limits() {
    fn nested_arrays(depth: usize) -> Json {
        let mut v = Json::Null;
        for _ in 0..depth {
            v = Json::Array(vec![v]);
        }
        v
    }
    // Deeply nested schemas: up to the limit compile, beyond it a typed error.
    let mut schema = json!({});
    for _ in 0..limits::MAX_JSON_DEPTH - 1 {
        schema = json!({"not": schema});
    }
    let s = Schema::compile(&j(schema.clone())).unwrap();
    // 127 `not`s around `{}`: odd count → rejects everything.
    assert!(!s.is_valid(&Json::Null));
    let deeper = json!({"not": schema});
    assert_eq!(
        Schema::compile(&j(deeper)).unwrap_err(),
        SchemaError::TooDeep { limit: limits::MAX_JSON_DEPTH }
    );
    let mut items = json!({});
    for _ in 0..limits::MAX_JSON_DEPTH - 1 {
        items = json!({"items": items});
    }
    let s = Schema::compile(&j(items)).unwrap();
    assert!(s.is_valid(&nested_arrays(limits::MAX_JSON_DEPTH)));

    // Instances: beyond the limit, rejected as a violation (even by `true`).
    let accept = Schema::accept_all();
    assert!(accept.is_valid(&nested_arrays(limits::MAX_JSON_DEPTH)));
    let too_deep = nested_arrays(limits::MAX_JSON_DEPTH + 1);
    assert!(!accept.is_valid(&too_deep));
    let violation = accept.validate(&too_deep).unwrap_err();
    assert!(violation.diagnostic().contains("nesting"), "{}", violation.diagnostic());
}

#[test]
fn malformed_number_text_is_a_typed_error() {
    // Only constructible inside the crate, but must not panic.
    let bad = Json::Number(Number("1.".to_owned()));
    assert!(matches!(
        Schema::compile(&Json::Object(Object::from([("maximum".to_owned(), bad.clone())]))),
        Err(SchemaError::Invalid { .. })
    ));
    assert!(!Schema::accept_all().is_valid(&bad));
    assert!(Schema::accept_all().validate(&bad).is_err());
}

#[test]
fn pathological_patterns_are_bounded() {
    // A back-reference forces the backtracking engine; on this input the match explodes and
    // the step budget turns it into a rejection instead of a hang.
    let schema = compile(json!({"pattern": "(x+x+)+\\1y"}));
    let instance = j(json!("x".repeat(30)));
    let violation = schema.validate(&instance).unwrap_err();
    assert!(violation.diagnostic().contains("backtracking"), "{}", violation.diagnostic());
    assert_bounded(violation.diagnostic());
    // Plain patterns use the linear-time engine: no budget involved.
    let linear = compile(json!({"pattern": "^(x+x+)+y$"}));
    assert!(!linear.is_valid(&instance));
    assert!(linear.is_valid(&j(json!("xxy"))));
}

#[test]
fn formats_follow_the_draft_default() {
    // 2020-12: `format` is an annotation.
    assert!(compile(json!({"format": "email"})).is_valid(&j(json!("not an email"))));
    assert!(compile(json!({"format": "no-such-format"})).is_valid(&j(json!("x"))));
    // Draft 7: `format` asserts.
    let draft7 =
        compile(json!({"$schema": "http://json-schema.org/draft-07/schema#", "format": "email"}));
    assert!(!draft7.is_valid(&j(json!("not an email"))));
    assert!(draft7.is_valid(&j(json!("a@example.com"))));
}

#[test]
fn is_object_schema_requires_type_object() {
    assert!(is_object_schema(&j(json!({"type": "object"}))));
    assert!(is_object_schema(&j(json!({"type": "object", "properties": {}}))));
    for not_object in [
        json!({"type": "string"}),
        json!({"type": ["object"]}),
        json!({"type": ["object", "null"]}),
        json!({"properties": {}}),
        json!({}),
        json!(true),
        json!("object"),
        json!({"anyOf": [{"type": "object"}]}),
    ] {
        assert!(!is_object_schema(&j(not_object.clone())), "{not_object}");
    }
}

#[test]
fn from_json_compiles_and_reports_bounded_diagnostic() {
    let source = j(json!({"type": "integer"}));
    let schema = Schema::from_json(&source).unwrap();
    assert_eq!(schema.source(), &source);
    assert!(schema.is_valid(&num("3")));

    let err = Schema::from_json(&j(json!({"type": 5}))).unwrap_err();
    assert_eq!(err.path, "$");
    match &err.kind {
        DecodeErrorKind::Invalid(text) => {
            assert!(text.starts_with("invalid schema"), "{text}");
            assert_bounded(text);
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = Schema::from_json(&j(json!({"$ref": "http://x/y"}))).unwrap_err();
    assert!(matches!(err.kind, DecodeErrorKind::Invalid(_)), "{err:?}");
}

/// The validator reads keel's `Json` directly (`keel_node`); it must give the same verdict and
/// the same diagnostic as the same schema compiled for the converted `serde_json::Value`
/// instance (the form validation went through before).
#[test]
fn direct_instances_match_serde_converted_instances() {
    fn serde_verdict(schema: &Json, instance: &Json) -> Result<(), SchemaViolation> {
        let source = crate::json::to_serde_value_with(schema, limits::MAX_JSON_DEPTH).unwrap();
        let validator = jsonschema::options()
            .offline()
            .with_pattern_options(
                jsonschema::PatternOptions::fancy_regex().backtrack_limit(limits::MAX_SCHEMA_REGEX_BACKTRACKS),
            )
            .build(&source)
            .unwrap();
        let value = match crate::json::to_serde_value_with(instance, limits::MAX_JSON_DEPTH) {
            Ok(v) => v,
            Err(e) => return Err(unconvertible(&e)),
        };
        if validator.is_valid(&value) {
            return Ok(());
        }
        let (diagnostic, error_count) = render_errors(Rendering::Violation, validator.iter_errors(&value));
        Err(SchemaViolation { diagnostic, error_count: error_count.max(1) })
    }
    let schemas = [
        json!({"type": "object", "required": ["source", "model_calls"], "additionalProperties": false,
               "properties": {"source": {"enum": ["model_response", "direct_tool_results"]},
                              "model_response": {"type": "object"},
                              "direct_tool_results": {"type": "array", "minItems": 1},
                              "model_calls": {"type": "integer", "minimum": 1}}}),
        json!({"properties": {"n": {"multipleOf": 0.5, "maximum": 9007199254740992u64, "exclusiveMinimum": -3}},
               "patternProperties": {"^x-": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-zé]+$"}},
               "propertyNames": {"maxLength": 5}, "minProperties": 1, "maxProperties": 3}),
        json!({"items": {"const": {"a": [1, 2.0]}}, "uniqueItems": true, "contains": {"type": "null"}, "maxItems": 4}),
        json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
               "$ref": "#/$defs/node"}),
        json!({"oneOf": [{"type": "string"}, {"type": "number"}], "not": {"const": 3}}),
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}),
        json!({"dependentRequired": {"a": ["b"]}, "if": {"required": ["c"]}, "then": {"required": ["d"]}, "else": {"maxProperties": 2}}),
    ];
    let instances = [
        json!({"source": "model_response", "model_calls": 1, "model_response": {"m": [1, "x"]}}),
        json!({"source": "other", "model_calls": 0, "extra": null}),
        json!({"model_calls": 1.5, "direct_tool_results": []}),
        json!({"n": 2.5, "x-ab": "éé", "x-toolong": "abcdef"}),
        json!({"n": 0.3, "x-a": 1}),
        json!([{"a": [1, 2]}, {"a": [1.0, 2]}, null]),
        json!([null, null]),
        json!({"next": {"next": {"v": 1.0}}, "v": "no"}),
        json!("text"), json!(3), json!(3.0), json!(1e2), json!(-0), json!(true), json!(null), json!({}),
        json!({"a": 1, "c": 2, "d": 3}), json!({"a": 1, "b": 2}),
    ];
    let numbers = ["9007199254740993", "18446744073709551616", "1e400", "-1e-400", "1.50", "-0"];
    let mut compared = 0;
    for schema in &schemas {
        let source = j(schema.clone());
        let compiled = Schema::compile(&source).unwrap();
        let all = instances.iter().map(|i| j(i.clone())).chain(numbers.iter().map(|n| num(n)));
        for instance in all {
            let expected = serde_verdict(&source, &instance);
            assert_eq!(compiled.validate(&instance), expected, "schema {schema} instance {instance:?}");
            assert_eq!(compiled.is_valid(&instance), expected.is_ok());
            compared += usize::from(expected.is_err());
        }
    }
    assert!(compared > 20, "the cases exercise violations too ({compared})");
    // An instance that does not convert is refused the same way.
    let deep = (0..=limits::MAX_JSON_DEPTH).fold(Json::Null, |inner, _| Json::Array(vec![inner]));
    let any = j(json!({}));
    assert_eq!(Schema::compile(&any).unwrap().validate(&deep), serde_verdict(&any, &deep));
    let bad = num("01");
    assert_eq!(Schema::compile(&any).unwrap().validate(&bad), serde_verdict(&any, &bad));
}
