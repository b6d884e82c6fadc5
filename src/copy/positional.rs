//! Running a copy by position (`--rescue`, `--map`, `--resume`): the map
//! to start from, the rescue loop on the opened ends, the output synced
//! as conv=fsync/fdatasync asks, and what it has to say after GNU's
//! statistics (every bad range, a map that could not be saved).

use std::path::Path;

use crate::ends::{Input, Output};
use crate::engine::{Diagnostic, Events};
use crate::integrity::Tap;
use crate::operands::Conv;
use crate::progress::Reporter;
use crate::rescue::{self, mapfile::Map, Ended, Job, Request};
use crate::text::quote::quote_file;

use super::{Copying, Failure};

/// What is left to say once the statistics are out.
pub struct Aftermath {
    input_name: Vec<u8>,
    report: rescue::RescueOutcome,
    request: Request,
}

/// Run the copy; `Ok(failed)` with the aftermath, or a failure that ends
/// ddx before the statistics.
pub fn run(
    request: &Request,
    resuming: bool,
    copying: &Copying<'_>,
    input: &mut Input,
    output: &mut Output,
    tap: Option<Tap>,
) -> Result<(bool, Aftermath), Failure> {
    let Copying {
        plan,
        counters,
        reporter,
        command_line,
    } = *copying;
    let size = rescue::input_size(input.end.as_mut()).map_err(|errno| {
        Failure::from(Diagnostic::CannotFstat {
            file: input.name.clone(),
            errno,
        })
    })?;
    let start = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let mut end = size.max(start);
    if plan.has_count() {
        let count = plan
            .count
            .records
            .saturating_mul(plan.input_block_size as u64)
            .saturating_add(plan.count.bytes);
        end = end.min(start.saturating_add(count));
    }
    let map = match (&request.map_path, resuming) {
        (Some(path), true) => std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| Map::parse(&text, start, end).map_err(|e| e.to_string()))
            .map_err(|why| {
                reporter.message(format!("--resume: map '{}': {why}", path.display()));
                Failure::Reported
            })?,
        _ => Map::new(start, end),
    };
    if let (Some(path), true) = (&request.map_path, resuming) {
        if plan.status != crate::operands::StatusLevel::None {
            reporter.message(rescue::resume_summary(&map, path));
        }
    }
    let sector = request
        .sector
        .unwrap_or_else(|| rescue::logical_sector(input.end.as_ref()));
    let input_path = plan
        .input
        .as_deref()
        .filter(|_| input.end.fd().is_some() && input.end.kind().positional());
    let job = Job {
        input: input.end.as_mut(),
        input_path,
        output: output.end.as_mut(),
        start,
        end,
        output_start: plan.seek.total_bytes(plan.output_block_size).unwrap_or(0),
        chunk: plan.input_block_size,
        sector,
        rescue: request.rescue,
        pad_failed_chunks: plan.conv.contains(Conv::NOERROR),
        map,
        map_path: request.map_path.clone(),
        command_line: command_line.to_owned(),
        tap,
    };
    let report = rescue::run(job, counters, reporter).map_err(|_| {
        Failure::from(Diagnostic::NoMemory {
            buffer: crate::engine::diagnostic::BufferKind::Input,
            size: plan.input_block_size,
        })
    })?;
    // Where an error stopped the copy: GNU's line, with what the end said
    // and where the copy stands.
    let resume = if request.map_path.is_some() {
        "continue with --resume"
    } else {
        "continue with --resume (and --map=FILE next time)"
    };
    let stopped = match report.ended {
        Ended::Complete => None,
        Ended::ReadError { offset, errno } => {
            let said = input.end.take_detail();
            Some(
                Diagnostic::ReadError {
                    file: input.name.clone(),
                    errno,
                }
                .explained(Some(where_it_stands(
                    said,
                    &format!("stopped at input offset {offset}; {resume}"),
                ))),
            )
        }
        Ended::WriteError { offset, errno } => {
            let said = output.end.take_detail();
            Some(
                Diagnostic::ErrorWriting {
                    file: output.name.clone(),
                    errno,
                }
                .explained(Some(where_it_stands(
                    said,
                    &format!(
                        "stopped at output offset {offset}, everything before it is written; \
                         {resume}"
                    ),
                ))),
            )
        }
    };
    let mut failed = stopped.is_some();
    if let Some(diagnostic) = stopped {
        reporter.diagnostic(diagnostic);
    }
    if plan.conv.intersects(Conv::FSYNC | Conv::FDATASYNC) {
        let data_only = !plan.conv.contains(Conv::FSYNC);
        if let Err(errno) = output.end.sync(data_only) {
            reporter.diagnostic(Diagnostic::FsyncFailed {
                file: output.name.clone(),
                errno,
            });
            failed = true;
        }
    }
    Ok((
        failed,
        Aftermath {
            input_name: input.name.clone(),
            report,
            request: request.clone(),
        },
    ))
}

/// What the end said (if anything) and where the copy stands, as one
/// detail.
fn where_it_stands(said: Option<String>, stands: &str) -> String {
    match said {
        Some(said) => format!("{said}; {stands}"),
        None => stands.to_owned(),
    }
}

impl Aftermath {
    /// After the statistics: every bad range, a map that could not be
    /// saved; a finished checkpoint is removed. Returns whether any of it
    /// makes the copy a failure.
    pub fn report(self, reporter: &Reporter) -> bool {
        let Aftermath {
            input_name,
            report,
            request,
        } = self;
        let mut failed = false;
        let bad = report.map.bad();
        for block in &bad {
            reporter.message(format!(
                "{}: bad range at offset {}, {} bytes (zeros in the output)",
                quote_file(&input_name),
                block.pos,
                block.size
            ));
        }
        if !bad.is_empty() {
            let lost: u64 = bad.iter().map(|b| b.size).sum();
            reporter.message(format!(
                "{}: {} bad range{}, {lost} bytes unreadable{}",
                quote_file(&input_name),
                bad.len(),
                if bad.len() == 1 { "" } else { "s" },
                if report.newly_bad < lost {
                    " (some found by an earlier run)"
                } else {
                    ""
                }
            ));
            failed = true;
        }
        if let Some((path, why)) = &report.map_error {
            reporter.message(format!("cannot save the map '{}': {why}", path.display()));
            failed = true;
        }
        let complete = matches!(report.ended, Ended::Complete);
        if complete && bad.is_empty() && request.map_is_checkpoint && report.map_error.is_none() {
            if let Some(path) = &request.map_path {
                let _ = std::fs::remove_file(Path::new(path));
            }
        }
        failed
    }
}
