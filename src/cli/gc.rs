//! `ddx gc`: a chunk store's garbage collection, as casync's `gc`: every
//! chunk no index still names is removed. Its options are one table
//! ([`OPTIONS`]) that `--help` and the man page's GC section are made
//! from, parsed with the copy's getopt rules.
//!
//! Every index is read and checked before anything is removed: an index
//! that cannot be read stops the collection, since the chunks only it
//! names would go. Chunks stored in the last `--min-age` seconds stay
//! whatever the indexes say, for a backup adding them now has not written
//! its index yet.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::casync::Index;
use crate::cli::getopt;
use crate::cli::options::{OptionSpec, Values};
use crate::progress::reporter::emit;
use crate::store::{collect, Location, Store};
use crate::text::human::{human, Base};
use crate::text::quote::{quote, quote_file};
use crate::text::wrap::wrap;

/// Every `ddx gc` option, in the order `--help` lists them.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec::valued(
        "store",
        "STORE",
        Values::File,
        "the chunk store to collect: a directory or s3://BUCKET[/PREFIX] (required)",
    ),
    OptionSpec::valued(
        "min-age",
        "SECONDS",
        Values::Free,
        "keep every chunk stored less than SECONDS ago, named or not (default 3600): a \
         backup adds its chunks before it writes the index that names them",
    ),
    OptionSpec::switch("dry-run", "say what would be removed, and remove nothing"),
    OptionSpec::switch("help", "display this help and exit"),
];

pub const SUMMARY: &str = "Remove from a chunk store every chunk that none of the INDEX \
files names (each a casync blob index: a file, an http(s):// or s3:// URL), as casync gc \
does. Every index is read and checked first; one that cannot be read removes nothing. \
Then one line says what the store keeps and what went.";

pub const EXIT: &str = "Exit status: 0 when the store was collected (or, with --dry-run, \
looked at); 1 on any error.";

/// What the words after "gc" ask for.
#[derive(Debug, PartialEq, Eq)]
struct GcArgs {
    store: PathBuf,
    min_age: Duration,
    dry_run: bool,
    indexes: Vec<PathBuf>,
}

enum Parsed {
    Run(GcArgs),
    Help,
    Error(String),
}

fn parse(words: &[OsString]) -> Parsed {
    let mut store = None;
    let mut min_age = Duration::from_secs(3600);
    let mut dry_run = false;
    let mut indexes = Vec::new();
    let mut options_ended = false;
    for word in words {
        let bytes = word.as_bytes();
        if options_ended || bytes.len() < 2 || bytes[0] != b'-' {
            indexes.push(PathBuf::from(word));
            continue;
        }
        if bytes == b"--" {
            options_ended = true;
            continue;
        }
        let Some(long) = bytes.strip_prefix(b"--") else {
            let letter = String::from_utf8_lossy(&bytes[1..2]).into_owned();
            return Parsed::Error(format!("invalid option -- '{letter}'"));
        };
        let text = String::from_utf8_lossy(long);
        let (option, value) = match getopt::find(OPTIONS, |o| o, &text) {
            Ok(found) => found,
            Err(message) => return Parsed::Error(message),
        };
        let name = option.name;
        match (option.value, value) {
            (None, Some(_)) => {
                return Parsed::Error(format!("option '--{name}' doesn't allow an argument"))
            }
            (Some(_), None) => {
                return Parsed::Error(format!(
                    "option '--{name}' requires an argument (as --{name}=VALUE)"
                ))
            }
            _ => {}
        }
        let value = value.unwrap_or("");
        match name {
            "help" => return Parsed::Help,
            "dry-run" => dry_run = true,
            "store" if value.is_empty() => {
                return Parsed::Error(
                    "invalid argument '' for '--store': a directory or a URL".into(),
                )
            }
            "store" => store = Some(PathBuf::from(value)),
            "min-age" => match value.parse::<u64>() {
                Ok(seconds) => min_age = Duration::from_secs(seconds),
                Err(_) => {
                    return Parsed::Error(format!(
                        "invalid argument {} for '--min-age': a number of seconds",
                        quote(value.as_bytes())
                    ))
                }
            },
            other => unreachable!("every gc option is handled: --{other}"),
        }
    }
    let Some(store) = store else {
        return Parsed::Error("--store=STORE is required: the store to collect".into());
    };
    if indexes.is_empty() {
        return Parsed::Error(
            "name at least one INDEX: with none, every chunk of the store would go".into(),
        );
    }
    Parsed::Run(GcArgs {
        store,
        min_age,
        dry_run,
        indexes,
    })
}

/// `ddx gc --help`.
pub fn help_text(program: &str) -> String {
    let mut out = format!("Usage: {program} gc --store=STORE [OPTION]... INDEX...\n");
    out.push_str(&wrap("", SUMMARY, 0, 78));
    out.push_str("\nOptions (a value is given as --option=VALUE):\n");
    out.push_str(&crate::cli::options::layout(OPTIONS));
    out.push('\n');
    out.push_str(&wrap("", EXIT, 0, 78));
    out
}

/// Run `ddx gc` with the words after "gc"; the exit status.
pub fn run(program: &str, words: &[OsString]) -> i32 {
    let args = match parse(words) {
        Parsed::Run(args) => args,
        Parsed::Help => return super::print_stdout(program, &help_text(program)),
        Parsed::Error(message) => {
            emit(
                format!(
                    "{program} gc: {message}\nTry '{program} gc --help' for more information.\n"
                )
                .as_bytes(),
            );
            return super::EXIT_FAILURE;
        }
    };
    match collect_store(&args) {
        Ok(line) => {
            emit(format!("{program} gc: {line}\n").as_bytes());
            0
        }
        Err(line) => {
            emit(format!("{program} gc: {line}\n").as_bytes());
            super::EXIT_FAILURE
        }
    }
}

/// Read every index, then collect; the line to print.
fn collect_store(args: &GcArgs) -> Result<String, String> {
    let location = Location::parse(&args.store).map_err(|e| format!("--store: {e}"))?;
    let shown = location.shown();
    let mut keep = HashSet::new();
    for path in &args.indexes {
        let name = quote_file(&crate::ends::uri::shown(path));
        let bytes = read_index(path)
            .map_err(|why| format!("cannot read the index {name}: {why}; nothing was removed"))?;
        let index = Index::parse(&bytes).map_err(|e| {
            format!("{name} is not a usable casync blob index: {e}; nothing was removed")
        })?;
        keep.extend(index.chunks.iter().map(|c| c.id));
    }
    let store = Store::open(location, !args.dry_run)
        .map_err(|e| format!("--store={shown}: {}", e.detail))?;
    let done = collect(&store, &keep, args.min_age, args.dry_run)
        .map_err(|e| format!("--store={shown}: {}", e.detail))?;
    let show = |bytes: u64| human(bytes, Base::Iec, 1, 1);
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut line = format!(
        "{shown}: {} chunks ({}) named by {} {}; {verb} {} chunks ({})",
        done.named.chunks,
        show(done.named.bytes),
        args.indexes.len(),
        if args.indexes.len() == 1 {
            "index"
        } else {
            "indexes"
        },
        done.removed.chunks,
        show(done.removed.bytes),
    );
    if done.recent.chunks > 0 {
        line.push_str(&format!(
            "; kept {} chunks ({}) named by none but stored in the last {} s",
            done.recent.chunks,
            show(done.recent.bytes),
            args.min_age.as_secs()
        ));
    }
    Ok(line)
}

/// An index's bytes: a file, or an object (`s3://`, `https://`).
fn read_index(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let plan = crate::operands::parse::<&str>(&[])
        .plan
        .map_err(|e| e.to_string())?;
    let plan = crate::operands::CopyPlan {
        input: Some(path.to_owned()),
        ..plan
    };
    let mut input = crate::ends::open::open_input(
        &plan,
        crate::request::Settings::default().passthrough().into(),
    )
    .map_err(|e| e.diagnostic.to_string())?;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match input.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(crate::sys::Errno::INTR) => {}
            Err(errno) => {
                return Err(input
                    .stream
                    .take_detail()
                    .unwrap_or_else(|| crate::sys::errno_text(errno)))
            }
        }
    }
    let _ = input.stream.close();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn gc_needs_a_store_and_an_index() {
        assert!(matches!(parse(&words(&["a.caibx"])), Parsed::Error(m) if m.contains("--store")));
        assert!(matches!(parse(&words(&["--store=s"])), Parsed::Error(m) if m.contains("INDEX")));
        let Parsed::Run(args) = parse(&words(&[
            "--sto=s",
            "a.caibx",
            "--dry",
            "--min-age=0",
            "b.caibx",
        ])) else {
            panic!("not parsed");
        };
        assert_eq!(
            args,
            GcArgs {
                store: "s".into(),
                min_age: Duration::ZERO,
                dry_run: true,
                indexes: vec!["a.caibx".into(), "b.caibx".into()],
            }
        );
        assert!(matches!(
            parse(&words(&["--store=s", "--min-age=x", "a"])),
            Parsed::Error(_)
        ));
        assert!(matches!(parse(&words(&["--help"])), Parsed::Help));
    }

    #[test]
    fn help_is_within_78_columns() {
        for line in help_text("ddx").lines() {
            assert!(line.len() <= 78, "{line:?}");
        }
    }
}
