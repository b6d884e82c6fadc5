//! gzip, bzip2 and lz4: formats decoded on one thread (their own, apart
//! from the writer's), through their crates' `io::Read` decoders.
//!
//! Neither gzip members nor bzip2 streams record their compressed length,
//! so they cannot be cut apart without decoding; lz4 decodes faster than
//! a disk writes. Concatenated members, streams and frames are decoded
//! one after another, as `gzip -d`, `bzip2 -d` and `lz4 -d` do.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use super::{corrupt, input_failed, CHUNK};
use crate::image::chunks::{announce, send, BufferPool, Fault, Part, Piece};
use crate::image::format::Format;
use crate::image::source::CompressedInput;

const DEPTH: usize = 8;
/// The decoders' input buffer.
const READ_STEP: usize = 256 << 10;

pub fn run(
    format: Format,
    source: CompressedInput,
    parts: SyncSender<Part>,
    pool: Arc<BufferPool>,
) -> CompressedInput {
    let (tx, rx) = sync_channel(DEPTH);
    if announce(&parts, Part::Next(rx)).is_err() {
        return source;
    }
    let input = BufReader::with_capacity(READ_STEP, source);
    let (outcome, input) = match format {
        Format::Gzip => {
            let mut decoder = flate2::bufread::MultiGzDecoder::new(input);
            let outcome = pump(&mut decoder, &tx, &pool, "gzip", |d| d.get_ref());
            (outcome, decoder.into_inner())
        }
        Format::Bzip2 => {
            let mut decoder = bzip2::bufread::MultiBzDecoder::new(input);
            let outcome = pump(&mut decoder, &tx, &pool, "bzip2", |d| d.get_ref());
            (outcome, decoder.into_inner())
        }
        Format::Lz4 => {
            let mut decoder = Lz4Frames {
                frames: lz4_flex::frame::FrameDecoder::new(input),
            };
            let outcome = pump(&mut decoder, &tx, &pool, "lz4", |d| d.frames.get_ref());
            (outcome, decoder.frames.into_inner())
        }
        Format::Zstd | Format::Xz => unreachable!("decoded by their own modules"),
    };
    match outcome {
        Ok(()) => {
            if send(&tx, Piece::Done).is_ok() {
                let _ = announce(&parts, Part::End);
            }
        }
        Err(Some(failure)) => {
            let _ = send(&tx, Piece::Failed(failure));
        }
        Err(None) => {}
    }
    input.into_inner()
}

/// Read `decoder` to its end in chunks sent on `part`. Err(None): the
/// reader has gone.
fn pump<D: Read>(
    decoder: &mut D,
    part: &SyncSender<Piece>,
    pool: &BufferPool,
    name: &str,
    input: impl Fn(&D) -> &BufReader<CompressedInput>,
) -> Result<(), Option<Fault>> {
    loop {
        let mut chunk = pool.take();
        chunk.resize(CHUNK, 0);
        let mut filled = 0;
        while filled < CHUNK {
            match decoder.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let reader = input(decoder);
                    let source = reader.get_ref();
                    if source.failure.is_some() {
                        return Err(Some(input_failed(source)));
                    }
                    // What the decoder has taken: the error is in it.
                    let taken = source.offset() - reader.buffer().len() as u64;
                    let why = if e.kind() == io::ErrorKind::UnexpectedEof {
                        "the stream is truncated".to_owned()
                    } else {
                        e.to_string()
                    };
                    return Err(Some(corrupt(name, taken, &why)));
                }
            }
        }
        chunk.truncate(filled);
        if filled > 0 {
            send(part, Piece::Data(chunk)).map_err(|_| None)?;
        }
        if filled < CHUNK {
            return Ok(());
        }
    }
}

/// lz4_flex's frame decoder reads one frame at a time (its `read` gives 0
/// at each frame's end) and reports a skippable frame as an error with
/// its length: this goes on to the next frame and skips those.
struct Lz4Frames {
    frames: lz4_flex::frame::FrameDecoder<BufReader<CompressedInput>>,
}

impl Read for Lz4Frames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.frames.read(buf) {
                Ok(0) => {
                    let input = self.frames.get_mut();
                    if input.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                }
                Ok(n) => return Ok(n),
                Err(e) => {
                    let skip = e
                        .get_ref()
                        .and_then(|inner| inner.downcast_ref::<lz4_flex::frame::Error>())
                        .and_then(|inner| match inner {
                            lz4_flex::frame::Error::SkippableFrame(len) => Some(*len),
                            _ => None,
                        });
                    let Some(len) = skip else {
                        return Err(e);
                    };
                    let input = self.frames.get_mut();
                    let skipped = io::copy(&mut input.take(len as u64), &mut io::sink())?;
                    if skipped < len as u64 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
            }
        }
    }
}
