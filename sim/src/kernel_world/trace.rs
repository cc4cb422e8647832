//! The run trace: one line per world event, hashed as it grows (equal seeds must give equal
//! hashes). Lines are kept only when asked for.

use keel::kernel::commit::CommitError;
use keel::kernel::owner::{Command, CommandError, CommitRequest, Publication, Reply};
use sha2::{Digest as _, Sha256};

pub struct Trace {
    hasher: Sha256,
    lines: Option<Vec<String>>,
}

impl Trace {
    pub fn new(keep: bool) -> Trace {
        Trace { hasher: Sha256::new(), lines: keep.then(Vec::new) }
    }

    pub fn push(&mut self, line: String) {
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        if let Some(lines) = &mut self.lines {
            lines.push(line);
        }
    }

    pub fn finish(self) -> ([u8; 32], Option<Vec<String>>) {
        (self.hasher.finalize().into(), self.lines)
    }
}

/// The tail of an id (enough to tell ids apart in a trace).
pub fn short(id: &str) -> &str {
    let n = id.len();
    &id[n.saturating_sub(8)..]
}

pub(super) fn describe_request(r: &CommitRequest) -> String {
    match r {
        CommitRequest::Checkpoint(c) => format!("seq={}", c.sequence),
        CommitRequest::Effect(b) => format!("seq={} effect={}", b.sequence, short(b.effect_id.as_str())),
        CommitRequest::Activation(a) => format!("inc={}", short(a.new_incarnation.as_str())),
    }
}

pub(super) fn result_name(r: &Result<(), CommitError>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(CommitError::Injected { fault }) => format!("injected {fault}"),
        Err(CommitError::TreeIncarnationConflict { .. }) => "fenced".into(),
        Err(CommitError::CommitConflict { .. }) => "conflict".into(),
        Err(e) => format!("error {e}"),
    }
}

pub(super) fn publication_name(p: &Publication) -> &'static str {
    match p {
        Publication::Started { .. } => "started",
        Publication::Finished { .. } => "finished",
        Publication::Stopped { .. } => "stopped",
        Publication::Event(e) => e.name,
    }
}

pub(super) fn reply_name(r: &Result<Reply, CommandError>) -> String {
    match r {
        Ok(Reply::Delivered { accepted }) => format!("delivered accepted={accepted}"),
        Ok(Reply::IntentRecorded) => "intent".into(),
        Ok(Reply::Resolved) => "resolved".into(),
        Ok(Reply::Captured(s)) => format!("captured {}", &s.digest().to_string()[..8.min(s.digest().to_string().len())]),
        Err(CommandError::Signal(e)) => format!("refused signal: {e}"),
        Err(e) => format!("refused {}", command_error_name(e)),
    }
}

pub(super) fn command_error_name(e: &CommandError) -> &'static str {
    match e {
        CommandError::NotFound(_) => "not_found",
        CommandError::ProcessFinished(_) => "finished",
        CommandError::Signal(_) => "signal",
        CommandError::EffectNotPending(_) => "not_pending",
        CommandError::InvalidSettlement(_) => "invalid_settlement",
        CommandError::Stopped(_) => "stopped",
    }
}

pub(super) fn command_name(c: &Command) -> String {
    match c {
        Command::Deliver { process, requests } => format!("deliver {} x{}", short(process.as_str()), requests.len()),
        Command::Cancel { process, .. } => format!("cancel {}", short(process.as_str())),
        Command::Kill { process, .. } => format!("kill {}", short(process.as_str())),
        Command::Resolve { effect, settlement, .. } => format!("resolve {} {}", short(effect.as_str()), settlement.status.as_str()),
        Command::Capture => "capture".into(),
    }
}
