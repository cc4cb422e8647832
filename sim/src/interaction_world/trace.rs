//! The run's closing trace lines: what the fault plan did and how the run ended. Everything
//! else is traced where it happens (model, tools, dispatches, host, driver), always without
//! task ids or wall time, so one seed always hashes the same.

use super::oracle::Summary;
use super::store::FaultLog;

/// The closing lines of a run.
pub fn closing_lines(log: &FaultLog, summary: &Summary, stops: u64) -> Vec<String> {
    let mut lines: Vec<String> =
        log.events.iter().map(|(index, boundary, kind)| format!("fault commit {index} at {boundary}: {}", kind.as_str())).collect();
    lines.push(format!("commits {} writer stops {stops}", log.commits));
    lines.push(format!(
        "end status={} source={:?} text={:?} failure={:?} root_model_calls={}",
        summary.status, summary.output_source, summary.output_text, summary.failure_code, summary.root_model_calls
    ));
    lines
}
