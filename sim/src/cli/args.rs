//! Hand-written argument parsing for the `keel-sim` binary: every mistake is a typed error.

use std::path::PathBuf;

use crate::mutation::{self, Mutation, MutationError};
use crate::regressions::parse_seed;
use crate::schedule::{FaultSchedule, ScheduleParseError};

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(RunArgs),
    Replay(ReplayArgs),
    Minimize(MinimizeArgs),
    /// `merge FILE...`: the summaries `run --shard K/N --summary-out FILE` wrote, merged.
    Merge(MergeArgs),
    List,
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunArgs {
    pub seeds: u64,
    pub from: u64,
    /// Empty: every registered scenario.
    pub scenarios: Vec<String>,
    /// `None`: the default (available parallelism, capped).
    pub jobs: Option<usize>,
    pub check: bool,
    pub regressions: RegressionsArg,
    /// `--mutation NAME`: every run against this deliberately broken rule.
    pub mutation: Option<Mutation>,
    /// `--fail-fast`: stop at the first failing run.
    pub fail_fast: bool,
    /// `--shard K/N`: only the seeds whose index in the range is `K-1` modulo `N`.
    pub shard: Option<Shard>,
    /// `--summary-out FILE`: also write the summary as JSON, for `merge`.
    pub summary_out: Option<PathBuf>,
    /// `--no-record`: do not append failing seeds to the regressions directory.
    pub no_record: bool,
}

/// One of `count` disjoint parts of a campaign (`index` is 1-based, as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeArgs {
    /// The shard summary files, in any order.
    pub files: Vec<PathBuf>,
}

/// Where `run` reads stored failing seeds from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegressionsArg {
    /// `sim/regressions/` of this checkout, skipped if absent.
    Default,
    /// `--regressions DIR`: must exist.
    Dir(PathBuf),
    /// `--no-regressions`.
    Off,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayArgs {
    pub seed: u64,
    pub scenario: Option<String>,
    pub check: bool,
    /// `--schedule AT:KIND,...`: run with these faults instead of the seed's own.
    pub schedule: Option<FaultSchedule>,
    pub mutation: Option<Mutation>,
    /// `--html FILE`: also write the run's timeline as one self-contained HTML page.
    pub html: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinimizeArgs {
    pub seed: u64,
    pub scenario: Option<String>,
    pub mutation: Option<Mutation>,
}

/// What is wrong with the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("no command given (try `keel-sim --help`)")]
    NoCommand,
    #[error("unknown command `{0}` (commands: run, replay, minimize, merge, list, help)")]
    UnknownCommand(String),
    #[error("`{command}` does not take `{flag}`{}", suggestion.map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownFlag {
        command: &'static str,
        flag: String,
        /// The known flag closest in spelling, when one is close.
        suggestion: Option<&'static str>,
    },
    #[error("`{flag}` needs a value")]
    MissingValue { flag: &'static str },
    #[error("`{flag}` takes no value")]
    UnexpectedValue { flag: &'static str },
    #[error("`{flag}` given twice")]
    Repeated { flag: &'static str },
    #[error("`{flag}` wants a non-negative decimal integer, got `{value}`")]
    BadNumber { flag: &'static str, value: String },
    #[error("`--jobs` must be at least 1")]
    ZeroJobs,
    #[error("`{command}` needs `{flag}`")]
    Missing {
        command: &'static str,
        flag: &'static str,
    },
    #[error("unexpected argument `{0}`")]
    Unexpected(String),
    #[error("`{0}` and `{1}` cannot be used together")]
    Conflict(&'static str, &'static str),
    #[error("`--shard` wants `K/N` with 1 <= K <= N (say `--shard 2/4`), got `{0}`")]
    BadShard(String),
    #[error("`merge` needs the summary files that `run --shard K/N --summary-out FILE` wrote")]
    NothingToMerge,
    #[error("bad `--schedule`: {0}")]
    BadSchedule(#[from] ScheduleParseError),
    #[error(transparent)]
    Mutation(#[from] MutationError),
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, ArgError> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    let Some((command, rest)) = args.split_first() else {
        return Err(ArgError::NoCommand);
    };
    let (name, known): (&'static str, &[&'static str]) = match command.as_str() {
        "run" => ("run", RUN_FLAGS),
        "replay" => ("replay", REPLAY_FLAGS),
        "minimize" => ("minimize", MINIMIZE_FLAGS),
        "merge" => return parse_merge(rest),
        "list" => ("list", &[]),
        "help" => ("help", &[]),
        other => return Err(ArgError::UnknownCommand(other.to_string())),
    };
    let mut flags = Flags::split(rest)?;
    // A misspelt flag first: otherwise `run --sedes 10` would only say `--seeds` is missing.
    flags.reject_unknown(name, known)?;
    let parsed = match name {
        "run" => parse_run(&mut flags)?,
        "replay" => parse_replay(&mut flags)?,
        "minimize" => parse_minimize(&mut flags)?,
        "list" => Command::List,
        _ => Command::Help,
    };
    flags.finish(command_name(&parsed))?;
    Ok(parsed)
}

/// The flags each command takes (the order breaks ties between equally close suggestions).
const RUN_FLAGS: &[&str] = &[
    "--seeds",
    "--from",
    "--scenario",
    "--jobs",
    "--check",
    "--regressions",
    "--no-regressions",
    "--no-record",
    "--mutation",
    "--fail-fast",
    "--shard",
    "--summary-out",
];
const REPLAY_FLAGS: &[&str] = &["--seed", "--scenario", "--check", "--schedule", "--mutation", "--html"];
const MINIMIZE_FLAGS: &[&str] = &["--seed", "--scenario", "--mutation"];

/// The known flag nearest to `flag` (edit distance with transpositions, at most 2 edits and
/// less than half the flag's letters), if any.
fn closest(flag: &str, known: &[&'static str]) -> Option<&'static str> {
    let letters = flag.trim_start_matches('-').chars().count();
    known
        .iter()
        .map(|k| (edit_distance(flag, k), *k))
        .filter(|(d, _)| *d <= 2 && *d * 2 < letters.max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent
/// transpositions each cost 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for j in 0..=b.len() {
        d[0][j] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// `merge FILE...`: positional files only.
fn parse_merge(rest: &[String]) -> Result<Command, ArgError> {
    if let Some(flag) = rest.iter().find(|a| a.starts_with("--")) {
        let flag = flag.split_once('=').map_or(flag.as_str(), |(f, _)| f).to_string();
        return Err(ArgError::UnknownFlag { command: "merge", flag, suggestion: None });
    }
    if rest.is_empty() {
        return Err(ArgError::NothingToMerge);
    }
    Ok(Command::Merge(MergeArgs {
        files: rest.iter().map(PathBuf::from).collect(),
    }))
}

/// `K/N` with `1 <= K <= N`.
fn parse_shard(text: &str) -> Result<Shard, ArgError> {
    let bad = || ArgError::BadShard(text.to_string());
    let (k, n) = text.split_once('/').ok_or_else(bad)?;
    let (index, count) = (parse_seed(k).ok_or_else(bad)?, parse_seed(n).ok_or_else(bad)?);
    if index == 0 || index > count {
        return Err(bad());
    }
    Ok(Shard { index, count })
}

fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Run(_) => "run",
        Command::Replay(_) => "replay",
        Command::Minimize(_) => "minimize",
        Command::Merge(_) => "merge",
        Command::List => "list",
        Command::Help => "help",
    }
}

fn parse_run(flags: &mut Flags) -> Result<Command, ArgError> {
    let seeds = flags.number("--seeds")?.ok_or(ArgError::Missing {
        command: "run",
        flag: "--seeds",
    })?;
    let from = flags.number("--from")?.unwrap_or(0);
    let scenarios = flags.values("--scenario")?;
    let jobs = match flags.number("--jobs")? {
        None => None,
        Some(0) => return Err(ArgError::ZeroJobs),
        Some(j) => Some(usize::try_from(j).unwrap_or(usize::MAX)),
    };
    let check = flags.switch("--check")?;
    let dir = flags.value("--regressions")?;
    let off = flags.switch("--no-regressions")?;
    let regressions = match (dir, off) {
        (Some(_), true) => return Err(ArgError::Conflict("--regressions", "--no-regressions")),
        (Some(dir), false) => RegressionsArg::Dir(PathBuf::from(dir)),
        (None, true) => RegressionsArg::Off,
        (None, false) => RegressionsArg::Default,
    };
    let mutation = mutation(flags)?;
    let fail_fast = flags.switch("--fail-fast")?;
    let shard = flags.value("--shard")?.map(|s| parse_shard(&s)).transpose()?;
    let summary_out = flags.value("--summary-out")?.map(PathBuf::from);
    let no_record = flags.switch("--no-record")?;
    Ok(Command::Run(RunArgs {
        seeds,
        from,
        scenarios,
        jobs,
        check,
        regressions,
        mutation,
        fail_fast,
        shard,
        summary_out,
        no_record,
    }))
}

fn parse_replay(flags: &mut Flags) -> Result<Command, ArgError> {
    let seed = flags.number("--seed")?.ok_or(ArgError::Missing {
        command: "replay",
        flag: "--seed",
    })?;
    let scenario = flags.value("--scenario")?;
    let check = flags.switch("--check")?;
    let schedule = flags
        .value("--schedule")?
        .map(|s| s.parse::<FaultSchedule>())
        .transpose()?;
    let mutation = mutation(flags)?;
    let html = flags.value("--html")?.map(PathBuf::from);
    Ok(Command::Replay(ReplayArgs {
        seed,
        scenario,
        check,
        schedule,
        mutation,
        html,
    }))
}

fn parse_minimize(flags: &mut Flags) -> Result<Command, ArgError> {
    let seed = flags.number("--seed")?.ok_or(ArgError::Missing {
        command: "minimize",
        flag: "--seed",
    })?;
    let scenario = flags.value("--scenario")?;
    let mutation = mutation(flags)?;
    Ok(Command::Minimize(MinimizeArgs {
        seed,
        scenario,
        mutation,
    }))
}

/// `--mutation NAME`, resolved (a typed error when unknown or not built in).
fn mutation(flags: &mut Flags) -> Result<Option<Mutation>, ArgError> {
    Ok(flags
        .value("--mutation")?
        .map(|name| mutation::from_name(&name))
        .transpose()?)
}

/// The flags of one command, consumed as the command asks for them; leftovers are errors.
struct Flags {
    /// `(flag, value)`; the value is the `=`-joined part or the next argument, bound later
    /// because only the command knows which flags take values.
    items: Vec<Item>,
}

#[derive(Debug)]
struct Item {
    flag: String,
    inline: Option<String>,
    next: Option<String>,
    used: bool,
    next_used: bool,
}

impl Flags {
    fn split(args: &[String]) -> Result<Flags, ArgError> {
        let mut items = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            if !arg.starts_with("--") {
                return Err(ArgError::Unexpected(arg.clone()));
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (arg.clone(), None),
            };
            // A following non-flag argument may be this flag's value.
            let next = match (&inline, args.get(i + 1)) {
                (None, Some(n)) if !n.starts_with("--") => {
                    i += 1;
                    Some(n.clone())
                }
                _ => None,
            };
            items.push(Item {
                flag,
                inline,
                next,
                used: false,
                next_used: false,
            });
            i += 1;
        }
        Ok(Flags { items })
    }

    /// Every value of a repeatable flag.
    fn values(&mut self, flag: &'static str) -> Result<Vec<String>, ArgError> {
        let mut out = Vec::new();
        for item in self.items.iter_mut().filter(|it| it.flag == flag) {
            item.used = true;
            let value = match (item.inline.take(), item.next.take()) {
                (Some(v), None) => v,
                (None, Some(v)) => {
                    item.next_used = true;
                    v
                }
                (Some(_), Some(n)) => return Err(ArgError::Unexpected(n)),
                (None, None) => return Err(ArgError::MissingValue { flag }),
            };
            if value.is_empty() {
                return Err(ArgError::MissingValue { flag });
            }
            out.push(value);
        }
        Ok(out)
    }

    fn value(&mut self, flag: &'static str) -> Result<Option<String>, ArgError> {
        let mut values = self.values(flag)?;
        if values.len() > 1 {
            return Err(ArgError::Repeated { flag });
        }
        Ok(values.pop())
    }

    fn number(&mut self, flag: &'static str) -> Result<Option<u64>, ArgError> {
        self.value(flag)?
            .map(|v| parse_seed(&v).ok_or(ArgError::BadNumber { flag, value: v }))
            .transpose()
    }

    fn switch(&mut self, flag: &'static str) -> Result<bool, ArgError> {
        let mut seen = false;
        for item in self.items.iter_mut().filter(|it| it.flag == flag) {
            if seen {
                return Err(ArgError::Repeated { flag });
            }
            if item.inline.is_some() {
                return Err(ArgError::UnexpectedValue { flag });
            }
            item.used = true;
            seen = true;
        }
        Ok(seen)
    }

    /// The first flag `command` does not take, with the nearest one it does.
    fn reject_unknown(&self, command: &'static str, known: &[&'static str]) -> Result<(), ArgError> {
        match self.items.iter().find(|it| !known.contains(&it.flag.as_str())) {
            None => Ok(()),
            Some(item) => Err(ArgError::UnknownFlag {
                command,
                flag: item.flag.clone(),
                suggestion: closest(&item.flag, known),
            }),
        }
    }

    fn finish(self, command: &'static str) -> Result<(), ArgError> {
        for item in self.items {
            if !item.used {
                return Err(ArgError::UnknownFlag {
                    command,
                    flag: item.flag,
                    suggestion: None,
                });
            }
            if let (Some(next), false) = (item.next, item.next_used) {
                return Err(ArgError::Unexpected(next));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Result<Command, ArgError> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse(&args)
    }

    #[test]
    fn run_with_everything() {
        let Command::Run(r) = p(
            "run --seeds 10 --from=5 --scenario a --scenario b --jobs 3 --check --no-regressions",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            r,
            RunArgs {
                seeds: 10,
                from: 5,
                scenarios: vec!["a".into(), "b".into()],
                jobs: Some(3),
                check: true,
                regressions: RegressionsArg::Off,
                mutation: None,
                fail_fast: false,
                shard: None,
                summary_out: None,
                no_record: false,
            }
        );
    }

    #[test]
    fn run_defaults() {
        let Command::Run(r) = p("run --seeds 1").unwrap() else {
            panic!()
        };
        assert_eq!(r.from, 0);
        assert_eq!(r.jobs, None);
        assert!(!r.check);
        assert!(!r.fail_fast);
        assert_eq!(r.mutation, None);
        assert_eq!(r.regressions, RegressionsArg::Default);
        assert!(r.scenarios.is_empty());
    }

    #[test]
    fn replay_and_minimize() {
        assert_eq!(
            p("replay --seed 7 --scenario x --check --schedule 1:task_abort --html t.html").unwrap(),
            Command::Replay(ReplayArgs {
                seed: 7,
                scenario: Some("x".into()),
                check: true,
                schedule: Some("1:task_abort".parse().unwrap()),
                mutation: None,
                html: Some(PathBuf::from("t.html")),
            })
        );
        assert_eq!(
            p("minimize --seed 7").unwrap(),
            Command::Minimize(MinimizeArgs {
                seed: 7,
                scenario: None,
                mutation: None,
            })
        );
        assert_eq!(p("list").unwrap(), Command::List);
        assert_eq!(p("help").unwrap(), Command::Help);
        assert_eq!(p("run --seeds x --help").unwrap(), Command::Help);
        assert_eq!(p("-h").unwrap(), Command::Help);
    }

    #[test]
    fn mistakes_are_typed_errors() {
        assert_eq!(p(""), Err(ArgError::NoCommand));
        assert_eq!(p("go"), Err(ArgError::UnknownCommand("go".into())));
        assert_eq!(
            p("run"),
            Err(ArgError::Missing {
                command: "run",
                flag: "--seeds"
            })
        );
        assert_eq!(
            p("replay"),
            Err(ArgError::Missing {
                command: "replay",
                flag: "--seed"
            })
        );
        assert_eq!(
            p("run --seeds"),
            Err(ArgError::MissingValue { flag: "--seeds" })
        );
        assert_eq!(
            p("run --seeds="),
            Err(ArgError::MissingValue { flag: "--seeds" })
        );
        assert_eq!(
            p("run --seeds --check"),
            Err(ArgError::MissingValue { flag: "--seeds" })
        );
        assert_eq!(
            p("run --seeds -1"),
            Err(ArgError::BadNumber {
                flag: "--seeds",
                value: "-1".into()
            })
        );
        assert_eq!(
            p("run --seeds +1"),
            Err(ArgError::BadNumber {
                flag: "--seeds",
                value: "+1".into()
            })
        );
        assert_eq!(
            p("run --seeds 1x"),
            Err(ArgError::BadNumber {
                flag: "--seeds",
                value: "1x".into()
            })
        );
        assert_eq!(
            p("run --seeds 99999999999999999999"),
            Err(ArgError::BadNumber {
                flag: "--seeds",
                value: "99999999999999999999".into()
            })
        );
        assert_eq!(p("run --seeds 1 --jobs 0"), Err(ArgError::ZeroJobs));
        assert_eq!(
            p("run --seeds 1 --seeds 2"),
            Err(ArgError::Repeated { flag: "--seeds" })
        );
        assert_eq!(
            p("run --seeds 1 --check --check"),
            Err(ArgError::Repeated { flag: "--check" })
        );
        assert_eq!(
            p("run --seeds 1 --check=yes"),
            Err(ArgError::UnexpectedValue { flag: "--check" })
        );
        assert_eq!(
            p("run --seeds 1 --check yes"),
            Err(ArgError::Unexpected("yes".into()))
        );
        assert_eq!(
            p("run --seeds 1 extra"),
            Err(ArgError::Unexpected("extra".into()))
        );
        assert_eq!(p("run --seeds=1 2"), Err(ArgError::Unexpected("2".into())));
        assert_eq!(
            p("run --seeds 1 --seed 2"),
            Err(ArgError::UnknownFlag {
                command: "run",
                flag: "--seed".into(),
                suggestion: Some("--seeds"),
            })
        );
        assert_eq!(
            p("list --seeds 1"),
            Err(ArgError::UnknownFlag {
                command: "list",
                flag: "--seeds".into(),
                suggestion: None,
            })
        );
        assert_eq!(
            p("run --seeds 1 --regressions d --no-regressions"),
            Err(ArgError::Conflict("--regressions", "--no-regressions"))
        );
        assert_eq!(
            p("replay --seed 1 --schedule 1"),
            Err(ArgError::BadSchedule(ScheduleParseError::MissingColon(
                "1".into()
            )))
        );
        assert_eq!(
            p("minimize --seed 1 --check"),
            Err(ArgError::UnknownFlag {
                command: "minimize",
                flag: "--check".into(),
                suggestion: None,
            })
        );
    }

    #[test]
    fn a_misspelt_flag_is_named_before_anything_else_with_the_nearest_flag() {
        let e = p("run --sedes 10").unwrap_err();
        assert_eq!(
            e,
            ArgError::UnknownFlag {
                command: "run",
                flag: "--sedes".into(),
                suggestion: Some("--seeds"),
            }
        );
        assert_eq!(e.to_string(), "`run` does not take `--sedes` (did you mean `--seeds`?)");
        // Even when a required flag is missing or another value is bad.
        assert!(matches!(
            p("run --seeds x --jbos 2"),
            Err(ArgError::UnknownFlag { suggestion: Some("--jobs"), .. })
        ));
        assert!(matches!(
            p("replay --sed 3"),
            Err(ArgError::UnknownFlag { suggestion: Some("--seed"), .. })
        ));
        assert!(matches!(
            p("run --seeds 1 --checkk"),
            Err(ArgError::UnknownFlag { suggestion: Some("--check"), .. })
        ));
        // Nothing close: no guess.
        assert_eq!(
            p("run --zzzzzz 1").unwrap_err().to_string(),
            "`run` does not take `--zzzzzz`"
        );
    }

    #[test]
    fn shards_summaries_and_merge() {
        let Command::Run(r) =
            p("run --seeds 10 --shard 2/3 --summary-out s.json --no-record").unwrap()
        else {
            panic!()
        };
        assert_eq!(r.shard, Some(Shard { index: 2, count: 3 }));
        assert_eq!(r.summary_out, Some(PathBuf::from("s.json")));
        assert!(r.no_record);
        for bad in ["0/3", "4/3", "1", "1/0", "a/2", "1/2/3", "/2"] {
            assert_eq!(
                p(&format!("run --seeds 1 --shard {bad}")),
                Err(ArgError::BadShard(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(
            p("merge a.json b.json").unwrap(),
            Command::Merge(MergeArgs {
                files: vec!["a.json".into(), "b.json".into()]
            })
        );
        assert_eq!(p("merge"), Err(ArgError::NothingToMerge));
        assert!(matches!(p("merge a --check"), Err(ArgError::UnknownFlag { .. })));
    }

    #[test]
    fn mutations_are_named_or_refused() {
        let Command::Run(r) = p("run --seeds 3 --fail-fast").unwrap() else {
            panic!()
        };
        assert!(r.fail_fast);
        assert!(matches!(
            p("run --seeds 3 --mutation nope"),
            Err(ArgError::Mutation(_))
        ));
        #[cfg(feature = "mutations")]
        {
            let Command::Replay(r) = p("replay --seed 1 --mutation steer_applied_twice").unwrap()
            else {
                panic!()
            };
            assert_eq!(r.mutation, Some(Mutation::SteerAppliedTwice));
        }
        #[cfg(not(feature = "mutations"))]
        assert_eq!(
            p("minimize --seed 1 --mutation steer_applied_twice"),
            Err(ArgError::Mutation(MutationError::NotBuilt {
                name: "steer_applied_twice".into()
            }))
        );
    }
}
