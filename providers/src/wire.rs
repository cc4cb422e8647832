//! Small helpers both adapters share to build request bodies and read provider JSON with
//! typed errors instead of panics.

use crate::error::ProviderError;
use keel::chat::Response;
use keel::json::{Json, Object};
use serde_json::{Map, Value};

/// `json` as a serde_json value (exact numbers), or a request error naming `what`.
pub(crate) fn to_value(provider: &'static str, json: &Json, what: &str) -> Result<Value, ProviderError> {
    json.to_serde_value().map_err(|e| ProviderError::request(provider, format!("{what}: {e}")))
}

/// A response body parsed as JSON, or a malformed-response error.
pub(crate) fn parse_body(provider: &'static str, bytes: &[u8], what: &str) -> Result<Value, ProviderError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let start = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
        ProviderError::malformed(provider, format!("{what} is not JSON ({e}); it starts with {start:?}"))
    })
}

/// `value` as an object, or a malformed-response error naming `what`.
pub(crate) fn object<'a>(provider: &'static str, value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, ProviderError> {
    value.as_object().ok_or_else(|| ProviderError::malformed(provider, format!("{what} is not an object")))
}

/// An optional string member (`null` counts as absent).
pub(crate) fn opt_str<'a>(
    provider: &'static str,
    map: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<&'a str>, ProviderError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ProviderError::malformed(provider, format!("{what}.{key} is not a string"))),
    }
}

/// A required string member.
pub(crate) fn req_str<'a>(
    provider: &'static str,
    map: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a str, ProviderError> {
    opt_str(provider, map, key, what)?.ok_or_else(|| ProviderError::malformed(provider, format!("{what}.{key} is missing")))
}

/// An optional non-negative integer member (`null` counts as absent).
pub(crate) fn opt_u64(
    provider: &'static str,
    map: &Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<u64>, ProviderError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) => Ok(Some(v)),
            None => Err(ProviderError::malformed(provider, format!("{what}.{key} is not a non-negative integer"))),
        },
        Some(_) => Err(ProviderError::malformed(provider, format!("{what}.{key} is not a number"))),
    }
}

/// An optional array member (`null` counts as empty).
pub(crate) fn opt_array<'a>(
    provider: &'static str,
    map: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a [Value], ProviderError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(ProviderError::malformed(provider, format!("{what}.{key} is not an array"))),
    }
}

/// Adds the request's `options.extra` members to `body`, top level. A member the adapter
/// already set is refused rather than silently overriding (or being overridden by) it.
pub(crate) fn merge_extra(
    provider: &'static str,
    body: &mut Map<String, Value>,
    extra: Option<&Object>,
) -> Result<(), ProviderError> {
    let Some(extra) = extra else { return Ok(()) };
    for (key, value) in extra {
        if body.contains_key(key) {
            return Err(ProviderError::request(
                provider,
                format!("options.extra.{key} collides with a member the adapter sets; use the typed option instead"),
            ));
        }
        body.insert(key.clone(), to_value(provider, value, &format!("options.extra.{key}"))?);
    }
    Ok(())
}

/// A mapped response, checked with keel's own rules so a bad provider value is reported as
/// a malformed response of this provider.
pub(crate) fn checked(provider: &'static str, response: Response) -> Result<Response, ProviderError> {
    response.validate().map_err(|e| ProviderError::malformed(provider, format!("the mapped response is invalid: {e}")))?;
    Ok(response)
}

/// `base` and `path` joined with exactly one slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// Copies the sampling options both providers name alike (`temperature`, `top_p`) into a
/// request body, keeping their exact number text.
pub(crate) fn insert_sampling(
    provider: &'static str,
    body: &mut Map<String, Value>,
    options: &keel::chat::Options,
) -> Result<(), ProviderError> {
    if let Some(t) = &options.temperature {
        body.insert("temperature".into(), to_value(provider, &Json::Number(t.clone()), "options.temperature")?);
    }
    if let Some(p) = &options.top_p {
        body.insert("top_p".into(), to_value(provider, &Json::Number(p.clone()), "options.top_p")?);
    }
    Ok(())
}

/// Where a client sends its calls, and with which key.
pub(crate) struct Endpoint {
    pub url: String,
    pub key: Option<String>,
}

/// Checks a configured base URL and resolves the key (the configured one, else the environment
/// variable `key_var`). The official endpoint `official` needs a key; any other base URL (a
/// local or compatible server, a test server) may go without. `path` follows the base URL.
pub(crate) fn endpoint(
    provider: &'static str,
    base_url: &str,
    official: &str,
    configured_key: Option<&str>,
    key_var: &str,
    key_setting: &str,
    path: &str,
) -> Result<Endpoint, crate::ProviderError> {
    let base = base_url.trim();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(crate::ProviderError::Config {
            provider,
            detail: format!("base URL `{base}` must start with http:// or https://"),
        });
    }
    let key = api_key(configured_key, key_var);
    if key.is_none() && base.trim_end_matches('/') == official {
        return Err(crate::ProviderError::Config {
            provider,
            detail: format!("no API key: set {key_var} or {key_setting}"),
        });
    }
    Ok(Endpoint { url: join_url(base, path), key })
}

/// The API key from the configuration or, failing that, the environment variable `var`.
pub(crate) fn api_key(configured: Option<&str>, var: &str) -> Option<String> {
    match configured {
        Some(key) => Some(key.to_owned()),
        None => std::env::var(var).ok().filter(|k| !k.trim().is_empty()),
    }
}
