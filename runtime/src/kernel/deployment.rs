//! DeploymentRef: the value identity of a Deployment.
//!
//! * `name` = descriptor name; `contract_digest` = descriptor digest;
//!   `implementation_digest`, `configuration_digest` = Host-supplied;
//! * `bindings_digest` = SHA-256 of the canonical JSON array of the `digest` text of every
//!   statically bound child ref, sorted by that text and deduplicated (`[]` for a leaf);
//! * `digest` = SHA-256 of the canonical JSON **array**
//!   `[name, contract_digest, implementation_digest, configuration_digest, bindings_digest]`
//!   (digests as `sha256:<hex>` text). An array, not an object, because the canonical encoding
//!   sorts object keys and the digest is defined over this
//!   field order.
//!
//! Text form `name+sha256:<hex>` ([`DeploymentKey`]): name plus `digest`, which covers the
//! other four fields, so it identifies the ref exactly. Wire: an object with all six fields;
//! decoding recomputes `digest` and rejects a mismatch. (`bindings_digest` cannot be
//! re-derived from the ref alone; the Engine re-checks it against the live Definition.)

use super::descriptor::{digest_from_json, digest_to_json, Descriptor};
use crate::json::{
    DecodeError, Digest, DigestError, FromJson, Json, ObjectBuilder, ObjectReader, ObjectWriter, ToJson, WriteJson,
};
use crate::text::{QualifiedName, TextError};

/// The exact identity of a Deployment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeploymentRef {
    name: QualifiedName,
    contract_digest: Digest,
    implementation_digest: Digest,
    configuration_digest: Digest,
    bindings_digest: Digest,
    digest: Digest,
    /// The canonical wire text, written once (every Process record of every cut writes it).
    text: Encoded,
}

/// A ref's canonical text: a function of the other fields, so comparing it agrees with them;
/// left out of `Debug`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Encoded(std::sync::Arc<str>);

impl std::fmt::Debug for Encoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

impl DeploymentRef {
    /// The ref of `descriptor` deployed with the given implementation and configuration,
    /// binding `child_bindings` statically (order and duplicates do not matter).
    pub fn new(
        descriptor: &Descriptor,
        implementation_digest: Digest,
        configuration_digest: Digest,
        child_bindings: &[DeploymentRef],
    ) -> DeploymentRef {
        DeploymentRef::from_parts(
            descriptor.name().clone(),
            descriptor.digest(),
            implementation_digest,
            configuration_digest,
            DeploymentRef::bindings_digest_of(child_bindings),
        )
    }

    /// From the five identity fields; computes `digest`.
    pub fn from_parts(
        name: QualifiedName,
        contract_digest: Digest,
        implementation_digest: Digest,
        configuration_digest: Digest,
        bindings_digest: Digest,
    ) -> DeploymentRef {
        let digest = Digest::of_json(&Json::Array(vec![
            name.to_json(),
            digest_to_json(&contract_digest),
            digest_to_json(&implementation_digest),
            digest_to_json(&configuration_digest),
            digest_to_json(&bindings_digest),
        ]));
        let mut text = String::with_capacity(512);
        let mut w = ObjectWriter::new(&mut text);
        w.write("bindings_digest", &bindings_digest)
            .write("configuration_digest", &configuration_digest)
            .write("contract_digest", &contract_digest)
            .write("digest", &digest)
            .write("implementation_digest", &implementation_digest)
            .write("name", &name);
        w.finish();
        DeploymentRef {
            name,
            contract_digest,
            implementation_digest,
            configuration_digest,
            bindings_digest,
            digest,
            text: Encoded(std::sync::Arc::from(text)),
        }
    }

    /// SHA-256 of the sorted, deduplicated JSON array of the children's digest texts.
    pub fn bindings_digest_of(child_bindings: &[DeploymentRef]) -> Digest {
        let mut texts: Vec<String> = child_bindings.iter().map(|r| r.digest.to_string()).collect();
        texts.sort();
        texts.dedup();
        Digest::of_json(&Json::Array(texts.into_iter().map(Json::String).collect()))
    }

    /// Whether a live Definition (its descriptor and static child bindings) still matches this
    /// frozen ref.
    pub fn matches_definition(&self, descriptor: &Descriptor, child_bindings: &[DeploymentRef]) -> bool {
        self.name == *descriptor.name()
            && self.contract_digest == descriptor.digest()
            && self.bindings_digest == DeploymentRef::bindings_digest_of(child_bindings)
    }

    pub fn name(&self) -> &QualifiedName {
        &self.name
    }
    pub fn contract_digest(&self) -> Digest {
        self.contract_digest
    }
    pub fn implementation_digest(&self) -> Digest {
        self.implementation_digest
    }
    pub fn configuration_digest(&self) -> Digest {
        self.configuration_digest
    }
    pub fn bindings_digest(&self) -> Digest {
        self.bindings_digest
    }
    pub fn digest(&self) -> Digest {
        self.digest
    }
    /// The text-form identity.
    pub fn key(&self) -> DeploymentKey {
        DeploymentKey { name: self.name.clone(), digest: self.digest }
    }
}

impl std::fmt::Display for DeploymentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{}", self.name, self.digest)
    }
}

impl ToJson for DeploymentRef {
    fn to_json(&self) -> Json {
        ObjectBuilder::new()
            .field("name", &self.name)
            .value("contract_digest", digest_to_json(&self.contract_digest))
            .value("implementation_digest", digest_to_json(&self.implementation_digest))
            .value("configuration_digest", digest_to_json(&self.configuration_digest))
            .value("bindings_digest", digest_to_json(&self.bindings_digest))
            .value("digest", digest_to_json(&self.digest))
            .build()
    }
}
impl WriteJson for DeploymentRef {
    fn write_json(&self, out: &mut String) {
        out.push_str(&self.text.0);
    }
}
thread_local! {
    /// The deployment refs this thread built from their parts most recently. Every Process
    /// record names one, a tree has a handful, and a reader decodes the same few in every
    /// record of every cut it reads; the digest is a pure function of the five parts, so a ref
    /// with equal parts is the same ref (a cache: the stated digest is still compared).
    static RECENT_REFS: std::cell::RefCell<Vec<DeploymentRef>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How many refs [`RECENT_REFS`] keeps.
const RECENT_REFS_KEPT: usize = 8;

/// [`DeploymentRef::from_parts`], taken from [`RECENT_REFS`] when it holds equal parts.
fn from_parts_recent(
    name: QualifiedName,
    contract_digest: Digest,
    implementation_digest: Digest,
    configuration_digest: Digest,
    bindings_digest: Digest,
) -> DeploymentRef {
    RECENT_REFS.with(|recent| {
        let mut recent = recent.borrow_mut();
        let same = |r: &&DeploymentRef| {
            r.name == name
                && r.contract_digest == contract_digest
                && r.implementation_digest == implementation_digest
                && r.configuration_digest == configuration_digest
                && r.bindings_digest == bindings_digest
        };
        if let Some(known) = recent.iter().find(same) {
            return known.clone();
        }
        let built =
            DeploymentRef::from_parts(name, contract_digest, implementation_digest, configuration_digest, bindings_digest);
        if recent.len() >= RECENT_REFS_KEPT {
            recent.remove(0);
        }
        recent.push(built.clone());
        built
    })
}

impl FromJson for DeploymentRef {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let recomputed = from_parts_recent(
            r.required("name")?,
            r.required_with("contract_digest", digest_from_json)?,
            r.required_with("implementation_digest", digest_from_json)?,
            r.required_with("configuration_digest", digest_from_json)?,
            r.required_with("bindings_digest", digest_from_json)?,
        );
        let stated = r.required_with("digest", digest_from_json)?;
        r.finish()?;
        if recomputed.digest != stated {
            return Err(DecodeError::invalid(format!(
                "deployment ref digest mismatch: stated {stated}, computed {}",
                recomputed.digest
            ))
            .in_member("digest"));
        }
        Ok(recomputed)
    }
}

/// Why a `name+sha256:…` text was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeploymentKeyError {
    #[error("deployment ref text must be `name+sha256:<hex>`")]
    MissingSeparator,
    #[error("deployment ref name: {0}")]
    Name(TextError),
    #[error("deployment ref digest: {0}")]
    Digest(DigestError),
}

/// The text-form identity of a DeploymentRef: `name+sha256:<hex>`. Exact: the digest covers
/// every identity field, so equal keys mean equal refs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeploymentKey {
    name: QualifiedName,
    digest: Digest,
}

impl DeploymentKey {
    pub fn parse(text: &str) -> Result<DeploymentKey, DeploymentKeyError> {
        // A qualified name never contains `+`, so the first one is the separator.
        let (name, digest) = text.split_once('+').ok_or(DeploymentKeyError::MissingSeparator)?;
        Ok(DeploymentKey {
            name: QualifiedName::parse(name).map_err(DeploymentKeyError::Name)?,
            digest: Digest::parse(digest).map_err(DeploymentKeyError::Digest)?,
        })
    }
    pub fn name(&self) -> &QualifiedName {
        &self.name
    }
    pub fn digest(&self) -> Digest {
        self.digest
    }
}

impl std::fmt::Display for DeploymentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{}", self.name, self.digest)
    }
}
impl ToJson for DeploymentKey {
    fn to_json(&self) -> Json {
        Json::String(self.to_string())
    }
}
impl FromJson for DeploymentKey {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
        DeploymentKey::parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Object;

    fn d(n: u8) -> Digest {
        Digest([n; 32])
    }
    fn name(text: &str) -> QualifiedName {
        QualifiedName::parse(text).unwrap()
    }
    fn leaf(text: &str, n: u8) -> DeploymentRef {
        DeploymentRef::from_parts(
            name(text),
            d(n),
            d(n + 1),
            d(n + 2),
            DeploymentRef::bindings_digest_of(&[]),
        )
    }
    fn members(r: &DeploymentRef) -> Object {
        match r.to_json() {
            Json::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_written_text_is_the_canonical_encoding() {
        for r in [leaf("tool.echo", 1), leaf("agent.main", 7)] {
            let mut out = String::from("x");
            r.write_json(&mut out);
            assert_eq!(out, format!("x{}", r.to_json().to_canonical_string()));
            assert_eq!(DeploymentRef::from_json(&r.to_json()).unwrap(), r);
        }
    }

    /// Decoding reuses a ref recently built from equal parts, but each decode still compares
    /// the stated digest and each field: a record that differs in one part or states a wrong
    /// digest is refused (or decoded as its own ref) right after the right one decoded.
    #[test]
    fn a_recently_decoded_ref_still_checks_every_part_and_the_stated_digest() {
        let r = leaf("tool.echo", 1);
        assert_eq!(DeploymentRef::from_json(&r.to_json()).unwrap(), r);
        let mut wrong = members(&r);
        wrong.insert("digest".into(), Json::String(d(9).to_string()));
        let refused = DeploymentRef::from_json(&Json::Object(wrong));
        assert!(refused.is_err_and(|e| e.to_string().contains("digest mismatch")));
        let other = DeploymentRef::from_parts(name("tool.echo"), d(1), d(2), d(9), r.bindings_digest());
        let mut changed = members(&r);
        changed.insert("configuration_digest".into(), Json::String(d(9).to_string()));
        assert!(DeploymentRef::from_json(&Json::Object(changed.clone())).is_err(), "the old digest no longer fits");
        changed.insert("digest".into(), Json::String(other.digest().to_string()));
        assert_eq!(DeploymentRef::from_json(&Json::Object(changed)).unwrap(), other);
        // More refs than the cache keeps: each still decodes to itself.
        for n in 0..(RECENT_REFS_KEPT as u8 + 3) {
            let r = leaf("tool.many", n * 3 + 1);
            assert_eq!(DeploymentRef::from_json(&r.to_json()).unwrap(), r);
        }
        assert_eq!(DeploymentRef::from_json(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn digest_is_over_the_five_fields_in_spec_order() {
        let r = leaf("tool.echo", 1);
        let expected = Json::Array(vec![
            Json::str("tool.echo"),
            Json::String(d(1).to_string()),
            Json::String(d(2).to_string()),
            Json::String(d(3).to_string()),
            Json::String(r.bindings_digest().to_string()),
        ]);
        assert_eq!(r.digest(), Digest::of(&expected.to_canonical_bytes()));
        // Every field changes the digest.
        let b = r.bindings_digest();
        for other in [
            DeploymentRef::from_parts(name("tool.echo2"), d(1), d(2), d(3), b),
            DeploymentRef::from_parts(name("tool.echo"), d(9), d(2), d(3), b),
            DeploymentRef::from_parts(name("tool.echo"), d(1), d(9), d(3), b),
            DeploymentRef::from_parts(name("tool.echo"), d(1), d(2), d(9), b),
            DeploymentRef::from_parts(name("tool.echo"), d(1), d(2), d(3), d(9)),
        ] {
            assert_ne!(other.digest(), r.digest());
        }
    }

    #[test]
    fn bindings_digest_is_sorted_and_deduplicated() {
        let a = leaf("a", 1);
        let b = leaf("b", 10);
        let empty = DeploymentRef::bindings_digest_of(&[]);
        assert_eq!(empty, Digest::of(b"[]"));
        let ab = DeploymentRef::bindings_digest_of(&[a.clone(), b.clone()]);
        assert_eq!(ab, DeploymentRef::bindings_digest_of(&[b.clone(), a.clone(), b.clone()]));
        assert_ne!(ab, DeploymentRef::bindings_digest_of(std::slice::from_ref(&a)));
        assert_ne!(ab, empty);
        let mut texts = [a.digest().to_string(), b.digest().to_string()];
        texts.sort();
        let expected = Json::Array(texts.iter().cloned().map(Json::String).collect());
        assert_eq!(ab, Digest::of(&expected.to_canonical_bytes()));
    }

    #[test]
    fn new_uses_the_descriptor_and_matches_it() {
        let descriptor =
            Descriptor::new("agent.main", "The main agent.", Json::Bool(true), Json::Bool(true), None)
                .unwrap();
        let tool = leaf("tool.echo", 1);
        let r = DeploymentRef::new(&descriptor, d(5), d(6), std::slice::from_ref(&tool));
        assert_eq!(r.name(), descriptor.name());
        assert_eq!(r.contract_digest(), descriptor.digest());
        assert_eq!((r.implementation_digest(), r.configuration_digest()), (d(5), d(6)));
        assert!(r.matches_definition(&descriptor, std::slice::from_ref(&tool)));
        assert!(!r.matches_definition(&descriptor, &[]));
        let other =
            Descriptor::new("agent.main", "Changed.", Json::Bool(true), Json::Bool(true), None).unwrap();
        assert!(!r.matches_definition(&other, &[tool]));
    }

    #[test]
    fn text_form_round_trip() {
        let r = leaf("tool.echo", 1);
        let text = r.to_string();
        assert_eq!(text, format!("tool.echo+{}", r.digest()));
        let key = DeploymentKey::parse(&text).unwrap();
        assert_eq!(key, r.key());
        assert_eq!(key.to_string(), text);
        assert_eq!(DeploymentKey::from_json(&key.to_json()).unwrap(), key);
    }

    #[test]
    fn text_form_rejections() {
        let hex = "ab".repeat(32);
        assert_eq!(DeploymentKey::parse("tool.echo"), Err(DeploymentKeyError::MissingSeparator));
        assert!(matches!(
            DeploymentKey::parse(&format!("Tool+sha256:{hex}")),
            Err(DeploymentKeyError::Name(_))
        ));
        assert!(matches!(DeploymentKey::parse(&format!("+sha256:{hex}")), Err(DeploymentKeyError::Name(_))));
        assert!(matches!(DeploymentKey::parse("tool+sha256:ab"), Err(DeploymentKeyError::Digest(_))));
        assert!(matches!(
            DeploymentKey::parse(&format!("tool+sha256:{}", "0".repeat(64))),
            Err(DeploymentKeyError::Digest(_))
        ));
        assert!(matches!(
            DeploymentKey::parse(&format!("tool+sha256:{hex}+x")),
            Err(DeploymentKeyError::Digest(_))
        ));
        assert!(DeploymentKey::from_json(&Json::u64(1)).is_err());
    }

    #[test]
    fn codec_round_trip() {
        let r = leaf("tool.echo", 1);
        let m = members(&r);
        let keys: Vec<_> = m.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "bindings_digest",
                "configuration_digest",
                "contract_digest",
                "digest",
                "implementation_digest",
                "name"
            ]
        );
        assert_eq!(DeploymentRef::from_json(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn decode_recomputes_the_digest() {
        let r = leaf("tool.echo", 1);
        let mut tampered = members(&r);
        tampered.insert("configuration_digest".into(), Json::String(d(42).to_string()));
        let err = DeploymentRef::from_json(&Json::Object(tampered)).unwrap_err();
        assert_eq!(err.path, "$.digest");
    }

    #[test]
    fn decode_strict_rejections() {
        let good = members(&leaf("tool.echo", 1));
        for key in good.keys() {
            let mut missing = good.clone();
            missing.remove(key);
            assert!(DeploymentRef::from_json(&Json::Object(missing)).is_err(), "missing {key}");
            let mut nulled = good.clone();
            nulled.insert(key.clone(), Json::Null);
            assert!(DeploymentRef::from_json(&Json::Object(nulled)).is_err(), "null {key}");
            if key != "name" {
                let mut zero = good.clone();
                zero.insert(key.clone(), Json::String(format!("sha256:{}", "0".repeat(64))));
                assert!(DeploymentRef::from_json(&Json::Object(zero)).is_err(), "zero {key}");
            }
        }
        let mut extra = good.clone();
        extra.insert("dispatcher".into(), Json::Bool(true));
        assert!(DeploymentRef::from_json(&Json::Object(extra)).is_err());
        let mut bad_name = good;
        bad_name.insert("name".into(), Json::str("Tool"));
        assert!(DeploymentRef::from_json(&Json::Object(bad_name)).is_err());
    }
}
