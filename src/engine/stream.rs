//! Streams: what a copy's reader reads and its writer writes, in order.
//!
//! GNU dd's semantics are written once, in the engine's record reader and
//! writer, against [`Stream`]: reads and writes at the current position,
//! seeks, the size GNU's `usable_st_size` would give, holes, truncation,
//! syncing and an explicit close. A stream is either an end of the copy
//! (a file, a device, an NBD export, an object: [`crate::ends::End`]) as
//! the engine moves its bytes, or a *stage* of the copy over another
//! stream: decompression, compression, a block map's filter or its
//! recording, several outputs at once, a disk read by its used blocks,
//! the safe order for bootable media. A stage is not an end: it holds no
//! data of its own, and what it can do is what the stream under it can.
//!
//! Errors are `Errno`, as the system calls give them, because GNU's
//! messages and dd's retry rules (EINTR, O_DIRECT's EINVAL at end of file)
//! are written in errno terms. A stream that knows more than an errno (a
//! server's message, a checksum that did not match) keeps it for
//! [`Stream::take_detail`], which the engine prints after GNU's line.
//!
//! Finalisation is explicit: [`Stream::finalise`] makes what was written
//! final (completes an upload) while the stream can still say more about
//! a failure; [`Stream::close`] completes it (close(2), or completing an
//! upload not finalised yet) and reports its error; [`Stream::abandon`]
//! is for a copy that failed or was interrupted, where a half-done output
//! must not be left behind (an upload is aborted, not completed), and
//! [`Stream::close_failed`] finalises the output of a copy that failed
//! (GNU closes a file as usual; an upload is aborted). Nothing is
//! finalised in `Drop`.

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::ends::open::{InputOf, OpenedInput, OpenedOutput, OutputOf};
use crate::ends::upload::{Journal, UploadRecord};
use crate::ends::{Capabilities, End, Kind, Whence};
use crate::operands::CopyPlan;
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// How the engine will use a stream from now on (see
/// [`Stream::pipeline`]): the copy's plan for the requests an end keeps in
/// flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pipeline {
    /// Bytes per request.
    pub chunk: usize,
    /// Requests worth keeping in flight.
    pub depth: usize,
    /// Bytes the copy will move, where known (an upload sizes its parts
    /// by it; reading ahead stops where they end).
    pub total: Option<u64>,
}

/// The bytes of a copy in order, as its reader takes them or its writer
/// gives them. Every method has lseek/read/write semantics: the position
/// moves with reads and writes, a read of 0 bytes is end of input, a
/// short write is followed by the error on the next one.
pub trait Stream: Send + fmt::Debug {
    fn kind(&self) -> Kind;

    /// What this end can do: by default what its kind can; an end that
    /// knows more answers for itself.
    fn capabilities(&self) -> Capabilities {
        Capabilities::of(self.kind())
    }

    /// The descriptor behind the end, where there is one: what only a
    /// descriptor can do (splice, copy_file_range, io_uring, cache advice,
    /// O_DIRECT, sysfs hints, the guard) asks for it, and does without.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// The descriptor whose read(2) and write(2) are exactly this end's
    /// reads and writes (a file or device opened by ddx, nothing wrapped
    /// around it). The record loop then calls the kernel itself: each
    /// function that returns across a system call costs a mispredicted
    /// return on machines whose kernel clears the return predictor on
    /// every exit (see `engine::reader::records`).
    fn plain_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// read(2). An end that is only written (an upload, a compressor)
    /// refuses with EBADF, as a descriptor opened write-only does.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let _ = buf;
        Err(Errno::BADF)
    }

    /// write(2). An end that is only read refuses with EBADF.
    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let _ = buf;
        Err(Errno::BADF)
    }

    /// A whole-buffer read without a copy, for an end whose data arrives
    /// in buffers of its own (an NBD export's read-ahead): where the next
    /// `buf.len()` bytes sit whole in such a buffer, the two buffers
    /// change places and `Some` says what `read` would have (the bytes
    /// read, or its error). `None`: nothing happened, read as usual.
    /// A copy between two remote ends otherwise moves every byte through
    /// memory twice more, on the CPUs their servers need.
    fn read_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        let _ = buf;
        None
    }

    /// A whole-buffer write without a copy: the end keeps `buf` (writing
    /// it behind) and puts one of its own buffers, of the same length, in
    /// its place; `Some` says what `write` of the whole buffer would have.
    /// `None`: nothing happened (the end does not write behind, or the
    /// write would be short), write as usual.
    fn write_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        let _ = buf;
        None
    }

    /// As [`End::seek`].
    fn seek(&mut self, to: Whence) -> Result<u64, Errno>;

    /// As [`End::size`].
    fn size(&self) -> Result<Option<u64>, Errno>;

    /// As [`End::next_data`].
    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        let _ = offset;
        Err(Errno::NOTSUP)
    }

    /// As [`End::next_hole`]: with [`Stream::next_data`] it lets the
    /// engine leave out exactly the holes (`--bmap` writes only mapped
    /// blocks) and `--bmap-create` map the input's extents.
    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        let _ = offset;
        Err(Errno::NOTSUP)
    }

    /// Move `len` bytes on in a stream whose bytes are not wanted (a hole
    /// that `--bmap` leaves out of a decompressed image) without copying
    /// them anywhere: the bytes passed over, fewer only where the input
    /// ends. EOPNOTSUPP (the default): the caller reads them over.
    fn discard(&mut self, len: u64) -> Result<u64, Errno> {
        let _ = len;
        Err(Errno::NOTSUP)
    }

    /// As [`End::truncate`].
    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Err(Errno::INVAL)
    }

    /// As [`End::sync`].
    fn sync(&mut self, data_only: bool) -> Result<(), Errno>;

    /// As [`End::read_at`].
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let _ = (buf, offset);
        Err(Errno::SPIPE)
    }

    /// As [`End::write_at`].
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        let _ = (buf, offset);
        Err(Errno::SPIPE)
    }

    /// The engine will go on sequentially in `hint.chunk`-byte requests:
    /// an end that can have several requests in flight (NBD, objects)
    /// may read ahead and write behind, up to `hint.depth` requests.
    fn pipeline(&mut self, hint: Pipeline) {
        let _ = hint;
    }

    /// After a write, sync or close of an end that writes behind failed:
    /// the offset before which everything is known to be written, so the
    /// statistics count only that. None: writes were never deferred.
    fn written_until(&self) -> Option<u64> {
        None
    }

    /// Make the next `len` bytes zeros at the position and move past them,
    /// without sending the zeros (an NBD zero request, a punched hole).
    /// EOPNOTSUPP where the end cannot: the caller writes zeros instead.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Err(Errno::NOTSUP)
    }

    /// Wait for everything the end deferred (writes behind) and report
    /// the first error not reported yet, while [`Stream::take_detail`] and
    /// [`Stream::written_until`] can still be asked, which they cannot after
    /// `close` consumed the end. Ends that defer nothing: Ok.
    fn settle(&mut self) -> Result<(), Errno> {
        Ok(())
    }

    /// After a read failed: the offset of the first byte the device said
    /// it could not read, where it said so (a SCSI disk's sense data
    /// names the block). A copy by position then reads everything before
    /// it in one piece, and retries sector by sector only from there.
    fn failed_at(&self) -> Option<u64> {
        None
    }

    /// The logical block of a disk the end addresses by block number (a
    /// generic node's): the unit of its commands, and what a bad
    /// block's number counts in. None for ends addressed by byte.
    fn logical_block(&self) -> Option<u32> {
        None
    }

    /// How the end reaches its device, where that is worth a line of
    /// `--verbose` (a generic node: which commands, how many in
    /// flight).
    fn describe(&self) -> Option<String> {
        None
    }

    /// More about the last error than its errno, once (a server's
    /// message, a checksum mismatch), for a line after GNU's.
    fn take_detail(&mut self) -> Option<String> {
        None
    }

    /// Make what was written final (complete an upload: the object
    /// appears under its key), or after a copy that failed (`copy_failed`)
    /// make sure nothing half-done is left that would look complete
    /// (abort an upload), and report its error while [`Stream::take_detail`]
    /// can still be asked; [`Stream::close`] or [`Stream::close_failed`] after
    /// it only release the end. Ends whose writes are final as they land
    /// (files, devices, exports): Ok, nothing to do.
    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        let _ = copy_failed;
        Ok(())
    }

    /// Keep `journal` up to date with what the end has durably stored
    /// (an upload's id and its stored parts), and, with `resume`, go on
    /// with the upload it records once the server confirms it still holds
    /// those parts. Err (with [`Stream::take_detail`]) when that cannot be:
    /// EOPNOTSUPP for an end with nothing to resume (the default).
    fn keep_journal(
        &mut self,
        journal: Box<dyn Journal>,
        resume: Option<&UploadRecord>,
    ) -> Result<(), Errno> {
        let _ = (journal, resume);
        Err(Errno::NOTSUP)
    }

    /// The bytes written from now on come in units a copy can resume
    /// from (compressed frames), each ended by [`Stream::resume_point`]:
    /// an end that records resume points (an upload) cuts its parts only
    /// there. Without the call every byte is such a point. True when
    /// the end holds units written by an earlier run (a resumed upload):
    /// a stream this run adds nothing to then adds no empty unit either.
    fn mark_resume_points(&mut self) -> bool {
        false
    }

    /// The bytes written so far end a unit that `source` bytes of the
    /// copy's input made (see [`Stream::mark_resume_points`]).
    fn resume_point(&mut self, source: u64) {
        let _ = source;
    }

    /// After [`Stream::finalise`]: what the output's store said of the
    /// bytes it holds (`Upload::stored_as_written`). None: nothing.
    fn stored_as_written(&mut self) -> Option<Result<String, String>> {
        None
    }

    /// Complete the end and report its last error (close(2); completing
    /// an upload; the last flush of a remote end).
    fn close(self: Box<Self>) -> Result<(), Errno>;

    /// Finalise the end of a copy that failed (exit status 1). GNU keeps
    /// what was written and still reports close's error, which the
    /// default does; an end where what was written would look complete
    /// and is not (an upload) abandons it instead. A wrapper passes it
    /// on to the end it wraps.
    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        self.close()
    }

    /// The copy failed or was interrupted: leave nothing half-done that
    /// would look complete (abort an upload). Files need nothing.
    fn abandon(self: Box<Self>) {}
}

/// Inside `impl Stream for W`, where `W` wraps another stream in its
/// field `inner: Box<dyn Stream>`: the named [`Stream`] methods, passed on to it
/// unchanged (`forward_to_inner!(size, sync, settle, abandon);`). A
/// wrapper then writes only what it changes, and a method it forgets to
/// pass on (a stage that swallowed `abandon` would leave an upload
/// looking complete) shows in the one line that lists them.
///
/// By hand rather than with the `delegate` crate: that crate wants each
/// method's signature restated in every wrapper, which is the repetition
/// this removes; here each signature is written once, below, as Stream's.
macro_rules! forward_to_inner {
    ($($method:ident),+ $(,)?) => {
        $($crate::engine::stream::forward_to_inner!(@one $method);)+
    };
    (@one kind) => {
        fn kind(&self) -> $crate::ends::Kind {
            self.inner.kind()
        }
    };
    (@one capabilities) => {
        fn capabilities(&self) -> $crate::ends::Capabilities {
            self.inner.capabilities()
        }
    };
    (@one size) => {
        fn size(&self) -> Result<Option<u64>, $crate::sys::Errno> {
            self.inner.size()
        }
    };
    (@one next_data) => {
        fn next_data(&mut self, offset: u64) -> Result<Option<u64>, $crate::sys::Errno> {
            self.inner.next_data(offset)
        }
    };
    (@one next_hole) => {
        fn next_hole(&mut self, offset: u64) -> Result<u64, $crate::sys::Errno> {
            self.inner.next_hole(offset)
        }
    };
    (@one truncate) => {
        fn truncate(&mut self, len: u64) -> Result<(), $crate::sys::Errno> {
            self.inner.truncate(len)
        }
    };
    (@one sync) => {
        fn sync(&mut self, data_only: bool) -> Result<(), $crate::sys::Errno> {
            self.inner.sync(data_only)
        }
    };
    (@one pipeline) => {
        fn pipeline(&mut self, hint: $crate::engine::stream::Pipeline) {
            self.inner.pipeline(hint)
        }
    };
    (@one written_until) => {
        fn written_until(&self) -> Option<u64> {
            self.inner.written_until()
        }
    };
    (@one settle) => {
        fn settle(&mut self) -> Result<(), $crate::sys::Errno> {
            self.inner.settle()
        }
    };
    (@one failed_at) => {
        fn failed_at(&self) -> Option<u64> {
            self.inner.failed_at()
        }
    };
    (@one logical_block) => {
        fn logical_block(&self) -> Option<u32> {
            self.inner.logical_block()
        }
    };
    (@one describe) => {
        fn describe(&self) -> Option<String> {
            self.inner.describe()
        }
    };
    (@one take_detail) => {
        fn take_detail(&mut self) -> Option<String> {
            self.inner.take_detail()
        }
    };
    (@one finalise) => {
        fn finalise(&mut self, copy_failed: bool) -> Result<(), $crate::sys::Errno> {
            self.inner.finalise(copy_failed)
        }
    };
    (@one mark_resume_points) => {
        fn mark_resume_points(&mut self) -> bool {
            self.inner.mark_resume_points()
        }
    };
    (@one resume_point) => {
        fn resume_point(&mut self, source: u64) {
            self.inner.resume_point(source)
        }
    };
    (@one close) => {
        fn close(self: Box<Self>) -> Result<(), $crate::sys::Errno> {
            self.inner.close()
        }
    };
    (@one close_failed) => {
        fn close_failed(self: Box<Self>) -> Result<(), $crate::sys::Errno> {
            self.inner.close_failed()
        }
    };
    (@one abandon) => {
        fn abandon(self: Box<Self>) {
            self.inner.abandon()
        }
    };
}
pub(crate) use forward_to_inner;

/// The input side: its stream, and GNU's notion of its offset.
pub type Input = InputOf<Box<dyn Stream>>;

impl Input {
    /// The input the copy reads from the end `opened`.
    pub fn of(opened: OpenedInput) -> Input {
        opened.map(stream_of)
    }

    /// After a copy that stopped short, leave an inherited seekable
    /// input where GNU dd would have: just past the `records` it counted
    /// (after skip=, from `start`, the offset it was handed at). GNU reads
    /// a record, writes it and stops at a failed write; ddx's reader runs
    /// ahead of the writer and has taken more. A script that goes on
    /// reading the same standard input (`(dd ...; cat) < file`) must find
    /// the same bytes. Only ever moves back; a file ddx opened itself is
    /// closed and nobody sees its offset.
    pub fn give_back_read_ahead(&mut self, plan: &CopyPlan, start: i64, records: u64) {
        if !self.seekable || !self.inherited {
            return;
        }
        let ibs = plan.input_block_size as u64;
        let skipped = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
        let Some(gnu) = records
            .checked_mul(ibs)
            .and_then(|b| b.checked_add(skipped))
            .and_then(|b| b.checked_add(start.max(0) as u64))
            .and_then(|b| i64::try_from(b).ok())
        else {
            return;
        };
        if let Ok(now) = self.stream.seek(Whence::Current(0)) {
            if now as i64 > gnu {
                let _ = self.stream.seek(Whence::Start(gnu as u64));
            }
        }
    }
}

/// The output side: its stream and the name messages give it.
pub type Output = OutputOf<Box<dyn Stream>>;

impl Output {
    /// The output the copy writes to the end `opened`.
    pub fn of(opened: OpenedOutput) -> Output {
        opened.map(stream_of)
    }
}

/// The stream of an end: its bytes as the engine moves them, through
/// the window that keeps its requests in flight.
pub fn stream_of(end: Box<dyn End>) -> Box<dyn Stream> {
    Box::new(crate::engine::window::Window::over(end))
}
