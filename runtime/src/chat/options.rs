//! Provider-neutral generation options.

use super::ChatError;
use crate::json::{
    DecodeError, FromJson, Json, Number, Object, ObjectBuilder, ObjectReader, ToJson,
};
use crate::limits::{MAX_MODEL_NAME_BYTES, MAX_STOP_SEQUENCES, MAX_TEXT_BYTES};

/// Generation options. Every member is optional; the default (all absent) encodes as `{}`.
///
/// Wire form: `{"model"?:S,"temperature"?:N,"top_p"?:N,"max_output_tokens"?:u32,
/// "stop"?:[S],"extra"?:{..}}`. Numbers keep their exact text (`0.70` stays `0.70`).
/// `stop` is omitted when empty; an explicit `[]` decodes to the same (empty) value.
///
/// Valid when: `model` is 1 to [`MAX_MODEL_NAME_BYTES`] bytes without control characters or
/// surrounding whitespace; `temperature` is finite and ≥ 0 (the upper bound is provider
/// specific); `top_p` is in [0, 1]; `max_output_tokens` ≥ 1; at most [`MAX_STOP_SEQUENCES`]
/// stop sequences, each 1 to [`MAX_TEXT_BYTES`] bytes. `extra` is an opaque, provider-specific
/// object passed through unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Options {
    pub model: Option<String>,
    pub temperature: Option<Number>,
    pub top_p: Option<Number>,
    pub max_output_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub extra: Option<Object>,
}

impl Options {
    pub fn is_default(&self) -> bool {
        *self == Options::default()
    }

    pub fn validate(&self) -> Result<(), ChatError> {
        if let Some(model) = &self.model {
            let reason = if model.is_empty() {
                Some("must not be empty")
            } else if model.len() > MAX_MODEL_NAME_BYTES {
                Some("longer than 256 bytes")
            } else if model.chars().any(char::is_control) {
                Some("contains a control character")
            } else if model.trim() != model {
                Some("has surrounding whitespace")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(ChatError::InvalidOption {
                    member: "model",
                    reason,
                });
            }
        }
        if let Some(t) = &self.temperature {
            let v = t.as_f64();
            if !(v.is_finite() && v >= 0.0) {
                return Err(ChatError::InvalidOption {
                    member: "temperature",
                    reason: "must be finite and >= 0",
                });
            }
        }
        if let Some(p) = &self.top_p {
            let v = p.as_f64();
            if !(0.0..=1.0).contains(&v) {
                return Err(ChatError::InvalidOption {
                    member: "top_p",
                    reason: "must be within [0, 1]",
                });
            }
        }
        if self.max_output_tokens == Some(0) {
            return Err(ChatError::InvalidOption {
                member: "max_output_tokens",
                reason: "must be >= 1",
            });
        }
        if self.stop.len() > MAX_STOP_SEQUENCES {
            return Err(ChatError::InvalidOption {
                member: "stop",
                reason: "more than 16 stop sequences",
            });
        }
        for s in &self.stop {
            if s.is_empty() {
                return Err(ChatError::InvalidOption {
                    member: "stop",
                    reason: "a stop sequence is empty",
                });
            }
            if s.len() > MAX_TEXT_BYTES {
                return Err(ChatError::InvalidOption {
                    member: "stop",
                    reason: "a stop sequence is longer than 4096 bytes",
                });
            }
        }
        Ok(())
    }
}

fn decode_number(value: &Json) -> Result<Number, DecodeError> {
    value
        .as_number()
        .cloned()
        .ok_or_else(|| DecodeError::wrong_type("number", value))
}

fn decode_object(value: &Json) -> Result<Object, DecodeError> {
    value
        .as_object()
        .cloned()
        .ok_or_else(|| DecodeError::wrong_type("object", value))
}

/// Decodes an optional member with a custom decoder (the reader offers this only for
/// required members).
fn optional_with<T>(
    r: &mut ObjectReader<'_>,
    key: &'static str,
    decode: impl FnOnce(&Json) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match r.optional_value(key).map_err(|e| e.in_member(key))? {
        None => Ok(None),
        Some(v) => decode(v).map(Some).map_err(|e| e.in_member(key)),
    }
}

impl ToJson for Options {
    fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new().opt_field("model", self.model.as_ref());
        if let Some(t) = &self.temperature {
            b = b.value("temperature", Json::Number(t.clone()));
        }
        if let Some(p) = &self.top_p {
            b = b.value("top_p", Json::Number(p.clone()));
        }
        b = b
            .opt_field("max_output_tokens", self.max_output_tokens.as_ref())
            .nonempty_field("stop", &self.stop);
        if let Some(extra) = &self.extra {
            b = b.value("extra", Json::Object(extra.clone()));
        }
        b.build()
    }
}

impl FromJson for Options {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let options = Options {
            model: r.optional("model")?,
            temperature: optional_with(&mut r, "temperature", decode_number)?,
            top_p: optional_with(&mut r, "top_p", decode_number)?,
            max_output_tokens: r.optional("max_output_tokens")?,
            stop: r.optional_vec("stop")?,
            extra: optional_with(&mut r, "extra", decode_object)?,
        };
        r.finish()?;
        options.validate()?;
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;

    fn num(text: &str) -> Number {
        Number(text.to_owned())
    }

    fn full() -> Options {
        let mut extra = Object::new();
        extra.insert("seed".into(), Json::u64(7));
        extra.insert("nothing".into(), Json::Null);
        Options {
            model: Some("gpt-4o-mini".into()),
            temperature: Some(num("0.70")),
            top_p: Some(num("1")),
            max_output_tokens: Some(512),
            stop: vec!["\n\n".into(), "END".into()],
            extra: Some(extra),
        }
    }

    #[test]
    fn default_encodes_as_empty_object() {
        assert!(Options::default().is_default());
        assert_eq!(Options::default().to_json(), Json::object());
        assert_eq!(Options::from_json(&Json::object()), Ok(Options::default()));
    }

    #[test]
    fn round_trip_keeps_number_text() {
        let o = full();
        let v = o.to_json();
        assert_eq!(v.get("temperature"), Some(&Json::Number(num("0.70"))));
        assert_eq!(v.get("max_output_tokens"), Some(&Json::u64(512)));
        assert_eq!(Options::from_json(&v), Ok(o));
    }

    #[test]
    fn explicit_empty_stop_decodes_as_default() {
        let v = ObjectBuilder::new()
            .value("stop", Json::Array(vec![]))
            .build();
        assert_eq!(Options::from_json(&v), Ok(Options::default()));
    }

    #[test]
    fn validation_rules() {
        let cases: Vec<(Options, &str)> = vec![
            (
                Options {
                    model: Some(String::new()),
                    ..Options::default()
                },
                "model",
            ),
            (
                Options {
                    model: Some(" gpt".into()),
                    ..Options::default()
                },
                "model",
            ),
            (
                Options {
                    model: Some("a\nb".into()),
                    ..Options::default()
                },
                "model",
            ),
            (
                Options {
                    model: Some("m".repeat(MAX_MODEL_NAME_BYTES + 1)),
                    ..Options::default()
                },
                "model",
            ),
            (
                Options {
                    temperature: Some(num("-0.1")),
                    ..Options::default()
                },
                "temperature",
            ),
            (
                Options {
                    temperature: Some(num("1e400")),
                    ..Options::default()
                },
                "temperature",
            ),
            (
                Options {
                    top_p: Some(num("1.01")),
                    ..Options::default()
                },
                "top_p",
            ),
            (
                Options {
                    top_p: Some(num("-1")),
                    ..Options::default()
                },
                "top_p",
            ),
            (
                Options {
                    max_output_tokens: Some(0),
                    ..Options::default()
                },
                "max_output_tokens",
            ),
            (
                Options {
                    stop: vec![String::new()],
                    ..Options::default()
                },
                "stop",
            ),
            (
                Options {
                    stop: vec!["s".repeat(MAX_TEXT_BYTES + 1)],
                    ..Options::default()
                },
                "stop",
            ),
            (
                Options {
                    stop: vec!["s".into(); MAX_STOP_SEQUENCES + 1],
                    ..Options::default()
                },
                "stop",
            ),
        ];
        for (o, member) in cases {
            match o.validate() {
                Err(ChatError::InvalidOption { member: m, .. }) => assert_eq!(m, member, "{o:?}"),
                other => panic!("{o:?}: {other:?}"),
            }
            assert!(Options::from_json(&o.to_json()).is_err());
        }
        let fine = Options {
            model: Some("m".repeat(MAX_MODEL_NAME_BYTES)),
            temperature: Some(num("0")),
            top_p: Some(num("0")),
            max_output_tokens: Some(1),
            stop: vec!["s".into(); MAX_STOP_SEQUENCES],
            extra: Some(Object::new()),
        };
        assert_eq!(fine.validate(), Ok(()));
        assert_eq!(full().validate(), Ok(()));
    }

    #[test]
    fn strict_decoding() {
        let cases = [
            (ObjectBuilder::new().field("seed", &1u64).build(), "$"),
            (
                ObjectBuilder::new().value("model", Json::Null).build(),
                "$.model",
            ),
            (
                ObjectBuilder::new()
                    .value("temperature", Json::Null)
                    .build(),
                "$.temperature",
            ),
            (
                ObjectBuilder::new().value("extra", Json::Null).build(),
                "$.extra",
            ),
            (
                ObjectBuilder::new().field("temperature", "0.5").build(),
                "$.temperature",
            ),
            (
                ObjectBuilder::new().field("top_p", &true).build(),
                "$.top_p",
            ),
            (
                ObjectBuilder::new().field("max_output_tokens", "5").build(),
                "$.max_output_tokens",
            ),
            (
                ObjectBuilder::new()
                    .value("max_output_tokens", Json::Number(num("1.5")))
                    .build(),
                "$.max_output_tokens",
            ),
            (
                ObjectBuilder::new()
                    .field("max_output_tokens", &(u64::from(u32::MAX) + 1))
                    .build(),
                "$.max_output_tokens",
            ),
            (ObjectBuilder::new().field("stop", "END").build(), "$.stop"),
            (
                ObjectBuilder::new()
                    .value("stop", Json::Array(vec![Json::u64(1)]))
                    .build(),
                "$.stop[0]",
            ),
            (
                ObjectBuilder::new()
                    .value("extra", Json::Array(vec![]))
                    .build(),
                "$.extra",
            ),
        ];
        for (v, path) in cases {
            let e = Options::from_json(&v).unwrap_err();
            assert_eq!(e.path, path, "{v:?}: {e}");
        }
        let e = Options::from_json(&ObjectBuilder::new().field("seed", &1u64).build()).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::UnknownMember("seed".into()));
        assert!(Options::from_json(&Json::Array(vec![])).is_err());
    }
}
