//! Structural conversion of [`Json`] into `serde_json::Value`, the representation the
//! `jsonschema` crate validates.
//!
//! Numbers keep their exact value: with serde_json's `arbitrary_precision` feature, parsing the
//! number text as a `serde_json::Number` stores the digits as text, so `9007199254740993` and
//! `1e400` reach the validator unrounded. serde_json does rewrite the exponent spelling
//! (`1E5` → `1e+5`, `1e400` → `1e+400`); mantissa digits, sign and fraction are kept, so the
//! value is unchanged.

use crate::json::{Json, Number};
use serde_json::Value;

/// Why a [`Json`] value could not be converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConvertError {
    /// Arrays + objects nest deeper than the limit.
    TooDeep { limit: usize },
    /// A number whose text serde_json does not accept (cannot happen for numbers built by the
    /// json module, which validates RFC 8259 syntax; kept as a typed error, not a panic).
    Number { text: String },
}

/// Converts `json`, rejecting nesting deeper than `max_depth` containers.
pub(crate) fn to_value(json: &Json, max_depth: usize) -> Result<Value, ConvertError> {
    convert(json, 0, max_depth)
}

fn convert(json: &Json, depth: usize, max_depth: usize) -> Result<Value, ConvertError> {
    let inner_depth = || {
        if depth >= max_depth {
            Err(ConvertError::TooDeep { limit: max_depth })
        } else {
            Ok(depth + 1)
        }
    };
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(number(n)?),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => {
            let depth = inner_depth()?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(convert(item, depth, max_depth)?);
            }
            Value::Array(out)
        }
        Json::Object(members) => {
            let depth = inner_depth()?;
            let mut out = serde_json::Map::new();
            for (key, value) in members {
                out.insert(key.clone(), convert(value, depth, max_depth)?);
            }
            Value::Object(out)
        }
    })
}

fn number(n: &Number) -> Result<serde_json::Number, ConvertError> {
    let text = n.as_str();
    // `from_str` tolerates surrounding whitespace; number text never has any.
    let padded = text.trim() != text;
    match serde_json::from_str::<serde_json::Number>(text) {
        Ok(parsed) if !padded => Ok(parsed),
        _ => Err(ConvertError::Number { text: super::diagnostic::shorten_entry(text, 64) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;

    fn num(text: &str) -> Json {
        Json::Number(Number(text.to_owned()))
    }

    #[test]
    fn numbers_keep_exact_value() {
        for (text, stored) in [
            ("0", "0"),
            ("-0", "-0"),
            ("1.0", "1.0"),
            ("1.50", "1.50"),
            ("9007199254740993", "9007199254740993"),
            ("18446744073709551616", "18446744073709551616"),
            (
                "-123456789012345678901234567890.000000000000000000001",
                "-123456789012345678901234567890.000000000000000000001",
            ),
            // Exponents are respelled, never rounded.
            ("1E5", "1e+5"),
            ("1e+5", "1e+5"),
            ("1e400", "1e+400"),
            ("-1e-400", "-1e-400"),
            ("12.5E-3", "12.5e-3"),
        ] {
            match to_value(&num(text), 4) {
                Ok(Value::Number(n)) => assert_eq!(n.as_str(), stored, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn rejects_number_text_serde_does_not_accept() {
        for text in ["", "01", "1.", "+1", "NaN", "1 ", " 1", "1e", "1,2"] {
            assert!(
                matches!(to_value(&num(text), 4), Err(ConvertError::Number { .. })),
                "{text:?} accepted"
            );
        }
    }

    #[test]
    fn structure_is_preserved() {
        let mut members = Object::new();
        members.insert("b".into(), Json::Array(vec![Json::Null, Json::Bool(true), Json::str("x")]));
        members.insert("a".into(), Json::u64(7));
        let value = to_value(&Json::Object(members), 4).unwrap();
        assert_eq!(value, serde_json::json!({"a": 7, "b": [null, true, "x"]}));
    }

    fn nested_arrays(depth: usize) -> Json {
        let mut v = Json::Null;
        for _ in 0..depth {
            v = Json::Array(vec![v]);
        }
        v
    }

    #[test]
    fn depth_limit_counts_containers() {
        assert!(to_value(&nested_arrays(3), 3).is_ok());
        assert_eq!(to_value(&nested_arrays(4), 3), Err(ConvertError::TooDeep { limit: 3 }));
        assert!(to_value(&Json::str("scalar"), 0).is_ok());
    }
}
