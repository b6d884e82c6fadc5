//! ddx's copies that go beyond dd: positional copies (`--rescue`,
//! `--map`, `--resume`) and integrity (`--hash`, `--verify`). What these
//! options cannot be combined with is a row of `planner::needs`, checked
//! before any file is opened; what they add is printed after GNU's
//! statistics. With none of them, nothing here runs, so dd's output stays
//! GNU's.

use std::path::{Path, PathBuf};

use crate::diagnostic::Refusal;
use crate::request::Settings;

use crate::integrity::verify::{self, Verdict};
use crate::integrity::{Algorithm, ChunkDigests, HashJob, Tap};
use crate::operands::{Conv, CopyPlan};
use crate::progress::reporter::emit;
use crate::progress::Reporter;
use crate::rescue::{self, PositionalCopy};
use crate::text::quote::quote_file;

/// How the copy ended, for what the options add after it.
pub struct Ended {
    /// The copy failed.
    pub failed: bool,
    /// What the output's store said of the bytes it holds
    /// (`Upload::stored_as_written`).
    pub stored_as_written: Option<Result<String, String>>,
    /// The output was finalised; an output that failed to be (an upload
    /// whose completion failed or was refused) is not read back: it is
    /// not what was written.
    pub finalised: bool,
}

/// What ddx's own options ask for, checked.
#[derive(Debug, Default)]
pub struct Extras {
    /// A copy by position (`--rescue`, `--map`, `--resume`).
    pub positional: Option<PositionalCopy>,
    /// `--resume` continues from an existing map.
    pub resuming: bool,
    /// What that map records of its copy's ends.
    pub recorded: Option<rescue::identity::Recorded>,
    /// The line saying that a map named was not there, and the copy
    /// starts from the beginning.
    pub notice: Option<String>,
    hash: Vec<Algorithm>,
    /// `--hash-file=FILE`, checked: where to write the one digest.
    hash_file: Option<std::path::PathBuf>,
    verify: bool,
}

/// What ddx's options add to the plan; a resumed copy keeps its output
/// (conv=notrunc is added). What they cannot be combined with was refused
/// by `planner::needs::check` already. Err is the one line to print: a
/// map there is no copy to resume from.
pub fn prepare(plan: &mut CopyPlan, settings: &Settings) -> Result<Extras, Refusal> {
    let mut extras = Extras {
        hash: settings.hash.clone(),
        hash_file: settings.hash_file.clone(),
        // Under --bmap, the image's mapped ranges are read back instead
        // (`copy::images`): the unmapped blocks were never written.
        verify: settings.verify && settings.bmap.is_none(),
        ..Extras::default()
    };
    let asked = rescue::Asked {
        rescue: settings.rescue,
        map: settings.map.as_deref(),
        resume: settings.resume,
        sector: settings.sector_size,
        retry_passes: settings.retry_passes,
    };
    // An upload kept resumable by its map is a stream copy (`objects`).
    if asked.any() && !super::objects::is_upload(plan) {
        let request = rescue::request(plan, asked);
        match rescue::resuming(&request, plan).map_err(Refusal)? {
            rescue::Start::Fresh(notice) => extras.notice = notice,
            rescue::Start::Resumed(recorded) => {
                extras.resuming = true;
                extras.recorded = Some(recorded);
                plan.conv |= Conv::NOTRUNC;
            }
        }
        extras.positional = Some(request);
    }
    Ok(extras)
}

impl Extras {
    /// `--verify` is another's to do (an extracted index's blob is read
    /// back against the index's ids).
    pub fn leave_verify_to_the_index(&mut self) {
        self.verify = false;
    }

    /// The hasher thread, if hashing or verifying.
    pub fn start_hashing(&self) -> Result<Option<(Tap, HashJob)>, Refusal> {
        if self.hash.is_empty() && !self.verify {
            return Ok(None);
        }
        crate::integrity::start(&self.hash, self.verify)
            .map(Some)
            .ok_or_else(|| Refusal("--hash/--verify: cannot start the hashing thread".to_owned()))
    }

    /// After the statistics: the digests (and `--hash-file`, unless the
    /// copy failed), then the read-back of of= and of each further output
    /// still written (`further`: the `--tee` outputs not dropped; a
    /// dropped one has failed already and is not read back). Returns
    /// whether anything failed.
    pub fn finish(
        &self,
        job: Option<HashJob>,
        plan: &CopyPlan,
        further: &[PathBuf],
        passthrough: crate::ends::generic_node::Options,
        reporter: &Reporter,
        ended: Ended,
    ) -> bool {
        let Ended {
            failed: copy_failed,
            stored_as_written,
            finalised,
        } = ended;
        let Some(job) = job else {
            return false;
        };
        let (digests, chunks) = job.finish();
        let name = match &plan.input {
            Some(path) => String::from_utf8_lossy(&crate::ends::uri::shown(path)).into_owned(),
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
        let mut failed = self.write_hash_file(&digests, plan, reporter, copy_failed);
        let (Some(chunks), Some(output)) = (chunks, &plan.output) else {
            return failed;
        };
        let output_start = plan.seek.total_bytes(plan.output_block_size).unwrap_or(0);
        let input = plan
            .input
            .as_deref()
            .map(|path| super::read_back::ReadBackOf::new(path, plan, passthrough));
        let reference = input.as_ref().map(|input| {
            let start = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
            (input as &dyn verify::Reopen, start)
        });
        // Every output was written from the same offset with the same
        // bytes, so each is held to the same digests. An output whose
        // store confirmed it holds the bytes written (an object's checksum,
        // computed by the server) is not read back.
        let quoted = quote_file(&crate::ends::uri::shown(output));
        let reopen = super::read_back::ReadBackOf::new(output, plan, passthrough);
        match stored_as_written {
            _ if !finalised => {}
            Some(Ok(how)) if !copy_failed => reporter.message(format!(
                "verify: {} bytes of {quoted} not read back: {how}",
                chunks.total
            )),
            Some(Err(why)) if !copy_failed => {
                reporter.message(format!("verify: {quoted}: {why}, so it is read back"));
                failed |= read_back(output, &reopen, output_start, &chunks, reference, reporter);
            }
            _ => failed |= read_back(output, &reopen, output_start, &chunks, reference, reporter),
        }
        for output in further {
            let reopen = super::read_back::ReadBackOf::new(output, plan, passthrough);
            failed |= read_back(output, &reopen, output_start, &chunks, reference, reporter);
        }
        failed
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
}

/// Read one output back and report it; returns whether it failed.
fn read_back(
    output: &Path,
    reopen: &dyn verify::Reopen,
    output_start: u64,
    chunks: &ChunkDigests,
    reference: Option<(&dyn verify::Reopen, u64)>,
    reporter: &Reporter,
) -> bool {
    let quoted = quote_file(&crate::ends::uri::shown(output));
    match verify::verify(reopen, output_start, chunks, reference) {
        Ok(Verdict::Identical { bytes }) => {
            reporter.message(format!(
                "verify: {bytes} bytes of {quoted} read back, identical to what was written"
            ));
            false
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
