//! Signal collection per phase. Steers may accompany every expected signal; any
//! other unexpected signal is a step error.

use super::{count, invalid, Machine};
use crate::interaction::protocol::{EncodedResponse, ModelResult};
use crate::interaction::signals::{classify_signal, IncomingSignal, SteerSignal};
use crate::kernel::engine_signal::{ChildStartResult, ChildWaitOpened, ChildWaitSatisfied};
use crate::kernel::signal::Signal;
use crate::kernel::waist::StepError;

fn kernel_only<'a>(signal: &'a Signal, steers: &mut Vec<SteerSignal>) -> Result<Option<&'a Signal>, StepError> {
    match classify_signal(signal)? {
        IncomingSignal::Steer(s) => {
            steers.push(s);
            Ok(None)
        }
        IncomingSignal::Kernel(k) => Ok(Some(k)),
        _ => Err(invalid(format!("signal {} is an interaction signal where a kernel signal was expected", signal.id()))),
    }
}

impl Machine<'_> {
    /// `ready_model`: steers only; all consumed.
    pub(super) fn collect_ready(&mut self, signals: &[Signal]) -> Result<Vec<SteerSignal>, StepError> {
        let mut steers = Vec::new();
        for signal in signals {
            match classify_signal(signal)? {
                IncomingSignal::Steer(s) => steers.push(s),
                _ => return Err(invalid(format!("ready_model accepts only steers, got signal {}", signal.id()))),
            }
        }
        self.consumed = count(signals.len())?;
        Ok(steers)
    }

    /// `awaiting_model`: exactly one unaddressed model settlement plus steers; all consumed.
    /// With the result comes the response's encoding when the settlement remembers it
    /// ([`ModelResult::remembered_response`]).
    pub(super) fn collect_model<'s>(
        &mut self,
        signals: &'s [Signal],
    ) -> Result<(ModelResult, Vec<SteerSignal>, Option<EncodedResponse<'s>>), StepError> {
        let mut steers = Vec::new();
        let mut result = None;
        let mut encoded = None;
        for signal in signals {
            match classify_signal(signal)? {
                IncomingSignal::Steer(s) => steers.push(s),
                IncomingSignal::ModelResult(r) if result.is_none() => {
                    result = Some(r);
                    encoded = ModelResult::remembered_response(signal.payload());
                }
                IncomingSignal::ModelResult(_) => return Err(invalid("duplicate model_call settlement")),
                _ => return Err(invalid(format!("awaiting_model got an unexpected signal {}", signal.id()))),
            }
        }
        let result = result.ok_or_else(|| invalid("awaiting_model needs the model_call settlement"))?;
        self.consumed = count(signals.len())?;
        Ok((result, steers, encoded))
    }

    /// `awaiting_child_starts`: ≥ 1 child start results plus steers; all consumed.
    pub(super) fn collect_starts(
        &mut self,
        signals: &[Signal],
    ) -> Result<(Vec<ChildStartResult>, Vec<SteerSignal>), StepError> {
        let mut steers = Vec::new();
        let mut starts = Vec::new();
        for signal in signals {
            if let Some(k) = kernel_only(signal, &mut steers)? {
                starts.push(ChildStartResult::parse(k).map_err(|e| invalid(e.to_string()))?);
            }
        }
        if starts.is_empty() {
            return Err(invalid("awaiting_child_starts needs a child start result"));
        }
        self.consumed = count(signals.len())?;
        Ok((starts, steers))
    }

    /// `awaiting_child_wait_open`: exactly one opening plus steers. A satisfaction after the
    /// opening ends collection unconsumed: it belongs to the next Step.
    pub(super) fn collect_wait_open(
        &mut self,
        signals: &[Signal],
    ) -> Result<(ChildWaitOpened, Vec<SteerSignal>), StepError> {
        let mut steers = Vec::new();
        let mut opened: Option<ChildWaitOpened> = None;
        let mut taken = signals.len();
        for (i, signal) in signals.iter().enumerate() {
            let Some(k) = kernel_only(signal, &mut steers)? else { continue };
            if opened.is_some() {
                if ChildWaitSatisfied::parse(k).is_ok() {
                    taken = i;
                    break;
                }
                return Err(invalid(format!("awaiting_child_wait_open got an unexpected signal {}", signal.id())));
            }
            opened = Some(ChildWaitOpened::parse(k).map_err(|e| invalid(e.to_string()))?);
        }
        let opened = opened.ok_or_else(|| invalid("awaiting_child_wait_open needs the child wait opening"))?;
        self.consumed = count(taken)?;
        Ok((opened, steers))
    }

    /// `waiting_children`: exactly one satisfaction plus steers; all consumed.
    pub(super) fn collect_satisfied(
        &mut self,
        signals: &[Signal],
    ) -> Result<(ChildWaitSatisfied, Vec<SteerSignal>), StepError> {
        let mut steers = Vec::new();
        let mut satisfied = None;
        for signal in signals {
            let Some(k) = kernel_only(signal, &mut steers)? else { continue };
            if satisfied.is_some() {
                return Err(invalid("duplicate child wait satisfaction"));
            }
            satisfied = Some(ChildWaitSatisfied::parse(k).map_err(|e| invalid(e.to_string()))?);
        }
        let satisfied = satisfied.ok_or_else(|| invalid("waiting_children needs the child wait satisfaction"))?;
        self.consumed = count(signals.len())?;
        Ok((satisfied, steers))
    }
}
