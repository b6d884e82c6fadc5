//! The command-line side of ddx's copies that go beyond dd: positional
//! copies (`--rescue`, `--map`, `--resume`) and integrity (`--hash`,
//! `--verify`). It checks these options against the operands before any
//! file is opened, runs the positional copy, and prints what they add
//! after GNU's statistics. With none of them, nothing here runs, so dd's
//! output stays GNU's.

use std::os::fd::AsFd;
use std::path::Path;

use crate::cli::options::Settings;
use crate::engine::{Counters, Diagnostic, Events, Input, Output};
use crate::integrity::verify::{self, Reference, Verdict};
use crate::integrity::{Algorithm, HashJob, Tap};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::progress::reporter::emit;
use crate::progress::Reporter;
use crate::rescue::{self, mapfile::Map, Ended, Job, Request};
use crate::text::quote::quote_file;

/// What ddx's own options ask for, checked.
#[derive(Debug, Default)]
pub struct Extras {
    positional: Option<Request>,
    resuming: bool,
    hash: Vec<Algorithm>,
    /// `--hash-file=FILE`, checked: where to write the one digest.
    hash_file: Option<std::path::PathBuf>,
    verify: bool,
}

/// Check ddx's options against the plan; a resumed copy keeps its output
/// (conv=notrunc is added). Err is the one line to print.
pub fn prepare(plan: &mut CopyPlan, settings: &Settings) -> Result<Extras, String> {
    let mut extras = Extras {
        hash: settings.hash.clone(),
        verify: settings.verify,
        ..Extras::default()
    };
    if settings.rescue || settings.map.is_some() || settings.resume {
        let request = rescue::check(
            plan,
            settings.rescue,
            settings.map.as_deref(),
            settings.resume,
            settings.sector_size,
        )?;
        extras.resuming = rescue::resuming(&request, plan)?;
        if extras.resuming {
            plan.conv |= Conv::NOTRUNC;
        }
        extras.positional = Some(request);
    } else if settings.sector_size.is_some() {
        return Err("--sector-size is the retry unit of --rescue: add --rescue".into());
    }
    if extras.resuming && (extras.verify || !extras.hash.is_empty()) {
        return Err(
            "--hash and --verify cannot be combined with resuming a copy: they would see \
             only the part copied now"
                .into(),
        );
    }
    if let Some(path) = &settings.hash_file {
        check_hash_file(plan, &extras.hash, path)?;
        extras.hash_file = Some(path.clone());
    }
    if extras.verify {
        if plan.output.is_none() {
            return Err("--verify needs of=FILE: it reads the output back".into());
        }
        if plan.output_flags.contains(IoFlags::APPEND) {
            return Err("--verify cannot be combined with oflag=append".into());
        }
    }
    if extras.verify {
        for (flag, name) in crate::operands::symbols::DATA_CONVERSIONS {
            if plan.conv.contains(*flag) {
                return Err(format!(
                    "--verify cannot be combined with conv={name}: the output is not the \
                     bytes read"
                ));
            }
        }
    }
    Ok(extras)
}

/// `--hash-file=FILE` before anything is opened: one algorithm, a digest
/// that covers the input it will name (no skip=, count= or conv=sync), a
/// name its checker can read, and a file that is neither end of the copy.
fn check_hash_file(plan: &CopyPlan, hash: &[Algorithm], path: &Path) -> Result<(), String> {
    use crate::integrity::checkfile;
    let algorithm = match hash {
        [one] => *one,
        [] => return Err("--hash-file needs --hash=ALG: the digest it holds".into()),
        _ => {
            return Err(
                "--hash-file holds one algorithm's digest, in that checker's format: \
                 give one algorithm in --hash"
                    .into(),
            )
        }
    };
    let part = if plan.skip.total_bytes(plan.input_block_size) != Some(0) {
        Some("skip=")
    } else if plan.has_count() {
        Some("count=")
    } else if plan.conv.contains(Conv::SYNC) {
        Some("conv=sync")
    } else {
        None
    };
    if let Some(operand) = part {
        return Err(format!(
            "--hash-file names the input as what its digest covers: it cannot be \
             combined with {operand}, which makes the digest cover something else"
        ));
    }
    if let Some(why) =
        checkfile::unwritable(algorithm, &checkfile::input_name(plan.input.as_deref()))
    {
        return Err(why);
    }
    let quoted = quote_file(path.as_os_str().as_encoded_bytes());
    let parent = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!("--hash-file={quoted}: no such directory"));
    }
    let same = |end: Option<&Path>| {
        end.is_some_and(|end| {
            end == path
                || matches!(
                    (rustix::fs::stat(end), rustix::fs::stat(path)),
                    (Ok(a), Ok(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino
                )
        })
    };
    if same(plan.input.as_deref()) || same(plan.output.as_deref()) {
        return Err(format!(
            "--hash-file={quoted} is an end of the copy: the digest would overwrite it"
        ));
    }
    Ok(())
}

impl Extras {
    pub fn positional(&self) -> bool {
        self.positional.is_some()
    }

    /// The hasher thread, if hashing or verifying.
    pub fn start_hashing(&self) -> Result<Option<(Tap, HashJob)>, String> {
        if self.hash.is_empty() && !self.verify {
            return Ok(None);
        }
        crate::integrity::start(&self.hash, self.verify)
            .map(Some)
            .ok_or_else(|| "--hash/--verify: cannot start the hashing thread".to_owned())
    }

    /// After the statistics: the digests (and `--hash-file`, unless the
    /// copy failed), then the read-back. Returns whether either failed.
    pub fn finish(
        &self,
        job: Option<HashJob>,
        plan: &CopyPlan,
        reporter: &Reporter,
        copy_failed: bool,
    ) -> bool {
        let Some(job) = job else {
            return false;
        };
        let (digests, chunks) = job.finish();
        let name = match &plan.input {
            Some(path) => path.display().to_string(),
            None => "-".to_owned(),
        };
        let mut text = String::new();
        for digest in &digests {
            text.push_str(&format!(
                "{}: {}  {name}\n",
                digest.algorithm.name(),
                digest.hex
            ));
        }
        emit(text.as_bytes());
        let hash_file_failed = self.write_hash_file(&digests, plan, reporter, copy_failed);
        let (Some(chunks), Some(output)) = (chunks, &plan.output) else {
            return hash_file_failed;
        };
        let output_start = plan.seek.total_bytes(plan.output_block_size).unwrap_or(0);
        let reference = plan.input.as_deref().map(|path| Reference {
            path,
            start: plan.skip.total_bytes(plan.input_block_size).unwrap_or(0),
        });
        let quoted = quote_file(output.as_os_str().as_encoded_bytes());
        match verify::verify(output, output_start, &chunks, reference) {
            Ok(Verdict::Identical { bytes }) => {
                reporter.message(format!(
                    "verify: {bytes} bytes of {quoted} read back, identical to what was written"
                ));
                hash_file_failed
            }
            Ok(Verdict::Differs { offset, exact }) => {
                if exact {
                    reporter.message(format!(
                        "verify: {quoted} differs from what was written at offset {offset}"
                    ));
                } else {
                    reporter.message(format!(
                        "verify: {quoted} differs from what was written in the MiB at \
                         offset {offset}"
                    ));
                }
                true
            }
            Err(errno) => {
                reporter.message(format!(
                    "verify: cannot read {quoted} back: {}",
                    crate::sys::errno_text(errno)
                ));
                true
            }
        }
    }

    /// `--hash-file`: the digest in its checker's format, only for a copy
    /// that succeeded (a failed one's digest is not the input's). Returns
    /// whether writing failed.
    fn write_hash_file(
        &self,
        digests: &[crate::integrity::Digest],
        plan: &CopyPlan,
        reporter: &Reporter,
        copy_failed: bool,
    ) -> bool {
        use crate::integrity::checkfile;
        let (Some(path), [digest]) = (&self.hash_file, digests) else {
            return false;
        };
        let quoted = quote_file(path.as_os_str().as_encoded_bytes());
        if copy_failed {
            reporter.message(format!(
                "--hash-file: {quoted} not written: the copy did not succeed, so its \
                 digest is not the input's"
            ));
            return false;
        }
        let name = checkfile::input_name(plan.input.as_deref());
        match checkfile::write(path, &checkfile::line(digest, &name)) {
            Ok(()) => false,
            Err(message) => {
                reporter.message(message);
                true
            }
        }
    }

    /// Run the positional copy on the opened ends; returns the exit status.
    pub fn run_positional(
        &self,
        plan: &CopyPlan,
        input: Input,
        output: Output,
        counters: &Counters,
        reporter: &Reporter,
        command_line: String,
    ) -> i32 {
        let request = self.positional.as_ref().expect("a positional copy");
        let input_path = plan.input.as_deref().unwrap_or(Path::new(""));
        let size = match rescue::input_size(input.handle.as_fd()) {
            Ok(size) => size,
            Err(errno) => {
                reporter.diagnostic(Diagnostic::CannotFstat {
                    file: input.name.clone(),
                    errno,
                });
                return super::EXIT_FAILURE;
            }
        };
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
        let map = match (&request.map_path, self.resuming) {
            (Some(path), true) => {
                let parsed = std::fs::read_to_string(path)
                    .map_err(|e| e.to_string())
                    .and_then(|text| Map::parse(&text, start, end).map_err(|e| e.to_string()));
                match parsed {
                    Ok(map) => map,
                    Err(why) => {
                        reporter.message(format!("--resume: map '{}': {why}", path.display()));
                        return super::EXIT_FAILURE;
                    }
                }
            }
            _ => Map::new(start, end),
        };
        if let (Some(path), true) = (&request.map_path, self.resuming) {
            if plan.status != crate::operands::StatusLevel::None {
                reporter.message(rescue::resume_summary(&map, path));
            }
        }
        let hashing = match self.start_hashing() {
            Ok(hashing) => hashing,
            Err(message) => {
                reporter.message(message);
                return super::EXIT_FAILURE;
            }
        };
        let (tap, hash_job) = match hashing {
            Some((tap, job)) => (Some(tap), Some(job)),
            None => (None, None),
        };
        let job = Job {
            input: input.handle.as_fd(),
            input_path,
            output: output.handle.as_fd(),
            start,
            end,
            output_start: plan.seek.total_bytes(plan.output_block_size).unwrap_or(0),
            chunk: plan.input_block_size,
            sector: request
                .sector
                .unwrap_or_else(|| rescue::logical_sector(input.handle.as_fd())),
            rescue: request.rescue,
            pad_failed_chunks: plan.conv.contains(Conv::NOERROR),
            map,
            map_path: request.map_path.clone(),
            command_line,
            tap,
        };
        let report = match rescue::run(job, counters, reporter) {
            Ok(report) => report,
            Err(_) => {
                reporter.diagnostic(Diagnostic::NoMemory {
                    buffer: crate::engine::diagnostic::BufferKind::Input,
                    size: plan.input_block_size,
                });
                return super::EXIT_FAILURE;
            }
        };
        let mut failed = false;
        match report.ended {
            Ended::Complete => {}
            Ended::ReadError { offset, errno } => {
                reporter.diagnostic(Diagnostic::ReadError {
                    file: input.name.clone(),
                    errno,
                });
                reporter.message(format!(
                    "stopped at input offset {offset}; continue with --resume{}",
                    if request.map_path.is_some() {
                        ""
                    } else {
                        " (and --map=FILE next time)"
                    }
                ));
                failed = true;
            }
            Ended::WriteError { offset, errno } => {
                reporter.diagnostic(Diagnostic::ErrorWriting {
                    file: output.name.clone(),
                    errno,
                });
                reporter.message(format!(
                    "{}: stopped at offset {offset}; everything before it is written",
                    quote_file(&output.name)
                ));
                failed = true;
            }
        }
        if plan.conv.intersects(Conv::FSYNC | Conv::FDATASYNC) {
            let fd = output.handle.as_fd();
            let synced = if plan.conv.contains(Conv::FSYNC) {
                crate::sys::file::fsync(fd)
            } else {
                crate::sys::file::fdatasync(fd)
            };
            if let Err(errno) = synced {
                reporter.diagnostic(Diagnostic::FsyncFailed {
                    file: output.name.clone(),
                    errno,
                });
                failed = true;
            }
        }
        if let Err(errno) = input.handle.close() {
            reporter.diagnostic(Diagnostic::ClosingInput {
                file: input.name.clone(),
                errno,
            });
            return super::EXIT_FAILURE;
        }
        if let Err(errno) = output.handle.close() {
            reporter.diagnostic(Diagnostic::ClosingOutput {
                file: output.name.clone(),
                errno,
            });
            return super::EXIT_FAILURE;
        }
        reporter.finish();
        let bad = report.map.bad();
        for block in &bad {
            reporter.message(format!(
                "{}: bad range at offset {}, {} bytes (zeros in the output)",
                quote_file(&input.name),
                block.pos,
                block.size
            ));
        }
        if !bad.is_empty() {
            let lost: u64 = bad.iter().map(|b| b.size).sum();
            reporter.message(format!(
                "{}: {} bad range{}, {lost} bytes unreadable{}",
                quote_file(&input.name),
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
                let _ = std::fs::remove_file(path);
            }
        }
        failed |= self.finish(hash_job, plan, reporter, failed);
        if failed || crate::progress::reporter::stderr_failed() {
            super::EXIT_FAILURE
        } else {
            0
        }
    }
}
