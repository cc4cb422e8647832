//! Property tests across parser and encoder.
use super::{parse, Json, Number};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

fn number_text() -> impl Strategy<Value = String> {
    let int = prop_oneof![Just("0".to_owned()), "[1-9][0-9]{0,30}"];
    let frac = proptest::option::of("[0-9]{1,30}");
    let exp = proptest::option::of(("[eE]", "[+-]?", "[0-9]{1,4}"));
    (any::<bool>(), int, frac, exp).prop_map(|(negative, int, frac, exp)| {
        let mut text = String::new();
        if negative {
            text.push('-');
        }
        text.push_str(&int);
        if let Some(frac) = frac {
            text.push('.');
            text.push_str(&frac);
        }
        if let Some((e, sign, digits)) = exp {
            text.push_str(&e);
            text.push_str(&sign);
            text.push_str(&digits);
        }
        text
    })
}

/// Strings biased towards the characters the encoder treats specially.
fn text() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '"',
        '\\',
        '/',
        '\u{0}',
        '\u{8}',
        '\t',
        '\n',
        '\u{b}',
        '\u{c}',
        '\r',
        '\u{1f}',
        '\u{7f}',
        '<',
        'é',
        '\u{2028}',
        '\u{fffd}',
        '\u{feff}',
        '😀',
        '\u{10ffff}',
    ]);
    let ch = prop_oneof![3 => any::<char>(), 2 => special, 2 => prop::char::range('a', 'e')];
    vec(ch, 0..12).prop_map(|chars| chars.into_iter().collect())
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number_text().prop_map(|t| Json::Number(Number::parse(&t).expect("generator yields valid numbers"))),
        text().prop_map(Json::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Json::Array),
            btree_map(text(), inner, 0..8).prop_map(Json::Object),
        ]
    })
}

/// A deliberately non-canonical but valid encoding: random whitespace, random `\u` escapes
/// (both hex cases, surrogate pairs), `\/`, and arbitrary member order.
struct Noisy {
    state: u64,
    out: String,
}

impl Noisy {
    fn next(&mut self) -> u64 {
        // xorshift64*: a deterministic stream, seeded by proptest.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn space(&mut self) {
        for _ in 0..self.next() % 3 {
            let ws = [' ', '\t', '\n', '\r'][(self.next() % 4) as usize];
            self.out.push(ws);
        }
    }
    fn unit(&mut self, unit: u16) {
        let text = if self.next() & 1 == 0 { format!("\\u{unit:04x}") } else { format!("\\u{unit:04X}") };
        self.out.push_str(&text);
    }
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            let escape = c < ' ' || c == '"' || c == '\\' || self.next() & 3 == 0;
            if !escape {
                self.out.push(c);
            } else if c == '/' && self.next() & 1 == 0 {
                self.out.push_str("\\/");
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    self.unit(*unit);
                }
            }
        }
        self.out.push('"');
    }
    fn value(&mut self, v: &Json) {
        self.space();
        match v {
            Json::Array(items) => {
                self.out.push('[');
                self.space();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.value(item);
                }
                self.out.push(']');
            }
            Json::Object(object) => {
                let mut members: Vec<_> = object.iter().collect();
                if self.next() & 1 == 0 {
                    members.reverse();
                }
                self.out.push('{');
                self.space();
                for (i, (key, value)) in members.into_iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.string(key);
                    self.space();
                    self.out.push(':');
                    self.value(value);
                }
                self.out.push('}');
            }
            Json::String(s) => self.string(s),
            other => self.out.push_str(&other.to_canonical_string()),
        }
        self.space();
    }
}

proptest! {
    #[test]
    fn canonical_bytes_round_trip(value in json()) {
        let bytes = value.to_canonical_bytes();
        prop_assert_eq!(bytes.len(), value.canonical_len());
        let reparsed = parse(&bytes).expect("canonical bytes must parse");
        prop_assert_eq!(&reparsed, &value);
        prop_assert_eq!(reparsed.to_canonical_bytes(), bytes.clone());
        // An independent parser accepts the canonical form too.
        prop_assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok());
    }

    #[test]
    fn noisy_encodings_normalize_to_the_same_bytes(value in json(), seed in any::<u64>()) {
        let mut noisy = Noisy { state: seed | 1, out: String::new() };
        noisy.value(&value);
        let reparsed = parse(noisy.out.as_bytes()).expect("noisy encoding must parse");
        prop_assert_eq!(&reparsed, &value);
        prop_assert_eq!(reparsed.to_canonical_bytes(), value.to_canonical_bytes());
        // Canonical is never longer than any input that parses to the same value.
        prop_assert!(value.canonical_len() <= noisy.out.len());
    }

    #[test]
    fn string_escaping_matches_serde_json(s in text()) {
        prop_assert_eq!(Json::String(s.clone()).to_canonical_string(), serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn parser_never_panics_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..64)) {
        if let Ok(value) = parse(&bytes) {
            prop_assert_eq!(parse(&value.to_canonical_bytes()).unwrap(), value);
        }
    }

    #[test]
    fn parser_never_panics_on_mutated_json(value in json(), index in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = value.to_canonical_bytes();
        let i = index.index(bytes.len());
        bytes[i] = byte;
        if let Ok(mutated) = parse(&bytes) {
            prop_assert_eq!(parse(&mutated.to_canonical_bytes()).unwrap(), mutated);
        }
    }
}
