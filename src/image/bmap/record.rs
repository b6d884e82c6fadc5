//! `--bmap-create=FILE`: a block map of the input, recorded as the copy
//! reads it.
//!
//! The recorder wraps the input end and watches the bytes go by, so the
//! map costs no second pass: each block is classed mapped or not, and each
//! run of mapped blocks digested (SHA-256, bmaptool's default) as it
//! passes. Bytes the engine seeks over (holes it skips) are zeros and
//! unmapped.
//!
//! Mapped means what bmaptool means where the input can say: the block
//! meets a data extent (SEEK_DATA/SEEK_HOLE) of a regular file (or of a
//! remote export that reports them). A stream or a pipe has no extents,
//! and a block device calls all of itself data; there a block is mapped
//! unless all its bytes are zero. That is the only information a stream carries, and it is what a
//! restore with `--bmap` then skips: the target keeps whatever those
//! blocks held before, exactly as bmaptool treats holes. A filesystem
//! that needs zeroed blocks it has not allocated (rare: ext4 and XFS
//! track what they initialised) must be restored without `--bmap`, or
//! onto a discarded device.
//!
//! The map describes the stream from `origin` (the input offset where
//! the copy starts, GNU's `skip=` in bytes) to the image size the caller
//! gives [`Recording::finish`] (the bytes the copy wrote). The recording
//! is handed over at [`Stream::close`]; an abandoned copy leaves none.

use std::sync::{Arc, Mutex};

use super::{Bmap, ChecksumKind, Hasher, Range};
use crate::ends::{Capabilities, Kind, Whence};
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::Errno;
use crate::transform::is_all_zero;

/// How blocks are classed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Classing {
    /// By the input's data extents.
    Extents,
    /// By their bytes: all zeros is a hole.
    Zeros,
}

/// The map as recorded so far; [`Recording::finish`] makes it a [`Bmap`].
#[derive(Debug)]
pub struct Recording {
    block_size: u64,
    kind: ChecksumKind,
    /// Image bytes accounted for.
    seen: u64,
    /// The bytes of the block being filled (`seen % block_size` of them).
    block: Vec<u8>,
    /// Some byte of the block being filled came from a read (not a hole
    /// sought over).
    block_read: bool,
    /// The run of mapped blocks being digested: first, last, digest.
    run: Option<(u64, u64, Hasher)>,
    /// Whether the block the input ended in is mapped (classed at close,
    /// while the input can still be asked).
    pending_mapped: bool,
    ranges: Vec<Range>,
    /// Why the recording cannot be finished, if it cannot.
    broken: Option<String>,
    complete: bool,
}

impl Recording {
    /// The map of an image of `image_size` bytes (the bytes the copy
    /// wrote; at least those the recorder saw).
    pub fn finish(mut self, image_size: u64) -> Result<Bmap, String> {
        if let Some(why) = self.broken.take() {
            return Err(why);
        }
        if !self.complete {
            return Err("the copy did not complete".into());
        }
        if image_size < self.seen {
            return Err(format!(
                "the input gave {} bytes, more than the {image_size} the copy wrote",
                self.seen
            ));
        }
        // The block the input ended in was classed at close; the rest is
        // a hole.
        let pending = self.pending_mapped;
        self.hole(image_size - self.seen, &mut |_, _, _| pending);
        if !self.block.is_empty() {
            let start = self.seen - self.block.len() as u64;
            let block = std::mem::take(&mut self.block);
            let mapped = self.block_read && pending;
            self.class(start, &block, mapped);
        }
        self.end_run();
        Ok(Bmap {
            version: (2, 0),
            image_size,
            block_size: self.block_size,
            blocks: image_size.div_ceil(self.block_size),
            checksum: Some(self.kind),
            ranges: self.ranges,
        })
    }

    /// Bytes read at image offset `seen`; `mapped(start, end)` says
    /// whether a block spanning `start..end` holds data.
    fn bytes(&mut self, mut data: &[u8], mapped: &mut dyn FnMut(u64, u64, &[u8]) -> bool) {
        let bs = self.block_size as usize;
        while !data.is_empty() {
            if self.block.is_empty() && data.len() >= bs {
                // Whole blocks straight from the caller's buffer.
                let whole = data.len() / bs * bs;
                for block in data[..whole].chunks_exact(bs) {
                    let start = self.seen;
                    self.seen += bs as u64;
                    let is = mapped(start, start + bs as u64, block);
                    self.class(start, block, is);
                }
                data = &data[whole..];
                continue;
            }
            let n = (bs - self.block.len()).min(data.len());
            self.block.extend_from_slice(&data[..n]);
            self.block_read = true;
            self.seen += n as u64;
            data = &data[n..];
            if self.block.len() == bs {
                self.complete_block(mapped);
            }
        }
    }

    /// `len` bytes of hole at image offset `seen`.
    fn hole(&mut self, mut len: u64, mapped: &mut dyn FnMut(u64, u64, &[u8]) -> bool) {
        let bs = self.block_size;
        if !self.block.is_empty() && len > 0 {
            let n = (bs - self.block.len() as u64).min(len);
            self.block.resize(self.block.len() + n as usize, 0);
            self.seen += n;
            len -= n;
            if self.block.len() as u64 == bs {
                self.complete_block(mapped);
            }
        }
        if len >= bs {
            let whole = len / bs * bs;
            self.end_run();
            self.seen += whole;
            len -= whole;
        }
        if len > 0 {
            self.block.resize(len as usize, 0);
            self.seen += len;
        }
    }

    fn complete_block(&mut self, mapped: &mut dyn FnMut(u64, u64, &[u8]) -> bool) {
        let block = std::mem::take(&mut self.block);
        let start = self.seen - block.len() as u64;
        let is = self.block_read && mapped(start, self.seen, &block);
        self.class(start, &block, is);
        self.block = block;
        self.block.clear();
        self.block_read = false;
    }

    fn class(&mut self, start: u64, block: &[u8], mapped: bool) {
        if !mapped {
            self.end_run();
            return;
        }
        let number = start / self.block_size;
        match &mut self.run {
            Some((_, last, hasher)) => {
                *last = number;
                hasher.update(block);
            }
            None => {
                let mut hasher = self.kind.hasher();
                hasher.update(block);
                self.run = Some((number, number, hasher));
            }
        }
    }

    fn end_run(&mut self) {
        if let Some((first, last, hasher)) = self.run.take() {
            self.ranges.push(Range {
                first,
                last,
                digest: Some(hasher.hex()),
            });
        }
    }
}

/// The input end, recorded.
#[derive(Debug)]
pub struct BmapRecorder {
    inner: Box<dyn Stream>,
    recording: Option<Recording>,
    handed: Arc<Mutex<Option<Recording>>>,
    classing: Classing,
    /// The input's absolute offset at image offset 0, where the input can
    /// seek (so that seeks can be followed and extents asked for).
    base: Option<u64>,
    /// The input offset, relative to where the recorder started.
    pos: u64,
    /// Where the image starts, relative to where the recorder started.
    origin: u64,
    /// The data extent at or after the last query (image offsets), or
    /// Some(None): no data after `none_after`.
    extent: Option<(u64, u64)>,
    none_after: Option<u64>,
}

impl BmapRecorder {
    /// Record `input` from `origin` bytes after its current position, in
    /// `block_size`-byte blocks. The recording appears in the returned
    /// slot when the recorder is closed.
    pub fn new(
        mut input: Box<dyn Stream>,
        block_size: u64,
        origin: u64,
    ) -> (BmapRecorder, Arc<Mutex<Option<Recording>>>) {
        let can = input.capabilities();
        let base = match can.reads_at {
            true => input
                .seek(Whence::Current(0))
                .ok()
                .map(|here| here + origin),
            false => None,
        };
        // A regular file's extents are its allocation; a remote export
        // may report real ones too. A block device says all of it is
        // data, which would map every block: its zeros are the holes.
        let classing = match base {
            Some(_) if can.extents => Classing::Extents,
            _ => Classing::Zeros,
        };
        let handed = Arc::new(Mutex::new(None));
        let recorder = BmapRecorder {
            inner: input,
            recording: Some(Recording {
                block_size: block_size.max(1),
                kind: ChecksumKind::Sha256,
                seen: 0,
                block: Vec::new(),
                block_read: false,
                run: None,
                pending_mapped: false,
                ranges: Vec::new(),
                broken: None,
                complete: false,
            }),
            handed: Arc::clone(&handed),
            classing,
            base,
            pos: 0,
            origin,
            extent: None,
            none_after: None,
        };
        (recorder, handed)
    }

    /// Class blocks by the input's data extents, whatever its kind: for an
    /// input whose extents say what is used (a disk read by its used
    /// blocks), where a used block of zeros is still data.
    pub fn by_extents(mut self) -> BmapRecorder {
        if self.base.is_some() {
            self.classing = Classing::Extents;
        }
        self
    }

    /// Whether the block at image bytes `start..end` holding `block` is
    /// mapped. Extent queries move the input: it is put back at `restore`
    /// (absolute).
    fn mapped(&mut self, start: u64, end: u64, block: &[u8], restore: u64) -> bool {
        let (Classing::Extents, Some(base)) = (self.classing, self.base) else {
            return !is_all_zero(block);
        };
        if self.none_after.is_some_and(|after| after <= start) {
            return false;
        }
        if let Some((data, hole)) = self.extent {
            if hole > start {
                return data < end;
            }
        }
        let found = self
            .inner
            .next_data(base + start)
            .and_then(|data| match data {
                None => Ok(None),
                Some(data) => Ok(Some((data, self.inner.next_hole(data)?))),
            });
        let back = self.inner.seek(Whence::Start(restore));
        match (found, back) {
            (Ok(Some((data, hole))), Ok(_)) => {
                self.extent = Some((data.saturating_sub(base), hole.saturating_sub(base)));
                data.saturating_sub(base) < end
            }
            (Ok(None), Ok(_)) => {
                self.none_after = Some(start);
                false
            }
            // No extent information after all: class by bytes.
            _ => {
                self.classing = Classing::Zeros;
                !is_all_zero(block)
            }
        }
    }

    /// Account for input bytes `from..to` (relative to the start), read
    /// (`data`) or sought over (None).
    fn pass(&mut self, from: u64, to: u64, data: Option<&[u8]>) {
        let Some(mut recording) = self.recording.take() else {
            return;
        };
        let start = from.max(self.origin);
        if start < to {
            let restore = self.restore();
            let mut mapped = |s: u64, e: u64, block: &[u8]| self.mapped(s, e, block, restore);
            match data {
                Some(bytes) => {
                    let skip = (start - from) as usize;
                    recording.bytes(&bytes[skip..], &mut mapped);
                }
                None => recording.hole(to - start, &mut mapped),
            }
        }
        self.recording = Some(recording);
    }

    /// The input's absolute position now (where extent queries put it
    /// back).
    fn restore(&self) -> u64 {
        self.base.map_or(0, |base| base - self.origin + self.pos)
    }

    fn break_recording(&mut self, why: &str) {
        if let Some(recording) = self.recording.as_mut() {
            recording.broken.get_or_insert_with(|| why.to_owned());
        }
    }
}

impl Stream for BmapRecorder {
    fn kind(&self) -> Kind {
        self.inner.kind().in_order()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().in_order()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.inner.read(buf)?;
        let from = self.pos;
        self.pos += n as u64;
        self.pass(from, self.pos, Some(&buf[..n]));
        Ok(n)
    }

    fn write(&mut self, _buf: &[u8]) -> Result<usize, Errno> {
        Err(Errno::BADF)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let at = self.inner.seek(to)?;
        let Some(base) = self.base else {
            // Without a known base a seek cannot be followed.
            if !matches!(to, Whence::Current(0)) {
                self.break_recording("the input was sought, and its position is not known");
            }
            return Ok(at);
        };
        let start = base - self.origin;
        let Some(pos) = at.checked_sub(start) else {
            self.break_recording("the input was sought before its start");
            return Ok(at);
        };
        if pos < self.pos {
            self.break_recording("the input was read out of order (a seek back)");
        } else if pos > self.pos {
            let from = self.pos;
            self.pos = pos;
            self.pass(from, pos, None);
        }
        self.pos = pos;
        Ok(at)
    }

    forward_to_inner!(
        size,
        next_data,
        next_hole,
        sync,
        pipeline,
        settle,
        take_detail,
        abandon
    );

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        if let Some(mut recording) = self.recording.take() {
            if !recording.block.is_empty() {
                let start = recording.seen - recording.block.len() as u64;
                let end = start + recording.block_size;
                let restore = self.restore();
                recording.pending_mapped =
                    self.mapped(start, end, &recording.block.clone(), restore);
            }
            recording.complete = true;
            if let Ok(mut slot) = self.handed.lock() {
                *slot = Some(recording);
            }
        }
        self.inner.close()
    }

    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        // No map of a failed copy is written: nothing to complete.
        self.inner.close_failed()
    }
}
