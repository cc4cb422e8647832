//! Retries inside one model call: which outcomes may be retried, and how long to wait.
//!
//! Only an outcome that proves the request had no effect is retried: the connection was never
//! made, or the provider refused the request with a retryable status before any response body
//! was read. Everything else ends the call (see the crate docs for the whole table).

use keel::env::{Clock, Rng, Timestamp};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// Hard ceiling on [`RetryPolicy::max_attempts`], whatever the configuration says.
pub const MAX_ATTEMPTS_LIMIT: u32 = 16;

/// How often and how long one model call may retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = never retry). Clamped to
    /// [`MAX_ATTEMPTS_LIMIT`].
    pub max_attempts: u32,
    /// The backoff before the first retry; doubled for each further retry.
    pub initial_backoff: Duration,
    /// The longest computed backoff.
    pub max_backoff: Duration,
    /// No retry starts later than this after the call began, and no wait (backoff or
    /// Retry-After) reaches past it.
    pub total_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            total_deadline: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn never() -> RetryPolicy {
        RetryPolicy { max_attempts: 1, ..RetryPolicy::default() }
    }

    pub(crate) fn attempts(&self) -> u32 {
        self.max_attempts.clamp(1, MAX_ATTEMPTS_LIMIT)
    }

    /// The backoff before retry number `retry` (1 = the first retry): exponential, capped,
    /// with "equal jitter" drawn from `rng` (uniform in the upper half of the step), so
    /// clients retrying together spread out and the sequence is reproducible under a seeded
    /// rng.
    pub fn backoff(&self, retry: u32, rng: &dyn Rng) -> Duration {
        let exponent = retry.saturating_sub(1).min(31);
        let step = self.initial_backoff.saturating_mul(1u32 << exponent).min(self.max_backoff);
        let step_ms = u64::try_from(step.as_millis()).unwrap_or(u64::MAX);
        let half = step_ms / 2;
        let jitter = match (step_ms - half).checked_add(1) {
            Some(span) => rng.next_u64() % span,
            None => 0,
        };
        Duration::from_millis(half + jitter)
    }
}

/// Timeouts of one attempt, measured on the client's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From sending the request until the whole response (complete mode: status, headers and
    /// body together) or its status and headers (streaming) arrived. Expiry leaves the call
    /// unknown.
    pub response: Duration,
    /// Longest silence between two chunks of a streamed response. Expiry leaves the call
    /// unknown.
    pub stream_idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { response: Duration::from_secs(600), stream_idle: Duration::from_secs(120) }
    }
}

/// What a client's retries and timeouts run on: keel's abstract clock and rng, so that under
/// the simulator every backoff and jitter is deterministic.
#[derive(Clone)]
pub struct Pacing {
    pub clock: Arc<dyn Clock>,
    pub rng: Arc<dyn Rng>,
    pub retry: RetryPolicy,
    pub timeouts: Timeouts,
}

impl Pacing {
    /// Default retry policy and timeouts over `env`'s clock and rng.
    pub fn new(env: &keel::env::Env) -> Pacing {
        Pacing {
            clock: env.clock.clone(),
            rng: env.rng.clone(),
            retry: RetryPolicy::default(),
            timeouts: Timeouts::default(),
        }
    }
}

impl std::fmt::Debug for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacing").field("retry", &self.retry).field("timeouts", &self.timeouts).finish()
    }
}

/// Whether an HTTP status proves the request had no effect and may be retried: 408 (request
/// timeout), 409 (conflict), 429 (rate limited) and every 5xx. Any other 4xx is a definite
/// failure: the same request would fail again.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// Longest Retry-After honored; a longer one is treated as this (the total deadline still
/// applies).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The wait a refused response asks for: `retry-after-ms` (milliseconds, sent by OpenAI), or
/// `Retry-After` as delay-seconds or as an HTTP date (IMF-fixdate, or the obsolete RFC 850
/// and asctime forms), capped at [`MAX_RETRY_AFTER`]. `None` (the computed backoff applies)
/// when none is given, or the value is unparsable, negative, or a date not after the
/// reference.
///
/// A date is read against the response's own `Date` header when it has one, so the wait is
/// the server's "retry at" minus the server's "now" and no clock skew between client and
/// server enters. Without a `Date` header it is read against `now`, the client's keel clock
/// (its wall time in production, simulated time under the simulator), so every wait still
/// runs on the clock the retries run on.
pub fn retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    date: Option<&str>,
    now: Timestamp,
) -> Option<Duration> {
    let from_ms = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0);
    let wait = match from_ms {
        Some(ms) => Duration::from_secs_f64((ms / 1000.0).min(MAX_RETRY_AFTER.as_secs_f64())),
        None => {
            let value = retry_after?.trim();
            match value.parse::<u64>() {
                Ok(seconds) => Duration::from_secs(seconds),
                Err(_) => {
                    let at = httpdate::parse_http_date(value).ok()?;
                    let reference = match date.map(|d| httpdate::parse_http_date(d.trim())) {
                        Some(Ok(server_now)) => server_now,
                        // No (or an unreadable) Date: the client's clock.
                        _ => UNIX_EPOCH + Duration::from_millis(now.as_millis()),
                    };
                    at.duration_since(reference).ok().filter(|d| !d.is_zero())?
                }
            }
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::env::SeededRng;

    #[test]
    fn only_no_effect_statuses_are_retryable() {
        for s in [408, 409, 429, 500, 502, 503, 529, 599] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 301, 400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn backoff_doubles_is_capped_and_jitters_in_the_upper_half() {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            ..RetryPolicy::default()
        };
        let rng = SeededRng::new(7);
        for (retry, step) in [(1, 100), (2, 200), (3, 400), (4, 500), (30, 500), (u32::MAX, 500)] {
            for _ in 0..50 {
                let d = policy.backoff(retry, &rng).as_millis();
                assert!((step / 2..=step).contains(&d), "retry {retry}: {d}ms outside [{}, {step}]", step / 2);
            }
        }
        // Reproducible: the same seed draws the same waits.
        let (a, b) = (SeededRng::new(3), SeededRng::new(3));
        let draws = |rng: &SeededRng| (1..6).map(|r| policy.backoff(r, rng)).collect::<Vec<_>>();
        assert_eq!(draws(&a), draws(&b));
    }

    #[test]
    fn retry_after_prefers_milliseconds_then_seconds() {
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(retry_after(None, Some("2"), None, now), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(Some("250"), Some("2"), None, now), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(Some("x"), Some("1"), None, now), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(None, Some("-1"), None, now), None);
        assert_eq!(retry_after(None, Some("soon"), None, now), None);
        assert_eq!(retry_after(None, Some("99999"), None, now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(None, None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), now), None);
    }

    #[test]
    fn a_retry_after_date_is_read_against_the_server_date_else_the_clock() {
        let server_now = "Wed, 21 Oct 2015 07:28:00 GMT";
        // The server's Date decides, whatever the client's clock says.
        for now in [Timestamp::UNIX_EPOCH, Timestamp::parse("2030-01-01T00:00:00.000Z").unwrap()] {
            for (at, wait) in [
                ("Wed, 21 Oct 2015 07:28:03 GMT", Some(Duration::from_secs(3))),
                // The obsolete forms a server may still send.
                ("Wednesday, 21-Oct-15 07:28:05 GMT", Some(Duration::from_secs(5))),
                ("Wed Oct 21 07:29:00 2015", Some(Duration::from_secs(60))),
                // Now or past: nothing to wait for beyond the computed backoff.
                ("Wed, 21 Oct 2015 07:28:00 GMT", None),
                ("Wed, 21 Oct 2015 07:27:00 GMT", None),
                // Capped like a delay in seconds.
                ("Thu, 22 Oct 2015 07:28:00 GMT", Some(MAX_RETRY_AFTER)),
                ("21 Oct 2015", None),
            ] {
                assert_eq!(retry_after(None, Some(at), Some(server_now), now), wait, "{at} at {now}");
            }
        }
        // Without a (readable) Date, the client's clock is the reference.
        let now = Timestamp::parse("2015-10-21T07:27:58.500Z").unwrap();
        for date in [None, Some("yesterday")] {
            assert_eq!(
                retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), date, now),
                Some(Duration::from_millis(1500)),
                "Date {date:?}"
            );
        }
        // retry-after-ms still wins.
        assert_eq!(retry_after(Some("100"), Some("Wed, 21 Oct 2015 07:28:03 GMT"), Some(server_now), now), Some(Duration::from_millis(100)));
    }

    #[test]
    fn attempts_are_clamped() {
        assert_eq!(RetryPolicy { max_attempts: 0, ..RetryPolicy::default() }.attempts(), 1);
        assert_eq!(RetryPolicy { max_attempts: 1000, ..RetryPolicy::default() }.attempts(), MAX_ATTEMPTS_LIMIT);
        assert_eq!(RetryPolicy::never().attempts(), 1);
    }
}
