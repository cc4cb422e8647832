//! JSON Schema: compile once, validate many times, with bounded diagnostics.
//!
//! * Dialect: draft 2020-12, unless the schema's own `$schema` names another draft the
//!   `jsonschema` crate knows (draft 4, 6, 7, 2019-09; `http`/`https`, optional trailing `#`).
//!   Any other `$schema` value is a [`SchemaError`]: custom meta-schemas would need retrieval.
//! * No external resources: retrieval is disabled, so a `$ref` to any resource not embedded in
//!   the schema itself (remote URL, file, relative document) is a [`SchemaError`] at compile
//!   time, never a network or file access. Only the official draft meta-schemas, which ship
//!   inside the `jsonschema` crate, resolve without being embedded.
//! * `format` follows the draft's default: an annotation in 2019-09/2020-12, an assertion in
//!   drafts 4/6/7; unknown formats are ignored.
//! * Patterns use the `jsonschema` default engine (fancy-regex, which hands plain patterns to
//!   the linear-time `regex` engine); look-around/back-reference matching is bounded by
//!   [`limits::MAX_SCHEMA_REGEX_BACKTRACKS`] steps, deterministically.
//! * Numbers reach the validator with their exact value, never through `f64`
//!   (`9007199254740993 > 9007199254740992`; `1e400` is a number).
//! * Nothing here panics on input: the crate is called inside `catch_unwind`, and a panic
//!   counts as "invalid schema" / "instance rejected".
//! * Compilation is a pure function of the source, so small compiled schemas are kept in a
//!   bounded process-wide table keyed by the exact source value ([`Schema::compile`] of an
//!   equal source shares one compiled validator): a program that builds the same tools and
//!   descriptors again and again (a simulation campaign, one run per seed) compiles each
//!   schema once. The table only ever returns what compiling would have returned.
//! * Diagnostics list at most [`limits::MAX_SCHEMA_ERRORS_LISTED`] errors in the validator's
//!   order (instance members and schema keywords are both visited in `BTreeMap` order, so the
//!   order is deterministic) and are bounded by [`limits::MAX_DIAGNOSTIC_BYTES`].

mod diagnostic;
mod error;
mod keel_node;

pub use error::{SchemaError, SchemaViolation};

use crate::json::{DecodeError, Digest, FromJson, Json, ToJson};
use crate::limits;
use crate::json::{to_serde_value_with, SerdeValueError as ConvertError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

/// At most this many compiled schemas are kept by [`Schema::compile`]; once full, further
/// sources are compiled each time (first come, first kept: no eviction order to get wrong).
const MAX_SHARED_SCHEMAS: usize = 256;
/// Only sources whose canonical encoding is at most this many bytes are kept.
const MAX_SHARED_SCHEMA_BYTES: usize = 4096;

/// Compiled schemas by exact source (`Json`'s order compares number texts and strings
/// exactly, so equal keys are sources that compile identically).
static SHARED: LazyLock<Mutex<BTreeMap<Json, Schema>>> = LazyLock::new(|| Mutex::new(BTreeMap::new()));

/// A compiled JSON Schema together with its exact source. Cheap to clone (shared).
#[derive(Clone)]
pub struct Schema {
    inner: Arc<Inner>,
}

struct Inner {
    source: Json,
    /// Reads keel's `Json` directly (`keel_node`): no copy into a `serde_json::Value`.
    validator: jsonschema::Validator<keel_node::KeelJson>,
    digest: OnceLock<Digest>,
}

static ACCEPT_ALL: LazyLock<Schema> = LazyLock::new(|| constant_schema(true));
static REJECT_ALL: LazyLock<Schema> = LazyLock::new(|| constant_schema(false));

fn constant_schema(accept: bool) -> Schema {
    // Boolean schemas are valid in every draft; failure would be a bug in the crate.
    Schema::compile(&Json::Bool(accept)).expect("boolean schemas always compile")
}

impl Schema {
    /// Compiles `source`. Every failure (invalid schema, external `$ref`, unknown `$schema`,
    /// excessive nesting, a panic inside the schema crate) is a [`SchemaError`].
    pub fn compile(source: &Json) -> Result<Schema, SchemaError> {
        // The table is a plain map; a panic elsewhere while it was locked leaves it whole.
        let shared = || SHARED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(schema) = shared().get(source) {
            return Ok(schema.clone());
        }
        let schema = Schema::compile_uncached(source)?;
        if source.canonical_len() <= MAX_SHARED_SCHEMA_BYTES {
            let mut table = shared();
            if table.len() < MAX_SHARED_SCHEMAS {
                table.entry(source.clone()).or_insert_with(|| schema.clone());
            }
        }
        Ok(schema)
    }

    fn compile_uncached(source: &Json) -> Result<Schema, SchemaError> {
        let value = to_serde_value_with(source, limits::MAX_JSON_DEPTH).map_err(|e| match e {
            ConvertError::TooDeep { limit } => SchemaError::TooDeep { limit },
            ConvertError::Number { text } => SchemaError::Invalid {
                diagnostic: bounded(&format!("invalid schema: `{text}` is not a JSON number")),
            },
        })?;
        let built = catch_unwind(AssertUnwindSafe(|| {
            jsonschema::options_for::<keel_node::KeelJson>()
                .offline()
                .with_pattern_options(
                    jsonschema::PatternOptions::fancy_regex()
                        .backtrack_limit(limits::MAX_SCHEMA_REGEX_BACKTRACKS),
                )
                .build(&value)
                .map_err(|e| render_errors(Rendering::SchemaError, std::iter::once(e)).0)
        }));
        let validator = match built {
            Ok(Ok(validator)) => validator,
            Ok(Err(diagnostic)) => return Err(SchemaError::Invalid { diagnostic }),
            Err(_panic) => {
                return Err(SchemaError::Invalid {
                    diagnostic: "invalid schema: the schema compiler failed on this schema"
                        .to_owned(),
                })
            }
        };
        Ok(Schema {
            inner: Arc::new(Inner { source: source.clone(), validator, digest: OnceLock::new() }),
        })
    }

    /// The schema `true`: every instance is valid.
    pub fn accept_all() -> Schema {
        ACCEPT_ALL.clone()
    }

    /// The schema `false`: no instance is valid.
    pub fn reject_all() -> Schema {
        REJECT_ALL.clone()
    }

    /// The exact source value this schema was compiled from.
    pub fn source(&self) -> &Json {
        &self.inner.source
    }

    /// [`Digest::of_json`] of the source (computed once).
    pub fn digest(&self) -> Digest {
        *self.inner.digest.get_or_init(|| Digest::of_json(&self.inner.source))
    }

    /// Validates `instance`; the violation lists the first errors with their instance paths.
    /// An instance nested deeper than [`limits::MAX_JSON_DEPTH`] is always rejected.
    pub fn validate(&self, instance: &Json) -> Result<(), SchemaViolation> {
        if let Err(e) = keel_node::check_convertible(instance) {
            return Err(unconvertible(&e));
        }
        let validator = &self.inner.validator;
        match catch_unwind(AssertUnwindSafe(|| validator.is_valid(instance))) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(_panic) => return Err(internal_failure()),
        }
        let rendered = catch_unwind(AssertUnwindSafe(|| {
            render_errors(Rendering::Violation, validator.iter_errors(instance))
        }));
        match rendered {
            Ok((diagnostic, error_count)) => {
                // `is_valid` said no; never report a violation with zero errors.
                Err(SchemaViolation { diagnostic, error_count: error_count.max(1) })
            }
            Err(_panic) => Err(internal_failure()),
        }
    }

    /// Whether `instance` is valid (same verdict as [`Schema::validate`], without diagnostics).
    pub fn is_valid(&self, instance: &Json) -> bool {
        if keel_node::check_convertible(instance).is_err() {
            return false;
        }
        let validator = &self.inner.validator;
        catch_unwind(AssertUnwindSafe(|| validator.is_valid(instance))).unwrap_or(false)
    }
}

/// Whether `schema`'s top-level `type` is exactly the string `"object"` (tool input schemas
/// must be object schemas; `["object"]` or an implied object type does not qualify, matching
/// what model providers accept).
/// Runs the schema engine once so its process-global lazy state is initialized now.
///
/// Why: the `jsonschema` crate's hash maps seed themselves from OS randomness once per
/// process. Under madsim that first draw is intercepted and taken from the *simulated* rng, so
/// the first simulated run in a process would see a different random stream than every later
/// run with the same seed. Simulation harnesses call this before starting any simulated
/// runtime (idempotent and cheap after the first call).
pub fn prime() {
    static PRIMED: std::sync::Once = std::sync::Once::new();
    PRIMED.call_once(|| {
        let source = Json::Object(
            [("type".to_owned(), Json::str("object")), ("required".to_owned(), Json::Array(vec![Json::str("a")]))]
                .into_iter()
                .collect(),
        );
        if let Ok(schema) = Schema::compile(&source) {
            let _ = schema.validate(&Json::Null);
            let _ = schema.is_valid(&Json::object());
        }
    });
}

pub fn is_object_schema(schema: &Json) -> bool {
    schema.get("type").and_then(Json::as_str) == Some("object")
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Schema").field(&self.inner.source).finish()
    }
}

/// Schemas are equal when their sources are: compilation is a pure function of the source.
impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner.source == other.inner.source
    }
}
impl Eq for Schema {}

impl ToJson for Schema {
    fn to_json(&self) -> Json {
        self.inner.source.clone()
    }
}

impl FromJson for Schema {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        Schema::compile(value).map_err(|e| DecodeError::invalid(e.diagnostic()))
    }
}

/// Bounds a whole diagnostic with the shared normalization rule.
fn bounded(text: &str) -> String {
    diagnostic::normalize_diagnostic(text.as_bytes(), limits::MAX_DIAGNOSTIC_BYTES, "schema error")
}

/// What a list of `jsonschema` errors describes.
#[derive(Clone, Copy)]
enum Rendering {
    /// Errors of the schema itself; paths point into the schema. Reference and meta-schema
    /// resolution errors carry no path, so an empty path is left out.
    SchemaError,
    /// Errors of an instance; the empty path is the instance root and is named.
    Violation,
}

/// Renders `errors` as `"{headline} at /a: …; at /b: …; and N more"` (bounded) and counts them.
fn render_errors<'a>(
    rendering: Rendering,
    errors: impl Iterator<Item = jsonschema::ValidationError<'a>>,
) -> (String, usize) {
    use std::fmt::Write;
    // Room for the headline and the "; and N more" tail, then an equal share per entry
    // (minus its "; " separator), so the count survives the final cut.
    const RESERVED: usize = 64;
    let entry_budget =
        (limits::MAX_DIAGNOSTIC_BYTES - RESERVED) / limits::MAX_SCHEMA_ERRORS_LISTED - 2;
    let mut text = String::from(match rendering {
        Rendering::SchemaError => "invalid schema",
        Rendering::Violation => "schema violation",
    });
    let mut count = 0usize;
    for error in errors {
        count += 1;
        if count > limits::MAX_SCHEMA_ERRORS_LISTED {
            continue;
        }
        let path = error.instance_path().as_str();
        let entry = match (rendering, path.is_empty()) {
            (Rendering::SchemaError, true) => error.to_string(),
            (Rendering::Violation, true) => format!("at (root): {error}"),
            (_, false) => format!("at {path}: {error}"),
        };
        let entry = diagnostic::shorten_entry(&entry, entry_budget);
        let separator = match (count, rendering, path.is_empty()) {
            (1, Rendering::SchemaError, true) => ": ",
            (1, _, _) => " ",
            _ => "; ",
        };
        let _ = write!(text, "{separator}{entry}");
    }
    if count > limits::MAX_SCHEMA_ERRORS_LISTED {
        let _ = write!(text, "; and {} more", count - limits::MAX_SCHEMA_ERRORS_LISTED);
    }
    (bounded(&text), count)
}

fn unconvertible(error: &ConvertError) -> SchemaViolation {
    let diagnostic = match error {
        ConvertError::TooDeep { limit } => {
            format!("schema violation: instance nesting deeper than {limit}")
        }
        ConvertError::Number { text } => {
            format!("schema violation: `{text}` is not a JSON number")
        }
    };
    SchemaViolation { diagnostic: bounded(&diagnostic), error_count: 1 }
}

fn internal_failure() -> SchemaViolation {
    SchemaViolation {
        diagnostic: "schema violation: the validator failed on this instance".to_owned(),
        error_count: 1,
    }
}

#[cfg(test)]
mod tests;
