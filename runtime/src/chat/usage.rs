//! Token accounting of one model call.

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson, WriteJson};

/// Token accounting. `input_tokens` and `output_tokens` are everything billed; the other
/// members say how much of it was special, as far as the provider reports it (else zero):
/// `cache_read_tokens` and `cache_write_tokens` are parts of the input (read from, or written
/// to, the provider's prompt cache), `reasoning_tokens` a part of the output (hidden
/// reasoning).
///
/// Wire form: `{"input_tokens":u64,"output_tokens":u64,"cache_read_tokens"?:u64,
/// "cache_write_tokens"?:u64,"reasoning_tokens"?:u64}`; the optional members are written only
/// when not zero (absent reads as zero), so usage without them keeps its earlier bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input, read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Of the input, written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Of the output, spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }

    /// Member-wise sum that saturates at `u64::MAX` (totals over many calls never wrap).
    pub fn saturating_add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_add(other.cache_read_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_add(other.cache_write_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
        }
    }

    /// Input plus output tokens, saturating.
    pub fn total(self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl ToJson for Usage {
    fn to_json(&self) -> Json {
        let nonzero = |n: &u64| (*n != 0).then_some(*n);
        ObjectBuilder::new()
            .field("input_tokens", &self.input_tokens)
            .field("output_tokens", &self.output_tokens)
            .opt_field("cache_read_tokens", nonzero(&self.cache_read_tokens).as_ref())
            .opt_field("cache_write_tokens", nonzero(&self.cache_write_tokens).as_ref())
            .opt_field("reasoning_tokens", nonzero(&self.reasoning_tokens).as_ref())
            .build()
    }
}

/// The canonical text of [`Usage::to_json`], written without a tree (a state's snapshot
/// writes its usage every Step).
impl WriteJson for Usage {
    fn write_json(&self, out: &mut String) {
        let mut w = ObjectWriter::new(out);
        for (key, n) in [("cache_read_tokens", self.cache_read_tokens), ("cache_write_tokens", self.cache_write_tokens)] {
            if n != 0 {
                w.u64(key, n);
            }
        }
        w.u64("input_tokens", self.input_tokens).u64("output_tokens", self.output_tokens);
        if self.reasoning_tokens != 0 {
            w.u64("reasoning_tokens", self.reasoning_tokens);
        }
        w.finish();
    }
}

impl FromJson for Usage {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let usage = Usage {
            input_tokens: r.required("input_tokens")?,
            output_tokens: r.required("output_tokens")?,
            cache_read_tokens: r.optional("cache_read_tokens")?.unwrap_or(0),
            cache_write_tokens: r.optional("cache_write_tokens")?.unwrap_or(0),
            reasoning_tokens: r.optional("reasoning_tokens")?.unwrap_or(0),
        };
        r.finish()?;
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_writer_writes_the_canonical_encoding() {
        let values = [0, 1, 7, 10, 99, 1_000_000, u64::MAX - 1, u64::MAX];
        let mut checked = 0;
        for (i, &a) in values.iter().enumerate() {
            for (j, &b) in values.iter().enumerate() {
                for mask in 0..8u32 {
                    let pick = |bit: u32, k: usize| if mask & (1 << bit) != 0 { values[(i + j + k) % values.len()] } else { 0 };
                    let usage = Usage {
                        input_tokens: a,
                        output_tokens: b,
                        cache_read_tokens: pick(0, 1),
                        cache_write_tokens: pick(1, 2),
                        reasoning_tokens: pick(2, 3),
                    };
                    let mut text = String::new();
                    usage.write_json(&mut text);
                    assert_eq!(text, usage.to_json().to_canonical_string(), "{usage:?}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 512);
    }
    use crate::json::codec::DecodeErrorKind;
    use crate::json::Number;

    fn detailed() -> Usage {
        Usage {
            input_tokens: 100,
            output_tokens: 40,
            cache_read_tokens: 60,
            cache_write_tokens: 30,
            reasoning_tokens: 25,
        }
    }

    #[test]
    fn round_trip() {
        for u in [
            Usage::default(),
            Usage::new(12, 34),
            Usage::new(u64::MAX, 0),
            detailed(),
            Usage {
                reasoning_tokens: 1,
                ..Usage::new(1, 2)
            },
        ] {
            assert_eq!(Usage::from_json(&u.to_json()), Ok(u));
        }
        assert_eq!(
            Usage::default().to_json(),
            ObjectBuilder::new()
                .field("input_tokens", &0u64)
                .field("output_tokens", &0u64)
                .build()
        );
    }

    #[test]
    fn details_are_written_only_when_not_zero() {
        // Usage without details keeps its earlier bytes (and digests).
        assert_eq!(
            Usage::new(3, 4).to_json().to_canonical_string(),
            r#"{"input_tokens":3,"output_tokens":4}"#
        );
        assert_eq!(
            detailed().to_json().to_canonical_string(),
            r#"{"cache_read_tokens":60,"cache_write_tokens":30,"input_tokens":100,"output_tokens":40,"reasoning_tokens":25}"#
        );
        let zero = ObjectBuilder::new()
            .field("input_tokens", &3u64)
            .field("output_tokens", &4u64)
            .field("reasoning_tokens", &0u64)
            .build();
        assert_eq!(Usage::from_json(&zero), Ok(Usage::new(3, 4)));
    }

    #[test]
    fn saturating_add() {
        assert_eq!(
            detailed().saturating_add(detailed()),
            Usage {
                input_tokens: 200,
                output_tokens: 80,
                cache_read_tokens: 120,
                cache_write_tokens: 60,
                reasoning_tokens: 50,
            }
        );
        assert_eq!(
            Usage::new(1, 2).saturating_add(Usage::new(3, 4)),
            Usage::new(4, 6)
        );
        assert_eq!(
            Usage::new(u64::MAX, 1).saturating_add(Usage::new(1, u64::MAX)),
            Usage::new(u64::MAX, u64::MAX)
        );
        assert_eq!(Usage::new(u64::MAX, 1).total(), u64::MAX);
    }

    #[test]
    fn strict_decoding() {
        let only_input = ObjectBuilder::new().field("input_tokens", &1u64).build();
        assert_eq!(
            Usage::from_json(&only_input).unwrap_err().kind,
            DecodeErrorKind::MissingMember("output_tokens".into())
        );
        let extra = ObjectBuilder::new()
            .field("input_tokens", &1u64)
            .field("output_tokens", &1u64)
            .field("cached_input_tokens", &1u64)
            .build();
        assert_eq!(
            Usage::from_json(&extra).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("cached_input_tokens".into())
        );
        for bad in [
            Json::Number(Number("-1".into())),
            Json::Number(Number("1.0".into())),
            Json::str("1"),
            Json::Null,
        ] {
            let v = ObjectBuilder::new()
                .field("input_tokens", &1u64)
                .value("output_tokens", bad.clone())
                .build();
            assert_eq!(
                Usage::from_json(&v).unwrap_err().path,
                "$.output_tokens",
                "{bad:?}"
            );
        }
    }
}
