//! Zstandard, decoded frame by frame on every core.
//!
//! A zstd stream is a sequence of independent frames (and skippable
//! frames). A frame's extent can be found from its block headers without
//! decoding it (`ZSTD_findFrameCompressedSize`), so one thread, the
//! dispatcher, cuts the input into frames and hands each to a pool of
//! workers; the parts mechanism of [`crate::image::chunks`] puts their
//! output back in order. ddx's own `--compress=zstd` writes frames of
//! [`crate::image::compress::FRAME`] bytes for this reason; pzstd does
//! the same. The `zstd` tool writes one frame per file, even with `-T`:
//! such a frame (or any whose end is not found within
//! [`MAX_FRAME_IN_MEMORY`] compressed bytes) is decoded by the dispatcher
//! as a stream, which still overlaps decoding with writing. A frame decoded
//! as a stream (by the dispatcher, or by a worker when its size is not
//! known or too large for one buffer) goes block by block straight into the
//! pieces ([`super::zstd_blocks`]) when its window allows, through
//! `ZSTD_decompressStream` otherwise.

use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use zstd::zstd_safe::{self, DCtx, DParameter, InBuffer, OutBuffer, ResetDirective};

use super::zstd_blocks::{BlockDecoder, Layout};
use super::{corrupt, input_failed, FrameChecksums, CHUNK};
use crate::image::chunks::{announce, next_job, send, BufferPool, Fault, Halt, Part, Piece};
use crate::image::format::{is_skippable_magic, ZSTD_MAGIC};
use crate::image::source::CompressedInput;
use crate::sys::Errno;

/// Compressed bytes held to find where a frame ends before decoding it as
/// a stream instead.
pub const MAX_FRAME_IN_MEMORY: usize = 32 << 20;
/// A frame whose header promises more than this is decoded as a stream at
/// once: it is the whole file (as the zstd tool writes), there is nothing
/// to overlap it with, and looking for its end would only delay the first
/// byte.
const STREAM_AT_ONCE: u64 = 256 << 20;
/// The longest frame header (RFC 8878: magic, descriptor, window, the
/// dictionary id and the content size).
const MAX_HEADER: usize = 18;
/// A frame whose header promises at most this much is decoded in one
/// call into one buffer (zstd then writes straight into it).
const ONE_SHOT_MAX: u64 = 32 << 20;
const READ_STEP: usize = 1 << 20;
/// Pieces a streamed frame may have waiting for the reader.
const STREAM_DEPTH: usize = 8;

struct Job {
    /// The buffer the frame was read into: the frame is `buf[range]`.
    buf: Vec<u8>,
    range: Range<usize>,
    /// Offset of the frame in the compressed input, for error details.
    offset: u64,
    part: SyncSender<Piece>,
}

impl Job {
    fn frame(&self) -> &[u8] {
        &self.buf[self.range.clone()]
    }
}

/// Decode the whole input, announcing parts on `parts`; returns the source
/// so that its end can be closed.
pub fn run(
    source: CompressedInput,
    parts: SyncSender<Part>,
    pool: Arc<BufferPool>,
    threads: usize,
    checksums: FrameChecksums,
) -> CompressedInput {
    let (jobs_tx, jobs_rx) = sync_channel::<Job>(threads);
    let jobs_rx = Arc::new(Mutex::new(jobs_rx));
    // The dispatcher's read buffers, handed over with the frames in them
    // and given back by the workers: at most one per job queued or being
    // decoded, and the dispatcher's own.
    let spare = BufferPool::new(2 * threads + 2);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let jobs = Arc::clone(&jobs_rx);
            let pool = Arc::clone(&pool);
            let spare = Arc::clone(&spare);
            scope.spawn(move || worker(&jobs, &pool, &spare, checksums));
        }
        let mut dispatcher = Dispatcher {
            source,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pool,
            spare,
            checksums,
        };
        let outcome = dispatcher.frames(&parts, &jobs_tx);
        drop(jobs_tx);
        if let Err(Halt::Failed(failure)) = outcome {
            let _ = announce(&parts, Part::Failed(failure));
        }
        dispatcher.source
    })
}

struct Dispatcher {
    source: CompressedInput,
    /// Compressed bytes read and not yet handed on: `buf[lo..hi]` is
    /// live. Bytes past `hi` are room for the next read, kept allocated
    /// (and not zeroed again for every read: this is the decoding
    /// thread, which sets the pace of a single-frame image).
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    pool: Arc<BufferPool>,
    /// Read buffers the workers gave back.
    spare: Arc<BufferPool>,
    checksums: FrameChecksums,
}

impl Dispatcher {
    fn frames(&mut self, parts: &SyncSender<Part>, jobs: &SyncSender<Job>) -> Result<(), Halt> {
        loop {
            self.want(MAX_HEADER)?;
            let live = self.live();
            if live.is_empty() {
                announce(parts, Part::End)?;
                return Ok(());
            }
            let offset = self.offset_of_lo();
            if live.len() < 4 {
                return Err(corrupt_zstd(
                    offset,
                    "the stream ends inside a frame's magic number",
                ));
            }
            let magic = u32::from_le_bytes(live[..4].try_into().expect("4 bytes"));
            if is_skippable_magic(magic) {
                self.skip_skippable(offset)?;
                continue;
            }
            if magic != ZSTD_MAGIC {
                return Err(corrupt_zstd(
                    offset,
                    "unknown frame magic (not a zstd frame)",
                ));
            }
            let promised = zstd_safe::get_frame_content_size(live).ok().flatten();
            let whole = match promised {
                Some(size) if size > STREAM_AT_ONCE => None,
                _ => self.whole_frame(offset)?,
            };
            match whole {
                Some(len) => {
                    let (buf, range) = self.hand_over(len);
                    let frame = &buf[range.clone()];
                    let content = zstd_safe::get_frame_content_size(frame).ok().flatten();
                    let depth = if content.is_some_and(|n| n <= ONE_SHOT_MAX) {
                        2
                    } else {
                        Layout::of(frame).map_or(STREAM_DEPTH, |layout| layout.depth())
                    };
                    let (tx, rx) = sync_channel(depth);
                    announce(parts, Part::Next(rx))?;
                    jobs.send(Job {
                        buf,
                        range,
                        offset,
                        part: tx,
                    })
                    .map_err(|_| Halt::Gone)?;
                }
                None => {
                    let layout = Layout::of(self.live());
                    let depth = layout.map_or(STREAM_DEPTH, |layout| layout.depth());
                    let (tx, rx) = sync_channel(depth);
                    announce(parts, Part::Next(rx))?;
                    let outcome = match layout {
                        Some(layout) => {
                            let pool = Arc::clone(&self.pool);
                            let checksums = self.checksums;
                            decode_blocks(self, layout, &tx, &pool, offset, checksums)
                                .and_then(|()| Ok(send(&tx, Piece::Done)?))
                        }
                        None => self.stream_frame(&tx, offset),
                    };
                    if let Err(Halt::Failed(failure)) = outcome {
                        // The part carries the failure, in order; the
                        // reader stops there.
                        send(&tx, Piece::Failed(failure))?;
                        return Ok(());
                    }
                }
            }
        }
    }

    fn live(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    fn offset_of_lo(&self) -> u64 {
        self.source.offset() - (self.hi - self.lo) as u64
    }

    /// Hand the frame at `lo` (`len` bytes) over in the buffer it was read
    /// into instead of copying it out: the bytes read after it move to a
    /// spare buffer, usually far fewer than the frame's (the copy, and the
    /// page faults of a fresh buffer per frame, were a tenth of the
    /// dispatcher's time).
    fn hand_over(&mut self, len: usize) -> (Vec<u8>, Range<usize>) {
        let end = self.lo + len;
        let rest = self.hi - end;
        let mut next = self.spare.take();
        if next.len() < rest {
            next.resize(rest, 0);
        }
        next[..rest].copy_from_slice(&self.buf[end..self.hi]);
        let range = self.lo..end;
        self.lo = 0;
        self.hi = rest;
        (std::mem::replace(&mut self.buf, next), range)
    }

    /// Read until `n` bytes are live or the input ends.
    fn want(&mut self, n: usize) -> Result<(), Halt> {
        while self.hi - self.lo < n && !self.source.eof {
            self.read_more(READ_STEP.max(n))?;
        }
        Ok(())
    }

    fn read_more(&mut self, step: usize) -> Result<usize, Halt> {
        if self.lo > 0 && self.lo >= self.hi / 2 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        if self.buf.len() < self.hi + step {
            self.buf.resize(self.hi + step, 0);
        }
        let got = self.source.fill(&mut self.buf[self.hi..self.hi + step]);
        let n = *got.as_ref().unwrap_or(&0);
        self.hi += n;
        match got {
            Ok(n) => Ok(n),
            Err(_) => Err(Halt::Failed(input_failed(&self.source))),
        }
    }

    fn skip_skippable(&mut self, offset: u64) -> Result<(), Halt> {
        let live = self.live();
        if live.len() < 8 {
            return Err(corrupt_zstd(
                offset,
                "the stream ends inside a skippable frame's header",
            ));
        }
        let mut left = 8 + u32::from_le_bytes(live[4..8].try_into().expect("4 bytes")) as u64;
        loop {
            let here = (self.hi - self.lo) as u64;
            let n = here.min(left) as usize;
            self.lo += n;
            left -= n as u64;
            if left == 0 {
                return Ok(());
            }
            if self.read_more(READ_STEP)? == 0 {
                return Err(corrupt_zstd(
                    offset,
                    "the stream ends inside a skippable frame",
                ));
            }
        }
    }

    /// The length of the frame at `lo` once it is all in memory, or None
    /// when it is too big to hold and must be streamed.
    fn whole_frame(&mut self, offset: u64) -> Result<Option<usize>, Halt> {
        loop {
            let result = zstd_safe::find_frame_compressed_size(self.live());
            if let Ok(len) = result {
                if len <= self.live().len() {
                    return Ok(Some(len));
                }
            }
            // Most likely the frame goes on beyond what has been read;
            // corrupt headers are found by the decoder if not here.
            if self.live().len() >= MAX_FRAME_IN_MEMORY {
                return Ok(None);
            }
            if self.source.eof || self.read_more(READ_STEP)? == 0 {
                let why = match result {
                    Err(code) => zstd_safe::get_error_name(code),
                    Ok(_) => "the frame is truncated",
                };
                return Err(corrupt_zstd(offset, why));
            }
        }
    }

    /// Decode the frame at `lo` as a stream, reading as it goes, and leave
    /// `lo` just after it.
    fn stream_frame(&mut self, part: &SyncSender<Piece>, offset: u64) -> Result<(), Halt> {
        let mut dctx = context(self.checksums);
        let mut out = self.pool.take();
        // zstd may hold decoded bytes that did not fit the last output:
        // it is called again without new input until it has none left.
        let mut drained = true;
        loop {
            if self.lo == self.hi && drained && self.read_more(READ_STEP)? == 0 {
                return Err(corrupt_zstd(
                    self.source.offset(),
                    "the stream ends inside a frame (truncated input)",
                ));
            }
            out.clear();
            out.reserve(CHUNK);
            let mut input = InBuffer::around(&self.buf[self.lo..self.hi]);
            let result = {
                let mut output = OutBuffer::around(&mut out);
                dctx.decompress_stream(&mut output, &mut input)
            };
            let consumed = input.pos();
            self.lo += consumed;
            let hint = result.map_err(|code| {
                let name = zstd_safe::get_error_name(code);
                corrupt_zstd(
                    self.offset_of_lo(),
                    &format!("{name} (in the frame at compressed offset {offset})"),
                )
            })?;
            drained = out.len() < out.capacity();
            if !out.is_empty() {
                send(
                    part,
                    Piece::Data(std::mem::replace(&mut out, self.pool.take())),
                )?;
            }
            if hint == 0 {
                send(part, Piece::Done)?;
                return Ok(());
            }
        }
    }
}

fn worker(
    jobs: &Mutex<Receiver<Job>>,
    pool: &BufferPool,
    spare: &BufferPool,
    checksums: FrameChecksums,
) {
    let mut dctx = context(checksums);
    while let Some(job) = next_job(jobs) {
        let result = decode_frame(&mut dctx, &job, pool, checksums);
        let Job { buf, part, .. } = job;
        spare.give(buf);
        let last = match result {
            Ok(()) => Piece::Done,
            Err(Halt::Failed(failure)) => Piece::Failed(failure),
            Err(Halt::Gone) => continue,
        };
        let _ = send(&part, last);
    }
}

/// Decode one whole frame into its part.
fn decode_frame(
    dctx: &mut DCtx<'_>,
    job: &Job,
    pool: &BufferPool,
    checksums: FrameChecksums,
) -> Result<(), Halt> {
    let failed = |code| {
        let name = zstd_safe::get_error_name(code);
        corrupt_zstd(job.offset, &format!("{name} (in the frame at this offset)"))
    };
    let frame = job.frame();
    let content = zstd_safe::get_frame_content_size(frame).ok().flatten();
    if let Some(size) = content.filter(|&n| n <= ONE_SHOT_MAX) {
        let mut out = pool.take();
        out.clear();
        out.reserve(size as usize);
        dctx.decompress(&mut out, frame).map_err(failed)?;
        if !out.is_empty() {
            send(&job.part, Piece::Data(out))?;
        }
        return Ok(());
    }
    if let Some(layout) = Layout::of(frame) {
        let mut input = InMemory {
            frame,
            at: 0,
            offset: job.offset,
        };
        return decode_blocks(&mut input, layout, &job.part, pool, job.offset, checksums);
    }
    dctx.reset(ResetDirective::SessionOnly).map_err(failed)?;
    let mut input = InBuffer::around(frame);
    loop {
        let mut out = pool.take();
        out.clear();
        out.reserve(CHUNK);
        let hint = {
            let mut output = OutBuffer::around(&mut out);
            dctx.decompress_stream(&mut output, &mut input)
        }
        .map_err(failed)?;
        let stalled = out.is_empty() && input.pos() == frame.len();
        if !out.is_empty() {
            send(&job.part, Piece::Data(out))?;
        }
        if hint == 0 {
            return Ok(());
        }
        if stalled {
            return Err(corrupt_zstd(job.offset, "the frame is truncated"));
        }
    }
}

/// Where a frame's compressed bytes come from, in the steps the block
/// decoder takes them.
trait FrameInput {
    /// The next `n` bytes, contiguous; None if the frame's input ends
    /// first.
    fn take(&mut self, n: usize) -> Result<Option<&[u8]>, Halt>;
    /// Offset in the compressed input of the next byte to take.
    fn offset(&self) -> u64;
}

impl FrameInput for Dispatcher {
    fn take(&mut self, n: usize) -> Result<Option<&[u8]>, Halt> {
        self.want(n)?;
        if self.hi - self.lo < n {
            return Ok(None);
        }
        let start = self.lo;
        self.lo += n;
        Ok(Some(&self.buf[start..start + n]))
    }

    fn offset(&self) -> u64 {
        self.offset_of_lo()
    }
}

/// A whole frame a worker was given.
struct InMemory<'a> {
    frame: &'a [u8],
    at: usize,
    /// The frame's offset in the compressed input.
    offset: u64,
}

impl FrameInput for InMemory<'_> {
    fn take(&mut self, n: usize) -> Result<Option<&[u8]>, Halt> {
        let Some(bytes) = self.frame.get(self.at..self.at + n) else {
            return Ok(None);
        };
        self.at += n;
        Ok(Some(bytes))
    }

    fn offset(&self) -> u64 {
        self.offset + self.at as u64
    }
}

/// Decode the frame at the start of `input` block by block into pieces
/// sent on `part` (all but the part's final `Done`).
fn decode_blocks(
    input: &mut impl FrameInput,
    layout: Layout,
    part: &SyncSender<Piece>,
    pool: &BufferPool,
    frame_offset: u64,
    checksums: FrameChecksums,
) -> Result<(), Halt> {
    let verify = checksums == FrameChecksums::Verify;
    let mut decoder = BlockDecoder::new(layout, pool, verify)
        .map_err(|why| Halt::Failed(Fault::new(Errno::NOMEM, format!("zstd: {why}"))))?;
    loop {
        let wants = decoder.wants();
        if wants == 0 {
            break;
        }
        let at = input.offset();
        let Some(src) = input.take(wants)? else {
            return Err(corrupt_zstd(
                at,
                "the stream ends inside a frame (truncated input)",
            ));
        };
        if let Some(piece) = decoder.rotate(pool) {
            send(part, Piece::Data(piece))?;
        }
        decoder.step(src).map_err(|name| {
            corrupt_zstd(
                at,
                &format!("{name} (in the frame at compressed offset {frame_offset})"),
            )
        })?;
    }
    decoder.check_size().map_err(|why| {
        corrupt_zstd(
            input.offset(),
            &format!("{why} (in the frame at compressed offset {frame_offset})"),
        )
    })?;
    for piece in decoder.finish() {
        send(part, Piece::Data(piece))?;
    }
    Ok(())
}

/// The frame at the start of `frame`, decoded block by block as a worker
/// decodes a frame too large for one buffer, its pieces gathered up to
/// `limit` bytes; None when its window is too large for pieces. Err is
/// the failure's detail. (The fuzzing target of the buffer-less path.)
pub(crate) fn decode_frame_by_blocks(
    frame: &[u8],
    verify: bool,
    limit: usize,
) -> Option<Result<Vec<u8>, String>> {
    let layout = Layout::of(frame)?;
    let checksums = if verify {
        FrameChecksums::Verify
    } else {
        FrameChecksums::Redundant
    };
    let pool = BufferPool::new(4);
    let (tx, rx) = sync_channel(layout.depth());
    let outcome = std::thread::scope(|scope| {
        let gather = scope.spawn(move || {
            let mut out = Vec::new();
            while let Ok(Piece::Data(piece)) = rx.recv() {
                out.extend_from_slice(&piece);
                if out.len() >= limit {
                    // Dropping the receiver stops the decoder.
                    break;
                }
            }
            out
        });
        let mut input = InMemory {
            frame,
            at: 0,
            offset: 0,
        };
        let outcome = decode_blocks(&mut input, layout, &tx, &pool, 0, checksums);
        drop(tx);
        (
            outcome,
            gather.join().expect("gathering pieces does not panic"),
        )
    });
    Some(match outcome {
        (Ok(()) | Err(Halt::Gone), out) => Ok(out),
        (Err(Halt::Failed(failure)), _) => Err(failure.detail),
    })
}

/// A decoding context that verifies frames' checksums or not.
fn context(checksums: FrameChecksums) -> DCtx<'static> {
    let mut dctx = DCtx::create();
    if checksums == FrameChecksums::Redundant {
        // Only fails for a parameter this zstd does not know: the
        // checksums are then verified, which is safe.
        let _ = dctx.set_parameter(DParameter::ForceIgnoreChecksum(true));
    }
    dctx
}

/// A zstd stream found corrupt at compressed `offset`, and why.
fn corrupt_zstd(offset: u64, why: &str) -> Halt {
    Halt::Failed(corrupt("zstd", offset, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame whose header says 42 bytes and whose only block is an
    /// empty last one: zstd's one-shot and streaming decoders call it
    /// corrupt, and so must the block path.
    #[test]
    fn a_frame_shorter_than_its_header_says_is_corrupt() {
        let frame = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 42, 0x01, 0x00, 0x00];
        assert!(zstd::bulk::decompress(&frame, 1 << 20).is_err());
        let decoded = decode_frame_by_blocks(&frame, true, 1 << 20).expect("a small window");
        let why = decoded.expect_err("decoded a frame shorter than its header says");
        assert!(why.contains("its header says 42"), "{why}");
        // The same frame with its size right decodes (to nothing).
        let empty = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 0, 0x01, 0x00, 0x00];
        assert_eq!(
            decode_frame_by_blocks(&empty, true, 1 << 20),
            Some(Ok(Vec::new()))
        );
    }

    /// A compressed block of no bytes is corrupt on every path, as zstd's
    /// one-shot decoder has it (its buffer-less API would take it for an
    /// empty block).
    #[test]
    fn a_compressed_block_of_no_bytes_is_corrupt() {
        let frame = [0x28, 0xB5, 0x2F, 0xFD, 0x20, 0, 0x05, 0x00, 0x00];
        assert!(zstd::bulk::decompress(&frame, 1 << 20).is_err());
        let decoded = decode_frame_by_blocks(&frame, true, 1 << 20).expect("a small window");
        let why = decoded.expect_err("decoded an empty compressed block");
        assert!(why.contains("a compressed block of no bytes"), "{why}");
    }
}
