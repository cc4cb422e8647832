//! Every built-in scenario whose faults replay from a schedule (the kernel worlds, the
//! Interaction swarm) behaves exactly like its seed when handed the seed's own schedule, and
//! a subset of that schedule is a different, still deterministic run. This is what makes
//! `minimize` and `replay --schedule` sound.

use keel_sim::scenarios::builtin_registry;
use keel_sim::schedule::FaultSchedule;
use keel_sim::world::RunOptions;

const SEEDS: u64 = 12;

#[test]
fn a_seed_replays_identically_from_its_own_fault_schedule() {
    let registry = builtin_registry();
    let schedulable: Vec<&str> =
        registry.scenarios().iter().filter(|s| s.schedulable().is_some()).map(|s| s.name()).collect();
    for name in ["kernel-swarm", "kernel-crash-matrix", "kernel-stale-writer", "kernel-fanout-order", "interaction-swarm"] {
        assert!(schedulable.contains(&name), "{name} cannot replay a schedule ({schedulable:?})");
    }
    let options = RunOptions::default();
    for scenario in registry.scenarios().iter().filter(|s| s.schedulable().is_some()) {
        let s = scenario.schedulable().unwrap();
        let mut faulted = 0;
        for seed in 0..SEEDS {
            let own = s.schedule_of(seed);
            let by_seed = scenario.run(seed, &options);
            let by_schedule = s.run_with_schedule(seed, &own, &options).unwrap();
            assert_eq!(by_seed, by_schedule, "{} seed {seed} with schedule {own}", scenario.name());
            if own.is_empty() {
                continue;
            }
            faulted += 1;
            // Without its faults the seed is another run, the same one every time.
            let none = FaultSchedule::default();
            let clean = s.run_with_schedule(seed, &none, &options).unwrap();
            assert_ne!(clean.trace_hash, by_seed.trace_hash, "{} seed {seed}: faults {own} changed nothing", scenario.name());
            assert!(clean.crash_points_hit.is_empty(), "{} seed {seed}: {:?}", scenario.name(), clean.crash_points_hit);
            assert_eq!(clean, s.run_with_schedule(seed, &none, &options).unwrap());
        }
        let quiet = scenario.name() == "kernel-fanout-order" || scenario.name() == "kernel-stale-writer";
        assert!(quiet || faulted > 0, "{}: no seed below {SEEDS} fired a commit fault", scenario.name());
    }
}

#[test]
fn schedules_with_foreign_kinds_or_disorder_are_refused() {
    let registry = builtin_registry();
    for name in ["kernel-swarm", "interaction-swarm"] {
        let s = registry.get(name).unwrap();
        let s = s.schedulable().unwrap();
        for bad in ["3:task_abort", "5:crash_after,2:lose_ack"] {
            let schedule: FaultSchedule = bad.parse().unwrap();
            assert!(s.run_with_schedule(1, &schedule, &RunOptions::default()).is_err(), "{name} took {bad}");
        }
    }
}
