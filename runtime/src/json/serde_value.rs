//! Conversion between [`Json`] and `serde_json::Value`, with no trip through text.
//!
//! Provider adapters and user code that already speak serde_json convert at the boundary:
//!
//! ```
//! use keel::json::Json;
//! let value = serde_json::json!({"n": 9007199254740993u64, "list": [true, null]});
//! let json = Json::from_serde_value(&value).unwrap();
//! assert_eq!(json.get("n").unwrap().as_number().unwrap().as_str(), "9007199254740993");
//! assert_eq!(json.to_serde_value().unwrap(), value);
//! ```
//!
//! Numbers keep their exact value in both directions: the workspace builds serde_json with
//! `arbitrary_precision`, which stores number digits as text, so `9007199254740993`,
//! `18446744073709551616`, `1.50` and `-0` survive unrounded. serde_json respells exponents
//! (`1E5` becomes `1e+5`, `1e400` becomes `1e+400`); mantissa, sign, fraction and exponent
//! digits are kept, so the number is the same value.
//!
//! Nesting is bounded by [`MAX_JSON_DEPTH`] both ways: a [`Json`] deeper than that must never
//! exist (every consumer recurses), and a serde_json value built in memory can be deeper.

use super::value::truncate_for_error;
use super::{Json, Number, Object};
use crate::limits::MAX_JSON_DEPTH;
use serde_json::Value;

/// Why a value could not be converted between [`Json`] and `serde_json::Value`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SerdeValueError {
    /// Arrays and objects nest deeper than keel's JSON depth limit.
    #[error("JSON nesting deeper than {limit} levels; flatten the value")]
    TooDeep { limit: usize },
    /// A number whose text the other side does not accept as RFC 8259 number syntax.
    #[error("`{text}` is not an RFC 8259 JSON number")]
    Number { text: String },
}

impl Json {
    /// This value as a `serde_json::Value`, numbers exact (exponents respelled, see the module
    /// docs). Fails only on nesting deeper than [`MAX_JSON_DEPTH`].
    pub fn to_serde_value(&self) -> Result<Value, SerdeValueError> {
        to_serde_value_with(self, MAX_JSON_DEPTH)
    }

    /// A `serde_json::Value` as [`Json`], numbers exact. Fails on nesting deeper than
    /// [`MAX_JSON_DEPTH`].
    pub fn from_serde_value(value: &Value) -> Result<Json, SerdeValueError> {
        from_value(value, 0, MAX_JSON_DEPTH)
    }
}

/// Converts `json`, rejecting nesting deeper than `max_depth` containers (clamped to
/// [`MAX_JSON_DEPTH`]).
pub(crate) fn to_serde_value_with(json: &Json, max_depth: usize) -> Result<Value, SerdeValueError> {
    to_value(json, 0, max_depth.min(MAX_JSON_DEPTH))
}

/// Checks that `json` converts ([`to_serde_value_with`] at [`MAX_JSON_DEPTH`]), reporting the
/// first failure in the order the conversion meets it, without building anything: a
/// validator that reads keel's `Json` directly refuses the same instances as before.
pub(crate) fn check_serde_convertible(json: &Json) -> Result<(), SerdeValueError> {
    check(json, 0)
}

fn check(json: &Json, depth: usize) -> Result<(), SerdeValueError> {
    match json {
        Json::Null | Json::Bool(_) | Json::String(_) => Ok(()),
        // A plain integer (already valid number text) always converts: serde_json keeps the
        // text of every number (`arbitrary_precision`), so only other forms need parsing.
        Json::Number(n) if is_plain_integer(n.as_str()) => Ok(()),
        Json::Number(n) => to_serde_number(n).map(|_| ()),
        Json::Array(items) => {
            let depth = enter(depth, MAX_JSON_DEPTH)?;
            items.iter().try_for_each(|item| check(item, depth))
        }
        Json::Object(members) => {
            let depth = enter(depth, MAX_JSON_DEPTH)?;
            members.values().try_for_each(|value| check(value, depth))
        }
    }
}

/// `-?(0|[1-9][0-9]*)`, nothing else (the JSON integer grammar: a `Number` built in the
/// crate is not necessarily validated text, and `01` must still be refused by the parse).
fn is_plain_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    match digits.as_bytes() {
        [] => false,
        [b'0'] => true,
        [b'0', ..] => false,
        bytes => bytes.iter().all(u8::is_ascii_digit),
    }
}

fn enter(depth: usize, max_depth: usize) -> Result<usize, SerdeValueError> {
    if depth >= max_depth {
        Err(SerdeValueError::TooDeep { limit: max_depth })
    } else {
        Ok(depth + 1)
    }
}

fn to_value(json: &Json, depth: usize, max_depth: usize) -> Result<Value, SerdeValueError> {
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(to_serde_number(n)?),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => {
            let depth = enter(depth, max_depth)?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(to_value(item, depth, max_depth)?);
            }
            Value::Array(out)
        }
        Json::Object(members) => {
            let depth = enter(depth, max_depth)?;
            // The members come in key order: collecting builds the map in one pass instead of
            // one search-and-insert per member (this runs for every schema validation).
            let out: serde_json::Map<String, Value> = members
                .iter()
                .map(|(key, value)| Ok((key.clone(), to_value(value, depth, max_depth)?)))
                .collect::<Result<_, SerdeValueError>>()?;
            Value::Object(out)
        }
    })
}

fn from_value(value: &Value, depth: usize, max_depth: usize) -> Result<Json, SerdeValueError> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => {
            let text = n.to_string();
            let number =
                Number::parse(&text).map_err(|_| SerdeValueError::Number { text: truncate_for_error(&text) })?;
            Json::Number(number)
        }
        Value::String(s) => Json::String(s.clone()),
        Value::Array(items) => {
            let depth = enter(depth, max_depth)?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(from_value(item, depth, max_depth)?);
            }
            Json::Array(out)
        }
        Value::Object(members) => {
            let depth = enter(depth, max_depth)?;
            let mut out = Object::new();
            for (key, value) in members {
                out.insert(key.clone(), from_value(value, depth, max_depth)?);
            }
            Json::Object(out)
        }
    })
}

pub(crate) fn to_serde_number(n: &Number) -> Result<serde_json::Number, SerdeValueError> {
    let text = n.as_str();
    // `from_str` tolerates surrounding whitespace; number text never has any.
    let padded = text.trim() != text;
    match serde_json::from_str::<serde_json::Number>(text) {
        Ok(parsed) if !padded => Ok(parsed),
        _ => Err(SerdeValueError::Number { text: truncate_for_error(text) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str) -> Json {
        Json::Number(Number(text.to_owned()))
    }

    #[test]
    fn the_integer_shortcut_agrees_with_the_parse() {
        let texts = ["0", "-0", "01", "-01", "00", "7", "-42", "123456789012345678901234567890", "-", "", "+1", " 1", "1 ", "1.5", "1e400", "0x1"];
        for text in texts {
            let shortcut = check(&num(text), 0).is_ok();
            let parsed = to_serde_number(&Number(text.to_owned())).is_ok();
            assert_eq!(shortcut, parsed, "number text {text:?}");
        }
    }

    #[test]
    fn numbers_keep_their_value_both_ways() {
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
            ("1E5", "1e+5"),
            ("1e+5", "1e+5"),
            ("1e400", "1e+400"),
            ("-1e-400", "-1e-400"),
            ("12.5E-3", "12.5e-3"),
        ] {
            let value = num(text).to_serde_value().unwrap();
            let Value::Number(n) = &value else { panic!("{text}: {value:?}") };
            assert_eq!(n.as_str(), stored, "{text}");
            // Back again: the respelled text is what keel keeps, and it round-trips exactly.
            assert_eq!(Json::from_serde_value(&value), Ok(num(stored)), "{text}");
            assert_eq!(num(stored).to_serde_value(), Ok(value), "{text}");
        }
    }

    #[test]
    fn numbers_built_by_serde_json_convert() {
        let value = serde_json::json!([u64::MAX, i64::MIN, 0.5, -2]);
        let json = Json::from_serde_value(&value).unwrap();
        let texts: Vec<&str> =
            json.as_array().unwrap().iter().map(|n| n.as_number().unwrap().as_str()).collect();
        assert_eq!(texts, ["18446744073709551615", "-9223372036854775808", "0.5", "-2"]);
    }

    #[test]
    fn number_text_serde_rejects_is_a_typed_error() {
        for text in ["", "01", "1.", "+1", "NaN", "1 ", " 1", "1e", "1,2"] {
            assert!(
                matches!(num(text).to_serde_value(), Err(SerdeValueError::Number { .. })),
                "{text:?} accepted"
            );
        }
    }

    #[test]
    fn structure_round_trips() {
        let value = serde_json::json!({"b": [null, true, "x", {"c": {}}], "a": 7, "": []});
        let json = Json::from_serde_value(&value).unwrap();
        assert_eq!(json.get("a"), Some(&Json::u64(7)));
        assert_eq!(json.to_serde_value(), Ok(value));
        let parsed = crate::json::parse(br#"{"a":[1,{"b":"\u00e9"}],"c":null}"#).unwrap();
        assert_eq!(Json::from_serde_value(&parsed.to_serde_value().unwrap()), Ok(parsed));
    }

    fn nested_json(depth: usize) -> Json {
        (0..depth).fold(Json::Null, |v, _| Json::Array(vec![v]))
    }

    fn nested_value(depth: usize) -> Value {
        (0..depth).fold(Value::Null, |v, _| Value::Array(vec![v]))
    }

    #[test]
    fn depth_limit_counts_containers_both_ways() {
        assert!(nested_json(MAX_JSON_DEPTH).to_serde_value().is_ok());
        assert!(Json::from_serde_value(&nested_value(MAX_JSON_DEPTH)).is_ok());
        let too_deep = Err(SerdeValueError::TooDeep { limit: MAX_JSON_DEPTH });
        assert_eq!(Json::from_serde_value(&nested_value(MAX_JSON_DEPTH + 1)), too_deep);
        assert_eq!(to_serde_value_with(&nested_json(4), 3), Err(SerdeValueError::TooDeep { limit: 3 }));
        assert!(to_serde_value_with(&Json::str("scalar"), 0).is_ok());
    }
}
