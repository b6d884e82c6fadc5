//! Copies that know where they are: `--rescue` (a failed read is retried
//! sector by sector, so only unreadable sectors are lost), `--map=FILE`
//! (GNU ddrescue's mapfile of what is done and what is bad, saved as the
//! copy goes) and `--resume` (continue from that map after a crash, a
//! signal or an error, copying only what is not done yet).
//!
//! These copies address both ends by position (pread/pwrite), not as
//! streams, which is what makes a map meaningful; so they run their own
//! loop here rather than the record engine, and accept only the operands
//! for which a byte of output has one fixed source byte (see [`check`]).
//!
//! First pass: pending ranges in ibs-sized chunks through the input as
//! opened (page cache, iflag=). A chunk that fails from some position on
//! is retried from there one logical sector at a time, with O_DIRECT where
//! the input allows it: through the page cache (and FUSE) a failure covers
//! a whole page or request, while a direct read of one sector fails only if
//! that sector does. Unreadable sectors are written as zeros and marked
//! bad ('-'); everything read is marked finished ('+').

pub mod mapfile;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::engine::counters::{add, bump, Counters};
use crate::engine::Events;
use crate::integrity::Tap;
use rustix::fs::OFlags;

use crate::ends::{End, Whence};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::fill::{fill, Filled};
use crate::sys::Errno;
use mapfile::{BlockStatus, Map};

/// How often the map is saved during a copy.
const SAVE_EVERY: Duration = Duration::from_millis(500);

/// The sector size when the input does not tell (a file).
pub const DEFAULT_SECTOR: usize = 512;

/// What the positional copy is asked to do, from ddx's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `--rescue`: retry failed reads sector by sector.
    pub rescue: bool,
    /// Where the map is kept, if anywhere.
    pub map_path: Option<PathBuf>,
    /// `--resume`: continue from the map if it exists.
    pub resume: bool,
    /// The map path was chosen by ddx (OF.ddx-map): removed once the copy
    /// is complete, as a checkpoint no longer needed.
    pub map_is_checkpoint: bool,
    /// `--sector-size=N`, if given.
    pub sector: Option<usize>,
}

/// The suffix of the checkpoint map `--resume` keeps next to the output.
pub const CHECKPOINT_SUFFIX: &str = ".ddx-map";

/// Validate the operands for a positional copy, before anything is opened.
/// Returns the request and whether an existing map is being resumed.
pub fn check(
    plan: &CopyPlan,
    rescue: bool,
    map: Option<&Path>,
    resume: bool,
    sector: Option<usize>,
) -> Result<Request, String> {
    let what = if rescue {
        "--rescue"
    } else if resume {
        "--resume"
    } else {
        "--map"
    };
    if plan.input.is_none() {
        return Err(format!(
            "{what} needs if=FILE: it reads the input by position, not as a stream"
        ));
    }
    let Some(output) = &plan.output else {
        return Err(format!(
            "{what} needs of=FILE: it writes the output by position, not as a stream"
        ));
    };
    let refused_conv = crate::operands::symbols::DATA_CONVERSIONS
        .iter()
        .chain(&[(Conv::SPARSE, "sparse")]);
    for &(flag, name) in refused_conv {
        if plan.conv.contains(flag) {
            return Err(format!(
                "{what} cannot be combined with conv={name}: it copies bytes unchanged, \
                 each to the same place"
            ));
        }
    }
    if plan.conv.contains(Conv::NOERROR) != plan.conv.contains(Conv::SYNC) && !rescue {
        return Err(format!(
            "{what} needs conv=noerror and conv=sync together (or --rescue): without \
             padding, every read error would move the rest of the output"
        ));
    }
    if plan.conv.contains(Conv::SYNC) && !plan.conv.contains(Conv::NOERROR) {
        return Err(format!(
            "{what} cannot be combined with conv=sync alone: padding short reads changes \
             where later bytes go"
        ));
    }
    if plan.output_flags.contains(IoFlags::APPEND) {
        return Err(format!(
            "{what} cannot be combined with oflag=append: it writes by position"
        ));
    }
    if plan.output_flags.contains(IoFlags::DIRECT) {
        return Err(format!(
            "{what} cannot be combined with oflag=direct (the zeros and tails it writes \
             need not be aligned)"
        ));
    }
    if plan.skip.total_bytes(plan.input_block_size).is_none()
        || plan.seek.total_bytes(plan.output_block_size).is_none()
    {
        return Err(format!("{what}: skip= or seek= is too large"));
    }
    if let Some(sector) = sector {
        if !(512..=65536).contains(&sector) || !sector.is_power_of_two() {
            return Err(
                "invalid argument for '--sector-size': a power of two from 512 to 65536".into(),
            );
        }
    }
    let (map_path, map_is_checkpoint) = match map {
        Some(path) => (Some(path.to_path_buf()), false),
        None if resume => {
            let mut path = output.as_os_str().to_owned();
            path.push(CHECKPOINT_SUFFIX);
            (Some(PathBuf::from(path)), true)
        }
        None => (None, false),
    };
    Ok(Request {
        rescue,
        map_path,
        resume,
        map_is_checkpoint,
        sector,
    })
}

/// Whether this request continues an earlier copy: a map to resume from
/// exists. An existing map whose output is missing is an error (its
/// finished ranges would be lost).
pub fn resuming(request: &Request, plan: &CopyPlan) -> Result<bool, String> {
    let Some(map) = &request.map_path else {
        return Ok(false);
    };
    if !map.exists() {
        return Ok(false);
    }
    if !request.resume {
        return Err(format!(
            "the map '{}' exists: add --resume to continue that copy, or remove it to \
             start over",
            map.display()
        ));
    }
    let output = plan.output.as_deref().unwrap_or(Path::new(""));
    // An export named by a URI is no file: whether it is there is for
    // its opening to say.
    let remote = crate::ends::remote::recognise(output).is_some();
    if !remote && !output.exists() {
        return Err(format!(
            "the map '{}' records a copy to '{}', which does not exist: remove the map \
             to start over",
            map.display(),
            output.display()
        ));
    }
    Ok(true)
}

/// The one line a resumed copy starts with: what its map says is done,
/// left to read and bad, in bytes of the copy's extent.
pub fn resume_summary(map: &Map, path: &Path) -> String {
    let done = map.bytes_with(BlockStatus::Finished);
    let bad = map.bytes_with(BlockStatus::BadSector);
    let left: u64 = map.pending().iter().map(|b| b.size).sum();
    let total = done + bad + left;
    // Rounded down: "100% done" only when nothing is left.
    let percent = if total == 0 {
        100
    } else {
        (u128::from(done) * 100 / u128::from(total)) as u64
    };
    format!(
        "resuming from {}: {done} bytes done, {left} left, {bad} bad ({percent}% done)",
        crate::text::quote::quote_file(path.as_os_str().as_encoded_bytes())
    )
}

/// The copy's two ends and its extent, opened.
pub struct Job<'a> {
    pub input: &'a mut dyn End,
    /// The input's path, where sectors can be read again with O_DIRECT
    /// (a file or block device).
    pub input_path: Option<&'a Path>,
    pub output: &'a mut dyn End,
    /// Input positions `[start, end)` are copied.
    pub start: u64,
    pub end: u64,
    /// Output position of input position `start`.
    pub output_start: u64,
    pub chunk: usize,
    pub sector: usize,
    pub rescue: bool,
    /// conv=noerror,sync without --rescue: a failed chunk is zero-filled
    /// whole, as dd pads a lost block.
    pub pad_failed_chunks: bool,
    pub map: Map,
    pub map_path: Option<PathBuf>,
    pub command_line: String,
    pub tap: Option<Tap>,
}

/// Why the copy stopped.
#[derive(Debug)]
pub enum Ended {
    Complete,
    /// A read error without --rescue or noerror: the map says where.
    ReadError {
        offset: u64,
        errno: Errno,
    },
    /// The output refused a write at output `offset` (all before it is written).
    WriteError {
        offset: u64,
        errno: Errno,
    },
}

/// How a positional copy went.
#[derive(Debug)]
pub struct RescueOutcome {
    pub ended: Ended,
    pub map: Map,
    /// A map save that failed (the copy went on).
    pub map_error: Option<(PathBuf, String)>,
    /// Bytes found bad in this run.
    pub newly_bad: u64,
}

/// The input's size: its data size (a file's, an export's), else where
/// its end is (a device's). The position is left at the end.
pub fn input_size(input: &mut dyn End) -> Result<u64, Errno> {
    match input.size()? {
        Some(size) => Ok(size),
        None => input.seek(Whence::End(0)),
    }
}

/// The input's logical sector size (BLKSSZGET for a block device).
pub fn logical_sector(input: &dyn End) -> usize {
    input
        .fd()
        .and_then(|fd| rustix::fs::ioctl_blksszget(fd).ok())
        .map(|s| s as usize)
        .filter(|s| s.is_power_of_two() && *s >= 512)
        .unwrap_or(DEFAULT_SECTOR)
}

struct Copier<'a, 'c> {
    job: Job<'a>,
    events: &'c dyn Events,
    sink: PositionalSink<'c>,
    direct: Option<OwnedFd>,
    buf: AlignedBuf,
    sector_buf: AlignedBuf,
    zeros: Vec<u8>,
    last_save: Instant,
    map_error: Option<(PathBuf, String)>,
    newly_bad: u64,
}

/// Run a positional copy over the pending ranges of `job.map`.
pub fn run(
    mut job: Job<'_>,
    counters: &Counters,
    events: &dyn Events,
) -> Result<RescueOutcome, Errno> {
    let direct = match job.input_path {
        Some(path) if job.rescue => file::open_input(path, OFlags::DIRECT).ok(),
        _ => None,
    };
    let mut copier = Copier {
        buf: AlignedBuf::new(job.chunk)?,
        sector_buf: AlignedBuf::new(job.sector)?,
        zeros: vec![0; job.chunk.max(job.sector)],
        direct,
        events,
        sink: PositionalSink {
            counters,
            tap: job.tap.take(),
        },
        last_save: Instant::now(),
        map_error: None,
        newly_bad: 0,
        job,
    };
    // A map on disk from the start: the room for later saves is taken
    // while the filesystem has it.
    copier.save_map(false);
    let ended = copier.copy_pending();
    let complete = matches!(ended, Ended::Complete);
    if complete {
        copier.job.map.current_status = '+';
        copier.job.map.current_pos = copier.job.end;
    }
    copier.save_map(true);
    // The hasher thread gets the last staged bytes.
    drop(copier.sink.tap.take());
    Ok(RescueOutcome {
        ended,
        map: copier.job.map,
        map_error: copier.map_error,
        newly_bad: copier.newly_bad,
    })
}

impl Copier<'_, '_> {
    fn copy_pending(&mut self) -> Ended {
        for block in self.job.map.pending() {
            let mut pos = block.pos;
            while pos < block.end() {
                let want = (block.end() - pos).min(self.job.chunk as u64) as usize;
                match self.copy_chunk(pos, want) {
                    Ok(Some(n)) => pos += n as u64,
                    // End of input before the expected end: the input shrank.
                    Ok(None) => {
                        let end = self.job.end;
                        self.job.map.mark(pos, end - pos, BlockStatus::Finished);
                        self.job.end = pos;
                        return Ended::Complete;
                    }
                    Err(ended) => return ended,
                }
                self.job.map.current_pos = pos;
                // status=progress, as the record engine prints it: between
                // two requests, after a write.
                if self.sink.counters.take_progress_due() {
                    self.events.progress();
                }
                if self.last_save.elapsed() >= SAVE_EVERY {
                    self.save_map(false);
                }
            }
        }
        Ended::Complete
    }

    /// Copy `want` bytes at input `pos`: Some(bytes dealt with), None at
    /// end of input, Err when the copy stops.
    fn copy_chunk(&mut self, pos: u64, want: usize) -> Result<Option<usize>, Ended> {
        let input = &mut self.job.input;
        let Filled {
            len: got,
            error: failure,
        } = fill(&mut self.buf.as_mut_slice()[..want], |rest, done| {
            input.read_at(rest, pos + done)
        });
        if got > 0 {
            self.write_good(pos, got, got == want && failure.is_none())?;
        }
        let Some(errno) = failure else {
            return Ok(if got == 0 { None } else { Some(got) });
        };
        let bad_from = pos + got as u64;
        let bad_len = want - got;
        if self.job.rescue {
            self.retry_sectors(bad_from, bad_len)?;
        } else if self.job.pad_failed_chunks {
            self.write_bad(bad_from, bad_len)?;
        } else {
            return Err(Ended::ReadError {
                offset: bad_from,
                errno,
            });
        }
        Ok(Some(want))
    }

    /// Read `[from, from+len)` one sector (or less, at the edges) at a time.
    fn retry_sectors(&mut self, from: u64, len: usize) -> Result<(), Ended> {
        let sector = self.job.sector as u64;
        let end = from + len as u64;
        let mut pos = from;
        while pos < end {
            let piece = ((pos / sector + 1) * sector).min(end) - pos;
            let piece = piece as usize;
            match self.read_sector(pos, piece) {
                Ok(0) => {
                    // End of input inside the range: nothing more to read.
                    self.job.map.mark(pos, end - pos, BlockStatus::Finished);
                    return Ok(());
                }
                Ok(n) => {
                    let at = self.output_offset(pos);
                    self.sink
                        .write(&mut *self.job.output, at, &self.sector_buf.as_slice()[..n])?;
                    self.job.map.mark(pos, n as u64, BlockStatus::Finished);
                    pos += n as u64;
                }
                Err(_) => {
                    self.write_bad(pos, piece)?;
                    pos += piece as u64;
                }
            }
        }
        Ok(())
    }

    /// Read `len` bytes at `pos`, all within one sector, into the front of
    /// the sector buffer. Through O_DIRECT the whole sector is read (a
    /// direct read must be aligned) and the wanted part moved to the front:
    /// a read through the cache would fail for the whole page.
    fn read_sector(&mut self, pos: u64, len: usize) -> Result<usize, Errno> {
        let sector = self.job.sector as u64;
        if let Some(direct) = &self.direct {
            let sector_start = pos / sector * sector;
            let skip = (pos - sector_start) as usize;
            let buf = &mut self.sector_buf.as_mut_slice()[..sector as usize];
            loop {
                match rustix::io::pread(direct, &mut *buf, sector_start) {
                    Err(Errno::INTR) => continue,
                    // Not alignable here after all: read through the cache.
                    Err(Errno::INVAL) => break,
                    Ok(n) => {
                        let n = n.saturating_sub(skip).min(len);
                        buf.copy_within(skip..skip + n, 0);
                        return Ok(n);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        loop {
            match self
                .job
                .input
                .read_at(&mut self.sector_buf.as_mut_slice()[..len], pos)
            {
                Err(Errno::INTR) => continue,
                other => return other,
            }
        }
    }

    fn output_offset(&self, pos: u64) -> u64 {
        self.job.output_start + (pos - self.job.start)
    }

    fn write_good(&mut self, pos: u64, len: usize, full: bool) -> Result<(), Ended> {
        if full {
            bump(&self.sink.counters.records_in_full);
        } else {
            bump(&self.sink.counters.records_in_partial);
        }
        let at = self.output_offset(pos);
        self.sink
            .write(&mut *self.job.output, at, &self.buf.as_slice()[..len])?;
        if full {
            bump(&self.sink.counters.records_out_full);
        } else {
            bump(&self.sink.counters.records_out_partial);
        }
        self.job.map.mark(pos, len as u64, BlockStatus::Finished);
        Ok(())
    }

    /// Zeros where the input could not be read; marked bad.
    fn write_bad(&mut self, pos: u64, len: usize) -> Result<(), Ended> {
        let at = self.output_offset(pos);
        self.sink
            .write(&mut *self.job.output, at, &self.zeros[..len])?;
        self.job.map.mark(pos, len as u64, BlockStatus::BadSector);
        self.newly_bad += len as u64;
        Ok(())
    }
}

/// Counting what is written, and the hash tap.
struct PositionalSink<'c> {
    counters: &'c Counters,
    tap: Option<Tap>,
}

impl PositionalSink<'_> {
    fn write(&mut self, output: &mut dyn End, at: u64, data: &[u8]) -> Result<(), Ended> {
        if let Some(tap) = &mut self.tap {
            tap.feed(data);
        }
        let mut done = 0;
        while done < data.len() {
            match output.write_at(&data[done..], at + done as u64) {
                Ok(0) => {
                    return Err(Ended::WriteError {
                        offset: at + done as u64,
                        errno: Errno::NOSPC,
                    })
                }
                Ok(n) => {
                    done += n;
                    add(&self.counters.bytes_out, n as u64);
                }
                Err(Errno::INTR) => {}
                Err(errno) => {
                    // What was written of this piece is on the output; the
                    // map keeps only whole pieces, so it is redone on resume.
                    return Err(Ended::WriteError {
                        offset: at + done as u64,
                        errno,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Copier<'_, '_> {
    /// Save the map (if kept): the output first, so that no range is
    /// marked finished before its bytes are on the device.
    fn save_map(&mut self, last: bool) {
        self.last_save = Instant::now();
        let Some(path) = &self.job.map_path else {
            return;
        };
        match self.job.output.sync(true) {
            Ok(()) | Err(Errno::INVAL) | Err(Errno::ROFS) => {}
            Err(errno) => {
                self.map_error = Some((path.clone(), crate::sys::errno_text(errno)));
                return;
            }
        }
        if let Err(e) = self.job.map.save(path, &self.job.command_line) {
            if last || self.map_error.is_none() {
                self.map_error = Some((path.clone(), e.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn plan(words: &[&str]) -> CopyPlan {
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        crate::operands::parse(&words).plan.expect("valid operands")
    }

    #[test]
    fn a_resume_says_what_its_map_holds() {
        let mut map = Map::new(0, 1 << 20);
        map.mark(0, 1 << 18, BlockStatus::Finished);
        map.mark(1 << 18, 512, BlockStatus::BadSector);
        assert_eq!(
            resume_summary(&map, Path::new("out.map")),
            "resuming from 'out.map': 262144 bytes done, 785920 left, 512 bad (25% done)"
        );
        map.mark(0, 1 << 20, BlockStatus::Finished);
        assert!(resume_summary(&map, Path::new("m")).ends_with(" 0 left, 0 bad (100% done)"));
    }

    #[test]
    fn positional_copies_need_two_named_ends() {
        assert!(check(&plan(&["of=b"]), true, None, false, None)
            .unwrap_err()
            .contains("needs if=FILE"));
        assert!(check(&plan(&["if=a"]), false, None, true, None)
            .unwrap_err()
            .contains("--resume needs of=FILE"));
    }

    /// Whether `--rescue` (`rescue`) or `--resume` (not) accepts `words`.
    fn accepted(words: &[&str], rescue: bool) -> bool {
        let mut all = vec!["if=a", "of=b"];
        all.extend_from_slice(words);
        check(&plan(&all), rescue, None, !rescue, None).is_ok()
    }

    #[test]
    fn what_moves_bytes_is_refused() {
        for conv in ["conv=swab", "conv=ucase", "conv=sparse", "conv=sync"] {
            assert!(!accepted(&[conv], true), "{conv}");
        }
        // noerror needs sync to keep positions, unless --rescue retries.
        assert!(!accepted(&["conv=noerror"], false));
        assert!(accepted(&["conv=noerror"], true));
        assert!(accepted(&["conv=noerror,sync"], false));
        assert!(!accepted(&["oflag=append"], true));
    }

    #[test]
    fn resume_keeps_a_checkpoint_next_to_the_output() {
        let request = check(&plan(&["if=a", "of=dir/b.img"]), false, None, true, None).unwrap();
        assert_eq!(request.map_path, Some(PathBuf::from("dir/b.img.ddx-map")));
        assert!(request.map_is_checkpoint);
        let request = check(
            &plan(&["if=a", "of=b"]),
            true,
            Some(Path::new("m")),
            true,
            Some(4096),
        )
        .unwrap();
        assert_eq!(request.map_path, Some(PathBuf::from("m")));
        assert!(!request.map_is_checkpoint);
        assert_eq!(request.sector, Some(4096));
    }
}
