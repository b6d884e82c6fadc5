//! Running a copy by position (`--rescue`, `--map`, `--resume`): the map
//! to start from, the rescue loop on the opened ends (telling the
//! progress line where it stands, and `--verbose` each phase), the output
//! synced as conv=fsync/fdatasync asks, and what it has to say after
//! GNU's statistics (every bad range, a map that could not be saved) and
//! how it ends: a rescue that ran its course with bad areas left exits 2.

use std::path::Path;
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, Events};
use crate::engine::stream::{Input, Output};
use crate::integrity::Tap;
use crate::operands::Conv;
use crate::progress::Reporter;
use crate::rescue::{self, mapfile::Map, Ended, Job, PhaseStart, PositionalCopy, Standing};
use crate::text::quote::quote_file;

use super::{Copying, Failure};

/// The bad ranges named one by one after the statistics; the rest are
/// summed up in one line (the map lists them all).
const SHOWN_BAD_RANGES: usize = 5;

/// What is left to say once the statistics are out.
pub struct Aftermath {
    input_name: Vec<u8>,
    /// The input's logical block, where it is a disk addressed by block
    /// number (a generic node): bad ranges are named by LBA too.
    block: Option<u64>,
    report: rescue::RescueOutcome,
    request: PositionalCopy,
}

/// How a copy by position ends, once everything is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Everything copied.
    Complete,
    /// A rescue ran every phase and pass, and bad areas remain (exit 2).
    BadAreasRemain,
    /// Anything else that went wrong (exit 1).
    Failed,
}

/// The progress line's view of a rescue.
struct RescueProgress(Arc<Standing>);

impl crate::progress::RescueStanding for RescueProgress {
    fn standing(&self) -> (Option<String>, u64) {
        (self.0.phase().map(|p| p.to_string()), self.0.failed())
    }
}

/// Run the copy; `Ok(failed)` with the aftermath, or a failure that ends
/// ddx before the statistics. With `verbose`, a rescue says each phase
/// as it starts.
pub fn run(
    request: &PositionalCopy,
    resuming: bool,
    copying: &Copying<'_>,
    input: &mut Input,
    output: &mut Output,
    tap: Option<Tap>,
    verbose: bool,
) -> Result<(bool, Aftermath), Failure> {
    let Copying {
        plan,
        counters,
        reporter,
        command_line,
        input_record,
    } = *copying;
    let size = rescue::input_size(input.stream.as_mut()).map_err(|errno| {
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
            reporter.message(rescue::resume_summary(&map, path, request.retry_passes > 0));
        }
        // The live line and the JSON records go on from where the map
        // stands, as its summary says, to the whole extent.
        reporter.set_resumed(rescue::resumed_bytes(&map, request.retry_passes > 0));
    }
    let sector = request
        .sector
        .unwrap_or_else(|| rescue::logical_sector(input.stream.as_ref()));
    let input_path = plan
        .input
        .as_deref()
        .filter(|_| input.stream.fd().is_some() && input.stream.capabilities().reads_at);
    let output_path = plan
        .output
        .as_deref()
        .filter(|_| output.stream.fd().is_some() && output.stream.capabilities().writes_at);
    let standing = Arc::new(Standing::default());
    if request.rescue {
        reporter.set_rescue(Arc::new(RescueProgress(Arc::clone(&standing))));
    }
    let tell = |start: &PhaseStart| reporter.message(start);
    // What identifies the copy's ends, kept in the map with every save.
    let notes = input_record.map_or_else(String::new, |input| {
        rescue::identity::Recorded::notes(input, Some(&super::resumed::output_record(plan, output)))
    });
    let job = Job {
        input: input.stream.as_mut(),
        input_path,
        output: output.stream.as_mut(),
        output_path,
        start,
        end,
        output_start: plan.seek.total_bytes(plan.output_block_size).unwrap_or(0),
        chunk: rescue::request_size(plan, request.rescue),
        record: plan.input_block_size,
        sector,
        rescue: request.rescue,
        retry_passes: request.retry_passes,
        pad_failed_chunks: plan.conv.contains(Conv::NOERROR),
        map,
        map_path: request.map_path.clone(),
        command_line: command_line.to_owned(),
        notes,
        tap,
        standing,
        on_phase: (verbose && request.rescue).then_some(&tell as &dyn Fn(&PhaseStart)),
    };
    let report = rescue::run(job, counters, reporter).map_err(|_| {
        Failure::from(Diagnostic::NoMemory {
            buffer: crate::diagnostic::BufferKind::Input,
            size: rescue::request_size(plan, request.rescue),
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
            let said = input.stream.take_detail();
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
            let said = output.stream.take_detail();
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
        if let Err(errno) = output.stream.sync(data_only) {
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
            block: input.stream.logical_block().map(u64::from),
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
    /// For `--verbose`: the phases a rescue ran, the reads that failed,
    /// and what is bad now and was before.
    pub fn how_it_ran(&self) -> Option<String> {
        if !self.request.rescue {
            return None;
        }
        let report = &self.report;
        let mut copying = Vec::new();
        let mut phases = Vec::new();
        let mut retries = None;
        for phase in &report.phases {
            match phase {
                rescue::Phase::Copying { pass } => copying.push(pass.to_string()),
                rescue::Phase::Trimming => phases.push("trimming".to_owned()),
                rescue::Phase::Scraping => phases.push("scraping".to_owned()),
                rescue::Phase::Retrying { pass, of } => retries = Some((*pass, *of)),
            }
        }
        if !copying.is_empty() {
            let passes = if copying.len() == 1 { "pass" } else { "passes" };
            phases.insert(0, format!("copying ({passes} {})", copying.join(", ")));
        }
        if let Some((ran, of)) = retries {
            phases.push(format!("retrying ({ran} of {of} passes)"));
        }
        let ran = if phases.is_empty() {
            "nothing left to read".to_owned()
        } else {
            phases.join(", ")
        };
        Some(format!(
            "{ran}; {} reads failed; {} bytes bad at the end, {} before this run",
            report.read_errors,
            report
                .map
                .bytes_with(rescue::mapfile::BlockStatus::BadSector),
            report.bad_before
        ))
    }

    /// After the statistics: every bad range and one line on what is left
    /// bad and how to read it again, a map that could not be saved,
    /// digests that do not cover the output; a finished checkpoint is
    /// removed. Returns how the copy ends.
    pub fn report(self, reporter: &Reporter) -> Verdict {
        let Aftermath {
            input_name,
            block,
            report,
            request,
        } = self;
        let input = quote_file(&input_name);
        let mut failed = false;
        let bad = report.map.bad();
        for range in bad.iter().take(SHOWN_BAD_RANGES) {
            let lba = match block {
                Some(unit) if range.size > 0 => format!(
                    "LBA {} to {}, ",
                    range.pos / unit,
                    (range.pos + range.size - 1) / unit
                ),
                _ => String::new(),
            };
            reporter.message(format!(
                "{input}: bad range at offset {}, {} bytes ({lba}zeros in the output)",
                range.pos, range.size
            ));
        }
        if let Some(rest) = bad.get(SHOWN_BAD_RANGES..).filter(|rest| !rest.is_empty()) {
            let bytes: u64 = rest.iter().map(|b| b.size).sum();
            let listed = match &request.map_path {
                Some(path) => format!(
                    "the map {} lists them all",
                    quote_file(path.as_os_str().as_encoded_bytes())
                ),
                None => "a map (--map=FILE) would list them all".to_owned(),
            };
            reporter.message(format!(
                "{input}: and {} more bad ranges, {bytes} bytes, from offset {}; {listed}",
                rest.len(),
                rest[0].pos
            ));
        }
        if !bad.is_empty() {
            reporter.message(left_bad(&input, &bad, &request));
        }
        if let Some(why) = &report.digest_error {
            reporter.message(format!("--hash/--verify: {why}"));
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
        if failed || !complete {
            Verdict::Failed
        } else if bad.is_empty() {
            Verdict::Complete
        } else if request.rescue && report.bad_areas_remain() {
            Verdict::BadAreasRemain
        } else {
            // A copy by position that is no rescue (conv=noerror,sync):
            // GNU's exit status for read errors.
            Verdict::Failed
        }
    }
}

/// The one line after the bad ranges: how many, how many bytes, after
/// what, where the map keeps them and how to read them again.
fn left_bad(input: &str, bad: &[rescue::mapfile::Block], request: &PositionalCopy) -> String {
    let lost: u64 = bad.iter().map(|b| b.size).sum();
    let areas = if bad.len() == 1 { "area" } else { "areas" };
    let after = match (request.rescue, request.retry_passes) {
        (false, _) => "in requests of ibs, not read sector by sector".to_owned(),
        (true, 0) => "with no retry pass".to_owned(),
        (true, 1) => "after 1 retry pass".to_owned(),
        (true, n) => format!("after {n} retry passes"),
    };
    let again = "--resume --retry-passes=N reads them again";
    let where_kept = match &request.map_path {
        Some(path) => format!(
            "they are '-' in the map {}: the same command with {again}",
            quote_file(path.as_os_str().as_encoded_bytes())
        ),
        None => format!("keep a map (--map=FILE) so that {again}"),
    };
    format!(
        "{input}: {} bad {areas}, {lost} bytes unreadable {after}; {where_kept}",
        bad.len()
    )
}
