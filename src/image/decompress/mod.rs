//! `--decompress`: an input end that reads the decompressed stream of
//! another end (a file, an NBD export, an object...).
//!
//! Decoding runs on its own threads, started with the end, so that it
//! overlaps the writer; the engine reads the result in order through
//! [`OrderedReader`]. Each read fills the engine's buffer until the stream
//! ends, like a regular file's, so GNU's records and statistics come out
//! as for the decompressed file.
//!
//! The end cannot seek (ESPIPE, even forward). GNU's `skip=` on an input
//! that cannot seek reads over the records, and warns "cannot skip to
//! specified offset" if the input ends first; on a regular file it
//! seeks, and warns likewise when the offset is past the file's size.
//! The decompressed size is not known in advance, so a seek that
//! pretended to succeed past the end would lose that warning; ESPIPE lets
//! the engine read over, which gives GNU's output for the decompressed
//! file exactly, at the cost of one copy of the skipped bytes.
//!
//! A corrupt or truncated stream is EBADMSG, with a detail naming the
//! format and the offset in the compressed input; the input's own errors
//! keep their errno and detail. After an error the stream reads as ended:
//! there is nothing after corruption to resume from, and `conv=noerror`
//! must not meet the same error for ever.

mod serial;
pub mod size;
mod xz;
mod zstd;
mod zstd_blocks;

pub(crate) use zstd::decode_frame_by_blocks;
pub use zstd::MAX_FRAME_IN_MEMORY;

use std::os::fd::BorrowedFd;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::image::chunks::{BufferPool, Fault, OrderedReader};
use crate::image::format::{recognise, Format, Recognised};
use crate::image::prefixed::Prefixed;
use crate::image::source::{InputProgress, Source};
use crate::sys::{errno_text, Errno};

/// Decoded bytes per piece handed to the reader.
pub(crate) const CHUNK: usize = 1 << 20;
/// Leading skippable frames followed at most this far to find the format.
const MAX_HEAD: usize = 1 << 20;

/// Whether the checksums a format carries of its decoded data are
/// verified (zstd's per-frame XXH64; the other formats always verify).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameChecksums {
    /// Verified: without a map they are the only check of the data.
    Verify,
    /// Not verified, because every byte the copy writes is checked by a
    /// stronger digest anyway: a `--bmap` whose every range carries one,
    /// read from the image's start. A frame's checksum is known only at
    /// the frame's end (for the zstd tool's single-frame image, after the
    /// whole device is written), covers the unmapped bytes nobody writes,
    /// and costs the one decoding thread that sets the flash's pace more
    /// than a tenth of its time.
    Redundant,
}

/// The decompressed stream of an input end.
#[derive(Debug)]
pub struct Decompressed {
    format: Format,
    reader: OrderedReader,
    progress: Arc<InputProgress>,
    thread: JoinHandle<Source>,
    detail: Option<String>,
}

impl Decompressed {
    /// Start decoding `input`, whose first bytes `head` have been read
    /// already (to recognise the format), on up to `threads` threads.
    pub fn start(
        input: Box<dyn Stream>,
        format: Format,
        head: Vec<u8>,
        threads: usize,
        checksums: FrameChecksums,
    ) -> Decompressed {
        let threads = threads.max(1);
        let progress = InputProgress::new(input.size().ok().flatten());
        let source = Source::new(input, head, Arc::clone(&progress));
        let pool = BufferPool::new(threads * 4 + 16);
        let (parts_tx, parts_rx) = sync_channel(threads.min(16) + 1);
        let thread_pool = Arc::clone(&pool);
        let thread = std::thread::Builder::new()
            .name(format!("ddx-{format}"))
            .spawn(move || match format {
                Format::Zstd => zstd::run(source, parts_tx, thread_pool, threads, checksums),
                Format::Xz => xz::run(source, parts_tx, thread_pool, threads),
                Format::Gzip | Format::Bzip2 | Format::Lz4 => {
                    serial::run(format, source, parts_tx, thread_pool)
                }
            })
            .expect("spawning the decompression thread");
        Decompressed {
            format,
            reader: OrderedReader::new(parts_rx, pool),
            progress,
            thread,
            detail: None,
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Position in (and size of) the compressed input, for the progress
    /// line and its ETA.
    pub fn progress(&self) -> Arc<InputProgress> {
        Arc::clone(&self.progress)
    }

    /// Halt the threads and give back the input end.
    fn finish(self) -> Box<dyn Stream> {
        let Decompressed { reader, thread, .. } = self;
        // Dropping the reader closes the channels: threads blocked on
        // them stop at once.
        drop(reader);
        let source = thread
            .join()
            .expect("the decompression thread does not panic");
        source.into_end()
    }
}

impl Stream for Decompressed {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        self.reader.read(buf).map_err(|Fault { errno, detail }| {
            self.detail = Some(detail);
            errno
        })
    }

    /// Holes of a `--bmap` are passed over without a copy out of the
    /// decoder's buffers.
    fn discard(&mut self, len: u64) -> Result<u64, Errno> {
        self.reader.discard(len).map_err(|Fault { errno, detail }| {
            self.detail = Some(detail);
            errno
        })
    }

    fn write(&mut self, _buf: &[u8]) -> Result<usize, Errno> {
        Err(Errno::BADF)
    }

    fn seek(&mut self, _to: Whence) -> Result<u64, Errno> {
        Err(Errno::SPIPE)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(None)
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        (*self).finish().close()
    }

    fn abandon(self: Box<Self>) {
        (*self).finish().abandon()
    }
}

/// A corrupt stream's failure: EBADMSG, saying where.
pub(crate) fn corrupt(format: &str, offset: u64, why: &str) -> Fault {
    Fault::new(
        Errno::BADMSG,
        format!("corrupt {format} data at compressed offset {offset}: {why}"),
    )
}

/// The input end's own failure, as the source kept it.
pub(crate) fn input_failed(source: &Source) -> Fault {
    match &source.failure {
        Some(failure) => Fault::new(
            failure.errno,
            match &failure.detail {
                Some(detail) => format!("{detail} (compressed offset {})", failure.offset),
                None => format!("reading the compressed input at offset {}", failure.offset),
            },
        ),
        None => Fault::new(Errno::IO, "reading the compressed input failed"),
    }
}

/// `--decompress` (Required) or `--decompress=auto` (Auto).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Required,
    Auto,
}

/// What [`open`] made of an input.
#[derive(Debug)]
pub enum Opened {
    Decompressing(Decompressed),
    /// Not compressed, under `--decompress=auto`: the input as it was (its
    /// first bytes given back).
    Plain(Box<dyn Stream>),
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("--decompress: {name} is not compressed (no zstd, xz, gzip, bzip2 or lz4 magic number); --decompress=auto copies such input as it is")]
    NotCompressed { name: String },
    #[error("--decompress: error reading {name}: {}", errno_text(*errno))]
    Read {
        name: String,
        errno: Errno,
        detail: Option<String>,
    },
}

/// Recognise the format of `input` (named `name` in messages) from its
/// first bytes, read at its current position, and start decompressing it.
pub fn open(
    mut input: Box<dyn Stream>,
    name: &str,
    mode: Mode,
    threads: usize,
    checksums: FrameChecksums,
) -> Result<Opened, OpenError> {
    let mut head = Vec::new();
    let mut want = 16;
    let mut eof = false;
    let format = loop {
        while head.len() < want && !eof {
            let old = head.len();
            head.resize(want, 0);
            match input.read(&mut head[old..]) {
                Ok(0) => eof = true,
                Ok(n) => head.truncate(old + n),
                Err(Errno::INTR) => head.truncate(old),
                Err(errno) => {
                    return Err(OpenError::Read {
                        name: name.to_owned(),
                        errno,
                        detail: input.take_detail(),
                    })
                }
            }
            if eof {
                head.truncate(old);
            }
        }
        match recognise(&head) {
            Recognised::Format(format) => break Some(format),
            Recognised::Plain => break None,
            // Skippable frames lead: followed only so far; then it is the
            // zstd stream pzstd writes.
            Recognised::NeedBytes(n) if n <= MAX_HEAD && !eof => want = n,
            Recognised::NeedBytes(_) if eof => break None,
            Recognised::NeedBytes(_) => break Some(Format::Zstd),
        }
    };
    match (format, mode) {
        (Some(format), _) => Ok(Opened::Decompressing(Decompressed::start(
            input, format, head, threads, checksums,
        ))),
        (None, Mode::Required) => Err(OpenError::NotCompressed {
            name: name.to_owned(),
        }),
        (None, Mode::Auto) => {
            let back = -(head.len() as i64);
            if input.capabilities().reads_at && input.seek(Whence::Current(back)).is_ok() {
                return Ok(Opened::Plain(input));
            }
            Ok(Opened::Plain(Box::new(Prefixed::new(head, input))))
        }
    }
}
