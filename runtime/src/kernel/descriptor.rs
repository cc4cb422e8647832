//! Descriptor: the immutable, portable contract of a Definition.
//!
//! * `name`: qualified name; `description`: non-empty trimmed UTF-8 ≤ 4096 bytes.
//! * `input_schema`, `output_schema`, `signal_schema`: JSON Schemas, held compiled together with
//!   their source values. The signal schema governs unaddressed Host input only and defaults to
//!   `false` (reject everything).
//! * `digest` = SHA-256 of the canonical encoding of the contract object
//!   `{"name", "description", "input_schema", "output_schema", "signal_schema"}` (schema members
//!   are the source values; the canonical encoding sorts the keys).
//!
//! Wire: the contract object plus `"digest"`; every member required. Decoding compiles the
//! schemas, recomputes the digest and rejects a mismatch.

use crate::json::{DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::schema::{Schema, SchemaError};
use crate::text::{BoundedText, QualifiedName, TextError};
use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, PoisonError};

/// At most this many descriptors are kept by [`Descriptor::from_parts`] (first come, first
/// kept, as in the schema table).
const MAX_SHARED_DESCRIPTORS: usize = 256;
/// Only contracts whose schema sources encode canonically in at most this many bytes are kept.
const MAX_SHARED_CONTRACT_BYTES: usize = 16 * 1024;

/// Descriptors by name, each kept with its exact parts. A descriptor is a pure function of its
/// parts, and a program that builds the same definitions again and again (a simulation
/// campaign builds its tools and interactions once per run) would otherwise compile, encode
/// and hash the same contract every time.
#[derive(Default)]
struct Shared {
    by_name: BTreeMap<QualifiedName, Vec<Descriptor>>,
    len: usize,
}

static SHARED: LazyLock<Mutex<Shared>> = LazyLock::new(|| Mutex::new(Shared::default()));

/// Why descriptor parts were rejected.
#[derive(Debug, thiserror::Error)]
pub enum DescriptorError {
    #[error("descriptor name: {0}")]
    Name(TextError),
    #[error("descriptor description: {0}")]
    Description(TextError),
    #[error("input schema: {0}")]
    InputSchema(SchemaError),
    #[error("output schema: {0}")]
    OutputSchema(SchemaError),
    #[error("signal schema: {0}")]
    SignalSchema(SchemaError),
}

/// The contract of a Definition.
#[derive(Clone)]
pub struct Descriptor {
    name: QualifiedName,
    description: BoundedText,
    input_schema: Schema,
    output_schema: Schema,
    signal_schema: Schema,
    digest: Digest,
}

impl Descriptor {
    /// Validates the parts and compiles the schemas; `signal_schema: None` is the schema
    /// `false`.
    pub fn new(
        name: &str,
        description: &str,
        input_schema: Json,
        output_schema: Json,
        signal_schema: Option<Json>,
    ) -> Result<Descriptor, DescriptorError> {
        let name = QualifiedName::parse(name).map_err(DescriptorError::Name)?;
        let description = BoundedText::parse(description).map_err(DescriptorError::Description)?;
        let signal_schema = signal_schema.unwrap_or(Json::Bool(false));
        Descriptor::from_parts(name, description, &input_schema, &output_schema, &signal_schema)
    }

    /// From validated text parts and schema sources. Equal parts give the descriptor kept
    /// from an earlier call (the table only ever returns what building would return).
    pub fn from_parts(
        name: QualifiedName,
        description: BoundedText,
        input_schema: &Json,
        output_schema: &Json,
        signal_schema: &Json,
    ) -> Result<Descriptor, DescriptorError> {
        // The table is a plain map; a panic elsewhere while it was locked leaves it whole.
        let shared = || SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = shared().by_name.get(&name).and_then(|all| {
            all.iter().find(|d| d.has_parts(&description, input_schema, output_schema, signal_schema)).cloned()
        });
        if let Some(kept) = kept {
            return Ok(kept);
        }
        let descriptor = Descriptor::from_parts_uncached(name, description, input_schema, output_schema, signal_schema)?;
        let bytes = [input_schema, output_schema, signal_schema].iter().map(|s| s.canonical_len()).fold(0usize, usize::saturating_add);
        if bytes <= MAX_SHARED_CONTRACT_BYTES {
            let mut table = shared();
            if table.len < MAX_SHARED_DESCRIPTORS {
                let all = table.by_name.entry(descriptor.name.clone()).or_default();
                if !all.contains(&descriptor) {
                    all.push(descriptor.clone());
                    table.len += 1;
                }
            }
        }
        Ok(descriptor)
    }

    fn has_parts(&self, description: &BoundedText, input_schema: &Json, output_schema: &Json, signal_schema: &Json) -> bool {
        &self.description == description
            && self.input_schema.source() == input_schema
            && self.output_schema.source() == output_schema
            && self.signal_schema.source() == signal_schema
    }

    /// [`Descriptor::from_parts`] built afresh: compiled, encoded and hashed.
    fn from_parts_uncached(
        name: QualifiedName,
        description: BoundedText,
        input_schema: &Json,
        output_schema: &Json,
        signal_schema: &Json,
    ) -> Result<Descriptor, DescriptorError> {
        let input_schema = Schema::compile(input_schema).map_err(DescriptorError::InputSchema)?;
        let output_schema = Schema::compile(output_schema).map_err(DescriptorError::OutputSchema)?;
        let signal_schema = Schema::compile(signal_schema).map_err(DescriptorError::SignalSchema)?;
        let digest = Digest::of_json(&contract_json(
            &name,
            &description,
            input_schema.source(),
            output_schema.source(),
            signal_schema.source(),
        ));
        Ok(Descriptor { name, description, input_schema, output_schema, signal_schema, digest })
    }

    pub fn name(&self) -> &QualifiedName {
        &self.name
    }
    pub fn description(&self) -> &BoundedText {
        &self.description
    }
    pub fn input_schema(&self) -> &Schema {
        &self.input_schema
    }
    pub fn output_schema(&self) -> &Schema {
        &self.output_schema
    }
    pub fn signal_schema(&self) -> &Schema {
        &self.signal_schema
    }
    /// The contract digest (a DeploymentRef's `contract_digest`).
    pub fn digest(&self) -> Digest {
        self.digest
    }
    /// The object the digest is computed over.
    pub fn contract_json(&self) -> Json {
        contract_json(
            &self.name,
            &self.description,
            self.input_schema.source(),
            self.output_schema.source(),
            self.signal_schema.source(),
        )
    }
}

fn contract_json(
    name: &QualifiedName,
    description: &BoundedText,
    input_schema: &Json,
    output_schema: &Json,
    signal_schema: &Json,
) -> Json {
    ObjectBuilder::new()
        .field("name", name)
        .field("description", description)
        .field("input_schema", input_schema)
        .field("output_schema", output_schema)
        .field("signal_schema", signal_schema)
        .build()
}

/// Equal contracts: same name, description and schema sources (hence the same digest).
impl PartialEq for Descriptor {
    fn eq(&self, other: &Descriptor) -> bool {
        self.digest == other.digest
            && self.name == other.name
            && self.description == other.description
            && self.input_schema.source() == other.input_schema.source()
            && self.output_schema.source() == other.output_schema.source()
            && self.signal_schema.source() == other.signal_schema.source()
    }
}
impl Eq for Descriptor {}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl ToJson for Descriptor {
    fn to_json(&self) -> Json {
        let mut json = self.contract_json();
        if let Json::Object(members) = &mut json {
            members.insert("digest".to_owned(), digest_to_json(&self.digest));
        }
        json
    }
}
impl FromJson for Descriptor {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let name: QualifiedName = r.required("name")?;
        let description: BoundedText = r.required("description")?;
        let input_schema = r.required_value("input_schema").map_err(|e| e.in_member("input_schema"))?;
        let output_schema = r.required_value("output_schema").map_err(|e| e.in_member("output_schema"))?;
        let signal_schema = r.required_value("signal_schema").map_err(|e| e.in_member("signal_schema"))?;
        let digest = r.required_with("digest", digest_from_json)?;
        r.finish()?;
        let descriptor =
            Descriptor::from_parts(name, description, input_schema, output_schema, signal_schema).map_err(
                |e| {
                    let member = match e {
                        DescriptorError::Name(_) => "name",
                        DescriptorError::Description(_) => "description",
                        DescriptorError::InputSchema(_) => "input_schema",
                        DescriptorError::OutputSchema(_) => "output_schema",
                        DescriptorError::SignalSchema(_) => "signal_schema",
                    };
                    DecodeError::invalid(e.to_string()).in_member(member)
                },
            )?;
        if descriptor.digest != digest {
            return Err(DecodeError::invalid(format!(
                "descriptor digest mismatch: stated {digest}, computed {}",
                descriptor.digest
            ))
            .in_member("digest"));
        }
        Ok(descriptor)
    }
}

/// A digest's wire form: its text `sha256:<hex>`.
pub(crate) fn digest_to_json(digest: &Digest) -> Json {
    Json::String(digest.to_string())
}

/// Decodes a digest's text form (rejects malformed text and the zero digest).
pub(crate) fn digest_from_json(value: &Json) -> Result<Digest, DecodeError> {
    let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
    Digest::parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;

    fn object_schema() -> Json {
        let mut o = Object::new();
        o.insert("type".into(), Json::str("object"));
        Json::Object(o)
    }
    fn sample() -> Descriptor {
        Descriptor::new("tool.echo", "Echoes its input.", object_schema(), Json::Bool(true), None).unwrap()
    }
    fn members(d: &Descriptor) -> Object {
        match d.to_json() {
            Json::Object(o) => o,
            _ => unreachable!(),
        }
    }

    /// The kept descriptor of equal parts is the one building afresh gives, and parts that
    /// differ in any one member (even in a single schema) never get another's descriptor.
    #[test]
    fn kept_descriptors_equal_fresh_ones() {
        let schema = |n: usize| -> Json {
            let mut o = Object::new();
            o.insert("type".into(), Json::str("object"));
            if n > 0 {
                o.insert("maxProperties".into(), Json::from(n as u64));
            }
            Json::Object(o)
        };
        let schemas = [Json::Bool(true), Json::Bool(false), schema(0), schema(1), schema(2)];
        let mut seen: Vec<Descriptor> = Vec::new();
        for round in 0..2 {
            for name in ["tool.kept", "tool.kept2"] {
                for description in ["One.", "Two."] {
                    for (i, input) in schemas.iter().enumerate() {
                        for output in &schemas[i % 2..i % 2 + 2] {
                            for signal in &schemas[..2] {
                                let parts = || (QualifiedName::parse(name).unwrap(), BoundedText::parse(description).unwrap());
                                let (n, d) = parts();
                                let kept = Descriptor::from_parts(n, d, input, output, signal).unwrap();
                                let (n, d) = parts();
                                let fresh = Descriptor::from_parts_uncached(n, d, input, output, signal).unwrap();
                                assert_eq!(kept, fresh);
                                assert_eq!(kept.digest(), fresh.digest());
                                assert_eq!(kept.to_json(), fresh.to_json());
                                assert_eq!(kept.contract_json(), fresh.contract_json());
                                if round == 0 {
                                    assert!(seen.iter().all(|s| s.digest() != kept.digest()), "two parts share a descriptor");
                                    seen.push(kept);
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(seen.len(), 2 * 2 * 5 * 2 * 2);
    }

    // Independent of the schema compiler and the digest: text rules run first.
    #[test]
    fn name_and_description_rules() {
        let bad_name = Descriptor::new("Tool", "d", Json::Bool(true), Json::Bool(true), None);
        assert!(matches!(bad_name, Err(DescriptorError::Name(_))));
        assert!(matches!(
            Descriptor::new("", "d", Json::Bool(true), Json::Bool(true), None),
            Err(DescriptorError::Name(_))
        ));
        for description in ["", " padded", "padded\n", &"a".repeat(4097)] {
            assert!(matches!(
                Descriptor::new("tool", description, Json::Bool(true), Json::Bool(true), None),
                Err(DescriptorError::Description(_))
            ));
        }
    }

    #[test]
    fn signal_schema_defaults_to_false() {
        let d = sample();
        assert_eq!(d.signal_schema().source(), &Json::Bool(false));
        assert_eq!(d.input_schema().source(), &object_schema());
        assert_eq!(d.output_schema().source(), &Json::Bool(true));
        assert_eq!(d.name().as_str(), "tool.echo");
        assert_eq!(d.description().as_str(), "Echoes its input.");
    }

    #[test]
    fn invalid_schemas_are_rejected() {
        let not_a_schema = Json::u64(3);
        assert!(matches!(
            Descriptor::new("t", "d", not_a_schema.clone(), Json::Bool(true), None),
            Err(DescriptorError::InputSchema(_))
        ));
        assert!(matches!(
            Descriptor::new("t", "d", Json::Bool(true), not_a_schema.clone(), None),
            Err(DescriptorError::OutputSchema(_))
        ));
        assert!(matches!(
            Descriptor::new("t", "d", Json::Bool(true), Json::Bool(true), Some(not_a_schema)),
            Err(DescriptorError::SignalSchema(_))
        ));
    }

    #[test]
    fn digest_covers_exactly_the_contract_object() {
        let d = sample();
        let contract = d.contract_json();
        let keys: Vec<_> = contract.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["description", "input_schema", "name", "output_schema", "signal_schema"]);
        assert_eq!(d.digest(), Digest::of(&contract.to_canonical_bytes()));
        // Every contract field changes the digest.
        let variants = [
            Descriptor::new("tool.echo2", "Echoes its input.", object_schema(), Json::Bool(true), None),
            Descriptor::new("tool.echo", "Echoes.", object_schema(), Json::Bool(true), None),
            Descriptor::new("tool.echo", "Echoes its input.", Json::Bool(true), Json::Bool(true), None),
            Descriptor::new("tool.echo", "Echoes its input.", object_schema(), object_schema(), None),
            Descriptor::new(
                "tool.echo",
                "Echoes its input.",
                object_schema(),
                Json::Bool(true),
                Some(Json::Bool(true)),
            ),
        ];
        for v in variants {
            let v = v.unwrap();
            assert_ne!(v.digest(), d.digest());
            assert_ne!(v, d);
        }
        assert_eq!(sample(), d);
        assert_eq!(sample().digest(), d.digest());
    }

    #[test]
    fn codec_round_trip() {
        let d = sample();
        let m = members(&d);
        assert_eq!(m.len(), 6);
        assert_eq!(m["digest"], Json::String(d.digest().to_string()));
        assert_eq!(m["signal_schema"], Json::Bool(false));
        let back = Descriptor::from_json(&d.to_json()).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.digest(), d.digest());
    }

    #[test]
    fn decode_recomputes_the_digest() {
        let d = sample();
        let mut tampered = members(&d);
        tampered.insert("description".into(), Json::str("Something else."));
        let err = Descriptor::from_json(&Json::Object(tampered)).unwrap_err();
        assert_eq!(err.path, "$.digest");
        let mut wrong = members(&d);
        wrong.insert("digest".into(), Json::String(Digest([7; 32]).to_string()));
        assert!(Descriptor::from_json(&Json::Object(wrong)).is_err());
    }

    #[test]
    fn decode_strict_rejections() {
        let good = members(&sample());
        for key in good.keys() {
            let mut missing = good.clone();
            missing.remove(key);
            assert!(Descriptor::from_json(&Json::Object(missing)).is_err(), "missing {key}");
            let mut nulled = good.clone();
            nulled.insert(key.clone(), Json::Null);
            assert!(Descriptor::from_json(&Json::Object(nulled)).is_err(), "null {key}");
        }
        let mut extra = good.clone();
        extra.insert("version".into(), Json::u64(1));
        assert!(Descriptor::from_json(&Json::Object(extra)).is_err());
        for bad_digest in
            [Json::str("sha256:00"), Json::str(format!("sha256:{}", "0".repeat(64))), Json::u64(1)]
        {
            let mut m = good.clone();
            m.insert("digest".into(), bad_digest);
            assert!(Descriptor::from_json(&Json::Object(m)).is_err());
        }
        let mut bad_schema = good;
        bad_schema.insert("input_schema".into(), Json::u64(3));
        assert!(Descriptor::from_json(&Json::Object(bad_schema))
            .unwrap_err()
            .path
            .starts_with("$.input_schema"));
    }
}

