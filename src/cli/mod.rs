//! The command line: GNU's `--help`/`--version` and ddx's own `--options`,
//! then dd operands, then the copy, its statistics and the exit status.
//!
//! Options are scanned by hand rather than with clap because dd's operands
//! are `key=value` words that must reach the operand grammar untouched and
//! in order, and because option errors must read exactly as GNU getopt's.

mod options;

use std::ffi::OsString;
use std::sync::Arc;

use crate::engine::{self, Counters, Events, RunResult, SyncCopy};
use crate::operands::{self, StatusLevel};
use crate::progress::{Reporter, Ticker};
use crate::sys::signals::SignalPipes;

pub use options::{help_text, version_text};

/// GNU dd's exit status for every failure.
pub const EXIT_FAILURE: i32 = 1;

/// Run ddx with `args` (argv, program name first); returns the exit status.
pub fn run(args: Vec<OsString>, signals: SignalPipes) -> i32 {
    let program = program_name(args.first());
    let words = &args[args.len().min(1)..];
    let operand_words = match options::scan(words) {
        options::Scan::Operands(words) => words,
        options::Scan::Help => {
            print!("{}", help_text(&program));
            return 0;
        }
        options::Scan::Version => {
            print!("{}", version_text());
            return 0;
        }
        options::Scan::Error(message) => {
            eprintln!("{program}: {message}");
            eprintln!("Try '{program} --help' for more information.");
            return EXIT_FAILURE;
        }
    };

    let parsed = operands::parse(&operand_words);
    for warning in &parsed.warnings {
        eprintln!("{program}: {warning}");
    }
    let plan = match parsed.plan {
        Ok(plan) => plan,
        Err(error) => {
            eprintln!("{program}: {error}");
            if error.suggests_help() {
                eprintln!("Try '{program} --help' for more information.");
            }
            return EXIT_FAILURE;
        }
    };

    let counters = Arc::new(Counters::default());
    let reporter = Arc::new(Reporter::new(&program, plan.status, Arc::clone(&counters)));
    let ticker = Ticker::start(
        Arc::clone(&reporter),
        signals,
        plan.status == StatusLevel::Progress,
    );

    let endpoints = match engine::endpoints::open(&plan) {
        Ok(endpoints) => endpoints,
        Err(diagnostic) => {
            ticker.stop();
            reporter.diagnostic(diagnostic);
            return EXIT_FAILURE;
        }
    };
    let engine::Endpoints {
        mut input,
        mut output,
        warnings,
    } = endpoints;
    for warning in warnings {
        reporter.diagnostic(warning);
    }
    reporter.start_clock();

    let result = SyncCopy::new(&plan, &mut input, &mut output, &counters, reporter.as_ref()).run();
    ticker.stop();
    let failed = match result {
        RunResult::Died => return EXIT_FAILURE,
        RunResult::Finished(outcome) | RunResult::Quit(outcome) => outcome.failed,
    };

    // GNU closes both ends before the statistics; a close error ends it there.
    if let Err(errno) = input.handle.close() {
        reporter.diagnostic(engine::Diagnostic::ClosingInput {
            file: input.name,
            errno,
        });
        return EXIT_FAILURE;
    }
    if let Err(errno) = output.handle.close() {
        reporter.diagnostic(engine::Diagnostic::ClosingOutput {
            file: output.name,
            errno,
        });
        return EXIT_FAILURE;
    }
    reporter.statistics();
    if failed {
        EXIT_FAILURE
    } else {
        0
    }
}

/// GNU names itself after argv[0]'s last component in messages.
fn program_name(arg0: Option<&OsString>) -> String {
    arg0.map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ddx".to_owned())
}
