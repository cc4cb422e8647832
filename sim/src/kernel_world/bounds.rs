//! Named bounds of the kernel world: every loop, queue and generated shape is finite.

/// World events per run (commit acks, dispatch starts/completions, host actions). Exceeding it
/// is a violation: a generated run is far smaller, so hitting it means something spun.
pub const MAX_WORLD_TURNS: u64 = 20_000;
/// Upper bound of a seed's crash budget (commit faults, host crashes, stale-writer restores).
pub const MAX_CRASHES: u32 = 4;
/// Owner instances a run may create (start, restores, stale writers, failed activations).
pub const MAX_INSTANCES: u32 = 16;
/// Host actions injected per run (finishing work at quiescence not included).
pub const MAX_HOST_ACTIONS: u32 = 48;
/// Host actions taken at quiescence (answers, adjudications) per run.
pub const MAX_FINISHING_ACTIONS: u32 = 64;
/// Depth of the generated process tree (root = 0).
pub const MAX_TREE_DEPTH: u32 = 3;
/// Processes in a generated tree, root included.
pub const MAX_PROCESSES: u32 = 4;
/// Ops in one generated script.
pub const MAX_OPS_PER_SCRIPT: u32 = 4;
/// Dispatcher Effects in one generated batch.
pub const MAX_BATCH: u32 = 3;
/// Children in one generated spawn.
pub const MAX_SPAWN: u32 = 3;
/// Violations kept per run (later ones are counted, not stored).
pub const MAX_VIOLATIONS: usize = 32;
/// Commit decisions a fault schedule may name (every commit sent to the store is one); far
/// above what a run makes, so any schedule a run printed replays.
pub const MAX_COMMIT_DECISIONS: u64 = MAX_WORLD_TURNS;
