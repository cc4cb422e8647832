//! Refuses a build without `--cfg madsim`: keel-sim runs every simulation on madsim's
//! deterministic runtime, which exists only under that cfg. A crate that depends on keel-sim
//! (to fault-test its own agent) must set it too; this says how, instead of a wall of
//! unresolved-import errors.

fn main() {
    // Cargo hands build scripts the target's cfgs, `--cfg` flags from `rustflags` included.
    if std::env::var_os("CARGO_CFG_MADSIM").is_none() {
        eprintln!(
            "error: keel-sim needs `--cfg madsim` (its runs are deterministic only on madsim's simulated runtime).\n\
             Add to `.cargo/config.toml` in your crate (or workspace):\n\n    [build]\n    rustflags = [\"--cfg\", \"madsim\"]\n\n\
             and do not set a RUSTFLAGS environment variable (it replaces that list)."
        );
        std::process::exit(1);
    }
}
