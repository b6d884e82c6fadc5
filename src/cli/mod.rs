//! The command line: GNU's `--help`/`--version` and ddx's own `--options`,
//! then dd operands, then the wrong-device guard (before anything is
//! opened), then the copy, its statistics (and `--verbose` report) and the
//! exit status.
//!
//! Options are scanned by hand rather than with clap because dd's operands
//! are `key=value` words that must reach the operand grammar untouched and
//! in order, and because option errors must read exactly as GNU getopt's.

pub mod docs;
mod extras;
pub mod options;
pub mod reference;
mod safety;
mod strategy;
mod verbose;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::sync::Arc;

use crate::engine::{self, Counters, Events, RunResult};
use crate::operands::{self, StatusLevel};
use crate::progress::reporter::{emit, stderr_failed};
use crate::progress::{Reporter, Ticker};
use crate::sys::signals::SignalPipes;

pub use options::{help_text, version_text};

/// GNU dd's exit status for every failure.
pub const EXIT_FAILURE: i32 = 1;

/// Run ddx with `args` (argv, program name first); returns the exit status.
pub fn run(args: Vec<OsString>, signals: SignalPipes) -> i32 {
    let program = program_name(args.first());
    if args.get(1).is_some_and(|a| a == "bench") {
        return crate::bench::run(&program, &args[2..], signals);
    }
    let words = &args[args.len().min(1)..];
    let (operand_words, settings) = match options::scan(words) {
        options::Scan::Operands(words, settings) => (words, settings),
        options::Scan::Help => return print_stdout(&program, &help_text(&program)),
        options::Scan::Version => return print_stdout(&program, &version_text()),
        options::Scan::Error(message) => {
            emit(format!("{program}: {message}\n{}", try_help(&program)).as_bytes());
            return EXIT_FAILURE;
        }
    };

    let parsed = operands::parse(&operand_words);
    for warning in &parsed.warnings {
        emit(format!("{program}: {warning}\n").as_bytes());
    }
    let mut plan = match parsed.plan {
        Ok(plan) => plan,
        Err(error) => {
            let hint = if error.suggests_help() {
                try_help(&program)
            } else {
                String::new()
            };
            emit(format!("{program}: {error}\n{hint}").as_bytes());
            return EXIT_FAILURE;
        }
    };

    // ddx's own options, checked before anything is opened.
    let extras = match extras::prepare(&mut plan, &settings) {
        Ok(extras) => extras,
        Err(message) => {
            emit(format!("{program}: {message}\n").as_bytes());
            return EXIT_FAILURE;
        }
    };

    // Checked before anything is opened, as the operands are.
    let progress_stream = match settings.progress_fd {
        Some(fd) => match safety::progress_stream(fd, &plan) {
            Ok(stream) => Some((stream, fd)),
            Err(message) => {
                emit(format!("{program}: {message}\n").as_bytes());
                return EXIT_FAILURE;
            }
        },
        None => None,
    };
    if let Err(message) = safety::guard(&program, &plan, settings.force, &signals) {
        emit(format!("{program}: {message}\n").as_bytes());
        return EXIT_FAILURE;
    }

    let counters = Arc::new(Counters::default());
    let reporter = Arc::new(Reporter::new(&program, plan.status, Arc::clone(&counters)));
    let live_line = plan.status == StatusLevel::Progress && {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal()
    };
    if live_line {
        reporter.use_live_line();
    }
    let json = progress_stream.is_some();
    if let Some((stream, fd)) = progress_stream {
        reporter.use_json(stream, fd);
    }
    let ticker = Ticker::start(
        Arc::clone(&reporter),
        signals,
        plan.status == StatusLevel::Progress || json,
        plan.status == StatusLevel::Progress && !live_line,
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
        input,
        mut output,
        warnings,
    } = endpoints;
    for warning in warnings {
        reporter.diagnostic(warning);
    }
    let (plan, block_choice) = resolve_auto_block_size(plan, &input, &output);
    reporter.set_total(verbose::expected_bytes(&plan, &input));
    reporter.start_clock();
    if extras.positional() {
        let command_line = args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let status =
            extras.run_positional(&plan, input, output, &counters, &reporter, command_line);
        ticker.stop();
        return status;
    }
    let (tap, hash_job) = match extras.start_hashing() {
        Ok(Some((tap, job))) => (Some(tap), Some(job)),
        Ok(None) => (None, None),
        Err(message) => {
            ticker.stop();
            reporter.message(message);
            return EXIT_FAILURE;
        }
    };

    let (backend, shaping) = strategy::choose(&settings, &plan, &input, &output, tap);
    let report = settings.verbose.then(|| {
        verbose::Report::new(&settings, backend, &shaping, &plan)
            .with_block_choice(block_choice.as_ref())
    });
    let plan = Arc::new(plan);
    let input_start = input.offset;
    let (result, input) = engine::backend::run(
        backend,
        shaping,
        Arc::clone(&plan),
        input,
        &mut output,
        &counters,
        reporter.as_ref(),
    );
    ticker.stop();
    let (failed, stopped_short) = match result {
        RunResult::Died => return EXIT_FAILURE,
        RunResult::Finished(outcome) => (outcome.failed, outcome.stopped_short),
    };
    if let (true, Some(input)) = (stopped_short, &input) {
        let counted = counters.snapshot();
        input.give_back_read_ahead(
            &plan,
            input_start,
            counted.records_in_full + counted.records_in_partial,
        );
    }

    // GNU closes both ends before the statistics; a close error ends it there.
    if let Some(input) = input {
        if let Err(errno) = input.handle.close() {
            reporter.diagnostic(engine::Diagnostic::ClosingInput {
                file: input.name,
                errno,
            });
            return EXIT_FAILURE;
        }
    }
    if let Err(errno) = output.handle.close() {
        reporter.diagnostic(engine::Diagnostic::ClosingOutput {
            file: output.name,
            errno,
        });
        return EXIT_FAILURE;
    }
    reporter.finish();
    // The statistics are out; a signal now ends the read-back at once.
    crate::sys::signals::default_from_now_on();
    let failed = extras.finish(hash_job, &plan, &reporter, failed) || failed;
    if let Some(report) = report {
        report.print(&reporter, &counters);
    }
    if failed || stderr_failed() {
        EXIT_FAILURE
    } else {
        0
    }
}

/// bs=auto: measure now that both ends are open (the probe only reads).
fn resolve_auto_block_size(
    plan: operands::CopyPlan,
    input: &engine::Input,
    output: &engine::Output,
) -> (operands::CopyPlan, Option<engine::auto_block::Choice>) {
    use operands::IoFlags;
    if !plan.auto_block_size {
        return (plan, None);
    }
    let here = crate::sys::file::current_offset(input.handle.as_fd()).unwrap_or(0);
    let skip = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let choice = engine::auto_block::choose(
        engine::auto_block::End {
            fd: input.handle.as_fd(),
            direct: plan.input_flags.contains(IoFlags::DIRECT),
        },
        engine::auto_block::End {
            fd: output.handle.as_fd(),
            direct: plan.output_flags.contains(IoFlags::DIRECT),
        },
        here.max(0) as u64 + skip,
    );
    (plan.with_block_size(choice.block_size), Some(choice))
}

fn try_help(program: &str) -> String {
    format!("Try '{program} --help' for more information.\n")
}

/// --help/--version output; a failed write is an error, as in GNU.
fn print_stdout(program: &str, text: &str) -> i32 {
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
fn program_name(arg0: Option<&OsString>) -> String {
    arg0.map(|a| a.to_string_lossy().into_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "ddx".to_owned())
}
