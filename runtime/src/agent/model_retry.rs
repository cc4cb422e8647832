//! Repeating a model call that failed definitely but may succeed if tried again: the provider
//! was overloaded, rate limited or had a server error, before or during a stream
//! ([`ModelError::Transient`](crate::interaction::model::ModelError::Transient)).
//!
//! The repeat happens inside the call's one dispatch, so it needs no new durable state: the
//! run's store sees one model call that settles with the last attempt's outcome. A crash
//! between attempts leaves the call in flight, and the model Unknown policy (by default
//! [`UnknownPolicy::Retry`](super::UnknownPolicy::Retry)) issues it again after the restore,
//! with the same bounded attempts. Waits are on the runtime's abstract clock and their jitter
//! is derived from the Effect id, so a simulated run repeats exactly.

use super::events::RunEvent;
use super::trace;
use super::tracker::Hub;
use crate::env::{BoxFuture, Env};
use crate::interaction::model::ModelDispatcher;
use crate::json::{Digest, Json, ObjectBuilder, Payload};
use crate::kernel::dispatcher::{DispatchContext, DispatchError, DispatchPolicy, Dispatcher, EffectRequest};
use crate::kernel::effect::Settlement;
use futures::future::{select, Either};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

/// The most attempts a model error policy may make for one call.
pub const MAX_MODEL_ATTEMPTS: u32 = 10;

/// What the agent does when a model call fails with an error that may not happen again
/// (overloaded, rate limited, server error; also inside a started stream). Set it with
/// [`AgentBuilder::on_model_error`](super::AgentBuilder::on_model_error).
///
/// The default makes 3 attempts, waiting 1 s then 2 s (doubling, at most 30 s, each wait
/// shortened by up to a quarter so that many runs do not retry in step). Each failed attempt
/// is reported by a [`RunEvent::ModelRetrying`](super::RunEvent::ModelRetrying) event; when the
/// last one fails too, the call settles as a failed model call and the run fails with
/// `interaction.model.failed`. Other errors (a refused request, a host failure) are never
/// repeated.
///
/// ```
/// use keel::prelude::*;
/// use std::time::Duration;
/// let policy = ModelErrorPolicy::attempts(5).backoff(Duration::from_millis(500), Duration::from_secs(20));
/// # let _ = policy;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelErrorPolicy {
    attempts: u32,
    first_delay: Duration,
    max_delay: Duration,
}

impl Default for ModelErrorPolicy {
    fn default() -> ModelErrorPolicy {
        ModelErrorPolicy { attempts: 3, first_delay: Duration::from_secs(1), max_delay: Duration::from_secs(30) }
    }
}

impl ModelErrorPolicy {
    /// At most `attempts` attempts per call, the first included (1 to
    /// [`MAX_MODEL_ATTEMPTS`]; `build` refuses other values).
    pub fn attempts(attempts: u32) -> ModelErrorPolicy {
        ModelErrorPolicy { attempts, ..ModelErrorPolicy::default() }
    }

    /// One attempt: every model error fails the call at once.
    pub fn never() -> ModelErrorPolicy {
        ModelErrorPolicy::attempts(1)
    }

    /// Waits `first` before the second attempt, doubling for each next one up to `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> ModelErrorPolicy {
        self.first_delay = first;
        self.max_delay = max.max(first);
        self
    }

    /// The most attempts per call.
    pub fn max_attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait after failed attempt `attempt` (1-based) of the call `effect`: doubling from
    /// the first delay, capped, then shortened by a fraction (below a quarter) derived from
    /// the Effect id and the attempt, so it is the same in every replay.
    pub fn delay(&self, attempt: u32, effect: &str) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        let base = self.first_delay.saturating_mul(1u32 << doublings).min(self.max_delay);
        let digest = Digest::of(format!("{effect}\0{attempt}").as_bytes());
        let fraction = u64::from(digest.0[0]) * 25 / 255; // 0..=25 percent
        base - base.mul_f64(fraction as f64 / 100.0)
    }

    /// The policy as it enters the configuration digest.
    pub(crate) fn to_json(self) -> Json {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        ObjectBuilder::new()
            .field("attempts", &u64::from(self.attempts))
            .field("first_delay_ms", &millis(self.first_delay))
            .field("max_delay_ms", &millis(self.max_delay))
            .build()
    }
}

/// The model dispatcher with the agent's model error policy around each call.
pub(crate) struct ModelRetry {
    pub(crate) inner: Arc<ModelDispatcher>,
    pub(crate) policy: ModelErrorPolicy,
    pub(crate) hub: Arc<Hub>,
}

impl ModelRetry {
    async fn run(&self, request: EffectRequest, cx: DispatchContext) -> Result<Settlement, DispatchError> {
        // The clock of the runtime running this agent; without one (a deployment driven by
        // hand), no waiting and so no repeat.
        let env: Option<Env> = self.hub.env();
        let effect = request.effect_id.to_string();
        let mut attempt = 1;
        // The attempt spans' parent: the span of the agent run making the call (the run's, or
        // a delegate's, found through the delegating agent's hub), or of the Unknown a re-issue
        // settles.
        let parent = self.hub.tree_run(&request.relation.root_id).map(|run| run.lock().trace.model_parent(&request.effect_id, &request.process_id));
        loop {
            let span = trace::model_span(self.hub.trace_config(), &parent.clone().unwrap_or_else(tracing::Span::none), &request, attempt);
            let clock = env.as_ref().map(|e| e.clock.clone());
            let outcome = self.inner.attempt(request.clone(), cx.clone(), clock).instrument(span.clone()).await;
            match &outcome {
                Ok((settlement, transient)) => trace::model_settled(self.hub.trace_config(), &span, Ok(settlement), transient.is_some()),
                Err(e) => trace::model_settled(self.hub.trace_config(), &span, Err(&e.to_string()), false),
            }
            drop(span);
            let (settlement, transient) = outcome?;
            let (Some(error), Some(env)) = (transient, env.as_ref()) else { return Ok(settlement) };
            if attempt >= self.policy.attempts || cx.cancel.is_cancelled() {
                return Ok(settlement);
            }
            let delay = self.policy.delay(attempt, &effect);
            // A delegate's retries are reported in the run of the tree it runs in, as its deltas.
            if let Some(run) = self.hub.tree_run(&request.relation.root_id) {
                run.push_delta(RunEvent::ModelRetrying {
                    process: request.process_id.clone(),
                    attempt,
                    attempts: self.policy.attempts,
                    error,
                    delay,
                });
            }
            let wait = env.clock.sleep(delay);
            let cancelled = cx.cancel.cancelled();
            if let Either::Right(_) = select(wait, std::pin::pin!(cancelled)).await {
                return Ok(settlement); // the run is being cancelled: settle with the failure
            }
            attempt += 1;
        }
    }
}

impl Dispatcher for ModelRetry {
    fn policy(&self, effect: &Payload) -> DispatchPolicy {
        self.inner.policy(effect)
    }

    fn dispatch<'a>(&'a self, request: EffectRequest, cx: DispatchContext) -> BoxFuture<'a, Result<Settlement, DispatchError>> {
        Box::pin(self.run(request, cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_are_capped_and_are_the_same_for_the_same_call() {
        let p = ModelErrorPolicy::default();
        let a = p.delay(1, "effect:a");
        assert!(a <= Duration::from_secs(1) && a >= Duration::from_millis(750), "{a:?}");
        let b = p.delay(2, "effect:a");
        assert!(b <= Duration::from_secs(2) && b >= Duration::from_millis(1500), "{b:?}");
        assert!(p.delay(20, "effect:a") <= Duration::from_secs(30));
        assert_eq!(p.delay(2, "effect:a"), b, "deterministic");
    }
}
