//! One self-contained HTML page of a run's [`Timeline`]: Processes as lanes, model and tool
//! calls, waits, steers and Unknowns as spans, commits as ticks, crashes, lost
//! acknowledgements, restores and settlements as marks, and every broken invariant pinned at
//! the moment it was seen. No external script, style or font: the page opens from a file
//! anywhere, and the same timeline always gives the same bytes.
//!
//! The x axis is the order of events (one column each, the simulated time written above when
//! it moves), because most of a run happens at one simulated instant (commits take no
//! simulated time) and a time axis would draw them on top of each other.
//!
//! Every drawn element carries a data attribute (`data-lane`, `data-span`, `data-commit`,
//! `data-mark`), and a small inline script counts them into `#rendered` once the page has
//! loaded, so a headless browser's DOM proves the page was parsed and drawn.

use std::fmt::Write as _;

use super::{EventKind, MarkKind, SpanKind, Timeline};
use crate::world::RunReport;

const LABEL_W: usize = 230;
const TOP: usize = 64;
const ROW: usize = 40;
const PAD_RIGHT: usize = 60;

/// Escapes text for HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The column width for `n` events: wide enough to read, narrow enough that short runs fit a
/// screen.
fn column_width(n: usize) -> usize {
    (1100 / n.max(1)).clamp(12, 36)
}

/// A drawn span: lane row, columns, kind, how it ended.
struct Span {
    row: usize,
    from: usize,
    to: Option<usize>,
    kind: SpanKind,
    label: String,
    outcome: Option<String>,
}

/// The page for `report`'s run.
pub fn render(report: &RunReport, timeline: &Timeline) -> String {
    let lanes = timeline.lanes();
    let row_of = |lane: &str| lanes.iter().position(|l| l == lane).unwrap_or(0);
    let n = timeline.events.len();
    let col = column_width(n);
    let x = |i: usize| LABEL_W + i * col;
    let width = LABEL_W + (n + 1) * col + PAD_RIGHT;
    let height = TOP + lanes.len() * ROW + 24;

    // Pair every Begin with its End.
    let mut spans: Vec<Span> = Vec::new();
    for (i, e) in timeline.events.iter().enumerate() {
        match &e.kind {
            EventKind::Begin { span, kind } => {
                let end = timeline.events[i + 1..].iter().position(|f| matches!(&f.kind, EventKind::End { span: s, .. } if s == span));
                let (to, outcome) = match end {
                    Some(k) => {
                        let f = &timeline.events[i + 1 + k];
                        let outcome = match &f.kind {
                            EventKind::End { outcome, .. } => Some(outcome.clone()),
                            _ => None,
                        };
                        (Some(i + 1 + k), outcome)
                    }
                    None => (None, None),
                };
                spans.push(Span { row: row_of(&e.lane), from: i, to, kind: *kind, label: e.label.clone(), outcome });
            }
            EventKind::End { .. } | EventKind::Commit { .. } | EventKind::Mark(_) => {}
        }
    }

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    // Lanes.
    for (r, lane) in lanes.iter().enumerate() {
        let y = TOP + r * ROW;
        let fill = if r % 2 == 0 { "#f6f7f9" } else { "#ffffff" };
        let _ = writeln!(
            svg,
            r#"<g class="lane" data-lane="{}" id="lane-{r}"><rect x="0" y="{y}" width="{width}" height="{ROW}" fill="{fill}"/><text x="8" y="{}" font-weight="bold">{}</text></g>"#,
            esc(timeline.lane_name(lane)),
            y + ROW / 2 + 4,
            esc(timeline.lane_name(lane)),
        );
    }
    // Time ruler: the simulated time above the first column of each new instant.
    let mut last_ms = None;
    let mut last_label_x = 0usize;
    for (i, e) in timeline.events.iter().enumerate() {
        if last_ms == Some(e.at_ms) {
            continue;
        }
        last_ms = Some(e.at_ms);
        let _ = writeln!(svg, r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#d9dce1"/>"##, x(i), TOP - 6, TOP + lanes.len() * ROW);
        if x(i) >= last_label_x + 44 || last_label_x == 0 {
            let _ = writeln!(svg, r##"<text x="{}" y="{}" fill="#5a6270">{}ms</text>"##, x(i) + 2, TOP - 10, e.at_ms);
            last_label_x = x(i);
        }
    }
    let _ = writeln!(svg, r##"<text x="8" y="{}" fill="#5a6270">simulated time →</text>"##, TOP - 10);
    // Spans.
    for s in &spans {
        let y = TOP + s.row * ROW;
        let to = s.to.unwrap_or(n);
        let x1 = x(s.from) + col / 2;
        let w = (x(to) + col / 2).saturating_sub(x1).max(col / 2).max(4);
        let outcome = s.outcome.as_deref().unwrap_or("open");
        let (fill, stroke, top, h) = match s.kind {
            SpanKind::Model => ("#8fb8f0", "#2f6fc2", 5, 16),
            SpanKind::Tool => ("#9ad6a4", "#2f8a44", 5, 16),
            SpanKind::Wait => ("#f7e08a", "#b08d10", 24, 10),
            SpanKind::Steer => ("#d4b5f2", "#7442b0", 24, 10),
            SpanKind::Unknown => ("url(#unknown)", "#c0262d", 23, 12),
        };
        let (stroke, dash) = if outcome == "unknown" || outcome == "dropped" {
            ("#c0262d", r#" stroke-dasharray="4 2""#)
        } else {
            (stroke, "")
        };
        let _ = writeln!(
            svg,
            r#"<rect data-span="{kind}" data-outcome="{outcome}" class="span {kind}" x="{x1}" y="{}" width="{w}" height="{h}" rx="3" fill="{fill}" stroke="{stroke}" stroke-width="1.5"{dash}><title>{} ({outcome})</title></rect>"#,
            y + top,
            esc(&s.label),
            kind = s.kind.as_str(),
        );
    }
    // Commits and marks.
    let mut violations: Vec<(usize, String)> = Vec::new();
    for (i, e) in timeline.events.iter().enumerate() {
        let cx = x(i) + col / 2;
        let y = TOP + row_of(&e.lane) * ROW;
        let title = format!("<title>{} @ {}ms</title>", esc(&e.label), e.at_ms);
        match &e.kind {
            EventKind::Commit { boundary, acknowledged } => {
                let (stroke, dash) = if *acknowledged { ("#222", "") } else { ("#999", r#" stroke-dasharray="2 2""#) };
                let _ = writeln!(
                    svg,
                    r#"<line data-commit="{}" data-acknowledged="{acknowledged}" x1="{cx}" y1="{}" x2="{cx}" y2="{}" stroke="{stroke}" stroke-width="2"{dash}>{title}</line>"#,
                    esc(boundary),
                    y + 8,
                    y + 32,
                );
            }
            EventKind::Mark(MarkKind::Violation) => violations.push((i, e.label.clone())),
            EventKind::Mark(kind) => {
                let my = y + ROW / 2;
                let shape = mark_shape(*kind, cx, my);
                let _ = writeln!(svg, r#"<g data-mark="{}" class="mark">{shape}{title}</g>"#, kind.as_str());
            }
            EventKind::Begin { .. } | EventKind::End { .. } => {}
        }
    }
    // Broken invariants, pinned across every lane.
    for (k, (i, label)) in violations.iter().enumerate() {
        let cx = x(*i) + col / 2;
        let bottom = TOP + lanes.len() * ROW;
        let _ = writeln!(
            svg,
            r##"<g data-mark="violation" class="mark violation"><line x1="{cx}" y1="{}" x2="{cx}" y2="{bottom}" stroke="#c0262d" stroke-width="3"/><text x="{}" y="{}" fill="#c0262d" font-weight="bold">{}</text><title>{}</title></g>"##,
            TOP - 30,
            cx + 4,
            TOP - 30 + 12 * (k % 2),
            esc(label.split(':').next().unwrap_or(label)),
            esc(label),
        );
    }
    svg.push_str(PATTERNS);
    svg.push_str("</svg>\n");

    let mut page = String::new();
    let status = if report.passed() { "PASS" } else { "FAIL" };
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>keel-sim timeline: {} seed {}</title>\n<style>{STYLE}</style>\n</head>\n<body data-rendered=\"no\">\n",
        esc(&report.scenario),
        report.seed
    );
    let _ = writeln!(
        page,
        "<header><h1>{} <span class=\"seed\">seed {}</span> <span class=\"result {}\" id=\"result\">{status}</span></h1><p>{}</p></header>",
        esc(&report.scenario),
        report.seed,
        status.to_lowercase(),
        esc(&report.outcome)
    );
    if !report.violations.is_empty() {
        page.push_str("<ul class=\"violations\">\n");
        for v in &report.violations {
            let _ = writeln!(page, "<li data-invariant=\"{0}\"><b>{0}</b>: {1}</li>", esc(&v.invariant), esc(&v.detail));
        }
        page.push_str("</ul>\n");
    }
    page.push_str(LEGEND);
    let _ = writeln!(page, "<div class=\"scroll\">\n{svg}</div>");
    if timeline.dropped > 0 {
        let _ = writeln!(page, "<p class=\"note\">{} later events were not recorded (event limit).</p>", timeline.dropped);
    }
    page.push_str("<p class=\"note\">Rendered: <output id=\"rendered\">not drawn (scripts off)</output></p>\n");
    page.push_str("<details><summary>events</summary><table id=\"events\"><tr><th>#</th><th>ms</th><th>lane</th><th>what</th></tr>\n");
    for (i, e) in timeline.events.iter().enumerate() {
        let _ = writeln!(
            page,
            "<tr><td>{i}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.at_ms,
            esc(timeline.lane_name(&e.lane)),
            esc(&e.label)
        );
    }
    page.push_str("</table></details>\n");
    page.push_str(SCRIPT);
    page.push_str("</body>\n</html>\n");
    page
}

/// The SVG shape of a mark centred on (x, y).
fn mark_shape(kind: MarkKind, x: usize, y: usize) -> String {
    let (l, r, t, b) = (x.saturating_sub(7), x + 7, y.saturating_sub(7), y + 7);
    match kind {
        MarkKind::Crash => format!(
            r##"<path d="M{l} {t} L{r} {b} M{r} {t} L{l} {b}" stroke="#c0262d" stroke-width="4"/>"##
        ),
        MarkKind::LostAck => format!(
            r##"<path d="M{x} {t} L{r} {y} L{x} {b} L{l} {y} Z" fill="#f08c1a" stroke="#8a4a00"/>"##
        ),
        MarkKind::FailBefore => format!(
            r##"<rect x="{l}" y="{t}" width="14" height="14" fill="#ffffff" stroke="#f08c1a" stroke-width="3"/>"##
        ),
        MarkKind::Start => format!(r##"<path d="M{l} {t} L{r} {y} L{l} {b} Z" fill="#2f8a44"/>"##),
        MarkKind::Restore => format!(
            r##"<circle cx="{x}" cy="{y}" r="8" fill="#2f8a44"/><text x="{}" y="{}" fill="#fff" font-size="11" font-weight="bold">R</text>"##,
            x.saturating_sub(4),
            y + 4
        ),
        MarkKind::Stop => format!(r##"<rect x="{}" y="{t}" width="6" height="14" fill="#7a1116"/>"##, x.saturating_sub(3)),
        MarkKind::Deliver => format!(r##"<circle cx="{x}" cy="{y}" r="5" fill="#7442b0"/>"##),
        MarkKind::Settle => format!(
            r##"<path d="M{l} {y} L{} {b} L{r} {t}" fill="none" stroke="#2f8a44" stroke-width="3"/>"##,
            x.saturating_sub(2)
        ),
        MarkKind::Finish => format!(
            r##"<path d="M{l} {b} L{l} {t} L{r} {} L{l} {y}" fill="#222" stroke="#222" stroke-width="2"/>"##,
            y.saturating_sub(3)
        ),
        MarkKind::Violation => format!(r##"<circle cx="{x}" cy="{y}" r="6" fill="#c0262d"/>"##),
    }
}

const PATTERNS: &str = r##"<defs><pattern id="unknown" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fde2e2"/><rect width="3" height="6" fill="#f19a9e"/></pattern></defs>
"##;

const STYLE: &str = "body{font-family:sans-serif;margin:16px;color:#1d2330}h1{font-size:20px;margin:0 0 4px}\
.seed{color:#5a6270;font-weight:normal}.result{padding:1px 8px;border-radius:4px;color:#fff}\
.result.pass{background:#2f8a44}.result.fail{background:#c0262d}header p{margin:0 0 8px;color:#3a4150}\
.violations{color:#c0262d;margin:4px 0 8px}.legend{font-size:12px;color:#3a4150;margin:6px 0}\
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;border:1px solid #555;vertical-align:middle}\
.scroll{overflow-x:auto;border:1px solid #d9dce1}.note{font-size:12px;color:#5a6270}\
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eee;padding:1px 8px;text-align:left}";

const LEGEND: &str = "<div class=\"legend\">\
<span><i style=\"background:#8fb8f0\"></i>model call</span>\
<span><i style=\"background:#9ad6a4\"></i>tool call</span>\
<span><i style=\"background:#f7e08a\"></i>input wait</span>\
<span><i style=\"background:#d4b5f2\"></i>steer</span>\
<span><i style=\"background:repeating-linear-gradient(45deg,#fde2e2 0 3px,#f19a9e 3px 6px);border-color:#c0262d\"></i>Unknown until settled</span>\
<span>| commit (dashed: not acknowledged)</span>\
<span style=\"color:#c0262d\">✕ crash after commit</span>\
<span style=\"color:#f08c1a\">◆ lost acknowledgement</span>\
<span style=\"color:#f08c1a\">□ commit failed before</span>\
<span style=\"color:#2f8a44\">▶ engine start ● R restore ✓ Unknown settled</span>\
<span style=\"color:#7a1116\">▮ writer stopped</span>\
<span>⚑ root finished</span>\
<span style=\"color:#7442b0\">● delivered signal</span>\
<span style=\"color:#c0262d\">▍ broken invariant</span>\
</div>\n";

const SCRIPT: &str = "<script>\
(function(){var q=function(s){return document.querySelectorAll(s).length;};\
var kinds={};document.querySelectorAll('[data-mark]').forEach(function(m){var k=m.getAttribute('data-mark');kinds[k]=(kinds[k]||0)+1;});\
var text='lanes='+q('[data-lane]')+' spans='+q('[data-span]')+' commits='+q('[data-commit]')+' marks='+q('[data-mark]');\
Object.keys(kinds).sort().forEach(function(k){text+=' mark.'+k+'='+kinds[k];});\
document.getElementById('rendered').textContent=text;document.body.setAttribute('data-rendered','yes');})();\
</script>\n";
