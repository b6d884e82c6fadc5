//! The positional copy's moving parts: a request of the first reads (a
//! record), a sector read again, the writes at their place, the map saved
//! behind the output's data. The plain copy (`--map`, `--resume` without
//! `--rescue`) is a loop over them here; a rescue's phases are in
//! `phases`.
//!
//! Every byte this run writes is counted once in the statistics: the
//! first reads write the whole extent of each request (data, and zeros
//! where a read failed), and a later phase counts only what it recovers
//! where this run had not written yet (`unwritten`: the failed blocks the
//! map held when the run began). So are GNU's records, on the grid of ibs
//! whatever the request size ([`Copier::count`]): a resumed retry pass
//! says in records too what it recovered.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use super::mapfile::{BlockStatus, Map};
use super::phases::{Phase, Standing};
use super::{Ended, Job, RescueOutcome};
use crate::diagnostic::Events;
use crate::engine::counters::{add, Counters};
use crate::engine::stream::Stream;
use crate::integrity::Tap;
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::fill::{fill, Filled};
use crate::sys::Errno;

/// How often the map is saved during a copy.
const SAVE_EVERY: Duration = Duration::from_millis(500);

/// What a failed request's unread rest becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnError {
    /// The copy stops there (no conv=noerror, no --rescue).
    Stop,
    /// Zeros, and this status in the map: bad sectors for
    /// conv=noerror,sync, non-trimmed for a rescue's copying phase.
    Fill(BlockStatus),
}

/// How one request of the first reads went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Got {
    Whole,
    /// A read failed; the rest of the request was filled with zeros.
    Failed,
    /// The input ended before the request did: the copy's end is here.
    EndOfInput,
}

pub(super) struct Copier<'a, 'c> {
    pub(super) job: Job<'a>,
    events: &'c dyn Events,
    sink: PositionalSink<'c>,
    /// The input again with O_DIRECT, for sector reads (a rescue of a
    /// file or block device).
    direct: Option<OwnedFd>,
    /// The input's own reads go through the page cache (a file or block
    /// device opened without O_DIRECT): a sector is read that way first.
    cached: bool,
    /// The input is served (an NBD export, an object): no page cache or
    /// block layer under it reads a failed request again.
    served: bool,
    buf: AlignedBuf,
    sector_buf: AlignedBuf,
    last_save: Instant,
    map_error: Option<(PathBuf, String)>,
    /// Where this run has not written yet, of what it may write again:
    /// the failed blocks of the map it began with ('?' there), the rest
    /// '+'.
    unwritten: Map,
    bad_before: u64,
    /// Why the digests do not cover the whole output, if they do not.
    digest_error: Option<String>,
    pub(super) phases: Vec<Phase>,
    pub(super) read_errors: u64,
    pub(super) standing: std::sync::Arc<Standing>,
}

impl<'a, 'c> Copier<'a, 'c> {
    pub(super) fn new(
        mut job: Job<'a>,
        counters: &'c Counters,
        events: &'c dyn Events,
    ) -> Result<Self, Errno> {
        let direct = match job.input_path {
            Some(path) if job.rescue => file::open_input(path, OFlags::DIRECT).ok(),
            _ => None,
        };
        let cached = job.input.fd().is_some_and(|fd| {
            rustix::fs::fcntl_getfl(fd).is_ok_and(|flags| !flags.contains(OFlags::DIRECT))
        });
        let served = job.rescue && job.input.capabilities().served;
        let mut unwritten = Map::new(job.start, job.end);
        unwritten.mark(job.start, job.end - job.start, BlockStatus::Finished);
        for block in job.map.blocks() {
            if block.status.failed() {
                unwritten.mark(block.pos, block.size, BlockStatus::NonTried);
            }
        }
        let standing = std::sync::Arc::clone(&job.standing);
        standing.set_failed(job.map.failed_bytes());
        Ok(Copier {
            buf: AlignedBuf::new(job.chunk)?,
            sector_buf: AlignedBuf::new(job.sector)?,
            direct,
            cached,
            served,
            events,
            sink: PositionalSink {
                counters,
                tap: job.tap.take(),
                tap_at: job.output_start,
                in_order: true,
            },
            last_save: Instant::now(),
            map_error: None,
            bad_before: job.map.bytes_with(BlockStatus::BadSector),
            digest_error: None,
            unwritten,
            phases: Vec::new(),
            read_errors: 0,
            standing,
            job,
        })
    }

    pub(super) fn run(mut self) -> Result<RescueOutcome, Errno> {
        // A map on disk from the start: the room for later saves is taken
        // while the filesystem has it.
        self.save_map(false);
        let ended = match self.copy() {
            Ok(()) => Ended::Complete,
            Err(ended) => ended,
        };
        if matches!(ended, Ended::Complete) {
            self.job.map.current_status = '+';
            self.job.map.current_pos = self.job.end;
            if !self.sink.in_order {
                self.digest_the_rest();
            }
        }
        self.standing.set_phase(None);
        self.standing.set_failed(self.job.map.failed_bytes());
        self.save_map(true);
        // The hasher thread gets the last staged bytes.
        drop(self.sink.tap.take());
        Ok(RescueOutcome {
            ended,
            map: self.job.map,
            map_error: self.map_error,
            bad_before: self.bad_before,
            digest_error: self.digest_error,
            phases: self.phases,
            read_errors: self.read_errors,
        })
    }

    fn copy(&mut self) -> Result<(), Ended> {
        if self.job.rescue {
            return self.rescue();
        }
        let on_error = if self.job.pad_failed_chunks {
            OnError::Fill(BlockStatus::BadSector)
        } else {
            OnError::Stop
        };
        for block in self.job.map.pending() {
            let mut pos = block.pos;
            while pos < block.end().min(self.job.end) {
                let len = self.request_end(pos).min(block.end()) - pos;
                if self.request(pos, len as usize, on_error)? == Got::EndOfInput {
                    return Ok(());
                }
                pos += len;
                self.step(pos);
            }
        }
        Ok(())
    }

    /// Where the request that holds input position `pos` ends: requests
    /// lie ibs apart from the copy's start, whatever order they are read
    /// in, so each is read once and counted once.
    pub(super) fn request_end(&self, pos: u64) -> u64 {
        let chunk = self.job.chunk as u64;
        (self.job.start + ((pos - self.job.start) / chunk + 1) * chunk).min(self.job.end)
    }

    /// Where the request that ends at `end` (exclusive) begins.
    pub(super) fn request_start(&self, end: u64) -> u64 {
        let chunk = self.job.chunk as u64;
        self.job.start + (end - 1 - self.job.start) / chunk * chunk
    }

    /// Read `[pos, pos+want)` in one request and write it at its place.
    /// A failure from some position on is handled as `on_error` says.
    pub(super) fn request(
        &mut self,
        pos: u64,
        want: usize,
        on_error: OnError,
    ) -> Result<Got, Ended> {
        let input = &mut self.job.input;
        let Filled {
            len: mut got,
            error: mut failure,
        } = fill(&mut self.buf.as_mut_slice()[..want], |rest, done| {
            input.read_at(rest, pos + done)
        });
        if failure.is_some_and(|errno| !input_gone(errno)) && self.served {
            (got, failure) = self.read_once_more(pos, got, want);
        }
        if failure.is_some() && on_error == OnError::Fill(BlockStatus::NonTrimmed) {
            got = self.read_up_to_named(pos, got, want);
        }
        match failure {
            None if got == want => {
                self.write_request(pos, want, true)?;
                self.count(pos, want, want, want);
                self.job.map.mark(pos, want as u64, BlockStatus::Finished);
                Ok(Got::Whole)
            }
            None => {
                // The input ends inside the map: it is shorter than it was
                // (or than the map says); nothing past here to read.
                if got > 0 {
                    self.write_request(pos, got, true)?;
                    self.count(pos, got, got, got);
                }
                let end = pos + got as u64;
                if end < self.job.end {
                    self.job
                        .map
                        .mark(end, self.job.end - end, BlockStatus::Finished);
                }
                self.job.map.mark(pos, got as u64, BlockStatus::Finished);
                self.job.end = end;
                Ok(Got::EndOfInput)
            }
            Some(errno) => {
                self.read_errors += 1;
                let bad_from = pos + got as u64;
                let on_error = if input_gone(errno) {
                    OnError::Stop
                } else {
                    on_error
                };
                match on_error {
                    OnError::Stop => {
                        if got > 0 {
                            self.write_request(pos, got, true)?;
                            self.count(pos, got, got, got);
                            self.job.map.mark(pos, got as u64, BlockStatus::Finished);
                        }
                        Err(Ended::ReadError {
                            offset: bad_from,
                            errno,
                        })
                    }
                    OnError::Fill(status) => {
                        self.buf.as_mut_slice()[got..want].fill(0);
                        // Zeros that stay (bad sectors) are settled; those a
                        // rescue reads again later are not.
                        let settled = status == BlockStatus::BadSector;
                        self.write_request(pos, want, settled)?;
                        self.count(pos, want, got, want);
                        self.job.map.mark(pos, got as u64, BlockStatus::Finished);
                        self.job.map.mark(bad_from, (want - got) as u64, status);
                        Ok(Got::Failed)
                    }
                }
            }
        }
    }

    /// GNU's records of a read at `pos` of `tried` bytes, the first `got`
    /// of them read, and its write of `written` bytes, as GNU dd counts
    /// them reading record by record (with conv=noerror,sync where a read
    /// failed): a record of the copy's grid read whole is a full record
    /// in, every other record the read touched (cut short by an error or
    /// the input's end, or only partly this read's) a partial one; out, a
    /// record written whole is full, a piece of one partial.
    pub(super) fn count(&self, pos: u64, tried: usize, got: usize, written: usize) {
        let counters = self.sink.counters;
        let (whole_read, _) = self.records(pos, pos + got as u64);
        let (whole_tried, pieces_tried) = self.records(pos, pos + tried as u64);
        add(&counters.records_in_full, whole_read);
        add(
            &counters.records_in_partial,
            whole_tried + pieces_tried - whole_read,
        );
        let (whole_out, pieces_out) = self.records(pos, pos + written as u64);
        add(&counters.records_out_full, whole_out);
        add(&counters.records_out_partial, pieces_out);
    }

    /// The records of the copy's grid (ibs apart from its start) in input
    /// positions `[from, to)`: how many lie wholly inside, and how many
    /// pieces of records it holds besides (cut by either end).
    fn records(&self, from: u64, to: u64) -> (u64, u64) {
        if from >= to {
            return (0, 0);
        }
        let (start, record) = (self.job.start, self.job.record as u64);
        let first_boundary = start + (from - start).div_ceil(record) * record;
        let last_boundary = start + (to - start) / record * record;
        let whole = last_boundary.saturating_sub(first_boundary) / record;
        let head = u64::from(from < first_boundary.min(to));
        let tail = u64::from(last_boundary >= first_boundary && last_boundary < to);
        (whole, head + tail)
    }

    /// A served input's request that failed after `got` of its `want`
    /// bytes, read once more from there, as the page cache reads a failed
    /// readahead of a file once more before a read fails (what ddrescue
    /// reading a served disk through a file, nbdfuse, gets): how much is
    /// read now, and the error if it failed again. The failure counts.
    fn read_once_more(&mut self, pos: u64, got: usize, want: usize) -> (usize, Option<Errno>) {
        self.read_errors += 1;
        let input = &mut self.job.input;
        let again = fill(&mut self.buf.as_mut_slice()[got..want], |rest, done| {
            input.read_at(rest, pos + got as u64 + done)
        });
        (got + again.len, again.error)
    }

    /// After the request `[pos, pos+want)` failed with `got` bytes read:
    /// where the device named the first bad byte (a SCSI disk's sense
    /// data), what lies before it is read again in one piece, so that
    /// trimming starts at the bad block instead of reading the good ones
    /// before it sector by sector. How much of the request is read now.
    fn read_up_to_named(&mut self, pos: u64, got: usize, want: usize) -> usize {
        let Some(named) = self
            .job
            .input
            .failed_at()
            .filter(|&at| at > pos + got as u64 && at < pos + want as u64)
        else {
            return got;
        };
        let until = (named - pos) as usize;
        let input = &mut self.job.input;
        let Filled { len, error } = fill(&mut self.buf.as_mut_slice()[got..until], |rest, done| {
            input.read_at(rest, pos + got as u64 + done)
        });
        if error.is_some() {
            self.read_errors += 1;
        }
        got + len
    }

    /// The first `len` bytes of the request buffer to input `pos`'s place;
    /// `settled` unless zeros stand in for what a later phase may read.
    fn write_request(&mut self, pos: u64, len: usize, settled: bool) -> Result<(), Ended> {
        let at = self.output_offset(pos);
        let data = &self.buf.as_slice()[..len];
        let how = if settled {
            Written::Settled
        } else {
            Written::Provisional
        };
        self.sink.write(&mut *self.job.output, at, data, how)?;
        // Written by this run: a later phase does not count it again.
        self.unwritten.mark(pos, len as u64, BlockStatus::Finished);
        Ok(())
    }

    /// Read `[pos, pos+len)`, within one sector, again: on success write it
    /// and mark it finished; on failure mark it `failed_as` and leave the
    /// output as it is (zeros written by this run's request, or what an
    /// earlier run left there, as ddrescue leaves a bad sector untouched).
    /// Whether it was recovered.
    pub(super) fn read_again(
        &mut self,
        pos: u64,
        len: usize,
        failed_as: BlockStatus,
    ) -> Result<bool, Ended> {
        match self.read_sector(pos, len) {
            Ok(n) => {
                if n > 0 {
                    let at = self.output_offset(pos);
                    let fresh = self.unwritten.overlap(pos, n as u64, BlockStatus::NonTried);
                    self.sink.write(
                        &mut *self.job.output,
                        at,
                        &self.sector_buf.as_slice()[..n],
                        Written::Again,
                    )?;
                    add(&self.sink.counters.bytes_out, fresh);
                    // Bytes this run had not written: read and written now,
                    // as GNU's records (a retry pass's statistics are what
                    // it recovered).
                    if fresh > 0 {
                        self.count(pos, n, n, n);
                    }
                    self.unwritten.mark(pos, n as u64, BlockStatus::Finished);
                }
                // Short: the input ends here, nothing is left to read.
                self.job.map.mark(pos, len as u64, BlockStatus::Finished);
                Ok(true)
            }
            Err(errno) if input_gone(errno) => Err(Ended::ReadError { offset: pos, errno }),
            Err(_) => {
                self.read_errors += 1;
                self.job.map.mark(pos, len as u64, failed_as);
                Ok(false)
            }
        }
    }

    /// Read `len` bytes at `pos`, all within one sector, into the front of
    /// the sector buffer. Through O_DIRECT the whole sector is read (a
    /// direct read must be aligned) and the wanted part moved to the front:
    /// a read through the cache would fail for the whole page.
    fn read_sector(&mut self, pos: u64, len: usize) -> Result<usize, Errno> {
        // Through the cache first, as ddrescue reads a file (the kernel
        // reads a failed page once more); where that fails, the sector
        // alone with O_DIRECT, which a bad neighbour in its page cannot
        // fail.
        if self.cached && self.direct.is_some() {
            match self.read_sector_as_opened(len, pos) {
                Err(errno) if !input_gone(errno) => self.read_errors += 1,
                other => return other,
            }
        }
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
        match self.read_sector_as_opened(len, pos) {
            // Served: no layer under it reads a failed request again.
            Err(errno) if self.served && !input_gone(errno) => {
                self.read_errors += 1;
                self.read_sector_as_opened(len, pos)
            }
            other => other,
        }
    }

    /// Read `len` bytes at `pos` into the front of the sector buffer, as
    /// the input was opened.
    fn read_sector_as_opened(&mut self, len: usize, pos: u64) -> Result<usize, Errno> {
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

    /// Between two reads: where the copy stands, for the map's status
    /// line and the progress line; a progress line when one is due
    /// (status=progress prints it between two requests, as the record
    /// engine does); the map saved twice a second.
    pub(super) fn step(&mut self, pos: u64) {
        self.job.map.current_pos = pos;
        self.standing.set_failed(self.job.map.failed_bytes());
        if self.sink.counters.take_progress_due() {
            self.events.progress();
        }
        if self.last_save.elapsed() >= SAVE_EVERY {
            self.save_map(false);
        }
    }

    /// Save the map (if kept): the output first, so that no range is
    /// marked finished before its bytes are on the device.
    pub(super) fn save_map(&mut self, last: bool) {
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
        if let Err(e) = self
            .job
            .map
            .save_noted(path, &self.job.command_line, &self.job.notes)
        {
            if last || self.map_error.is_none() {
                self.map_error = Some((path.clone(), e.to_string()));
            }
        }
    }
}

/// Whether a read error says the input itself is gone (a server that
/// hung up, a device unplugged) rather than that these sectors cannot be
/// read: the copy then stops where it is, its map saved, for `--resume`
/// once the input is back, instead of marking everything after as bad.
fn input_gone(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::NOTCONN
            | Errno::SHUTDOWN
            | Errno::CONNRESET
            | Errno::CONNABORTED
            | Errno::PIPE
            | Errno::NODEV
            | Errno::NXIO
            | Errno::NOMEDIUM
            | Errno::BADF
    )
}

/// How a write stands for the statistics and the digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Counted in the statistics; what the output keeps.
    Settled,
    /// Counted; zeros a later phase may overwrite.
    Provisional,
    /// A later phase's write: counted by the caller, where new.
    Again,
}

/// Counting what is written, and the hash tap. The tap must see the
/// output's bytes in order, as they end up: it is fed while the writes
/// come in order and settled; from the first write that does not, the
/// rest is read back from the output once the copy is done
/// ([`Copier::digest_the_rest`]).
struct PositionalSink<'c> {
    counters: &'c Counters,
    tap: Option<Tap>,
    /// The output offset the tap has been fed up to.
    tap_at: u64,
    in_order: bool,
}

impl PositionalSink<'_> {
    /// Write `data` at output `at`; unless it is written `Again`, add what
    /// is written to the statistics' bytes as it goes (a write that fails
    /// half-way counts its first half).
    fn write(
        &mut self,
        output: &mut dyn Stream,
        at: u64,
        data: &[u8],
        how: Written,
    ) -> Result<(), Ended> {
        if let (Some(tap), true) = (&mut self.tap, self.in_order) {
            if how == Written::Settled && at == self.tap_at {
                tap.feed(data);
                self.tap_at += data.len() as u64;
            } else {
                self.in_order = false;
            }
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
                    if how != Written::Again {
                        add(&self.counters.bytes_out, n as u64);
                    }
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
    /// The digests of a rescue that wrote out of order: what the output
    /// holds from where the tap stopped to the copy's end, read back.
    fn digest_the_rest(&mut self) {
        let Some(mut tap) = self.sink.tap.take() else {
            return;
        };
        let end = self.output_offset(self.job.end);
        let mut reopened: Option<OwnedFd> = None;
        while self.sink.tap_at < end {
            let at = self.sink.tap_at;
            let want = (end - at).min(self.job.chunk as u64) as usize;
            let buf = &mut self.buf.as_mut_slice()[..want];
            let output = &mut self.job.output;
            let mut filled = match &reopened {
                Some(fd) => fill(buf, |rest, done| rustix::io::pread(fd, rest, at + done)),
                None => fill(buf, |rest, done| output.read_at(rest, at + done)),
            };
            // An output opened for writing only: read it by name.
            if filled.error == Some(Errno::BADF) && reopened.is_none() {
                if let Some(path) = self.job.output_path {
                    if let Ok(fd) = file::open_input(path, OFlags::empty()) {
                        reopened = Some(fd);
                        continue;
                    }
                }
            }
            if filled.len < want && filled.error.is_none() {
                filled.error = Some(Errno::NODATA);
            }
            tap.feed(&buf[..filled.len]);
            self.sink.tap_at += filled.len as u64;
            if let Some(errno) = filled.error {
                self.digest_error = Some(format!(
                    "the digests cover the output's first {} bytes only: the rescue wrote \
                     out of order, and reading the rest back failed at offset {}: {}",
                    self.sink.tap_at - self.job.output_start,
                    self.sink.tap_at,
                    crate::sys::errno_text(errno)
                ));
                return;
            }
        }
    }
}
