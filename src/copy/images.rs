//! ddx's image options in the copy: `--decompress`, `--compress`,
//! `--bmap`, `--bmap-create`, `--used-only` and `--tee`.
//!
//! The image ends themselves live in [`crate::image`]; this module owns
//! when they apply. What the options cannot be combined with is a row of
//! `planner::needs`, refused before anything is opened; [`prepare`] reads
//! the map `--bmap` names (a map that cannot be read is one line, and
//! nothing is created or truncated); the input is
//! then wrapped once it is opened and admitted ([`Images::wrap_input`]: read by
//! its used blocks, or decoded, then filtered through its map, then
//! recorded), before the output is
//! opened, so that an input that is not compressed or a map made for
//! another image still writes nothing; the output is wrapped once opened
//! ([`Images::wrap_output`]: every output held to the safe order where it
//! is a whole block device, the `--tee` outputs joined, then compressed).
//! After GNU's statistics, [`Images::finish`] prints one line per further
//! output and writes the recorded map.
//!
//! The wrapped ends are peers of the file end: the planner sees their
//! kind (a stream) and plans around it; the engine knows nothing of them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::allocation::Analysis;
use crate::diagnostic::{Diagnostic, Refusal};
use crate::ends::{self};
use crate::engine::stream::Stream;
use crate::engine::stream::{Input, Output};
use crate::image::bmap::{ChecksumKind, Recorded, Recording};
use crate::image::{
    self, Bmap, BmapFilter, BmapRecorder, Opened, TeeReport, UsedOnly, UsedProgress,
};
use crate::integrity::verify::{self, RangeCheck, RangeDigest, RangesVerdict};
use crate::operands::{CopyPlan, IoFlags, StatusLevel};
use crate::progress::{InputPosition, InputRead, Measure, Reporter};
use crate::request::Settings;
use crate::text::human::{human, Base};
use crate::text::quote::quote_file;

use super::Failure;

/// bmaptool's block size, and the unit `--bmap-create` maps in.
const BMAP_BLOCK: u64 = 4096;

/// The image options, checked.
#[derive(Debug, Default)]
pub struct Images {
    decompress: Option<image::Mode>,
    compress: Option<image::Compression>,
    /// `--bmap`: the map and the file it came from.
    bmap: Option<(Arc<Bmap>, PathBuf)>,
    bmap_create: Option<PathBuf>,
    /// The recording, once the input is wrapped; handed over at close.
    recording: Option<Arc<Mutex<Option<Recording>>>>,
    tee: Vec<PathBuf>,
    tee_report: Option<Arc<TeeReport>>,
    used_only: bool,
    /// `--used-only`, once the input is analysed: its progress and what
    /// each partition held.
    used: Option<(Arc<UsedProgress>, Analysis)>,
    /// The compressed input's position, once it is being decoded.
    compressed: Option<Arc<image::InputProgress>>,
    /// `--verify` with `--bmap`: the mapped ranges are read back (see
    /// [`Images::verify`]), with the digests the filter takes of those
    /// the map gives none.
    verify: bool,
    recorded: Option<Recorded>,
    /// What each output written with O_DIRECT where aligned did.
    direct: Vec<Arc<image::DirectReport>>,
    /// How a further output that is a generic node is opened.
    passthrough: Option<crate::ends::generic_node::Options>,
    /// The input is an image written whole onto the output (an extracted
    /// index's blob), as `--decompress` and `--bmap` make it one.
    image: bool,
    /// The size the compressed input decodes to, where its format records
    /// it (`image::decompress::size`): what an output of fixed size must
    /// hold, and the progress line's total.
    decoded_size: Option<u64>,
    /// `--no-decompress`: a compressed input is written as it is.
    no_decompress: bool,
}

fn quoted(path: &Path) -> String {
    quote_file(path.as_os_str().as_encoded_bytes())
}

/// The image options, as asked. What they cannot be combined with, and
/// the ends they need, were refused by `planner::needs::check` already;
/// here the map is read, and held to the output's blocks. Err is the one
/// line to print; nothing has been opened.
pub fn prepare(plan: &CopyPlan, settings: &Settings) -> Result<Images, Refusal> {
    let mut images = Images {
        decompress: settings.decompress,
        compress: settings.compress,
        bmap_create: settings.bmap_create.clone(),
        tee: settings.tee.clone(),
        used_only: settings.used_only,
        no_decompress: settings.no_decompress,
        verify: settings.verify && settings.bmap.is_some(),
        passthrough: Some(settings.passthrough()),
        ..Images::default()
    };
    if let Some(path) = &settings.bmap {
        let map = Bmap::read(path).map_err(|e| Refusal(e.to_string()))?;
        // Output blocks must end where the map's blocks do, so that a
        // hole never starts inside a block held back for re-blocking.
        if plan.two_buffers && map.block_size % plan.output_block_size as u64 != 0 {
            return Err(Refusal(format!(
                "--bmap={}: its {}-byte blocks are not whole output blocks of obs={}",
                quoted(path),
                map.block_size,
                plan.output_block_size
            )));
        }
        images.bmap = Some((Arc::new(map), path.clone()));
    }
    Ok(images)
}

/// The decoder's position in its compressed input, as the progress line
/// reads it: the image ends count, the reporter reads, and neither knows
/// the other.
struct Decoding(Arc<image::InputProgress>);

impl InputPosition for Decoding {
    fn position(&self) -> InputRead {
        InputRead {
            read: self.0.consumed(),
            total: self.0.total,
            measure: Measure::Compressed,
        }
    }
}

/// The used blocks read of a disk (`--used-only`), as the progress line
/// reads them.
struct Used(Arc<UsedProgress>);

impl InputPosition for Used {
    fn position(&self) -> InputRead {
        InputRead {
            read: self.0.read(),
            total: Some(self.0.total),
            measure: Measure::Used,
        }
    }
}

/// Threads for the codecs: every CPU this process may use.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Images {
    /// The input is an image for the output (an extracted index's blob):
    /// the safe order and direct writes apply as to a decompressed one.
    pub fn writes_an_image(&mut self) {
        self.image = true;
    }

    /// The plans of the further outputs: of=, as `--tee` names it.
    pub fn tee_plans(&self, plan: &CopyPlan) -> Vec<CopyPlan> {
        self.tee
            .iter()
            .map(|path| CopyPlan {
                output: Some(path.clone()),
                ..plan.clone()
            })
            .collect()
    }

    /// The further outputs still written at the end: those not dropped
    /// after a failure (all of them before the copy starts).
    pub fn kept_outputs(&self) -> Vec<PathBuf> {
        let dropped = |index: usize| {
            self.tee_report.as_ref().is_some_and(|report| {
                report
                    .outputs
                    .get(index)
                    .is_some_and(|output| matches!(output.fate(), image::Fate::Failed { .. }))
            })
        };
        self.tee
            .iter()
            .enumerate()
            .filter(|&(index, _)| !dropped(index))
            .map(|(_, path)| path.clone())
            .collect()
    }

    /// Where the input stands, when what is read is not what is written:
    /// a compressed input being decoded (`--decompress`), a disk read by
    /// its used blocks (`--used-only`). The progress line and its ETA
    /// follow it.
    pub fn input_position(&self) -> Option<Arc<dyn InputPosition>> {
        if let Some((used, _)) = &self.used {
            return Some(Arc::new(Used(Arc::clone(used))) as Arc<dyn InputPosition>);
        }
        self.compressed
            .as_ref()
            .map(|p| Arc::new(Decoding(Arc::clone(p))) as Arc<dyn InputPosition>)
    }

    /// The size the compressed input decodes to, where its format records
    /// it (known once the input is wrapped).
    pub fn decoded_size(&self) -> Option<u64> {
        self.decoded_size
    }

    /// The input read through a block map (`--bmap`) or by its used
    /// blocks (`--used-only`): the planner leaves its holes unwritten.
    pub fn mapped(&self) -> bool {
        self.bmap.is_some() || self.used.is_some()
    }

    /// Whether the decoder verifies the compressed format's own checksums:
    /// not when a map checks every byte written with its digests (see
    /// [`image::FrameChecksums`]; `--bmap` is refused with `skip=`, so
    /// every range is read from its first byte and checked).
    fn frame_checksums(&self) -> image::FrameChecksums {
        match &self.bmap {
            Some((map, _)) if map.checks_every_range() => image::FrameChecksums::Redundant,
            _ => image::FrameChecksums::Verify,
        }
    }

    /// The input, decoded (`--decompress`), filtered through its map
    /// (`--bmap`) and recorded (`--bmap-create`), in that order: the map
    /// and the recording are of the decompressed image.
    pub fn wrap_input(&mut self, mut input: Input, plan: &CopyPlan) -> Result<Input, Failure> {
        let mut end = input.stream;
        let quoted_name = quote_file(&input.name);
        // Admitted by its row of `planner::needs`: the input reads by
        // position.
        if self.used_only {
            let sector = match end.capabilities().device {
                true => end
                    .fd()
                    .and_then(|fd| crate::sys::device::device_info(fd).logical_sector)
                    .map(u64::from),
                false => None,
            };
            let (used, analysis) =
                UsedOnly::wrap(end, &quoted_name, sector).map_err(|e| Refusal(e.to_string()))?;
            self.used = Some((used.progress(), analysis));
            end = Box::new(used);
        }
        if self.decompress.is_some() && end.capabilities().reads_at {
            if let Some(format) = image::peek::compressed_format(end.as_mut(), 0) {
                self.decoded_size = image::decompress::size::decoded_size(end.as_mut(), format);
            }
        }
        if let (Some(_), Some((map, path))) = (self.decompress, &self.bmap) {
            check_decoded_size(end.as_mut(), map, path, &quoted_name)?;
        }
        if let (None, false, Some((map, path))) = (self.decompress, self.no_decompress, &self.bmap)
        {
            check_compressed_size(end.as_mut(), map, path, &quoted_name)?;
        }
        if let Some(mode) = self.decompress {
            let checksums = self.frame_checksums();
            end = match image::open(end, &quoted_name, mode, threads(), checksums) {
                Ok(Opened::Decompressing(decoded)) => {
                    // GNU's view of a pipe: skip= reads over, nothing
                    // seeks, and the offset counts the decompressed bytes.
                    input.seekable = false;
                    input.seek_errno = Some(crate::sys::Errno::SPIPE);
                    input.offset = 0;
                    input.inherited = false;
                    self.compressed = Some(decoded.progress());
                    Box::new(decoded)
                }
                Ok(Opened::Plain(end)) => end,
                Err(error) => {
                    let detail = match &error {
                        image::OpenError::Read {
                            detail: Some(text), ..
                        } => format!(" ({text})"),
                        _ => String::new(),
                    };
                    return Err(Refusal(format!("{error}{detail}")).into());
                }
            };
        }
        if let Some((map, path)) = &self.bmap {
            let mut filter = BmapFilter::new(
                end,
                Arc::clone(map),
                &quoted_name,
                &path.display().to_string(),
            )
            .map_err(|e| Refusal(e.to_string()))?;
            if self.verify && !map.checks_every_range() {
                self.recorded = Some(filter.record_undigested());
            }
            end = Box::new(filter);
        }
        if self.bmap_create.is_some() {
            let origin = if input.seekable {
                plan.skip.total_bytes(plan.input_block_size).unwrap_or(0)
            } else {
                0
            };
            let (recorder, slot) = BmapRecorder::new(end, BMAP_BLOCK, origin);
            // A disk read by its used blocks maps them, zeros or not: an
            // inode table of zeros must be written over what the target
            // held.
            let recorder = if self.used.is_some() {
                recorder.by_extents()
            } else {
                recorder
            };
            end = Box::new(recorder);
            self.recording = Some(slot);
        }
        input.stream = end;
        Ok(input)
    }

    /// The output, with the further outputs (`--tee`, each opened as of=
    /// would be), held to the safe order where it is a whole block device
    /// written from its start, and compressed (`--compress`).
    pub fn wrap_output(
        &mut self,
        output: Output,
        plan: &CopyPlan,
        warnings: &mut Vec<Diagnostic>,
    ) -> Result<Output, Failure> {
        let safe = self.decompress.is_some() || self.bmap.is_some() || self.image;
        // Image writes onto a device go direct where aligned (see
        // `image::direct`), and so do the writes of several outputs
        // (`--tee`), each of which would otherwise cost a copy into the
        // page cache and its writeback on the CPUs the others need;
        // unless oflag=direct already gives GNU's meaning to every
        // request.
        let direct = !plan.output_flags.contains(IoFlags::DIRECT);
        let teeing = !self.tee.is_empty();
        let mut reports = Vec::new();
        let mut hold = |end: Box<dyn Stream>| -> Box<dyn Stream> {
            if teeing && !safe && direct && end.capabilities().device {
                return match image::DirectWrites::wrap(end) {
                    Ok((writes, report)) => {
                        reports.push(report);
                        Box::new(writes)
                    }
                    Err(end) => end,
                };
            }
            // A whole export is a disk as a device is: an image written
            // onto it is bootable once its first MiB lands, so that MiB
            // goes last there too.
            let can = end.capabilities();
            if safe && plan.seek.is_zero() && (can.device || (can.served && can.writes_at)) {
                let end = if direct && can.device {
                    match image::DirectWrites::wrap(end) {
                        Ok((writes, report)) => {
                            reports.push(report);
                            Box::new(writes)
                        }
                        Err(end) => end,
                    }
                } else {
                    end
                };
                image::SafeOrder::wrap(end)
            } else {
                end
            }
        };
        let Output { stream, name } = output;
        let mut end = hold(stream);
        if !self.tee.is_empty() {
            let mut extras = Vec::new();
            for tee_plan in self.tee_plans(plan) {
                let opened = match ends::open::open_output(
                    &tee_plan,
                    self.passthrough
                        .unwrap_or(Settings::default().passthrough())
                        .into(),
                    warnings,
                ) {
                    Ok(opened) => opened,
                    Err(error) => {
                        // The outputs opened so far are left as opened:
                        // GNU leaves of= so when the copy cannot start.
                        for (_, extra) in extras {
                            let extra: Box<dyn Stream> = extra;
                            extra.abandon();
                        }
                        end.abandon();
                        return Err(error.into());
                    }
                };
                let extra = crate::engine::stream::stream_of(opened.stream);
                extras.push((quote_file(&opened.name), hold(extra)));
            }
            let tee = image::Tee::new(end, extras);
            self.tee_report = Some(tee.report());
            end = Box::new(tee);
        }
        // In the order of the outputs: of= first, then each --tee.
        self.direct = reports;
        if let Some(compression) = self.compress {
            end = Box::new(image::Compressed::start(end, compression, threads()));
        }
        Ok(Output { stream: end, name })
    }

    /// `--verbose`: how the image went onto each device (see
    /// `image::direct`).
    /// `--used-only`: a line for each part of the disk copied whole (no
    /// file system recognised there, or one that cannot be trusted), and
    /// for a partition table that cannot be read, said whatever
    /// `--verbose` says: the backup is then larger and slower than the
    /// user may expect.
    pub fn used_whole(&self) -> Vec<String> {
        let Some((_, analysis)) = &self.used else {
            return Vec::new();
        };
        let show = |bytes: u64| human(bytes, Base::Iec, 1, 1);
        let mut lines = Vec::new();
        if let crate::allocation::Table::Unreadable(_) = &analysis.table {
            lines.push(format!(
                "--used-only: {}: the whole disk is copied",
                analysis.table
            ));
        }
        for part in &analysis.parts {
            if matches!(part.found, crate::allocation::Found::Whole { .. }) {
                lines.push(format!("--used-only: {}", part.describe(&show)));
            }
        }
        lines
    }

    pub fn print_verbose(&self, reporter: &Reporter) {
        for report in &self.direct {
            reporter.message(format_args!("image writes: {}", report.describe()));
        }
        if let Some((progress, analysis)) = &self.used {
            let show = |bytes: u64| human(bytes, Base::Iec, 1, 1);
            reporter.message(format_args!(
                "--used-only: {}; read {} of {} used, {} skipped",
                analysis.table,
                show(progress.read()),
                show(progress.total),
                show(analysis.size - analysis.used.bytes())
            ));
            for part in &analysis.parts {
                reporter.message(format_args!("--used-only: {}", part.describe(&show)));
            }
            if !analysis.parts.is_empty() {
                reporter.message(format_args!(
                    "--used-only: outside the partitions: {}, copied",
                    show(analysis.outside)
                ));
            }
        }
    }

    /// After GNU's statistics (of `bytes` bytes): under `--bmap`, what
    /// was written of them (unless status=none); a line per further
    /// output; and the recorded map, written only for a copy that
    /// succeeded. Returns whether something failed.
    pub fn finish(
        &self,
        reporter: &Reporter,
        status: StatusLevel,
        bytes: u64,
        copy_failed: bool,
    ) -> bool {
        let mut failed = false;
        // GNU's statistics count the image's bytes, unmapped blocks and
        // all; what was written of them is said after them, named.
        let image = self.bmap.as_ref().map(|(map, _)| {
            let written = mapped_below(map, bytes);
            if status == StatusLevel::None {
                return bytes;
            }
            reporter.message(format_args!(
                "--bmap: {bytes} bytes of image copied: {written} bytes{} of mapped blocks \
                 written, {} bytes of unmapped blocks left as they were",
                gnu_sizes(written),
                bytes - written
            ));
            bytes
        });
        if let Some(report) = &self.tee_report {
            for line in report.lines(image) {
                reporter.message(format_args!("--tee: {line}"));
            }
            failed |= report.any_failed();
        }
        if let (Some(path), Some(slot)) = (&self.bmap_create, &self.recording) {
            failed |= write_map(reporter, path, slot, bytes, copy_failed);
        }
        failed
    }
}

impl Images {
    /// `--verify` with `--bmap`: read back the mapped ranges the copy
    /// wrote whole (all of them, unless it stopped in the first `bytes`
    /// of the image) from of= and each further output still written, on
    /// several threads, each range checked against the map's digest or,
    /// where the map gives none, the one taken of it as it was written.
    /// The unmapped blocks are not read: they hold what they held.
    /// Returns whether an output differs or cannot be read.
    pub fn verify(
        &self,
        reporter: &Reporter,
        plan: &CopyPlan,
        outputs: &[PathBuf],
        bytes: u64,
    ) -> bool {
        let (Some((map, _)), true) = (&self.bmap, self.verify) else {
            return false;
        };
        let recorded = self
            .recorded
            .as_ref()
            .and_then(|r| r.lock().ok().map(|slots| slots.clone()))
            .unwrap_or_default();
        let mut checks = Vec::new();
        let mut blocks = Vec::new();
        let mut unchecked = 0;
        for (index, range) in map.ranges.iter().enumerate() {
            let (start, end) = map.byte_span(range);
            if end > bytes {
                break;
            }
            let digest = match (map.checksum, &range.digest) {
                (Some(ChecksumKind::Sha1), Some(hex)) => RangeDigest::Sha1(hex.clone()),
                (Some(ChecksumKind::Sha256), Some(hex)) => RangeDigest::Sha256(hex.clone()),
                _ => match recorded.get(index).copied().flatten() {
                    Some(value) => RangeDigest::Xxh3(value),
                    None => {
                        unchecked += 1;
                        continue;
                    }
                },
            };
            checks.push(RangeCheck { start, end, digest });
            blocks.push((range.first, range.last));
        }
        let against = match map.checksum {
            Some(kind) if map.checks_every_range() => format!("the map's {kind}"),
            Some(_) => "the map's digest, or the digest of what was written".to_owned(),
            None => "the digest of what was written (the map has none)".to_owned(),
        };
        let workers = threads().clamp(4, 16);
        let mut failed = false;
        for output in outputs {
            let quoted = quote_file(&crate::ends::uri::shown(output));
            let passthrough = self
                .passthrough
                .unwrap_or(Settings::default().passthrough());
            let reopen = super::read_back::ReadBackOf::new(output, plan, passthrough);
            match verify::verify_ranges(&reopen, &checks, workers) {
                Ok(RangesVerdict::Identical { bytes }) => {
                    let left = if unchecked > 0 {
                        format!("; {unchecked} not checked (not read in order)")
                    } else {
                        String::new()
                    };
                    reporter.message(format_args!(
                        "verify: {bytes} bytes of {quoted} in {} mapped ranges read back, \
                         each as {against}{left}",
                        checks.len()
                    ));
                }
                Ok(RangesVerdict::Differs { index }) => {
                    let (first, last) = blocks[index];
                    let check = &checks[index];
                    reporter.message(format_args!(
                        "verify: {quoted} differs from what was written in blocks \
                         {first}-{last} (image bytes {} to {})",
                        check.start, check.end
                    ));
                    failed = true;
                }
                Err(errno) => {
                    reporter.message(format_args!(
                        "verify: cannot read {quoted} back: {}",
                        crate::sys::errno_text(errno)
                    ));
                    failed = true;
                }
            }
        }
        failed
    }
}

/// The compressed format the input starts with, where it can be read
/// at an offset without moving it (a pipe cannot be peeked at).
fn compressed_format(input: &mut dyn Stream) -> Option<image::Format> {
    if !input.capabilities().reads_at {
        return None;
    }
    image::peek::compressed_format(input, 0)
}

/// A map made for another image than the compressed input decodes to,
/// where its format records that size (see `image::decompress::size`):
/// refused before anything is written. Where the size is not recorded,
/// the filter finds the mismatch where the decoded stream ends (or at
/// the first range whose digest differs).
fn check_decoded_size(
    input: &mut dyn Stream,
    map: &Bmap,
    path: &Path,
    name: &str,
) -> Result<(), Failure> {
    let Some(format) = compressed_format(input) else {
        return Ok(());
    };
    match image::decompress::size::decoded_size(input, format) {
        Some(size) if size != map.image_size => Err(Refusal(format!(
            "--bmap={}: the map is for a {}-byte image, but {name} decompresses to {size} \
             bytes, as its {format} headers record",
            quoted(path),
            map.image_size
        ))
        .into()),
        _ => Ok(()),
    }
}

/// A map given for a compressed input without `--decompress`: the map
/// is of the image the input decompresses to, so where the input's own
/// size is not the map's, what is missing is `--decompress` (refused
/// before anything is written, rather than found where the sizes part).
fn check_compressed_size(
    input: &mut dyn Stream,
    map: &Bmap,
    path: &Path,
    name: &str,
) -> Result<(), Failure> {
    let Some(format) = compressed_format(input) else {
        return Ok(());
    };
    let Some(size) = input.size().ok().flatten() else {
        return Ok(());
    };
    if size == map.image_size {
        return Ok(());
    }
    let decodes = match image::decompress::size::decoded_size(input, format) {
        Some(decoded) => format!(", which decompresses to {decoded} bytes"),
        None => String::new(),
    };
    Err(Refusal(format!(
        "--bmap={}: the map is for a {}-byte image, and {name} is {format}-compressed, {size} \
         bytes{decodes}: add --decompress to write the image it holds (or --no-decompress \
         to write it as it is)",
        quoted(path),
        map.image_size
    ))
    .into())
}

/// The bytes of `map`'s mapped blocks in the image's first `bytes`: what
/// a copy through the map that got that far has written (it writes the
/// image in order, from its start).
fn mapped_below(map: &Bmap, bytes: u64) -> u64 {
    map.ranges
        .iter()
        .map(|range| {
            let (start, end) = map.byte_span(range);
            end.min(bytes).saturating_sub(start)
        })
        .sum()
}

/// " (532 MB, 507 MiB)", as GNU's statistics give a byte count; nothing
/// where GNU gives nothing (under 1000 bytes).
fn gnu_sizes(bytes: u64) -> String {
    use crate::text::human::{human, Base};
    if bytes < 1000 {
        return String::new();
    }
    format!(
        " ({}, {})",
        human(bytes, Base::Si, 1, 1),
        human(bytes, Base::Iec, 1, 1)
    )
}

/// `--bmap-create`: the map, as bmaptool writes it; returns whether it
/// failed.
fn write_map(
    reporter: &Reporter,
    path: &Path,
    slot: &Mutex<Option<Recording>>,
    bytes: u64,
    copy_failed: bool,
) -> bool {
    let quoted = quoted(path);
    if copy_failed {
        reporter.message(format_args!(
            "--bmap-create: {quoted} not written: the copy did not succeed"
        ));
        return false;
    }
    let recording = slot.lock().ok().and_then(|mut slot| slot.take());
    let Some(recording) = recording else {
        reporter.message(format_args!(
            "--bmap-create: {quoted} not written: the input was not closed"
        ));
        return true;
    };
    let map = match recording.finish(bytes) {
        Ok(map) => map,
        Err(why) => {
            reporter.message(format_args!("--bmap-create: {quoted} not written: {why}"));
            return true;
        }
    };
    match std::fs::write(path, map.to_xml()) {
        Ok(()) => false,
        Err(error) => {
            reporter.message(format_args!(
                "--bmap-create: cannot write {quoted}: {error}"
            ));
            true
        }
    }
}
