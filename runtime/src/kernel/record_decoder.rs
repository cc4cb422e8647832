//! The fast decoder of a stored Process record: the oracle's path for every record a commit
//! changed (`TreeSnapshot::decode_reusing`).
//!
//! Most of a record's bytes are its states' payloads (the committed state's and the prepared
//! candidate's). Parsing them into a tree, cloning the tree into a [`Payload`] and encoding
//! it again to get its canonical text is most of what decoding a record cost. Here the
//! record's canonical text is split instead (`json::canonical`): each payload's span is
//! checked canonical in place and becomes the payload as it is (its value is built only if
//! something looks into it), and only the small members around the payloads are parsed, into
//! the tree that the strict typed decoder reads (the same member rules as `Process`'s own decoding).
//!
//! The small members are parsed where they stand (the strict parser over the record's text,
//! no copy, no second scan) and not checked canonical one by one: the caller re-encodes an
//! accepted record and compares the bytes, which refuses any non-canonical member, so an
//! accepted record is the strict decoder's value for the same bytes. It is a fast path, never
//! a verdict: on `None` the caller decodes the record with the strict decoder, which names the
//! fault.
//!
//! A changed record mostly repeats its previous version's members (an effect boundary changes
//! the prepared batch, a settlement the mailbox, and the budget, capabilities, relation and
//! deployment stay): the larger members are remembered per thread with the exact text they
//! were decoded from ([`Recent`]), and a member whose text is byte-identical to a remembered
//! one takes that value instead of being parsed and decoded again. Each of those members
//! decodes from its own text alone (`FromJson`, no context), so the value is the one decoding
//! would give; the text must be an object, array or string, which ends where its bytes end,
//! so a remembered text found at a member's start is that member's whole text.

use super::capability::CapabilitySet;
use super::deployment::DeploymentRef;
use super::mailbox::Mailbox;
use super::process::{Finish, Process, TakenMembers};
use super::relation::Relation;
use super::resource::Budget;
use super::retired::RetiredChildren;
use super::segment::Segment;
use super::status::PendingControl;
use super::waist::ExecutionState;
use crate::json::canonical::{members, scan};
use crate::json::{parse_at, DecodeError, Json, Object, Payload};
use crate::limits::MAX_JSON_DEPTH;
use std::cell::RefCell;
use std::sync::Arc;

/// Decodes one Process record, resolving its states' segment references through `segments`;
/// `None` when it does not decode or a state's payload is not canonical text. The members
/// around the payloads are not checked canonical here: a caller that needs that verdict
/// compares the decoded record's encoding with `bytes` (as `TreeSnapshot::decode_reusing`
/// does), which refuses any non-canonical member.
pub fn decode_process_record(
    bytes: &[u8],
    segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
) -> Option<Process> {
    RECENT.with(|recent| decode_with_recent(bytes, segments, &mut recent.borrow_mut()))
}

thread_local! {
    /// The members remembered by this thread's decodes (a cache only: see the module note).
    static RECENT: RefCell<Remembered> = RefCell::new(Remembered::default());
}

/// How many distinct texts are remembered per member (a tree's Processes each change their
/// records in turn; a few suffice for the root and its children).
const KEPT: usize = 8;
/// Longer member texts are not remembered (bounds the memory a thread keeps).
const MAX_KEPT_BYTES: usize = 256 * 1024;

/// Recently decoded values of one member, each with the text it was decoded from, most
/// recently used first.
struct Recent<T> {
    entries: Vec<(Box<[u8]>, T)>,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent { entries: Vec::new() }
    }
}

impl<T: Clone> Recent<T> {
    /// The value whose text starts `bytes` at `start`, and the end of that text there.
    fn find(&mut self, bytes: &[u8], start: usize) -> Option<(T, usize)> {
        let rest = bytes.get(start..)?;
        let i = self.entries.iter().position(|(text, _)| rest.starts_with(text))?;
        let entry = self.entries.remove(i);
        let found = (entry.1.clone(), start + entry.0.len());
        self.entries.insert(0, entry);
        Some(found)
    }

    /// Remembers that `text` (one whole canonical member value) decodes to `value`.
    fn remember(&mut self, text: &[u8], value: &T) {
        // Only a text that ends with its own closing byte can be recognized by its prefix.
        if text.len() > MAX_KEPT_BYTES || !matches!(text.first(), Some(b'{' | b'[' | b'"')) {
            return;
        }
        if self.entries.len() >= KEPT {
            self.entries.pop();
        }
        self.entries.insert(0, (text.into(), value.clone()));
    }
}

/// The remembered members, one list per member name.
#[derive(Default)]
struct Remembered {
    relation: Recent<Relation>,
    deployment_ref: Recent<DeploymentRef>,
    budget: Recent<Budget>,
    capabilities: Recent<CapabilitySet>,
    mailbox: Recent<Mailbox>,
    pending_control: Recent<PendingControl>,
    finish: Recent<Finish>,
    retired: Recent<RetiredChildren>,
    /// Members taken from here (tests read it to prove the path is taken).
    hits: u64,
}

/// How many members this thread's decodes took from what it remembered, so far.
#[cfg(test)]
pub(crate) fn remembered_hits() -> u64 {
    RECENT.with(|r| r.borrow().hits)
}

/// Forgets every remembered member of this thread.
#[cfg(test)]
pub(crate) fn forget_remembered() {
    RECENT.with(|r| *r.borrow_mut() = Remembered::default());
}

fn decode_with_recent(
    bytes: &[u8],
    segments: &mut dyn FnMut(&Json) -> Result<Vec<Arc<Segment>>, DecodeError>,
    recent: &mut Remembered,
) -> Option<Process> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut record = Object::new();
    let mut committed = None;
    let mut candidate = None;
    let mut taken = TakenMembers::default();
    // (member, start, end) of every remembered kind of member that was parsed here.
    let mut parsed_spans: Vec<(&'static str, usize, usize)> = Vec::new();
    let end = members(text, 0, 0, &mut |key, start, depth| {
        macro_rules! recall {
            ($field:ident, $name:literal) => {{
                if let Some((value, end)) = recent.$field.find(bytes, start) {
                    taken.$field = Some(value);
                    recent.hits += 1;
                    return Some(end);
                }
                let (value, end) = parsed(text, start, depth)?;
                parsed_spans.push(($name, start, end));
                (value, end)
            }};
        }
        let (value, end) = match key {
            "committed_execution_state" => {
                let (tree, payload, end) = state(text, start, depth)?;
                committed = Some(payload);
                (tree, end)
            }
            "prepared" => {
                let (tree, payload, end) = prepared(text, start, depth)?;
                candidate = Some(payload);
                (tree, end)
            }
            "relation" => recall!(relation, "relation"),
            "deployment_ref" => recall!(deployment_ref, "deployment_ref"),
            "budget" => recall!(budget, "budget"),
            "capabilities" => recall!(capabilities, "capabilities"),
            "mailbox" => recall!(mailbox, "mailbox"),
            "pending_control" => recall!(pending_control, "pending_control"),
            "finish" => recall!(finish, "finish"),
            "retired_children" => recall!(retired, "retired_children"),
            _ => parsed(text, start, depth)?,
        };
        record.insert(key.to_owned(), value);
        Some(end)
    })?;
    if end != bytes.len() {
        return None;
    }
    let record = Json::Object(record);
    let committed_node = record.get("committed_execution_state");
    let candidate_node = record.get("prepared").and_then(|p| p.get("candidate_state"));
    let mut state_of = |v: &Json| {
        // The tree holds each state without its payload: give back the one split off there.
        let payload = if committed_node.is_some_and(|c| std::ptr::eq(c, v)) {
            committed.take()
        } else if candidate_node.is_some_and(|c| std::ptr::eq(c, v)) {
            candidate.take()
        } else {
            None
        };
        let payload = payload.ok_or_else(|| DecodeError::invalid("a state outside the record's two state members"))?;
        ExecutionState::decode_record_with_payload(v, payload, segments)
    };
    let p = Process::decode_taking(&record, taken, &mut state_of).ok()?;
    for (name, start, end) in parsed_spans {
        let text = &bytes[start..end];
        match name {
            "relation" => recent.relation.remember(text, &p.relation),
            "deployment_ref" => recent.deployment_ref.remember(text, &p.deployment_ref),
            "budget" => recent.budget.remember(text, &p.budget),
            "capabilities" => recent.capabilities.remember(text, &p.capabilities),
            "mailbox" => recent.mailbox.remember(text, &p.mailbox),
            "pending_control" => recent.pending_control.remember(text, &p.pending_control),
            "finish" => {
                if let Some(f) = &p.finish {
                    recent.finish.remember(text, f)
                }
            }
            "retired_children" => recent.retired.remember(text, &p.retired),
            _ => {}
        }
    }
    Some(p)
}

/// The value at `start` (`depth` containers enclose it in the record), parsed into a tree in
/// place, and its end. It is not checked canonical here: the caller compares the whole
/// record's re-encoding with its bytes, which refuses any non-canonical member.
fn parsed(text: &str, start: usize, depth: usize) -> Option<(Json, usize)> {
    parse_at(text, start, MAX_JSON_DEPTH.checked_sub(depth)?).ok()
}

/// A state object (`kind`, `payload`, `segments`) at `start`: the tree without the payload
/// (whose member reads as `null`), the payload taken from its canonical text, and the end.
fn state(text: &str, start: usize, depth: usize) -> Option<(Json, Payload, usize)> {
    let mut tree = Object::new();
    let mut payload = None;
    let end = members(text, start, depth, &mut |key, s, d| {
        let (value, end) = if key == "payload" {
            let end = scan(text, s, d)?;
            payload = Some(Payload::from_scanned(text.get(s..end)?)?);
            (Json::Null, end)
        } else {
            parsed(text, s, d)?
        };
        tree.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some((Json::Object(tree), payload?, end))
}

/// The prepared step at `start`: its members parsed, its candidate state split like the
/// committed one.
fn prepared(text: &str, start: usize, depth: usize) -> Option<(Json, Payload, usize)> {
    let mut tree = Object::new();
    let mut payload = None;
    let end = members(text, start, depth, &mut |key, s, d| {
        let (value, end) = if key == "candidate_state" {
            let (tree, p, end) = state(text, s, d)?;
            payload = Some(p);
            (tree, end)
        } else {
            parsed(text, s, d)?
        };
        tree.insert(key.to_owned(), value);
        Some(end)
    })?;
    Some((Json::Object(tree), payload?, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::commit::TreeCut;
    use crate::kernel::snapshot::TreeSnapshot;

    /// Every Process record of `cuts` with changed bytes, in commit order (what the oracle
    /// decodes with this decoder).
    fn changed_records(cuts: &[TreeCut]) -> Vec<(TreeCut, Vec<u8>)> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for cut in cuts {
            for e in cut.entries() {
                let Some(bytes) = e.bytes() else { continue };
                if e.key().starts_with(crate::kernel::segment_record::KEY_PREFIX) || !seen.insert(bytes.to_vec()) {
                    continue;
                }
                out.push((cut.clone(), bytes.to_vec()));
            }
        }
        out
    }

    /// The strict decoding of one record of `cut` (its segment records resolved from the cut).
    fn strict(cut: &TreeCut, bytes: &[u8]) -> Result<Process, String> {
        let whole = TreeSnapshot::decode(&cut.bytes().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let value = crate::json::parse_with(bytes, &crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() }).map_err(|e| e.to_string())?;
        if crate::kernel::retired::is_residue(&value) {
            return Err("a residue".into());
        }
        let id = value.get("process_id").and_then(Json::as_str).ok_or("no id")?.to_owned();
        whole.processes().iter().find(|p| p.id.as_str() == id).map(|p| (**p).clone()).ok_or_else(|| "absent".into())
    }

    fn fast(cut: &TreeCut, bytes: &[u8]) -> Option<Process> {
        let mut segments = crate::kernel::segment_record::SegmentTable::of_cut_reusing(cut.entries(), [])?;
        decode_process_record(bytes, &mut |v| segments.resolve_member(v))
    }

    /// With members remembered from earlier records (the oracle's case) and without (a cold
    /// thread), each record decodes to exactly the strict decoder's Process, and the
    /// remembered path is taken.
    #[test]
    fn remembered_members_decode_as_the_strict_decoder() {
        let cuts = crate::kernel::tests::children_run_cuts();
        let records = changed_records(&cuts);
        assert!(records.len() > 6, "several record versions");
        forget_remembered();
        let mut decoded = 0;
        for (cut, bytes) in &records {
            let Ok(expected) = strict(cut, bytes) else { continue };
            decoded += 1;
            // Warm: whatever earlier records left remembered.
            assert_eq!(fast(cut, bytes).as_ref(), Some(&expected), "{}", String::from_utf8_lossy(bytes));
            // A second time: every remembered kind of member is taken from memory.
            let before = remembered_hits();
            assert_eq!(fast(cut, bytes).as_ref(), Some(&expected));
            assert!(remembered_hits() > before, "the second decode took remembered members");
        }
        assert!(decoded > 6);
        // Cold, one by one.
        for (cut, bytes) in &records {
            let Ok(expected) = strict(cut, bytes) else { continue };
            forget_remembered();
            assert_eq!(fast(cut, bytes), Some(expected));
            assert_eq!(remembered_hits(), 0);
        }
    }

    /// A remembered member never makes a record acceptable that the strict decoder refuses:
    /// a changed member beside a remembered one, an unknown member, a missing one, a member
    /// text that merely starts like a remembered one.
    #[test]
    fn remembered_members_do_not_accept_what_the_strict_decoder_refuses() {
        let cuts = crate::kernel::tests::children_run_cuts();
        let records = changed_records(&cuts);
        let (cut, bytes) = records.iter().rev().find(|(c, b)| strict(c, b).is_ok() && String::from_utf8_lossy(b).contains("\"mailbox\":")).expect("a record");
        let text = String::from_utf8(bytes.clone()).unwrap();
        forget_remembered();
        assert!(fast(cut, bytes).is_some());
        let refused = |t: String| {
            let hits = remembered_hits();
            let out = fast(cut, t.as_bytes());
            (out, remembered_hits() > hits)
        };
        // The budget and mailbox are remembered; the Process's status is not a status.
        let mut status = None;
        members(&text, 0, 0, &mut |key, start, depth| {
            if key == "status" {
                status = Some(start + 1);
            }
            scan(&text, start, depth)
        });
        let status = status.expect("a status member");
        let bad_status = format!("{}x{}", &text[..status], &text[status..]);
        assert_eq!(refused(bad_status), (None, true));
        // An unknown member between remembered ones.
        let unknown = text.replacen("\"mailbox\":", "\"mailbox\":{},\"mailboy\":", 1);
        assert!(refused(unknown.clone()).0.is_none());
        // The mailbox removed (the members after it still remembered).
        let start = text.find("\"mailbox\":").unwrap();
        let end = scan(&text, start + "\"mailbox\":".len(), 1).unwrap();
        let missing = format!("{}{}", &text[..start], &text[end + 1..]);
        assert!(refused(missing).0.is_none());
        // The remembered mailbox text followed by more of it: not the remembered value.
        let doubled = format!("{}{}{}", &text[..end], &text[start + "\"mailbox\":".len()..end], &text[end..]);
        assert!(refused(doubled).0.is_none());
    }

    /// Non-canonical small members are no longer declined by the record decoder itself: the
    /// re-encoding comparison refuses them. Over every changed record of a children run and
    /// many non-canonical variants of each (a space after a colon or a comma, a number with a
    /// fraction, an escaped letter), the reusing decoder's verdict is the whole decoder's,
    /// and the unaltered records take the fast path.
    #[test]
    fn non_canonical_members_get_the_whole_decoders_verdict() {
        use crate::kernel::commit::CutEntry;
        let cuts = crate::kernel::tests::children_run_cuts();
        let (mut fast_taken, mut variants, mut accepted) = (0, 0, 0);
        for pair in cuts.windows(2) {
            let previous = TreeSnapshot::decode_reusing(&pair[0], None).unwrap();
            let cut = &pair[1];
            for (i, entry) in cut.entries().iter().enumerate() {
                let Some(bytes) = entry.bytes() else { continue };
                if entry.key().starts_with(crate::kernel::segment_record::KEY_PREFIX)
                    || previous.tree_cut().entries().iter().any(|e| e.key() == entry.key() && e.bytes() == Some(bytes))
                {
                    continue;
                }
                if strict(cut, bytes).is_ok() {
                    assert!(fast(cut, bytes).is_some(), "a changed record takes the fast path");
                    fast_taken += 1;
                }
                let text = String::from_utf8(bytes.to_vec()).unwrap();
                let mut mutated = Vec::new();
                for (at, c) in text.char_indices() {
                    let next = text[at + 1..].chars().next();
                    match (c, next) {
                        (':' | ',', _) => mutated.push(format!("{} {}", &text[..=at], &text[at + 1..])),
                        ('"', Some(l)) if l.is_ascii_alphabetic() => {
                            mutated.push(format!("{}\\u{:04x}{}", &text[..=at], l as u32, &text[at + 2..]))
                        }
                        ('0'..='9', Some(',' | '}' | ']')) => mutated.push(format!("{}.0{}", &text[..=at], &text[at + 1..])),
                        _ => {}
                    }
                }
                // Spread over the record, at most 48 variants each.
                let stride = mutated.len().div_ceil(48).max(1);
                for m in mutated.into_iter().step_by(stride) {
                    let mut entries: Vec<CutEntry> = cut.entries().to_vec();
                    entries[i] = CutEntry::new(entry.key().to_owned(), m.into_bytes());
                    let Ok(tampered) = TreeCut::new(cut.root_id.clone(), cut.incarnation.clone(), cut.envelope().clone(), entries) else {
                        continue;
                    };
                    variants += 1;
                    let whole = TreeSnapshot::decode(&tampered.bytes().unwrap());
                    let reusing = TreeSnapshot::decode_reusing(&tampered, Some(&previous));
                    accepted += usize::from(whole.is_ok());
                    assert_eq!(reusing, whole);
                }
            }
        }
        assert!(fast_taken > 6, "changed records decoded on the fast path: {fast_taken}");
        assert!(variants > 200, "non-canonical variants judged: {variants}");
        // A space or a fraction inside a string can leave a record canonical: those few are
        // accepted by both, the rest refused by both.
        assert!(accepted < variants / 4, "most variants are not canonical: {accepted} of {variants}");
    }
}
