//! A campaign's index page: one self-contained HTML file (no external files) with the
//! coverage of agent states, fault kinds and crash points (each reachable one not reached
//! says what would reach it) and every failing seed with its replay command.

use super::campaign::CampaignReport;
use crate::timeline::html::esc;
use std::collections::BTreeMap;
use std::fmt::Write;

fn table(out: &mut String, title: &str, rows: &[(String, String)], counts: &BTreeMap<String, u64>, unit: &str) {
    let _ = write!(out, "<h2>{}</h2><table><tr><th>{}</th><th>{}</th><th>what reaches it</th></tr>", esc(title), esc(title), esc(unit));
    let mut listed: Vec<&String> = Vec::new();
    for (name, how) in rows {
        listed.push(name);
        let n = counts.get(name).copied().unwrap_or(0);
        let class = if n > 0 { "hit" } else { "miss" };
        let _ = write!(out, "<tr class=\"{class}\"><td>{}</td><td>{n}</td><td>{}</td></tr>", esc(name), esc(how));
    }
    // Reached but not predicted from the agent's shape: still worth seeing.
    for (name, n) in counts {
        if !listed.contains(&name) {
            let _ = write!(out, "<tr class=\"hit\"><td>{}</td><td>{n}</td><td></td></tr>", esc(name));
        }
    }
    out.push_str("</table>");
}

/// The page for `report`.
pub(crate) fn render(report: &CampaignReport) -> String {
    let mut out = String::new();
    let name = esc(report.name());
    let _ = write!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>campaign {name}</title><style>\
         body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1.5em}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}tr.miss td{{background:#fde2e2}}\
         tr.hit td:nth-child(2){{color:#17631a}}pre{{background:#f4f4f4;padding:6px}}</style></head><body>"
    );
    let _ = write!(out, "<h1>campaign {name}</h1><pre>{}</pre>", esc(report.to_string().lines().next().unwrap_or("")));
    for e in report.setup_errors() {
        let _ = write!(out, "<p class=\"error\"><b>{}</b></p>", esc(e));
    }
    table(&mut out, "agent states", report.reachable_states(), report.states_reached(), "runs");
    table(&mut out, "faults fired", &report.expected().0, report.faults_fired(), "times");
    table(&mut out, "crash points", &report.expected().1, report.crash_points_hit(), "times");
    let _ = write!(out, "<h2>failing seeds ({})</h2>", report.failures().len());
    for r in report.failures() {
        let _ = write!(out, "<h3>seed {}</h3><pre>{}\nreplay: {}</pre>", r.seed, esc(&r.to_string()), esc(&report.replay_command(r.seed)));
    }
    out.push_str("</body></html>\n");
    out
}
