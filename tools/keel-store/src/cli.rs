//! The command line: flags are checked first (an unknown flag is an error before anything is
//! opened), then the subcommand and its arguments.

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: keel-store COMMAND [ROOT] (--file DIR | --sqlite PATH | --store PATH)

commands:
  list          every tree: head sequence, writer incarnation, root status
  show ROOT     one tree: head, processes with status, open input waits, Unknown effects
  verify        read every tree end to end: decode and validate each head cut, check its
                digest and the commit history; exits 1 naming each damaged tree
  compact       file store: rewrite the log as the live heads; SQLite: VACUUM the database
  export ROOT   the head cut of ROOT as pretty JSON on stdout
  repair        file store: cut off a torn tail (an unfinished last write, never
                acknowledged); refuses damage, which it never cuts

stores:
  --file DIR    a file store directory (holding commits.log)
  --sqlite PATH a SQLite store file
  --store PATH  either, detected from what PATH is

list, show, verify and export only read: they create, lock-file, truncate and write nothing.
A file store is read only while no writer has it open (stop the agent first); a SQLite store
can be read while agents run. A torn tail at the end of a file store's log is reported (verify
and list exit 1) and left in place: `repair` or the next writer's open cuts it.";

const FLAGS: [&str; 4] = ["--file", "--sqlite", "--store", "--help"];

/// Where the store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreArg {
    File(PathBuf),
    Sqlite(PathBuf),
    Detect(PathBuf),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    List,
    Show(String),
    Verify,
    Compact,
    Export(String),
    Repair,
}

impl Command {
    /// Whether the command writes to the store (the others only read it).
    pub fn writes(&self) -> bool {
        matches!(self, Command::Compact | Command::Repair)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Help,
    Run { command: Command, store: StoreArg },
}

/// Parses the arguments after the program name; the error is the message to print.
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    // Flags first, wherever they are.
    for arg in args {
        if arg.starts_with("--") {
            let name = arg.split_once('=').map_or(arg.as_str(), |(n, _)| n);
            if !FLAGS.contains(&name) {
                return Err(format!("unknown flag `{arg}` (known flags: {})", FLAGS.join(", ")));
            }
        } else if arg.starts_with('-') && arg.len() > 1 {
            return Err(format!("unknown flag `{arg}` (known flags: {})", FLAGS.join(", ")));
        }
    }
    let mut store = None;
    let mut positional = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if arg.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let make: fn(PathBuf) -> StoreArg = match name {
            "--help" => return Ok(Parsed::Help),
            "--file" => StoreArg::File,
            "--sqlite" => StoreArg::Sqlite,
            "--store" => StoreArg::Detect,
            _ => {
                positional.push(arg.clone());
                continue;
            }
        };
        let value = match inline {
            Some(v) => v,
            None => rest.next().cloned().ok_or_else(|| format!("{name} needs a path"))?,
        };
        if store.is_some() {
            return Err("give one store: --file DIR, --sqlite PATH or --store PATH".into());
        }
        store = Some(make(PathBuf::from(value)));
    }
    let mut positional = positional.into_iter();
    let command = match positional.next().as_deref() {
        None => return Err("no command (list, show, verify, compact, export, repair)".into()),
        Some("help") => return Ok(Parsed::Help),
        Some("list") => Command::List,
        Some("verify") => Command::Verify,
        Some("compact") => Command::Compact,
        Some("repair") => Command::Repair,
        Some("show") => Command::Show(positional.next().ok_or("show needs a ROOT (a process id)")?),
        Some("export") => {
            Command::Export(positional.next().ok_or("export needs a ROOT (a process id)")?)
        }
        Some(other) => {
            return Err(format!(
                "unknown command `{other}` (commands: list, show, verify, compact, export, repair)"
            ))
        }
    };
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument `{extra}`"));
    }
    let store = store.ok_or("no store: give --file DIR, --sqlite PATH or --store PATH")?;
    Ok(Parsed::Run { command, store })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn flags_and_commands() {
        assert_eq!(
            parse(&args("list --file d")),
            Ok(Parsed::Run { command: Command::List, store: StoreArg::File("d".into()) })
        );
        assert_eq!(
            parse(&args("--sqlite=x.db show process:a")),
            Ok(Parsed::Run {
                command: Command::Show("process:a".into()),
                store: StoreArg::Sqlite("x.db".into())
            })
        );
        assert_eq!(parse(&args("--help")), Ok(Parsed::Help));
        assert_eq!(
            parse(&args("repair --file d")),
            Ok(Parsed::Run { command: Command::Repair, store: StoreArg::File("d".into()) })
        );
        assert!(Command::Repair.writes() && Command::Compact.writes());
        assert!(![Command::List, Command::Verify, Command::Show("x".into()), Command::Export("x".into())].iter().any(Command::writes));
    }

    #[test]
    fn unknown_flags_are_refused_before_anything_else() {
        let e = parse(&args("frobnicate --verbose")).unwrap_err();
        assert!(e.starts_with("unknown flag `--verbose`"), "{e}");
        assert!(parse(&args("list -v --file d")).unwrap_err().contains("unknown flag `-v`"));
        assert!(parse(&args("frobnicate --file d")).unwrap_err().contains("unknown command"));
        assert!(parse(&args("show --file d")).unwrap_err().contains("needs a ROOT"));
        assert!(parse(&args("list")).unwrap_err().contains("no store"));
        assert!(parse(&args("list --file")).unwrap_err().contains("needs a path"));
        assert!(parse(&args("list --file a --sqlite b")).unwrap_err().contains("one store"));
        assert!(parse(&args("list x --file a")).unwrap_err().contains("unexpected argument"));
    }
}
