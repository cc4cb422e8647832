//! The scenarios this binary ships. Until the kernel world lands, the only one is the harness
//! self-test; the kernel world registers its scenarios (and a scenario-file loader) here.

pub mod clock_and_rng;
pub mod provider_adapters;

use std::sync::Arc;

use crate::registry::Registry;

pub use clock_and_rng::ClockAndRng;

/// Every built-in scenario, in the order `list` prints them.
pub fn builtin_registry() -> Registry {
    let mut registry = Registry::new();
    // A fresh registry has no names yet, so this cannot collide.
    let _ = registry.register(Arc::new(ClockAndRng));
    // Kernel-level worlds (direct mode, scripted strategy): swarm faults, crash matrix, stale
    // writers, fan-out ordering.
    for scenario in crate::kernel_world::scenarios() {
        let _ = registry.register(Arc::from(scenario));
    }
    // The Interaction world: the real strategy on the async Engine under madsim.
    for scenario in crate::interaction_world::scenarios() {
        let _ = registry.register(Arc::from(scenario));
    }
    // An agent built with the keel::agent facade, run by the public harness.
    let _ = registry.register(Arc::new(crate::harness::facade_scenario()));
    // The provider adapters in place of the scripted model, over recorded exchanges.
    let _ = registry.register(Arc::new(provider_adapters::ProviderAdapters));
    // The bundled scenario files: listed and found by name, run when named.
    for scenario in crate::interaction_world::bundled_scenarios() {
        let _ = registry.register_bundled(scenario);
    }
    registry.set_file_loader("json", Box::new(crate::interaction_world::load_scenario));
    registry
}
