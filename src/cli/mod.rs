//! The command line: GNU's `--help`/`--version` and ddx's own `--options`,
//! then dd operands, into a [`Request`]; the copy driver runs it, and its
//! result becomes the exit status, printed here if anything is left to
//! say. (`ddx bench` never comes here: `main` hands it its own arguments;
//! it borrows this module's getopt rules, help layout and `--version`.)
//!
//! Options are scanned by hand rather than with clap because dd's operands
//! are `key=value` words that must reach the operand grammar untouched and
//! in order, and because option errors must read exactly as GNU getopt's.

pub mod gc;
pub mod getopt;
pub mod options;
pub mod reference;

use std::ffi::OsString;

use crate::copy::{self, Context};
use crate::operands;
use crate::progress::reporter::emit;
use crate::request::Request;
use crate::sys::signals::SignalPipes;

pub use options::{help_text, version_text};

/// GNU dd's exit status for every failure.
pub const EXIT_FAILURE: i32 = 1;

/// A rescue that ran every phase and pass it was given, with bad areas
/// left (listed, and '-' in the map): it did its job, and a script can
/// tell that from a failure (1) and from a full recovery (0).
pub const EXIT_BAD_AREAS_REMAIN: i32 = 2;

/// Run ddx with `args` (argv, program name first); returns the exit status.
pub fn run(args: Vec<OsString>, signals: SignalPipes) -> i32 {
    let program = program_name(args.first());
    let request = match parse(&program, &args) {
        Ok(Parsed::Copy(request)) => *request,
        Ok(Parsed::Help) => return print_stdout(&program, &help_text(&program)),
        Ok(Parsed::Version) => return print_stdout(&program, &version_text()),
        Err(text) => {
            emit(text.as_bytes());
            return EXIT_FAILURE;
        }
    };
    let context = Context {
        program: program.clone(),
        signals,
        command_line: args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
    };
    match copy::run(request, context) {
        Ok(copy::Finished::Complete) => 0,
        Ok(copy::Finished::BadAreasRemain) => EXIT_BAD_AREAS_REMAIN,
        Err(failure) => {
            for line in failure.lines() {
                emit(format!("{program}: {line}\n").as_bytes());
            }
            EXIT_FAILURE
        }
    }
}

/// What the words ask for.
enum Parsed {
    Copy(Box<Request>),
    Help,
    Version,
}

/// Options, then operands (their warnings printed as they come); Err is
/// the whole text to print, GNU's "Try --help" line included where GNU
/// gives it.
fn parse(program: &str, args: &[OsString]) -> Result<Parsed, String> {
    let words = &args[args.len().min(1)..];
    let (operand_words, settings) = match options::scan(words) {
        options::Scan::Operands(words, settings) => (words, settings),
        options::Scan::Help => return Ok(Parsed::Help),
        options::Scan::Version => return Ok(Parsed::Version),
        options::Scan::Error(message) => {
            return Err(format!("{program}: {message}\n{}", try_help(program)))
        }
    };
    let parsed = operands::parse(&operand_words);
    for warning in &parsed.warnings {
        emit(format!("{program}: {warning}\n").as_bytes());
    }
    match parsed.plan {
        Ok(plan) => Ok(Parsed::Copy(Box::new(Request {
            plan,
            settings: *settings,
        }))),
        Err(error) => {
            let hint = if error.suggests_help() {
                try_help(program)
            } else {
                String::new()
            };
            Err(format!("{program}: {error}\n{hint}"))
        }
    }
}

fn try_help(program: &str) -> String {
    format!("Try '{program} --help' for more information.\n")
}

/// --help/--version output; a failed write is an error, as in GNU (also
/// `ddx bench --help`, whose `program` is "ddx bench").
pub(crate) fn print_stdout(program: &str, text: &str) -> i32 {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => 0,
        Err(e) => {
            let errno = e.raw_os_error().map(crate::sys::Errno::from_raw_os_error);
            let reason = errno.map_or_else(|| e.to_string(), crate::sys::errno_text);
            emit(format!("{program}: write error: {reason}\n").as_bytes());
            EXIT_FAILURE
        }
    }
}

/// GNU names itself in messages by argv[0] exactly as it was invoked
/// ("/usr/bin/dd: ..."), so ddx does the same.
pub fn program_name(arg0: Option<&OsString>) -> String {
    arg0.map(|a| a.to_string_lossy().into_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "ddx".to_owned())
}
