//! How fast this crate's fault campaign runs: the `weather_campaign` of `tests/campaign.rs`
//! (every fault kind, the answer, the steer and the cancel) over 10,000 seeds on one core,
//! without a regressions file. Prints `user_campaign_seeds_per_s = X` and the wall time.
//!
//! Run: `cargo bench --bench seeds_per_s` (optional first argument: the number of seeds).

use harness_campaign::{script, weather_agent, Bookings};
use keel_sim::harness::{Campaign, Faults};
use std::time::Instant;

fn main() {
    let seeds: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let started = Instant::now();
    let report = Campaign::new(|| weather_agent(Bookings::default()), script())
        .name("weather")
        .user_message("Book me a table where the weather is nice.")
        .answers(["Paris"])
        .steer_at(2, "Somewhere warm, please.")
        .cancel_at(3)
        .seeds(0..seeds)
        .faults(Faults::all())
        .jobs(1)
        .no_regressions()
        .run();
    let elapsed = started.elapsed().as_secs_f64();
    // A failing seed still did its work, but a failing campaign is not the one to time.
    assert!(report.passed(), "the campaign failed, fix it before timing it:\n{report}");
    println!("weather campaign: {} runs on one core in {elapsed:.1} s", report.runs());
    println!("user_campaign_seeds_per_s = {:.0}", report.runs() as f64 / elapsed.max(1e-9));
}
