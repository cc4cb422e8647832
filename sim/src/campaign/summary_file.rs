//! The machine-readable campaign summary `run --summary-out FILE` writes and `merge` reads: one
//! strict JSON object (`keel::json`, canonical encoding) with every count, tally, the traces
//! digest and the kept failures, so the shards of a campaign run on several machines can be
//! summed into the summary of the whole campaign.
//!
//! The worlds' declared coverage is not stored: `merge` takes it from the scenarios again,
//! exactly as a campaign does.

use std::collections::BTreeMap;
use std::time::Duration;

use keel::json::{parse_with, DecodeError, Json, ObjectBuilder, ObjectReader, ParseLimits};

use super::summary::{CampaignSummary, Failure, Origin};
use super::trace_digest::TraceDigest;
use crate::coverage::WorldTally;
use crate::limits::{MAX_KEPT_FAILURES, MAX_SUMMARY_FILE_BYTES};
use crate::mutation;
use crate::world::{RunReport, Violation};

/// The `format` member: bumped when the layout changes.
const FORMAT: &str = "keel-sim summary 1";

/// Why a summary file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryFileError {
    #[error("{file}: {bytes} bytes exceed the summary file limit of {max}")]
    TooLarge { file: String, bytes: usize, max: usize },
    #[error("{file}: not a keel-sim summary (write one with `run --summary-out FILE`): {error}")]
    Invalid { file: String, error: DecodeError },
}

/// The summary as one canonical JSON text.
pub fn encode_summary(s: &CampaignSummary) -> String {
    let strings = |v: &[String]| Json::Array(v.iter().map(|x| Json::str(x.clone())).collect());
    let stored: Vec<Json> = s
        .stored_seeds
        .iter()
        .map(|(scenario, seed)| {
            ObjectBuilder::new()
                .field("scenario", scenario)
                .field("seed", seed)
                .build()
        })
        .collect();
    let worlds: Vec<Json> = s
        .worlds
        .iter()
        .map(|w| {
            ObjectBuilder::new()
                .field("world", &w.world)
                .value("faults_fired", counts(&w.faults_fired))
                .value("crash_points_hit", counts(&w.crash_points_hit))
                .build()
        })
        .collect();
    let failures: Vec<Json> = s.failures.iter().map(failure).collect();
    let mut b = ObjectBuilder::new()
        .field("format", FORMAT)
        .value("scenarios", strings(&s.scenarios))
        .value("replay_names", strings(&s.replay_names))
        .value("stored_seeds", Json::Array(stored))
        .field("from", &s.from)
        .field("seeds", &s.seeds)
        .field("determinism_checked", &s.determinism_checked)
        .field("stopped_at_first_failure", &s.stopped_at_first_failure)
        .field("runs", &s.runs)
        .field("regression_runs", &s.regression_runs)
        .field("regression_failed", &s.regression_failed)
        .field("passed", &s.passed)
        .field("failed", &s.failed)
        .field("invariants_checked", &s.invariants_checked)
        .value("worlds", Json::Array(worlds))
        .value("broken_invariants", counts(&s.broken_invariants))
        .field("traces", &s.traces_digest)
        .value("failures", Json::Array(failures))
        .field("wall_time_ms", &u64::try_from(s.wall_time.as_millis()).unwrap_or(u64::MAX));
    if let Some((index, count)) = s.shard {
        b = b.value(
            "shard",
            ObjectBuilder::new()
                .field("index", &index)
                .field("count", &count)
                .build(),
        );
    }
    if let Some(m) = s.mutation {
        b = b.field("mutation", mutation::name(m));
    }
    b.build().to_canonical_string()
}

fn counts(map: &BTreeMap<String, u64>) -> Json {
    Json::Object(map.iter().map(|(k, n)| (k.clone(), Json::u64(*n))).collect())
}

fn failure(f: &Failure) -> Json {
    let r = &f.report;
    let violations: Vec<Json> = r
        .violations
        .iter()
        .map(|v| {
            ObjectBuilder::new()
                .field("invariant", &v.invariant)
                .field("detail", &v.detail)
                .build()
        })
        .collect();
    let swarm = Json::Object(r.swarm.iter().map(|(k, v)| (k.clone(), Json::str(v.clone()))).collect());
    let origin = match f.origin {
        Origin::Regression => "regression",
        Origin::Range => "range",
    };
    ObjectBuilder::new()
        .field("index", &f.index)
        .field("origin", origin)
        .field("replay_name", &f.replay_name)
        .field("scenario", &r.scenario)
        .field("seed", &r.seed)
        .field("trace_sha256", &r.trace_hash_hex())
        .value("faults_fired", counts(&r.faults_fired))
        .value("crash_points_hit", counts(&r.crash_points_hit))
        .field("invariants_checked", &r.invariants_checked)
        .value("violations", Json::Array(violations))
        .value("swarm", swarm)
        .field("outcome", &r.outcome)
        .build()
}

/// Reads a summary `encode_summary` wrote; `file` names the source in errors. The worlds come
/// back without their declarations (see the module docs).
pub fn decode_summary(file: &str, bytes: &[u8]) -> Result<CampaignSummary, SummaryFileError> {
    if bytes.len() > MAX_SUMMARY_FILE_BYTES {
        return Err(SummaryFileError::TooLarge {
            file: file.to_string(),
            bytes: bytes.len(),
            max: MAX_SUMMARY_FILE_BYTES,
        });
    }
    let invalid = |error: DecodeError| SummaryFileError::Invalid {
        file: file.to_string(),
        error,
    };
    let limits = ParseLimits {
        max_bytes: MAX_SUMMARY_FILE_BYTES,
        ..ParseLimits::default()
    };
    let value = parse_with(bytes, &limits).map_err(|e| invalid(DecodeError::from(e)))?;
    summary(&value).map_err(invalid)
}

fn bad(reason: impl Into<String>) -> DecodeError {
    DecodeError::invalid(reason)
}

fn array(v: &Json) -> Result<&[Json], DecodeError> {
    v.as_array().ok_or_else(|| DecodeError::wrong_type("array", v))
}

fn string(v: &Json) -> Result<String, DecodeError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| DecodeError::wrong_type("string", v))
}

fn number(v: &Json) -> Result<u64, DecodeError> {
    v.as_u64().ok_or_else(|| DecodeError::wrong_type("non-negative integer", v))
}

fn list<T>(v: &Json, f: impl Fn(&Json) -> Result<T, DecodeError>) -> Result<Vec<T>, DecodeError> {
    array(v)?
        .iter()
        .enumerate()
        .map(|(i, x)| f(x).map_err(|e| e.in_index(i)))
        .collect()
}

fn map<T>(v: &Json, f: impl Fn(&Json) -> Result<T, DecodeError>) -> Result<BTreeMap<String, T>, DecodeError> {
    let object = v.as_object().ok_or_else(|| DecodeError::wrong_type("object", v))?;
    object
        .iter()
        .map(|(k, x)| Ok((k.clone(), f(x).map_err(|e| e.in_member(k))?)))
        .collect()
}

fn member<'a, T>(
    r: &mut ObjectReader<'a>,
    key: &'static str,
    f: impl FnOnce(&'a Json) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    r.required_with(key, f)
}

fn summary(v: &Json) -> Result<CampaignSummary, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let format = member(&mut r, "format", string)?;
    if format != FORMAT {
        return Err(bad(format!("format `{format}`, expected `{FORMAT}`")).in_member("format"));
    }
    let shard = match r.optional_value("shard")? {
        None => None,
        Some(v) => {
            let mut s = ObjectReader::new(v).map_err(|e| e.in_member("shard"))?;
            let index = member(&mut s, "index", number).map_err(|e| e.in_member("shard"))?;
            let count = member(&mut s, "count", number).map_err(|e| e.in_member("shard"))?;
            s.finish().map_err(|e| e.in_member("shard"))?;
            if index == 0 || index > count {
                return Err(bad(format!("shard {index}/{count} does not exist")).in_member("shard"));
            }
            Some((index, count))
        }
    };
    let mutation = match r.optional_value("mutation")? {
        None => None,
        Some(v) => Some(
            mutation::from_name(&string(v).map_err(|e| e.in_member("mutation"))?)
                .map_err(|e| bad(e.to_string()).in_member("mutation"))?,
        ),
    };
    let failures = member(&mut r, "failures", |v| list(v, decode_failure))?;
    if failures.len() > MAX_KEPT_FAILURES {
        return Err(bad(format!("more than {MAX_KEPT_FAILURES} failures")).in_member("failures"));
    }
    let traces = member(&mut r, "traces", string)?;
    if TraceDigest::from_hex(&traces).is_none() {
        return Err(bad("not 64 lowercase hex digits").in_member("traces"));
    }
    let s = CampaignSummary {
        scenarios: member(&mut r, "scenarios", |v| list(v, string))?,
        replay_names: member(&mut r, "replay_names", |v| list(v, string))?,
        stored_seeds: member(&mut r, "stored_seeds", |v| list(v, stored_seed))?,
        shard,
        from: member(&mut r, "from", number)?,
        seeds: member(&mut r, "seeds", number)?,
        determinism_checked: r.required("determinism_checked")?,
        mutation,
        stopped_at_first_failure: r.required("stopped_at_first_failure")?,
        runs: member(&mut r, "runs", number)?,
        regression_runs: member(&mut r, "regression_runs", number)?,
        regression_failed: member(&mut r, "regression_failed", number)?,
        passed: member(&mut r, "passed", number)?,
        failed: member(&mut r, "failed", number)?,
        worlds: member(&mut r, "worlds", |v| list(v, world))?,
        invariants_checked: member(&mut r, "invariants_checked", number)?,
        broken_invariants: member(&mut r, "broken_invariants", |v| map(v, number))?,
        traces_digest: traces,
        failures,
        wall_time: Duration::from_millis(member(&mut r, "wall_time_ms", number)?),
    };
    r.finish()?;
    Ok(s)
}

fn stored_seed(v: &Json) -> Result<(String, u64), DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let out = (member(&mut r, "scenario", string)?, member(&mut r, "seed", number)?);
    r.finish()?;
    Ok(out)
}

fn world(v: &Json) -> Result<WorldTally, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let mut w = WorldTally::new(member(&mut r, "world", string)?, None);
    w.faults_fired = member(&mut r, "faults_fired", |v| map(v, number))?;
    w.crash_points_hit = member(&mut r, "crash_points_hit", |v| map(v, number))?;
    r.finish()?;
    Ok(w)
}

/// 32 bytes from 64 lowercase hex digits (all zero allowed: a run that panicked has no trace).
fn hash_from_hex(text: &str) -> Option<[u8; 32]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let hex = text.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

fn decode_failure(v: &Json) -> Result<Failure, DecodeError> {
    let mut r = ObjectReader::new(v)?;
    let index = member(&mut r, "index", number)?;
    let origin = match member(&mut r, "origin", string)?.as_str() {
        "regression" => Origin::Regression,
        "range" => Origin::Range,
        other => return Err(bad(format!("origin `{other}` (regression | range)")).in_member("origin")),
    };
    let replay_name = member(&mut r, "replay_name", string)?;
    let mut report = RunReport::new(member(&mut r, "scenario", string)?, member(&mut r, "seed", number)?);
    let hash = member(&mut r, "trace_sha256", string)?;
    report.trace_hash = hash_from_hex(&hash).ok_or_else(|| bad("not 64 lowercase hex digits").in_member("trace_sha256"))?;
    report.faults_fired = member(&mut r, "faults_fired", |v| map(v, number))?;
    report.crash_points_hit = member(&mut r, "crash_points_hit", |v| map(v, number))?;
    report.invariants_checked = member(&mut r, "invariants_checked", number)?;
    report.violations = member(&mut r, "violations", |v| {
        list(v, |v| {
            let mut r = ObjectReader::new(v)?;
            let out = Violation::new(member(&mut r, "invariant", string)?, member(&mut r, "detail", string)?);
            r.finish()?;
            Ok(out)
        })
    })?;
    report.swarm = member(&mut r, "swarm", |v| map(v, string))?;
    report.outcome = member(&mut r, "outcome", string)?;
    r.finish()?;
    Ok(Failure {
        index,
        origin,
        replay_name,
        report,
    })
}
