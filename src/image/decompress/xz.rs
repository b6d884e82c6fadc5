//! xz, through liblzma's multi-threaded decoder.
//!
//! `lzma_stream_decoder_mt` decodes the blocks of a stream on several
//! threads when the block headers record their sizes, which is what
//! `xz -T` and ddx's own `--compress=xz` write; a single-block file (plain
//! `xz` before 5.6) falls back to one thread inside liblzma. The crate's
//! builder does not expose liblzma's CONCATENATED flag for the threaded
//! decoder, so concatenated streams (`cat a.xz b.xz`) and the stream
//! padding between them are handled here, as `xz -d` accepts them.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use liblzma::stream::{Action, MtStreamBuilder, Status, Stream};

use super::{corrupt, input_failed, CHUNK};
use crate::image::chunks::{announce, send, BufferPool, Halt, Part, Piece};
use crate::image::source::CompressedInput;

const READ_STEP: usize = 1 << 20;
const DEPTH: usize = 8;

pub fn run(
    source: CompressedInput,
    parts: SyncSender<Part>,
    pool: Arc<BufferPool>,
    threads: usize,
) -> CompressedInput {
    let (tx, rx) = sync_channel(DEPTH);
    if announce(&parts, Part::Next(rx)).is_err() {
        return source;
    }
    let mut decoder = Decoder {
        source,
        input: vec![0; READ_STEP],
        lo: 0,
        hi: 0,
        pool,
        threads,
    };
    match decoder.streams(&tx) {
        Ok(()) => {
            if send(&tx, Piece::Done).is_ok() {
                let _ = announce(&parts, Part::End);
            }
        }
        Err(Halt::Failed(failure)) => {
            let _ = send(&tx, Piece::Failed(failure));
        }
        Err(Halt::Gone) => {}
    }
    decoder.source
}

struct Decoder {
    source: CompressedInput,
    input: Vec<u8>,
    lo: usize,
    hi: usize,
    pool: Arc<BufferPool>,
    threads: usize,
}

impl Decoder {
    /// Offset in the compressed input of `input[lo]`.
    fn offset(&self) -> u64 {
        self.source.offset() - (self.hi - self.lo) as u64
    }

    /// Refill the input buffer if it is empty: false at end of input.
    fn refill(&mut self) -> Result<bool, Halt> {
        if self.lo < self.hi {
            return Ok(true);
        }
        if self.source.eof {
            return Ok(false);
        }
        self.lo = 0;
        self.hi = 0;
        let n = self
            .source
            .read_errno(&mut self.input)
            .map_err(|_| Halt::Failed(input_failed(&self.source)))?;
        self.hi = n;
        Ok(n > 0)
    }

    fn streams(&mut self, part: &SyncSender<Piece>) -> Result<(), Halt> {
        let mut first = true;
        loop {
            // Stream padding: zero bytes, a multiple of four, between and
            // after streams.
            let mut padding = 0u64;
            while self.refill()? {
                let zeros = self.input[self.lo..self.hi]
                    .iter()
                    .take_while(|&&b| b == 0)
                    .count();
                padding += zeros as u64;
                self.lo += zeros;
                if self.lo < self.hi {
                    break;
                }
            }
            let at_end = self.lo == self.hi;
            if first && padding > 0 {
                return Err(Halt::Failed(corrupt(
                    "xz",
                    0,
                    "the input starts with zero bytes, not an xz stream",
                )));
            }
            if padding % 4 != 0 {
                return Err(Halt::Failed(corrupt(
                    "xz",
                    self.offset(),
                    "stream padding is not a multiple of four bytes",
                )));
            }
            if at_end {
                if first {
                    return Err(Halt::Failed(corrupt("xz", 0, "the input is empty")));
                }
                return Ok(());
            }
            first = false;
            self.stream(part)?;
        }
    }

    /// Decode one stream starting at `input[lo]`.
    fn stream(&mut self, part: &SyncSender<Piece>) -> Result<(), Halt> {
        let start = self.offset();
        let mut stream = decoder(self.threads)
            .map_err(|e| Halt::Failed(corrupt("xz", start, &format!("liblzma: {e}"))))?;
        let mut out = self.pool.take();
        out.clear();
        out.reserve(CHUNK);
        loop {
            let more = self.refill()?;
            let action = if more { Action::Run } else { Action::Finish };
            let (in_before, out_before) = (stream.total_in(), stream.total_out());
            let status = stream.process_vec(&self.input[self.lo..self.hi], &mut out, action);
            self.lo += (stream.total_in() - in_before) as usize;
            let progressed = stream.total_in() != in_before || stream.total_out() != out_before;
            let status = status.map_err(|e| {
                Halt::Failed(corrupt(
                    "xz",
                    start + stream.total_in(),
                    &format!("{e} (in the stream at compressed offset {start})"),
                ))
            })?;
            let ended = status == Status::StreamEnd;
            if out.len() == out.capacity() || (ended && !out.is_empty()) {
                let full = std::mem::replace(&mut out, self.pool.take());
                out.clear();
                out.reserve(CHUNK);
                send(part, Piece::Data(full))?;
            }
            if ended {
                return Ok(());
            }
            if !more && !progressed {
                return Err(Halt::Failed(corrupt(
                    "xz",
                    self.offset(),
                    "the stream is truncated",
                )));
            }
        }
    }
}

fn decoder(threads: usize) -> Result<Stream, liblzma::stream::Error> {
    MtStreamBuilder::new()
        .threads(threads.clamp(1, u32::MAX as usize) as u32)
        // xz's own default for threaded decoding: a quarter of the RAM;
        // past it liblzma decodes on one thread rather than fail.
        .memlimit_threading(physical_memory() / 4)
        .memlimit_stop(u64::MAX)
        // Block until the output is full or the input used: this thread
        // does nothing else.
        .timeout_ms(0)
        .decoder()
}

/// MemTotal from /proc/meminfo; 4 GiB if it cannot be read.
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(4 << 30)
}
