//! Addressing retired children, checked once after the run on the newest live writer: every
//! command naming a child retired in its acknowledged head (deliver, cancel, kill, resolve) is
//! refused with `ProcessFinished` ("too late, that call is over"), and the same commands
//! naming an id that never existed with `NotFound`. A refused command changes nothing, so
//! this runs after the run's last event; it logs no trace line and draws nothing from the
//! world's rng, so the run's trace (and the campaign's traces digest) stay as they were.
//!
//! The newest live writer is the one that retired the child, or a restored writer that knows
//! it only from its residue record, depending on the seed's crashes.

use super::world::{settlement, World};
use keel::json::{ObjectBuilder, Payload};
use keel::kernel::ids::{EffectId, ProcessId, SignalId};
use keel::kernel::owner::{Action, Command, CommandError, Input, Reply};
use keel::kernel::signal::{SettlementStatus, SignalRequest};

/// The invariant this check reports under.
pub const INVARIANT: &str = "retired_addressing";

/// Every command that names one Process, addressed to `pid`.
fn commands_to(pid: &ProcessId) -> Vec<Command> {
    let mut commands = vec![
        Command::Cancel { process: pid.clone(), reason: "late".into() },
        Command::Kill { process: pid.clone(), reason: "late".into() },
        Command::Resolve {
            process: pid.clone(),
            effect: EffectId::derive(pid, 1, 0),
            settlement: settlement(SettlementStatus::Succeeded, ObjectBuilder::new().field("late", &true).build()),
        },
    ];
    let body = Payload::from_json(ObjectBuilder::new().field("late", &true).build()).unwrap_or_else(|_| Payload::null());
    if let Some(request) = SignalId::external("signal:host:retired").ok().and_then(|id| SignalRequest::new(id, None, body).ok()) {
        commands.insert(0, Command::Deliver { process: pid.clone(), requests: vec![request] });
    }
    commands
}

impl World {
    /// Sends every command of [`commands_to`] to each retired child of the newest live
    /// writer's acknowledged head and to an id that never existed; checks each refusal.
    pub(super) fn probe_retired(&mut self) {
        let Some(i) = self.newest_live() else { return };
        // Commands would wait behind a commit in flight (none is, once the run settled).
        if self.instances[i].outstanding.is_some() {
            return;
        }
        let Some(head) = self.acked_head(i) else { return };
        let retired: Vec<ProcessId> = head.residues().iter().map(|r| r.process_id.clone()).collect();
        if retired.is_empty() {
            return;
        }
        self.fire("seen.retired_addressed");
        // A child id the root would get from a Step it never takes.
        let never = ProcessId::child(&EffectId::derive(&self.root_id, u64::MAX, 0));
        let targets = retired.into_iter().map(|p| (p, true)).chain([(never, false)]);
        for (pid, is_retired) in targets {
            for command in commands_to(&pid) {
                let what = super::trace::command_name(&command);
                let reply = self.probe(i, command);
                let ok = match (&reply, is_retired) {
                    (Some(Err(CommandError::ProcessFinished(p))), true) | (Some(Err(CommandError::NotFound(p))), false) => *p == pid,
                    _ => false,
                };
                self.oracle.check(ok, INVARIANT, || {
                    let wanted = if is_retired { "ProcessFinished (a retired child)" } else { "NotFound (an id that never existed)" };
                    format!("`{what}` was answered {} instead of {wanted}", describe(&reply))
                });
            }
        }
    }

    /// One command to instance `i`'s owner, outside the run: its reply, if it came at once.
    fn probe(&mut self, i: usize, command: Command) -> Option<Result<Reply, CommandError>> {
        let now = self.now();
        let inst = &mut self.instances[i];
        let id = inst.next_command;
        inst.next_command += 1;
        inst.owner.handle(Input::Command { id, command }, now);
        let mut reply = None;
        while let Some(action) = inst.owner.poll_action() {
            if let Action::Reply { id: replied, result } = action {
                if replied == id {
                    reply = Some(result);
                }
            }
        }
        reply
    }
}

fn describe(reply: &Option<Result<Reply, CommandError>>) -> String {
    match reply {
        None => "nothing (the command was taken)".into(),
        Some(r) => super::trace::reply_name(r),
    }
}
