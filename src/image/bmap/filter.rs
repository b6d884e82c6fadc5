//! `--bmap=FILE`: an input seen through its block map.
//!
//! Unmapped blocks read as holes: zeros, reported by
//! [`Stream::next_data`]/[`Stream::next_hole`] so that the engine skips them and
//! writes only the mapped ranges. Their bytes are never asked of the
//! input: a file is sought over, a stream (a decompressed image) is read
//! over only when a mapped range after them is needed. Each mapped range
//! is digested as it passes and checked at its last byte; a mismatch is
//! EBADMSG (the data is wrong, not the device), with a detail naming the
//! range's blocks and image offset, and the copy stops there, as bmaptool
//! stops.
//!
//! The map's image size must be the input's: checked at once when the
//! input has a size, and otherwise (a stream) when the stream is read
//! past the last mapped byte, which reads its tail to its end (the tail
//! is a hole, so its bytes are not otherwise wanted).
//!
//! The filter is a stream to the engine (reads in order, seeks forward):
//! a range read in pieces out of order could not be checked.

use std::sync::Arc;

use super::{Bmap, BmapError, Hasher};
use crate::ends::{Kind, Whence};
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::Errno;

const SCRATCH: usize = 1 << 20;

#[derive(Debug)]
pub struct BmapFilter {
    inner: Box<dyn Stream>,
    map: Arc<Bmap>,
    name: String,
    /// The image offset of the next read.
    pos: u64,
    /// How far the inner end has been consumed, in image offsets.
    inner_pos: u64,
    /// The inner end can seek (a file): holes are sought over.
    positional: bool,
    /// The first range whose end is beyond `pos`.
    next_range: usize,
    /// The range being digested and how far: it started at its first
    /// byte and has gone on without a gap.
    digesting: Option<(usize, Hasher, u64)>,
    /// The inner end has been checked to end at the image size.
    length_checked: bool,
    /// A failure that stands (a size mismatch, a bad range): returned
    /// again if the engine reads on.
    failed: Option<(Errno, String)>,
    detail: Option<String>,
    /// Ranges whose digest matched, and those that could not be checked
    /// (no digest, or read out of order).
    pub verified: u64,
    pub unverified: u64,
    scratch: Vec<u8>,
    /// `--verify` of a map that gives some ranges no digest: the XXH3-64
    /// of each such range as it passed (by range index), for the
    /// read-back to check the output against; and the one being taken.
    recorded: Option<Recorded>,
    recording: Option<(usize, Running, u64)>,
}

/// A range's digest being taken (XXH3 has no Debug to derive).
#[derive(Default)]
struct Running(Box<xxhash_rust::xxh3::Xxh3>);

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Running")
    }
}

/// Digests taken of the ranges a map gives none, by range index; shared
/// with whoever reads the output back.
pub type Recorded = std::sync::Arc<std::sync::Mutex<Vec<Option<u64>>>>;

impl BmapFilter {
    /// `input` (named `name` in messages) through `map` (from `file`).
    /// Refuses a map whose image size is not the input's, where the input
    /// knows its size.
    pub fn new(
        input: Box<dyn Stream>,
        map: Arc<Bmap>,
        name: &str,
        file: &str,
    ) -> Result<BmapFilter, BmapError> {
        let positional = input.capabilities().reads_at;
        let mut length_checked = false;
        if let Ok(Some(size)) = input.size() {
            map.check_size(name, size, file)?;
            length_checked = true;
        }
        Ok(BmapFilter {
            inner: input,
            map,
            name: name.to_owned(),
            pos: 0,
            inner_pos: 0,
            positional,
            next_range: 0,
            digesting: None,
            length_checked,
            failed: None,
            detail: None,
            verified: 0,
            unverified: 0,
            scratch: Vec::new(),
            recorded: None,
            recording: None,
        })
    }

    /// Take a digest of each range the map gives none as it passes (see
    /// [`Recorded`]); the slots fill as the copy goes.
    pub fn record_undigested(&mut self) -> Recorded {
        let recorded: Recorded = Default::default();
        if let Ok(mut slots) = recorded.lock() {
            slots.resize(self.map.ranges.len(), None);
        }
        self.recorded = Some(std::sync::Arc::clone(&recorded));
        recorded
    }

    /// Digest `data`, the bytes of undigested range `index` (image bytes
    /// `[start, end)`) at image offset `at`, when recording; a range read
    /// from its first byte without a gap gets its digest at its last.
    fn record(&mut self, index: usize, start: u64, end: u64, at: u64, data: &[u8]) {
        if self.recorded.is_none() {
            return;
        }
        let continues = matches!(&self.recording, Some((i, _, next)) if *i == index && *next == at);
        if !continues {
            self.recording = None;
            if at != start {
                return;
            }
            self.recording = Some((index, Default::default(), start));
        }
        let Some((_, hasher, next)) = self.recording.as_mut() else {
            return;
        };
        hasher.0.update(data);
        *next += data.len() as u64;
        if *next < end {
            return;
        }
        let (_, hasher, _) = self.recording.take().expect("set above");
        if let Some(Ok(mut slots)) = self.recorded.as_ref().map(|r| r.lock()) {
            if let Some(slot) = slots.get_mut(index) {
                *slot = Some(hasher.0.digest());
            }
        }
    }

    pub fn map(&self) -> &Bmap {
        &self.map
    }

    fn fail(&mut self, errno: Errno, detail: String) -> Errno {
        self.failed = Some((errno, detail.clone()));
        self.detail = Some(detail);
        errno
    }

    fn size_mismatch(&mut self, actual: &str) -> Errno {
        let detail = format!(
            "the bmap is for a {}-byte image, but {} {actual}",
            self.map.image_size, self.name
        );
        self.fail(Errno::BADMSG, detail)
    }

    /// Read from the inner end until `buf` is full or it ends.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(Errno::INTR) => {}
                Err(errno) => {
                    self.detail = self.inner.take_detail();
                    return Err(errno);
                }
            }
        }
        self.inner_pos += filled as u64;
        Ok(filled)
    }

    /// Move the inner end forward to image offset `to`, over bytes that
    /// are not wanted (a hole).
    fn skip_inner(&mut self, to: u64) -> Result<(), Errno> {
        if to <= self.inner_pos {
            return Ok(());
        }
        let gap = to - self.inner_pos;
        if self.positional
            && i64::try_from(gap).is_ok_and(|gap| self.inner.seek(Whence::Current(gap)).is_ok())
        {
            self.inner_pos = to;
            return Ok(());
        }
        // A decoded stream drops the bytes without copying them out.
        match self.inner.discard(gap) {
            Ok(passed) => {
                self.inner_pos += passed;
                if passed < gap {
                    let ends = format!("ends at byte {}", self.inner_pos);
                    return Err(self.size_mismatch(&ends));
                }
                return Ok(());
            }
            Err(Errno::NOTSUP) => {}
            Err(errno) => {
                self.detail = self.inner.take_detail();
                return Err(errno);
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(SCRATCH, 0);
        let mut result = Ok(());
        while self.inner_pos < to {
            let want = ((to - self.inner_pos).min(SCRATCH as u64)) as usize;
            match self.fill(&mut scratch[..want]) {
                Ok(n) if n == want => {}
                Ok(_) => {
                    let ends = format!("ends at byte {}", self.inner_pos);
                    result = Err(self.size_mismatch(&ends));
                    break;
                }
                Err(errno) => {
                    result = Err(errno);
                    break;
                }
            }
        }
        self.scratch = scratch;
        result
    }

    /// Check that the inner end holds exactly the image: read over the
    /// rest (a hole) and see it end there.
    fn check_length(&mut self) -> Result<(), Errno> {
        if self.length_checked {
            return Ok(());
        }
        self.skip_inner(self.map.image_size)?;
        let mut probe = [0u8; 1];
        if self.fill(&mut probe)? > 0 {
            return Err(self.size_mismatch("is longer"));
        }
        self.length_checked = true;
        Ok(())
    }

    /// The range at or after image offset `at`, moving `next_range` on.
    fn range_from(&mut self, at: u64) -> Option<(usize, u64, u64)> {
        while let Some(range) = self.map.ranges.get(self.next_range) {
            let (start, end) = self.map.byte_span(range);
            if end > at {
                return Some((self.next_range, start, end));
            }
            self.next_range += 1;
        }
        None
    }

    /// Digest `data`, the bytes of range `index` at image offset `at`;
    /// check the range when its last byte has passed.
    fn digest(&mut self, index: usize, at: u64, data: &[u8]) -> Result<(), Errno> {
        let map = Arc::clone(&self.map);
        let range = &map.ranges[index];
        let (start, end) = map.byte_span(range);
        let Some(kind) = map.checksum.filter(|_| range.digest.is_some()) else {
            if at + data.len() as u64 == end {
                self.unverified += 1;
            }
            self.record(index, start, end, at, data);
            return Ok(());
        };
        let continues = matches!(&self.digesting, Some((i, _, next)) if *i == index && *next == at);
        if !continues {
            if at != start {
                // Read out of order: this range cannot be checked.
                if self.digesting.take().is_some() || at + data.len() as u64 == end {
                    self.unverified += 1;
                }
                return Ok(());
            }
            self.digesting = Some((index, kind.hasher(), start));
        }
        let (_, hasher, next) = self.digesting.as_mut().expect("set above");
        hasher.update(data);
        *next += data.len() as u64;
        if *next < end {
            return Ok(());
        }
        let (_, hasher, _) = self.digesting.take().expect("set above");
        let actual = hasher.hex();
        let expected = range.digest.clone().expect("filtered above");
        if actual == expected {
            self.verified += 1;
            return Ok(());
        }
        let detail = format!(
            "blocks {}-{} (image bytes {start} to {end}) do not match the bmap: its {kind} is {expected}, {} gives {actual}",
            range.first, range.last, self.name
        );
        Err(self.fail(Errno::BADMSG, detail))
    }
}

impl Stream for BmapFilter {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if let Some((errno, detail)) = self.failed.clone() {
            self.detail = Some(detail);
            return Err(errno);
        }
        let image = self.map.image_size;
        if self.pos >= image || buf.is_empty() {
            if self.pos >= image {
                self.check_length()?;
            }
            return Ok(0);
        }
        let len = (buf.len() as u64).min(image - self.pos) as usize;
        let mut done = 0;
        while done < len {
            let at = self.pos + done as u64;
            let stop = at + (len - done) as u64;
            match self.range_from(at) {
                Some((index, start, end)) if start <= at => {
                    // Mapped: read it from the input and digest it.
                    let upto = end.min(stop);
                    let piece = &mut buf[done..done + (upto - at) as usize];
                    self.skip_inner(at)?;
                    if self.inner_pos != at {
                        // The input went past (a seek back): cannot re-read.
                        return Err(Errno::SPIPE);
                    }
                    let n = self.fill(piece)?;
                    if n < piece.len() {
                        let ends = format!("ends at byte {}", at + n as u64);
                        return Err(self.size_mismatch(&ends));
                    }
                    let piece = &buf[done..done + n];
                    self.digest(index, at, piece)?;
                    done += n;
                }
                next => {
                    // A hole up to the next range (or the end).
                    let upto = next.map_or(stop, |(_, start, _)| start.min(stop));
                    buf[done..done + (upto - at) as usize].fill(0);
                    done += (upto - at) as usize;
                }
            }
        }
        self.pos += len as u64;
        if self.range_from(self.pos).is_none() {
            // Nothing mapped is left: the rest of the input must be the
            // rest of the image, no more, no less.
            self.check_length()?;
        }
        Ok(len)
    }

    fn write(&mut self, _buf: &[u8]) -> Result<usize, Errno> {
        Err(Errno::BADF)
    }

    /// Forward anywhere (holes cost nothing; mapped bytes skipped are not
    /// checked); back only over what has not been read from the input.
    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(delta) => self.pos.checked_add_signed(delta),
            Whence::End(delta) => self.map.image_size.checked_add_signed(delta),
        }
        .ok_or(Errno::INVAL)?;
        if target < self.pos {
            if !self.positional {
                return Err(Errno::SPIPE);
            }
            let back = i64::try_from(self.inner_pos - target.min(self.inner_pos))
                .map_err(|_| Errno::INVAL)?;
            self.inner.seek(Whence::Current(-back))?;
            self.inner_pos -= back as u64;
            self.next_range = 0;
            self.digesting = None;
        }
        self.pos = target;
        Ok(target)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.map.image_size))
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        let found = self
            .map
            .ranges
            .iter()
            .map(|r| self.map.byte_span(r))
            .find(|&(_, end)| end > offset)
            .map(|(start, _)| start.max(offset));
        if found.is_none() && offset <= self.map.image_size {
            // Only a hole is left: the engine will not read it, so the
            // input's length is checked now.
            self.check_length()?;
        }
        Ok(found)
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        if offset >= self.map.image_size {
            return Err(Errno::NXIO);
        }
        Ok(self
            .map
            .ranges
            .iter()
            .map(|r| self.map.byte_span(r))
            .find(|&(_, end)| end > offset)
            .filter(|&(start, _)| start <= offset)
            .map_or(offset, |(_, end)| end))
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    forward_to_inner!(pipeline, settle, close, close_failed, abandon);
}
