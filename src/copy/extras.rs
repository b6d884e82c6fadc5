//! ddx's copies that go beyond dd: positional copies (`--rescue`,
//! `--map`, `--resume`) and integrity (`--hash`, `--verify`). These
//! options are checked against the operands before any file is opened,
//! and what they add is printed after GNU's statistics. With none of
//! them, nothing here runs, so dd's output stays GNU's.

use std::path::{Path, PathBuf};

use crate::request::Settings;

use crate::integrity::verify::{self, Reference, Verdict};
use crate::integrity::{Algorithm, ChunkDigests, HashJob, Tap};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::progress::reporter::emit;
use crate::progress::Reporter;
use crate::rescue::{self, Request};
use crate::text::quote::quote_file;

/// What ddx's own options ask for, checked.
#[derive(Debug, Default)]
pub struct Extras {
    /// A copy by position (`--rescue`, `--map`, `--resume`).
    pub positional: Option<Request>,
    /// `--resume` continues from an existing map.
    pub resuming: bool,
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
    let asked = rescue::Asked {
        rescue: settings.rescue,
        map: settings.map.as_deref(),
        resume: settings.resume,
        sector: settings.sector_size,
        retry_passes: settings.retry_passes,
    };
    if asked.any() {
        let request = rescue::check(plan, asked)?;
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
    /// copy failed), then the read-back of of= and of each further output
    /// still written (`further`: the `--tee` outputs not dropped; a
    /// dropped one has failed already and is not read back). Returns
    /// whether anything failed.
    pub fn finish(
        &self,
        job: Option<HashJob>,
        plan: &CopyPlan,
        further: &[PathBuf],
        reporter: &Reporter,
        copy_failed: bool,
    ) -> bool {
        let Some(job) = job else {
            return false;
        };
        let (digests, chunks) = job.finish();
        let name = match &plan.input {
            Some(path) => String::from_utf8_lossy(&crate::ends::remote::shown(path)).into_owned(),
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
        let reference = plan.input.as_deref().map(|path| Reference {
            path,
            start: plan.skip.total_bytes(plan.input_block_size).unwrap_or(0),
        });
        // Every output was written from the same offset with the same
        // bytes, so each is held to the same digests.
        for output in std::iter::once(output).chain(further) {
            failed |= read_back(output, output_start, &chunks, reference, reporter);
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
    output_start: u64,
    chunks: &ChunkDigests,
    reference: Option<Reference<'_>>,
    reporter: &Reporter,
) -> bool {
    let quoted = quote_file(&crate::ends::remote::shown(output));
    match verify::verify(output, output_start, chunks, reference) {
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
