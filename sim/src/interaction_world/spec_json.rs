//! The scenario file format (documented in `sim/scenarios/README.md`): strict JSON through
//! `keel::json`, unknown members rejected, every error naming the file and the JSON path of
//! the bad member.

use super::spec::{
    Action, AnswerOrder, CallSpec, CommitFaultKind, ConcurrencySpec, DelegateSpec, Expect, ExpectStatus, FaultSpec,
    Finish, HostAction, ModelMode, ModelSpec, Outcome, Spec, ToolSpec, Trigger, Turn, UnknownPolicy,
};
use crate::limits::{MAX_SCENARIO_FILE_BYTES, MAX_SCENARIO_LIST_LEN};
use keel::json::codec::DecodeErrorKind;
use keel::json::{parse, DecodeError, Json, ObjectReader};
use std::path::Path;

/// Why a scenario file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecFileError {
    #[error("{file}: cannot read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: {bytes} bytes exceed the scenario file limit of {max}")]
    TooLarge { file: String, bytes: u64, max: u64 },
    /// Only `.json` files are Interaction scenarios (the wording keeps the CLI's message for
    /// files no world loads).
    #[error("`{file}` looks like a scenario file, but no registered world loads scenario files yet with this extension (the Interaction world loads `.json` files)")]
    Extension { file: String },
    #[error("{file}: at {path}: {reason}")]
    Invalid { file: String, path: String, reason: String },
}

/// Reads and decodes one scenario file.
pub fn load_file(path: &Path) -> Result<Spec, SpecFileError> {
    let file = path.display().to_string();
    if path.extension().is_none_or(|e| e != "json") {
        return Err(SpecFileError::Extension { file });
    }
    let read_err = |e: std::io::Error| SpecFileError::Read { file: file.clone(), message: e.to_string() };
    let bytes = std::fs::metadata(path).map_err(read_err)?.len();
    if bytes > MAX_SCENARIO_FILE_BYTES {
        return Err(SpecFileError::TooLarge { file, bytes, max: MAX_SCENARIO_FILE_BYTES });
    }
    let text = std::fs::read(path).map_err(read_err)?;
    decode_bytes(&file, &text)
}

/// Decodes scenario file bytes; `file` names the source in errors.
pub fn decode_bytes(file: &str, bytes: &[u8]) -> Result<Spec, SpecFileError> {
    let invalid = |e: DecodeError| SpecFileError::Invalid { file: file.to_owned(), path: e.path, reason: e.kind.to_string() };
    let value = parse(bytes).map_err(|e| invalid(DecodeError::from(e)))?;
    spec(&value).map_err(invalid)
}

fn bad(reason: impl Into<String>) -> DecodeError {
    DecodeError::invalid(reason)
}

/// `finish` whose unknown-member error points at the member itself.
fn finish(r: ObjectReader<'_>) -> Result<(), DecodeError> {
    r.finish().map_err(|e| match e.kind {
        DecodeErrorKind::UnknownMember(key) => {
            DecodeError { path: format!("$.{key}"), kind: DecodeErrorKind::UnknownMember(key) }
        }
        kind => DecodeError { path: e.path, kind },
    })
}

fn opt<'a, T>(
    r: &mut ObjectReader<'a>,
    key: &'static str,
    f: impl FnOnce(&'a Json) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match r.optional_value(key).map_err(|e| e.in_member(key))? {
        None => Ok(None),
        Some(v) => f(v).map(Some).map_err(|e| e.in_member(key)),
    }
}

fn list<T>(v: &Json, f: impl Fn(&Json) -> Result<T, DecodeError>) -> Result<Vec<T>, DecodeError> {
    let items = v.as_array().ok_or_else(|| DecodeError::wrong_type("array", v))?;
    if items.len() > MAX_SCENARIO_LIST_LEN {
        return Err(bad(format!("{} items exceed the limit of {MAX_SCENARIO_LIST_LEN}", items.len())));
    }
    items.iter().enumerate().map(|(i, item)| f(item).map_err(|e| e.in_index(i))).collect()
}

fn string(v: &Json) -> Result<String, DecodeError> {
    v.as_str().map(str::to_owned).ok_or_else(|| DecodeError::wrong_type("string", v))
}

fn nonempty_string(v: &Json) -> Result<String, DecodeError> {
    let s = string(v)?;
    if s.is_empty() {
        return Err(bad("must not be empty"));
    }
    Ok(s)
}

fn u64_of(v: &Json) -> Result<u64, DecodeError> {
    v.as_u64().ok_or_else(|| DecodeError::wrong_type("unsigned integer", v))
}

fn u32_of(v: &Json) -> Result<u32, DecodeError> {
    u32::try_from(u64_of(v)?).map_err(|_| bad("does not fit 32 bits"))
}

fn bool_of(v: &Json) -> Result<bool, DecodeError> {
    v.as_bool().ok_or_else(|| DecodeError::wrong_type("boolean", v))
}

fn range(v: &Json) -> Result<(u64, u64), DecodeError> {
    let items = list(v, u64_of)?;
    match items.as_slice() {
        [lo, hi] if lo <= hi && *hi <= crate::limits::MAX_SIM_LATENCY_MS => Ok((*lo, *hi)),
        [_, _] => Err(bad(format!("need lo <= hi <= {}", crate::limits::MAX_SIM_LATENCY_MS))),
        _ => Err(bad("a range is [lo, hi]")),
    }
}

fn named<T>(v: &Json, what: &str, from: impl Fn(&str) -> Option<T>) -> Result<T, DecodeError> {
    let s = string(v)?;
    from(&s).ok_or_else(|| bad(format!("unknown {what} `{s}`")))
}

fn spec(v: &Json) -> Result<Spec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let name = r.required_with("name", nonempty_string)?;
    if name.chars().any(char::is_whitespace) {
        return Err(bad("a scenario name has no whitespace").in_member("name"));
    }
    let mut s = Spec::minimal(&name);
    if let Some(d) = opt(&mut r, "description", string)? {
        s.description = d;
    }
    s.user = r.required_with("user", nonempty_string)?;
    if let Some(n) = opt(&mut r, "max_model_calls", u32_of)? {
        s.max_model_calls = n;
    }
    if let Some((b, answers)) = opt(&mut r, "budget", budget)? {
        s.budget = Some(b);
        s.budget_answers = answers;
    }
    if let Some(n) = opt(&mut r, "max_concurrent_tool_calls", u32_of)? {
        s.max_concurrent_tool_calls = n;
    }
    s.model = r.required_with("model", model)?;
    s.tools = opt(&mut r, "tools", |v| list(v, tool))?.unwrap_or_default();
    s.deferred_tools = opt(&mut r, "deferred_tools", |v| list(v, tool))?.unwrap_or_default();
    s.delegate = opt(&mut r, "delegate", delegate)?;
    s.host = opt(&mut r, "host", |v| list(v, host_action))?.unwrap_or_default();
    if let Some(o) = opt(&mut r, "answer_order", |v| {
        named(v, "answer order", |n| match n {
            "snapshot" => Some(AnswerOrder::Snapshot),
            "reverse" => Some(AnswerOrder::Reverse),
            _ => None,
        })
    })? {
        s.answer_order = o;
    }
    if let Some(p) = opt(&mut r, "unknown_policy", |v| named(v, "unknown policy", UnknownPolicy::from_name))? {
        s.unknown_policy = p;
    }
    if let Some(f) = opt(&mut r, "faults", faults)? {
        s.faults = f;
    }
    if let Some(e) = opt(&mut r, "expect", expect)? {
        s.expect = e;
    }
    finish(r)?;
    check_references(&s)?;
    Ok(s)
}

/// Cross-member rules: tool names unique, advertised names are deferred tools, the delegate
/// name collides with no tool, tools and the concurrency limit go together.
/// `{"total_tokens"?:u64,"tool_calls"?:u64,"reserve_output_tokens"?:u32,"time_ms"?:u64,
/// "on_exhausted"?:"fail"|"ask_human","answers"?:[BudgetAnswer]}` (time on the simulated clock
/// from the run's start; `answers`: the host's answers to the budget questions, in order).
fn budget(v: &Json) -> Result<(keel::interaction::budget::Budget, Vec<keel::interaction::budget_question::BudgetAnswer>), DecodeError> {
    use keel::json::FromJson;
    let mut r = ObjectReader::new(v)?;
    let mut b = keel::interaction::budget::Budget::new();
    if let Some(n) = opt(&mut r, "total_tokens", u64_of)? {
        b = b.total_tokens(n);
    }
    if let Some(n) = opt(&mut r, "tool_calls", u64_of)? {
        b = b.tool_calls(n);
    }
    if let Some(n) = opt(&mut r, "reserve_output_tokens", u32_of)? {
        b = b.reserve_output_tokens(n);
    }
    if let Some(n) = opt(&mut r, "time_ms", u64_of)? {
        b = b.time(std::time::Duration::from_millis(n));
    }
    match opt(&mut r, "on_exhausted", string)?.as_deref() {
        None | Some("fail") => {}
        Some("ask_human") => b = b.on_exhausted(keel::interaction::budget::OnExhausted::AskHuman),
        Some(_) => return Err(bad("on_exhausted is \"fail\" or \"ask_human\"").in_member("on_exhausted")),
    }
    let answers = opt(&mut r, "answers", |v| list(v, keel::interaction::budget_question::BudgetAnswer::from_json))?.unwrap_or_default();
    finish(r)?;
    Ok((b, answers))
}

fn check_references(s: &Spec) -> Result<(), DecodeError> {
    let mut names = std::collections::BTreeSet::new();
    for t in s.all_tools() {
        if !names.insert(t.name.as_str()) {
            return Err(bad(format!("tool `{}` is defined twice", t.name)).in_member("tools"));
        }
    }
    for t in s.all_tools() {
        for a in &t.advertises {
            if !s.deferred_tools.iter().any(|d| &d.name == a) {
                return Err(bad(format!("tool `{}` advertises `{a}`, which is not a deferred tool", t.name)).in_member("tools"));
            }
        }
    }
    if let Some(d) = &s.delegate {
        if names.contains(d.name.as_str()) {
            return Err(bad(format!("delegate `{}` collides with a tool", d.name)).in_member("delegate"));
        }
    }
    if s.tools.is_empty() && s.deferred_tools.is_empty() && s.max_concurrent_tool_calls != 4 {
        return Err(bad("max_concurrent_tool_calls needs tools").in_member("max_concurrent_tool_calls"));
    }
    if s.max_model_calls == 0 {
        return Err(bad("must be > 0").in_member("max_model_calls"));
    }
    Ok(())
}

fn model(v: &Json) -> Result<ModelSpec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let mut m = Spec::minimal("x").model;
    if let Some(mode) = opt(&mut r, "mode", |v| {
        named(v, "model mode", |n| match n {
            "complete" => Some(ModelMode::Complete),
            "stream" => Some(ModelMode::Stream),
            _ => None,
        })
    })? {
        m.mode = mode;
    }
    m.turns = r.required_with("turns", |v| list(v, turn))?;
    if let Some(f) = opt(&mut r, "fallback", nonempty_string)? {
        m.fallback = f;
    }
    if let Some(l) = opt(&mut r, "latency_ms", range)? {
        m.latency_ms = l;
    }
    if let Some(b) = opt(&mut r, "reducer", bool_of)? {
        m.reducer = b;
    }
    if let Some(n) = opt(&mut r, "validator_rejections", u32_of)? {
        m.validator_rejections = n;
    }
    finish(r)?;
    Ok(m)
}

fn turn(v: &Json) -> Result<Turn, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let finish_of = |v: &Json| named(v, "finish reason", Finish::from_name);
    let t = if r.has("text") {
        let text = r.required_with("text", string)?;
        let finish = opt(&mut r, "finish", finish_of)?.unwrap_or(Finish::Stop);
        Turn::Text { text, finish }
    } else if r.has("calls") {
        let calls = r.required_with("calls", |v| list(v, call))?;
        if calls.is_empty() {
            return Err(bad("a calls turn needs at least one call").in_member("calls"));
        }
        let finish = opt(&mut r, "finish", finish_of)?.unwrap_or(Finish::ToolCalls);
        Turn::Calls { calls, finish }
    } else if r.has("provider_error") {
        Turn::ProviderError { message: r.required_with("provider_error", nonempty_string)? }
    } else if r.has("host_error") {
        Turn::HostError { message: r.required_with("host_error", nonempty_string)? }
    } else {
        return Err(bad("a turn has one of `text`, `calls`, `provider_error`, `host_error`"));
    };
    finish(r)?;
    Ok(t)
}

fn call(v: &Json) -> Result<CallSpec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let id = r.required_with("id", nonempty_string)?;
    let name = r.required_with("name", nonempty_string)?;
    let arguments = match (opt(&mut r, "arguments", |v| Ok(v.to_canonical_string()))?, opt(&mut r, "raw_arguments", string)?) {
        (Some(a), None) => a,
        (None, Some(raw)) => raw,
        (None, None) => "{}".to_owned(),
        (Some(_), Some(_)) => return Err(bad("`arguments` and `raw_arguments` exclude each other")),
    };
    finish(r)?;
    Ok(CallSpec { id, name, arguments })
}

fn tool(v: &Json) -> Result<ToolSpec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let name = r.required_with("name", nonempty_string)?;
    let concurrency = opt(&mut r, "concurrency", |v| match v {
        Json::String(s) if s == "exclusive" => Ok(ConcurrencySpec::Exclusive),
        Json::String(s) if s == "shared" => Ok(ConcurrencySpec::Shared),
        Json::Object(_) => {
            let mut k = ObjectReader::new(v)?;
            let arg = k.required_with("keyed", nonempty_string)?;
            finish(k)?;
            Ok(ConcurrencySpec::Keyed(arg))
        }
        other => Err(bad(format!("concurrency is \"exclusive\", \"shared\" or {{\"keyed\":ARG}}, not {}", other.to_canonical_string()))),
    })?
    .unwrap_or(ConcurrencySpec::Exclusive);
    let latency_ms = opt(&mut r, "latency_ms", range)?.unwrap_or((1, 5));
    let outcome = opt(&mut r, "outcome", |v| named(v, "outcome", Outcome::from_name))?.unwrap_or(Outcome::Text);
    let direct = opt(&mut r, "direct", bool_of)?.unwrap_or(false);
    let pauses = opt(&mut r, "pauses", u32_of)?.unwrap_or(0);
    if pauses > crate::limits::MAX_SIM_TOOL_PAUSES {
        return Err(bad(format!("at most {} pauses", crate::limits::MAX_SIM_TOOL_PAUSES)).in_member("pauses"));
    }
    let advertises = opt(&mut r, "advertises", |v| list(v, nonempty_string))?.unwrap_or_default();
    let strict_arguments = opt(&mut r, "strict_arguments", bool_of)?.unwrap_or(false);
    finish(r)?;
    Ok(ToolSpec { name, concurrency, latency_ms, outcome, direct, pauses, advertises, strict_arguments, recorded: Vec::new() })
}

fn delegate(v: &Json) -> Result<DelegateSpec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let name = r.required_with("name", nonempty_string)?;
    let model = r.required_with("model", model)?;
    let max_model_calls = opt(&mut r, "max_model_calls", u32_of)?.unwrap_or(4);
    if max_model_calls == 0 {
        return Err(bad("must be > 0").in_member("max_model_calls"));
    }
    let budget_steps = opt(&mut r, "budget_steps", u64_of)?;
    finish(r)?;
    Ok(DelegateSpec { name, model, max_model_calls, budget_steps })
}

fn host_action(v: &Json) -> Result<HostAction, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let trigger = r.required_with("at", |v| {
        let mut t = ObjectReader::new(v)?;
        let trigger = if t.has("model_call") {
            let n = t.required_with("model_call", u32_of)?;
            if n == 0 {
                return Err(bad("model calls count from 1").in_member("model_call"));
            }
            Trigger::ModelCall(n)
        } else if t.has("tool_call") {
            Trigger::ToolCall(t.required_with("tool_call", nonempty_string)?)
        } else if t.has("input_wait") {
            let n = t.required_with("input_wait", u32_of)?;
            if n == 0 {
                return Err(bad("input waits count from 1").in_member("input_wait"));
            }
            Trigger::InputWait(n)
        } else {
            return Err(bad("a trigger has one of `model_call`, `tool_call`, `input_wait`"));
        };
        finish(t)?;
        Ok(trigger)
    })?;
    let action = r.required_with("do", |v| match v {
        Json::String(s) if s == "kill" => Ok(Action::Kill),
        Json::String(s) if s == "cancel" => Ok(Action::Cancel),
        Json::String(s) if s == "stale_answer" => Ok(Action::StaleAnswer),
        Json::Object(_) => {
            let mut a = ObjectReader::new(v)?;
            let action = if a.has("steer") {
                let (id, text) = a.required_with("steer", steer_body)?;
                Action::Steer { id, text }
            } else if a.has("duplicate_steer") {
                Action::DuplicateSteer { id: a.required_with("duplicate_steer", nonempty_string)? }
            } else if a.has("conflict_steer") {
                let (id, text) = a.required_with("conflict_steer", steer_body)?;
                Action::ConflictSteer { id, text }
            } else {
                return Err(bad("an action object has one of `steer`, `duplicate_steer`, `conflict_steer`"));
            };
            finish(a)?;
            Ok(action)
        }
        other => Err(bad(format!("unknown action {}", other.to_canonical_string()))),
    })?;
    finish(r)?;
    Ok(HostAction { trigger, action })
}

fn steer_body(v: &Json) -> Result<(String, String), DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let id = r.required_with("id", nonempty_string)?;
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(bad("a steer id is [A-Za-z0-9_-]+").in_member("id"));
    }
    let text = r.required_with("text", nonempty_string)?;
    finish(r)?;
    Ok((id, text))
}

fn faults(v: &Json) -> Result<FaultSpec, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let at = opt(&mut r, "at", |v| {
        list(v, |v| {
            let mut f = ObjectReader::new(v)?;
            let commit = f.required_with("commit", u64_of)?;
            let kind = f.required_with("fault", |v| named(v, "commit fault", CommitFaultKind::from_name))?;
            finish(f)?;
            Ok((commit, kind))
        })
    })?
    .unwrap_or_default();
    let per_mille = |v: &Json| {
        let n = u64_of(v)?;
        if n > 1000 {
            return Err(bad("a per-mille value is at most 1000"));
        }
        Ok(n)
    };
    let crash_per_mille = opt(&mut r, "crash_per_mille", per_mille)?.unwrap_or(0);
    let lose_ack_per_mille = opt(&mut r, "lose_ack_per_mille", per_mille)?.unwrap_or(0);
    let fail_before_per_mille = opt(&mut r, "fail_before_per_mille", per_mille)?.unwrap_or(0);
    finish(r)?;
    Ok(FaultSpec { at, crash_per_mille, lose_ack_per_mille, fail_before_per_mille, replay: None })
}

fn expect(v: &Json) -> Result<Expect, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let status = opt(&mut r, "status", |v| named(v, "status", ExpectStatus::from_name))?;
    let output_text = opt(&mut r, "output_text", string)?;
    let output_source = opt(&mut r, "output_source", |v| {
        let s = string(v)?;
        match s.as_str() {
            "model" | "direct_tool_results" => Ok(s),
            _ => Err(bad(format!("unknown output source `{s}`"))),
        }
    })?;
    let failure_code = opt(&mut r, "failure_code", nonempty_string)?;
    let model_calls = opt(&mut r, "model_calls", u32_of)?;
    let model_saw = opt(&mut r, "model_saw", |v| list(v, nonempty_string))?.unwrap_or_default();
    let model_never_saw = opt(&mut r, "model_never_saw", |v| list(v, nonempty_string))?.unwrap_or_default();
    let same_output_under_crash = opt(&mut r, "same_output_under_crash", bool_of)?.unwrap_or(true);
    finish(r)?;
    Ok(Expect {
        status,
        output_text,
        output_source,
        failure_code,
        model_calls,
        model_saw,
        model_never_saw,
        same_output_under_crash,
    })
}
