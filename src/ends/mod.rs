//! The ends of a copy: whatever ddx reads from or writes to, each a
//! transport behind one small interface ([`End`]).
//!
//! An end carries bytes to and from its storage: a file, a block or
//! character device and a pipe over a descriptor (`file`), an NBD export
//! (`nbd`), an object in a store (`object`), a disk through its SCSI or
//! NVMe generic node (`generic_node`), a TCP connection (`tcp`), a file
//! held in memory (`memory`).
//! It reads and writes at its position with lseek/read/write semantics
//! (the engine's record reader and writer depend on them for GNU's), and,
//! where it keeps several requests in flight, takes requests at offsets
//! and reports each completion (`transport`). It says what it can do in
//! its [`Capabilities`], which code outside `ends` and `planner` asks
//! instead of matching kinds. It keeps no window of requests of its own:
//! the engine's window (`engine::window`) owns their order, the position,
//! the first failure and back-pressure, for every end alike. A new kind
//! of end is a new module here, its capabilities and, where a URI names
//! it, one arm in `uri`.
//!
//! Errors are `Errno`, as the system calls give them, because GNU's
//! messages and dd's retry rules are written in errno terms. An end that
//! knows more than an errno (a server's message, a sense key) keeps it
//! for [`End::take_detail`], which the engine prints after GNU's line.
//!
//! Finalisation is explicit: [`End::finalise`] makes what was written
//! final (completes an upload) while the end can still say more about a
//! failure; [`End::close`] completes the end and reports its error;
//! [`End::close_failed`] finalises the output of a copy that failed (GNU
//! closes a file as usual; an upload is aborted); [`End::abandon`] is for
//! a copy interrupted, where nothing half-done may be left that looks
//! complete. Nothing is finalised in `Drop`.

pub mod capabilities;
pub mod file;
pub mod generic_node;
pub mod memory;
pub mod nbd;
pub mod object;
pub mod open;
pub mod tcp;
pub mod transport;
pub mod upload;
pub mod uri;

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::sys::Errno;
use transport::{Completion, Fault, Op, Request, Submitted};
use upload::Upload;

pub use capabilities::{Capabilities, Discard};
pub use open::{open_input, open_output, OpenedInput, OpenedOutput};
pub use transport::Requests;

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
    GenericNode,
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
            Kind::GenericNode => "a SCSI or NVMe generic node",
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

impl Whence {
    /// The offset it names from `position` in an end of `size` bytes:
    /// None where that is below 0 or past what a u64 holds (EINVAL).
    pub fn from(self, position: u64, size: u64) -> Option<u64> {
        match self {
            Whence::Start(at) => Some(at),
            Whence::Current(by) => position.checked_add_signed(by),
            Whence::End(by) => size.checked_add_signed(by),
        }
    }
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
    /// Its read(2) and write(2) are exactly the end's reads and writes.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// read(2): by default a [`End::read_at`] at the end's position
    /// (which its `seek` keeps), the position moved past what was read.
    /// An end that is only written (an upload) refuses as its `read_at`
    /// does.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let at = self.seek(Whence::Current(0))?;
        let n = self.read_at(buf, at)?;
        self.seek(Whence::Start(at + n as u64))?;
        Ok(n)
    }

    /// write(2): by default a [`End::write_at`] at the end's position,
    /// the position moved past what was written. An end that is only
    /// read refuses as its `write_at` does.
    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let at = self.seek(Whence::Current(0))?;
        let n = self.write_at(buf, at)?;
        self.seek(Whence::Start(at + n as u64))?;
        Ok(n)
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
    /// With [`End::next_data`] it gives a data extent whole. The position
    /// is unspecified after. EOPNOTSUPP: no hole information.
    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        let _ = offset;
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

    /// Make the next `len` bytes zeros at the position and move past them,
    /// without sending the zeros (an NBD zero request, a punched hole).
    /// EOPNOTSUPP where the end cannot: the caller writes zeros instead.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Err(Errno::NOTSUP)
    }

    /// Carry `request` to the storage. An end that keeps requests in
    /// flight (`Capabilities::requests`) sends it and returns; its
    /// completion comes from [`End::complete`]. By default the request is
    /// done at once, through [`End::read_at`] and [`End::write_at`]: the
    /// adapter every end that does one request at a time gets.
    fn submit(&mut self, request: Request) -> Submitted {
        at_once(self, request)
    }

    /// The next request done, of those [`End::submit`] sent: waiting for
    /// one when `wait`. None when none is in flight (or, without `wait`,
    /// none is done yet).
    fn complete(&mut self, wait: bool) -> Option<Completion> {
        let _ = wait;
        None
    }

    /// After a read failed: the offset of the first byte the device said
    /// it could not read, where it said so (a SCSI disk's sense data
    /// names the block). A copy by position then reads everything before
    /// it in one piece, and retries sector by sector only from there.
    fn failed_at(&self) -> Option<u64> {
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

    /// The upload this end writes, where it is one: the part sizes, the
    /// journal of `--map`/`--resume` and the resume points of
    /// `--compress` (see [`Upload`]).
    fn upload(&mut self) -> Option<&mut dyn Upload> {
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

    /// Complete the end and report its last error (close(2); completing
    /// an upload; the last flush of a remote end).
    fn close(self: Box<Self>) -> Result<(), Errno>;

    /// Finalise the end of a copy that failed (exit status 1). GNU keeps
    /// what was written and still reports close's error, which the
    /// default does; an end where what was written would look complete
    /// and is not (an upload) abandons it instead.
    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        self.close()
    }

    /// The copy failed or was interrupted: leave nothing half-done that
    /// would look complete (abort an upload). Files need nothing.
    fn abandon(self: Box<Self>) {}
}

/// What [`End::submit`]'s adapter reports of a request it did at once:
/// the bytes moved, or the failure with the end's words and place. A
/// read is whole or fails (`whole`): a short read means the end of the
/// data, which a failure part way is not; a write stored in part is
/// short, and the rest's failure comes when it is sent again.
fn moved<E: End + ?Sized>(
    end: &mut E,
    done: usize,
    error: Option<Errno>,
    whole: bool,
) -> Result<u64, Fault> {
    match error {
        Some(errno) if done == 0 || whole => Err(Fault {
            errno,
            words: end.take_detail(),
            at: end.failed_at(),
        }),
        _ => Ok(done as u64),
    }
}

/// [`End::submit`]'s adapter for an end that does one request at a
/// time: the request done at once, through [`End::read_at`] and
/// [`End::write_at`].
pub fn at_once<E: End + ?Sized>(end: &mut E, request: Request) -> Submitted {
    let (id, op, offset) = (request.id, request.op, request.offset);
    let Some(mut buf) = request.buf.filter(|_| op != Op::Zero) else {
        return Submitted::Done(Completion {
            id,
            result: Err(Fault::new(Errno::NOTSUP)),
            buf: None,
        });
    };
    let want = (request.len as usize).min(buf.len());
    let mut done = 0;
    let mut error = None;
    while done < want {
        let at = offset + done as u64;
        let moved = match op {
            Op::Read => end.read_at(&mut buf.as_mut_slice()[done..want], at),
            _ => end.write_at(&buf.as_slice()[done..want], at),
        };
        match moved {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(errno) => {
                error = Some(errno);
                break;
            }
        }
    }
    let result = moved(end, done, error, op == Op::Read);
    Submitted::Done(Completion {
        id,
        result,
        buf: Some(buf),
    })
}
