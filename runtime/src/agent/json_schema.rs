//! JSON Schemas derived from Rust types with `schemars`, for typed tools and typed output.

use crate::json::Json;

/// The JSON Schema (draft 2020-12) of `T`, as keel's [`Json`]. The `$schema` member is left
/// out: keel reads 2020-12 by default, and some providers refuse unknown top-level members
/// in a tool's parameters.
pub(crate) fn schema_of<T: schemars::JsonSchema>() -> Result<Json, String> {
    let schema = schemars::SchemaGenerator::new(schemars::generate::SchemaSettings::draft2020_12().with(|s| s.meta_schema = None))
        .into_root_schema_for::<T>();
    let value = schema.to_value();
    Json::from_serde_value(&value).map_err(|e| format!("the schema of `{}` is not JSON keel can hold: {e}", std::any::type_name::<T>()))
}

/// The JSON text of a model's structured answer: the text itself, or the inside of one
/// Markdown code fence around it (models often wrap JSON in ```json fences even when asked
/// not to).
pub(crate) fn json_text(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return trimmed };
    let Some(body) = rest.strip_suffix("```") else { return trimmed };
    // Skip the info string (`json`) on the opening line.
    match body.split_once('\n') {
        Some((info, inner)) if !info.trim_start().starts_with(['{', '[', '"']) => inner.trim(),
        _ => body.trim(),
    }
}
