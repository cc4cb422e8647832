//! Token accounting of one model call.

use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};

/// Token accounting. Wire form: `{"input_tokens":u64,"output_tokens":u64}` (both required).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens,
        }
    }

    /// Member-wise sum that saturates at `u64::MAX` (totals over many calls never wrap).
    pub fn saturating_add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }

    /// Input plus output tokens, saturating.
    pub fn total(self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl ToJson for Usage {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("input_tokens", &self.input_tokens)
            .field("output_tokens", &self.output_tokens)
            .build()
    }
}

impl FromJson for Usage {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let usage = Usage {
            input_tokens: r.required("input_tokens")?,
            output_tokens: r.required("output_tokens")?,
        };
        r.finish()?;
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::codec::DecodeErrorKind;
    use crate::json::Number;

    #[test]
    fn round_trip() {
        for u in [
            Usage::default(),
            Usage::new(12, 34),
            Usage::new(u64::MAX, 0),
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
    fn saturating_add() {
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
            .field("cached_tokens", &1u64)
            .build();
        assert_eq!(
            Usage::from_json(&extra).unwrap_err().kind,
            DecodeErrorKind::UnknownMember("cached_tokens".into())
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
