//! The ends of a copy: whatever ddx reads from or writes to, behind one
//! small interface.
//!
//! GNU dd's semantics are written once, in the engine's record reader and
//! writer, against [`End`]: reads and writes at the current position,
//! seeks, the size GNU's `usable_st_size` would give, holes, truncation,
//! syncing and an explicit close. A file, a block device, a pipe and a
//! character device are one implementation over a descriptor; an NBD
//! export, an object in a store and a compressed stream are others. A new
//! kind of end is a new module here plus a row in the planner's table,
//! never a new branch in the copy loop.
//!
//! Errors are `Errno`, as the system calls give them, because GNU's
//! messages and dd's retry rules (EINTR, O_DIRECT's EINVAL at end of file)
//! are written in errno terms. An end that knows more than an errno (a
//! server's message, a checksum that did not match) keeps it for
//! [`End::take_detail`], which the engine prints after GNU's line.
//!
//! Finalisation is explicit: [`End::finalise`] makes what was written
//! final (completes an upload) while the end can still say more about a
//! failure; [`End::close`] completes the end (close(2), or completing an
//! upload not finalised yet) and reports its error; [`End::abandon`] is for
//! a copy that failed or was interrupted, where a half-done end must not
//! be left behind (an upload is aborted, not completed), and
//! [`End::close_failed`] finalises the output of a copy that failed (GNU
//! closes a file as usual; an upload is aborted). Nothing is finalised in
//! `Drop`.

pub mod capabilities;
pub mod file;
pub mod memory;
pub mod nbd;
pub mod object;
pub mod open;
pub mod passthrough;
pub mod read_ahead;
pub mod upload;
pub mod uri;
pub mod write_behind;

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

pub use capabilities::{Capabilities, Discard};
pub use open::{open_input, open_output, Input, Output};

/// What an end is, as GNU's rules and ddx's messages name it (a short
/// read means end of file only for a regular file; a block device is
/// never truncated; "is a pipe, which has no positions"). What an end can
/// do is asked of its [`Capabilities`], never decided by matching kinds
/// outside `ends` and `planner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    RegularFile,
    BlockDevice,
    CharDevice,
    Pipe,
    Socket,
    Directory,
    /// Anything else a descriptor can be (a symlink opened with O_PATH...).
    Other,
    /// A block device on another machine (an NBD export): positional, a
    /// fixed size, reads and writes at any offset.
    NbdExport,
    /// An object in a store (S3, HTTP): read by ranges, written whole,
    /// never in place.
    Object,
    /// A stream ddx makes or consumes itself (decompression, compression):
    /// sequential only.
    Stream,
    /// A file held in memory while the copy runs (`mem:PATH`).
    Memory,
    /// A disk reached with its own commands through its SCSI or NVMe
    /// generic node (`/dev/sg*`, `/dev/bsg/*`, `/dev/ngXnY`): read and
    /// written at any offset as its block device is, with no descriptor
    /// that read(2), O_DIRECT or the page cache would reach.
    Passthrough,
}

impl Kind {
    /// The kind, as the rest of a sentence names it ("of='p' is a pipe").
    pub const fn described(self) -> &'static str {
        match self {
            Kind::RegularFile => "a regular file",
            Kind::BlockDevice => "a block device",
            Kind::CharDevice => "a character device",
            Kind::Pipe => "a pipe",
            Kind::Socket => "a socket",
            Kind::Directory => "a directory",
            Kind::Other => "not a file",
            Kind::NbdExport => "an NBD export",
            Kind::Object => "an object",
            Kind::Stream => "a stream",
            Kind::Memory => "a file held in memory",
            Kind::Passthrough => "a SCSI or NVMe generic node",
        }
    }

    /// What an end of this kind can do (see [`Capabilities::of`]).
    pub const fn capabilities(self) -> Capabilities {
        Capabilities::of(self)
    }

    /// The kind of a wrapper that passes this end's bytes on in order
    /// only (a replayed head, a recording): an end read by position
    /// becomes a [`Kind::Stream`]; a pipe or a device stays what it is.
    pub const fn in_order(self) -> Kind {
        if Capabilities::of(self).reads_at {
            Kind::Stream
        } else {
            self
        }
    }
}

/// Where [`End::seek`] goes, as lseek(2)'s whence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whence {
    Start(u64),
    Current(i64),
    End(i64),
}

/// How the engine will use an end from now on (see [`End::pipeline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pipeline {
    /// Bytes per request.
    pub chunk: usize,
    /// Requests worth keeping in flight.
    pub depth: usize,
    /// Bytes the copy will move, where known (an upload sizes its parts
    /// by it).
    pub total: Option<u64>,
}

/// One end of a copy. Every method has lseek/read/write semantics: the
/// position moves with reads and writes, a read of 0 bytes is end of
/// input, a short write is followed by the error on the next one.
pub trait End: Send + fmt::Debug {
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

    /// lseek(2): the new position. ESPIPE where the end cannot seek.
    fn seek(&mut self, to: Whence) -> Result<u64, Errno>;

    /// The size GNU's `usable_st_size` gives (a regular file's, an
    /// export's or an object's data size); None where the kind has none
    /// that means the data (a pipe, a block device's st_size).
    fn size(&self) -> Result<Option<u64>, Errno>;

    /// Where data starts at or after `offset` (SEEK_DATA): None when only
    /// a hole is left up to the end. The position is unspecified after.
    /// ENXIO/EOPNOTSUPP-like errors mean "no hole information".
    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        let _ = offset;
        Err(Errno::NOTSUP)
    }

    /// Where the data at `offset` ends (SEEK_HOLE): the first hole at or
    /// after `offset`, or the end of the data if no hole comes before it.
    /// With [`End::next_data`] it gives a data extent whole, so that the
    /// engine can leave out exactly the holes (`--bmap` writes only mapped
    /// blocks) and `--bmap-create` can map the input's extents. The
    /// position is unspecified after. EOPNOTSUPP: no hole information.
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

    /// ftruncate(2).
    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Err(Errno::INVAL)
    }

    /// fdatasync(2) (`data_only`) or fsync(2); a flush for a remote end.
    fn sync(&mut self, data_only: bool) -> Result<(), Errno>;

    /// pread(2): read at `offset`, the position unchanged.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let _ = (buf, offset);
        Err(Errno::SPIPE)
    }

    /// pwrite(2): write at `offset`, the position unchanged.
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
    /// the first error not reported yet, while [`End::take_detail`] and
    /// [`End::written_until`] can still be asked, which they cannot after
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
    /// passthrough node's): the unit of its commands, and what a bad
    /// block's number counts in. None for ends addressed by byte.
    fn logical_block(&self) -> Option<u32> {
        None
    }

    /// How the end reaches its device, where that is worth a line of
    /// `--verbose` (a passthrough node: which commands, how many in
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
    /// (abort an upload), and report its error while [`End::take_detail`]
    /// can still be asked; [`End::close`] or [`End::close_failed`] after
    /// it only release the end. Ends whose writes are final as they land
    /// (files, devices, exports): Ok, nothing to do.
    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        let _ = copy_failed;
        Ok(())
    }

    /// After [`End::finalise`]: whether the store itself confirmed that
    /// it holds exactly the bytes written (an object whose checksum, as
    /// the server computed it, is the one of the bytes sent), for
    /// `--verify` to report instead of reading the output back: Ok says
    /// how it was confirmed, Err why the store could not say. None: the
    /// end has no such word (read it back).
    fn stored_as_written(&self) -> Option<Result<String, String>> {
        None
    }

    /// Keep `journal` up to date with what the end has durably stored
    /// (an upload's id and its stored parts), and, with `resume`, go on
    /// with the upload it records once the server confirms it still holds
    /// those parts. Err (with [`End::take_detail`]) when that cannot be:
    /// EOPNOTSUPP for an end with nothing to resume (the default).
    fn keep_journal(
        &mut self,
        journal: Box<dyn upload::Journal>,
        resume: Option<&upload::UploadRecord>,
    ) -> Result<(), Errno> {
        let _ = (journal, resume);
        Err(Errno::NOTSUP)
    }

    /// The bytes written from now on come in units a copy can resume
    /// from (compressed frames), each ended by [`End::resume_point`]:
    /// an end that records resume points (an upload) cuts its parts only
    /// there. Without the call every byte is such a point. True when
    /// the end holds units written by an earlier run (a resumed upload):
    /// a stream this run adds nothing to then adds no empty unit either.
    fn mark_resume_points(&mut self) -> bool {
        false
    }

    /// The bytes written so far end a unit that `source` bytes of the
    /// copy's input made (see [`End::mark_resume_points`]).
    fn resume_point(&mut self, source: u64) {
        let _ = source;
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

/// Inside `impl End for W`, where `W` wraps another end in its field
/// `inner: Box<dyn End>`: the named [`End`] methods, passed on to it
/// unchanged (`forward_to_inner!(size, sync, settle, abandon);`). A
/// wrapper then writes only what it changes, and a method it forgets to
/// pass on (a wrapper that swallowed `abandon` would leave an upload
/// looking complete) shows in the one line that lists them.
///
/// By hand rather than with the `delegate` crate: that crate wants each
/// method's signature restated in every wrapper, which is the repetition
/// this removes; here each signature is written once, below, as End's.
macro_rules! forward_to_inner {
    ($($method:ident),+ $(,)?) => {
        $($crate::ends::forward_to_inner!(@one $method);)+
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
        fn pipeline(&mut self, hint: $crate::ends::Pipeline) {
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
