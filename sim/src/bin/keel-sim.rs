//! `keel-sim`: run simulation campaigns, replay and minimize failing seeds.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use keel_sim::campaign::ProgressStyle;
use keel_sim::cli::Cli;
use keel_sim::scenarios::builtin_registry;

fn main() -> ExitCode {
    // Panics inside simulated runs become run failures in the summary, not stderr noise.
    keel_sim::panics::install_hook();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let registry = builtin_registry();
    let stderr = std::io::stderr();
    let progress = if stderr.is_terminal() {
        ProgressStyle::Bar
    } else {
        ProgressStyle::Lines
    };
    let cli = Cli {
        registry: &registry,
        default_regressions: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/regressions")),
        progress,
    };
    let code = cli.main(&args, &mut std::io::stdout().lock(), &mut stderr.lock());
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}
