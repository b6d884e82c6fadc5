//! The end over a descriptor: a regular file, a block or character
//! device, a pipe, a socket, or an inherited standard input or output.
//! Each call is the one system call it names, errno unchanged (EINTR
//! included: the engine decides whether to retry, because dd's semantics
//! depend on it).
//!
//! Opened with O_DIRECT (`iflag=direct`, `oflag=direct` on a file or a
//! block device) each read or write waits for the device, and the kernel
//! reads nothing ahead: there the end keeps several requests in flight
//! through io_uring (`sys::ring::Queue`), where the copy's plan says it
//! pays, each at its offset in a buffer moved in by value. Where io_uring
//! cannot serve (missing, disabled), each request is done at once, as
//! without it.

use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, OFlags, SeekFrom};

use super::transport::{Completion, Fault, Op, Request, Requests, Submitted};
use super::{Capabilities, End, Kind, Whence};
use crate::operands::IoFlags;
use crate::sys::file::{self, Handle};
use crate::sys::ring::Queue;
use crate::sys::Errno;

/// Requests an O_DIRECT descriptor keeps in flight at most (the copy's
/// plan keeps fewer: its queue depth).
const DIRECT_IN_FLIGHT: usize = 256;

/// The unit an O_DIRECT request is made of on any device: a request of
/// other sizes or offsets is done on its own, where the kernel's answer
/// (EINVAL, or the cache GNU turns O_DIRECT off for) is GNU's.
const SECTOR: u32 = 512;

/// A descriptor, with its kind read once when it was opened.
#[derive(Debug)]
pub struct FileEnd {
    handle: Handle,
    kind: Kind,
    /// Opened with O_DIRECT: requests may be kept in flight.
    direct: bool,
    /// The io_uring queue of an O_DIRECT descriptor; None where io_uring
    /// cannot serve (`uring_refused`), or without O_DIRECT.
    queue: Option<Queue>,
    uring_refused: bool,
}

impl FileEnd {
    /// The end over `handle`; its kind from fstat (Other when that fails:
    /// the first real call then meets the error).
    pub fn new(handle: Handle) -> FileEnd {
        let fd = handle.as_fd();
        let kind = file::file_type(fd).map_or(Kind::Other, kind_of);
        let direct = matches!(kind, Kind::RegularFile | Kind::BlockDevice)
            && rustix::fs::fcntl_getfl(fd).is_ok_and(|flags| flags.contains(OFlags::DIRECT));
        // The queue is made with the end, on the thread that opens it:
        // a reader thread takes a private copy of the descriptor table
        // when it starts, and a ring made there would not be in the
        // table of the thread that closes the end.
        let queue = direct.then(|| Queue::new(DIRECT_IN_FLIGHT).ok()).flatten();
        FileEnd {
            handle,
            kind,
            direct,
            uring_refused: direct && queue.is_none(),
            queue,
        }
    }
}

/// The kind of end a descriptor of this file type is.
pub fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::RegularFile => Kind::RegularFile,
        FileType::BlockDevice => Kind::BlockDevice,
        FileType::CharacterDevice => Kind::CharDevice,
        FileType::Fifo => Kind::Pipe,
        FileType::Socket => Kind::Socket,
        FileType::Directory => Kind::Directory,
        _ => Kind::Other,
    }
}

/// open(2) flags for dd's iflag=/oflag= symbols: where dd's vocabulary
/// becomes the kernel's (the private symbols map to nothing). A synced
/// input is also read with O_RSYNC, as GNU opens it.
pub fn open_flags(flags: IoFlags, reading: bool) -> OFlags {
    const TABLE: [(IoFlags, OFlags); 9] = [
        (IoFlags::APPEND, OFlags::APPEND),
        (IoFlags::DIRECT, OFlags::DIRECT),
        (IoFlags::DIRECTORY, OFlags::DIRECTORY),
        (IoFlags::DSYNC, OFlags::DSYNC),
        (IoFlags::SYNC, OFlags::SYNC),
        (IoFlags::NONBLOCK, OFlags::NONBLOCK),
        (IoFlags::NOATIME, OFlags::NOATIME),
        (IoFlags::NOCTTY, OFlags::NOCTTY),
        (IoFlags::NOFOLLOW, OFlags::NOFOLLOW),
    ];
    let mut o = TABLE
        .iter()
        .filter(|(dd, _)| flags.contains(*dd))
        .fold(OFlags::empty(), |acc, (_, o)| acc | *o);
    if reading && flags.intersects(IoFlags::DSYNC | IoFlags::SYNC) {
        o |= OFlags::RSYNC;
    }
    o
}

impl End for FileEnd {
    fn kind(&self) -> Kind {
        self.kind
    }

    /// Requests in flight under O_DIRECT, in whole sectors.
    fn capabilities(&self) -> Capabilities {
        let requests = if self.direct {
            Requests {
                most: DIRECT_IN_FLIGHT,
                unit: SECTOR,
                ..Requests::ONE_AT_A_TIME
            }
        } else {
            Requests::ONE_AT_A_TIME
        };
        Capabilities {
            requests,
            ..Capabilities::of(self.kind)
        }
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.handle.as_fd())
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        file::read(self.handle.as_fd(), buf)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        file::write(self.handle.as_fd(), buf)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let to = match to {
            Whence::Start(offset) => SeekFrom::Start(offset),
            Whence::Current(delta) => SeekFrom::Current(delta),
            Whence::End(delta) => SeekFrom::End(delta),
        };
        file::seek(self.handle.as_fd(), to)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        file::usable_size(self.handle.as_fd()).map(|size| size.map(|s| s.max(0) as u64))
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        file::next_data(self.handle.as_fd(), offset)
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        file::next_hole(self.handle.as_fd(), offset)
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        file::truncate(self.handle.as_fd(), len)
    }

    /// A hole punched at the position (`--trim`): a file keeps its size
    /// (a range past its end is extended over by the writer, as after
    /// conv=sparse's seek); a block device zeroes or discards the range.
    /// Other kinds cannot: EOPNOTSUPP.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        if !matches!(self.kind, Kind::RegularFile | Kind::BlockDevice) {
            return Err(Errno::NOTSUP);
        }
        let fd = self.handle.as_fd();
        let at = file::current_offset(fd)?.max(0) as u64;
        let delta = i64::try_from(len).map_err(|_| Errno::OVERFLOW)?;
        file::punch_hole(fd, at, len)?;
        file::seek(fd, SeekFrom::Current(delta)).map(drop)
    }

    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        if data_only {
            file::fdatasync(self.handle.as_fd())
        } else {
            file::fsync(self.handle.as_fd())
        }
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        file::read_at(self.handle.as_fd(), buf, offset)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        file::write_at(self.handle.as_fd(), buf, offset)
    }

    /// Under O_DIRECT, into the io_uring queue (busy when every slot is
    /// in flight); else, or where io_uring cannot serve, done at once.
    fn submit(&mut self, mut request: Request) -> Submitted {
        if request.op == Op::Zero || self.queue.is_none() || request.buf.is_none() {
            return super::at_once(self, request);
        }
        let mut buf = request.buf.take().expect("checked above");
        buf.set_len((request.len as usize).min(buf.capacity()));
        let (fd, queue) = (
            self.handle.as_fd(),
            self.queue.as_mut().expect("checked above"),
        );
        let queued = match request.op {
            Op::Read => queue.read(fd, request.id, buf, request.offset),
            _ => queue.write(fd, request.id, buf, request.offset),
        };
        match queued {
            Ok(()) => Submitted::InFlight,
            Err((Errno::BUSY, buf)) => {
                request.buf = Some(buf);
                Submitted::Busy(request)
            }
            Err((errno, buf)) => Submitted::Done(Completion {
                id: request.id,
                result: Err(Fault::new(errno)),
                buf: Some(buf),
            }),
        }
    }

    fn complete(&mut self, wait: bool) -> Option<Completion> {
        let finished = self.queue.as_mut()?.finished(wait)?;
        Some(match finished {
            Ok(done) => Completion {
                id: done.tag,
                result: done.result.map(|n| n as u64).map_err(Fault::new),
                buf: Some(done.buf),
            },
            // The ring cannot be waited on: its requests are lost, and so
            // is the queue (its Drop keeps their buffers from being freed).
            Err(errno) => {
                self.uring_refused = true;
                if let Some(queue) = self.queue.take() {
                    std::mem::forget(queue);
                }
                Completion {
                    id: 0,
                    result: Err(Fault::with_words(errno, "io_uring could not be waited on")),
                    buf: None,
                }
            }
        })
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        // Requests in flight end before the descriptor is closed.
        drop(self.queue.take());
        self.handle.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn memfd() -> FileEnd {
        let fd: OwnedFd =
            rustix::fs::memfd_create("ddx-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        FileEnd::new(Handle::Owned(fd))
    }

    #[test]
    fn a_memfd_is_a_regular_file_with_lseek_semantics() {
        let mut end = memfd();
        assert_eq!(end.kind(), Kind::RegularFile);
        assert_eq!(end.write(b"hello world").unwrap(), 11);
        assert_eq!(end.size().unwrap(), Some(11));
        assert_eq!(end.seek(Whence::Current(0)).unwrap(), 11);
        assert_eq!(end.seek(Whence::Start(6)).unwrap(), 6);
        let mut buf = [0; 16];
        assert_eq!(end.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"world");
        assert_eq!(end.read(&mut buf).unwrap(), 0, "end of file");
        assert_eq!(end.seek(Whence::End(-5)).unwrap(), 6);
        assert_eq!(end.read_at(&mut buf[..5], 0).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(
            end.seek(Whence::Current(0)).unwrap(),
            6,
            "pread keeps the offset"
        );
        end.truncate(5).unwrap();
        assert_eq!(end.size().unwrap(), Some(5));
        Box::new(end).close().unwrap();
    }

    #[test]
    fn a_pipe_reads_what_it_holds_and_cannot_seek() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let mut reader = FileEnd::new(Handle::Owned(r));
        let mut writer = FileEnd::new(Handle::Owned(w));
        assert_eq!(reader.kind(), Kind::Pipe);
        assert_eq!(writer.write(b"abc").unwrap(), 3);
        let mut buf = [0; 8];
        assert_eq!(
            reader.read(&mut buf).unwrap(),
            3,
            "a short read, not the end"
        );
        assert_eq!(reader.seek(Whence::Current(0)), Err(Errno::SPIPE));
        assert_eq!(reader.size().unwrap(), None);
        Box::new(writer).close().unwrap();
        assert_eq!(reader.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn dd_flags_become_open_flags_at_the_end() {
        assert_eq!(
            open_flags(IoFlags::DIRECT | IoFlags::FULLBLOCK, true),
            OFlags::DIRECT
        );
        assert_eq!(
            open_flags(IoFlags::DSYNC, true),
            OFlags::DSYNC | OFlags::RSYNC
        );
        assert_eq!(open_flags(IoFlags::DSYNC, false), OFlags::DSYNC);
    }
}
