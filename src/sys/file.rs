//! File descriptors and the system calls the copy makes on them.
//!
//! Every call returns `Errno` unchanged (EINTR included): the caller decides
//! whether to retry, because dd's semantics depend on it.

use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, SeekFrom};
use rustix::io::Errno;

/// An open end of the copy: a file we opened, or an inherited stdin/stdout.
#[derive(Debug)]
pub enum Handle {
    Owned(OwnedFd),
    Stdin(std::io::Stdin),
    Stdout(std::io::Stdout),
}

impl AsFd for Handle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Handle::Owned(fd) => fd.as_fd(),
            Handle::Stdin(s) => s.as_fd(),
            Handle::Stdout(s) => s.as_fd(),
        }
    }
}

impl Handle {
    /// Close explicitly so that a deferred write error (NFS, quota) is
    /// reported, as GNU dd does for both ends, stdin/stdout included.
    pub fn close(self) -> Result<(), Errno> {
        let raw = match self {
            Handle::Owned(fd) => fd.into_raw_fd(),
            Handle::Stdin(_) => 0,
            Handle::Stdout(_) => 1,
        };
        if crate::sys::stdio::was_closed_at_start(raw) {
            return Err(Errno::BADF);
        }
        // SAFETY: `raw` is a descriptor this process owns: either taken out
        // of an OwnedFd (so nothing else will close it) or fd 0/1, which
        // nothing reads or writes after the copy has finished.
        let rc = unsafe { libc::close(raw) };
        if rc == 0 {
            return Ok(());
        }
        match Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        {
            // POSIX leaves the descriptor's state unspecified after EINTR;
            // Linux has closed it already.
            Errno::INTR => Ok(()),
            e => Err(e),
        }
    }
}

/// How to open the output.
#[derive(Debug, Clone, Copy)]
pub struct OutputOpen {
    /// Flags beyond the access mode and creation (O_DIRECT, O_DSYNC...).
    pub flags: OFlags,
    pub create: bool,
    pub exclusive: bool,
    pub truncate: bool,
    /// Also ask for read access (dd may read to skip on unseekable outputs).
    pub read_write: bool,
}

/// open(2) for reading, with `flags` beyond O_RDONLY (O_DIRECT...).
pub fn open_input(path: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
    let o = OFlags::RDONLY | OFlags::CLOEXEC | flags;
    retry_eintr(|| rustix::fs::open(path, o, Mode::empty()))
}

pub fn open_output(path: &Path, how: OutputOpen) -> Result<OwnedFd, Errno> {
    let mut o = OFlags::CLOEXEC | how.flags;
    o |= if how.read_write {
        OFlags::RDWR
    } else {
        OFlags::WRONLY
    };
    if how.create {
        o |= OFlags::CREATE;
    }
    if how.exclusive {
        o |= OFlags::EXCL;
    }
    if how.truncate {
        o |= OFlags::TRUNC;
    }
    retry_eintr(|| rustix::fs::open(path, o, Mode::from_raw_mode(0o666)))
}

/// Add open flags to an inherited descriptor (stdin/stdout), as GNU does
/// with fcntl: creation-only flags are checked by hand or ignored.
pub fn add_fd_flags(fd: BorrowedFd<'_>, flags: OFlags) -> Result<(), Errno> {
    let add = flags - (OFlags::NOCTTY | OFlags::NOFOLLOW);
    if add.is_empty() {
        return Ok(());
    }
    let old = rustix::fs::fcntl_getfl(fd)?;
    let mut new = old | add;
    if new == old {
        return Ok(());
    }
    if new.contains(OFlags::DIRECTORY) {
        if file_type(fd)? != FileType::Directory {
            return Err(Errno::NOTDIR);
        }
        new.remove(OFlags::DIRECTORY);
    }
    if new != old {
        rustix::fs::fcntl_setfl(fd, new)?;
    }
    Ok(())
}

/// Turn O_DIRECT off (for an unaligned final block).
pub fn clear_direct(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let old = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, old - OFlags::DIRECT)
}

#[inline(always)]
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    rustix::io::read(fd, buf)
}

#[inline(always)]
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    rustix::io::write(fd, buf)
}

/// RWF_DONTCACHE (Linux 6.14): a buffered write whose pages the kernel
/// writes back at once and drops when that is done, without the writer
/// waiting. rustix 1.1 does not name it yet.
const RWF_DONTCACHE: u32 = 0x80;

/// write(2) at the file offset, uncached (see [`RWF_DONTCACHE`]).
/// EOPNOTSUPP where the kernel or the filesystem cannot do it.
pub fn write_uncached(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    // Offset -1 means "at the file offset, and advance it", as write(2).
    let at_file_offset = u64::MAX;
    rustix::io::pwritev2(
        fd,
        &[std::io::IoSlice::new(buf)],
        at_file_offset,
        rustix::io::ReadWriteFlags::from_bits_retain(RWF_DONTCACHE),
    )
}

/// lseek(fd, delta, SEEK_CUR), with GNU's signed offsets.
pub fn seek_relative(fd: BorrowedFd<'_>, delta: i64) -> Result<i64, Errno> {
    rustix::fs::seek(fd, SeekFrom::Current(delta)).map(|p| p as i64)
}

/// lseek(2) to anywhere: the new offset.
pub fn seek(fd: BorrowedFd<'_>, to: SeekFrom) -> Result<u64, Errno> {
    rustix::fs::seek(fd, to)
}

pub fn seek_to_end(fd: BorrowedFd<'_>) -> Result<i64, Errno> {
    rustix::fs::seek(fd, SeekFrom::End(0)).map(|p| p as i64)
}

pub fn current_offset(fd: BorrowedFd<'_>) -> Result<i64, Errno> {
    seek_relative(fd, 0)
}

pub fn file_type(fd: BorrowedFd<'_>) -> Result<FileType, Errno> {
    retry_eintr(|| rustix::fs::fstat(fd)).map(|st| FileType::from_raw_mode(st.st_mode))
}

/// The size when st_size means the data size (regular files; GNU's
/// usable_st_size), else None.
pub fn usable_size(fd: BorrowedFd<'_>) -> Result<Option<i64>, Errno> {
    let st = retry_eintr(|| rustix::fs::fstat(fd))?;
    Ok((FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then_some(st.st_size))
}

pub fn truncate(fd: BorrowedFd<'_>, len: u64) -> Result<(), Errno> {
    retry_eintr(|| rustix::fs::ftruncate(fd, len))
}

/// fallocate(PUNCH_HOLE | KEEP_SIZE): `len` bytes at `offset` read back
/// as zeros, their blocks freed where the filesystem can (a block device
/// zeroes or discards them), the size unchanged. EOPNOTSUPP where the
/// filesystem or device cannot; a block device refuses a range that is
/// not whole logical blocks (EINVAL).
pub fn punch_hole(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    use rustix::fs::FallocateFlags;
    retry_eintr(|| {
        rustix::fs::fallocate(
            fd,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        )
    })
}

/// fallocate(KEEP_SIZE): the first `len` bytes of the file allocated,
/// its size unchanged, so that writing within them later needs no free
/// space. EOPNOTSUPP where the filesystem cannot.
pub fn reserve(fd: BorrowedFd<'_>, len: u64) -> Result<(), Errno> {
    use rustix::fs::FallocateFlags;
    retry_eintr(|| rustix::fs::fallocate(fd, FallocateFlags::KEEP_SIZE, 0, len))
}

pub fn fdatasync(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    retry_eintr(|| rustix::fs::fdatasync(fd))
}

pub fn fsync(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    retry_eintr(|| rustix::fs::fsync(fd))
}

/// posix_fadvise(DONTNEED) on a range; len 0 means "to the end".
pub fn drop_cache(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    rustix::fs::fadvise(
        fd,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::DontNeed,
    )
}

/// posix_fadvise(WILLNEED) on a range: the kernel starts reading it
/// into the page cache, and the call returns without waiting.
pub fn will_need(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    rustix::fs::fadvise(
        fd,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::WillNeed,
    )
}

fn retry_eintr<T>(mut f: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    }
}

/// Start writeback of a range (SYNC_FILE_RANGE_WRITE), without waiting.
pub fn start_writeback(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    sync_file_range(fd, offset, len, libc::SYNC_FILE_RANGE_WRITE)
}

/// Wait until a range is on the device (its pages can then be dropped).
pub fn wait_writeback(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Result<(), Errno> {
    sync_file_range(
        fd,
        offset,
        len,
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    )
}

fn sync_file_range(
    fd: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    flags: libc::c_uint,
) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    // rustix has no wrapper for sync_file_range(2).
    // SAFETY: plain integer arguments; the descriptor is borrowed and open
    // for the duration of the call.
    let rc = unsafe { libc::sync_file_range(fd.as_raw_fd(), offset as i64, len as i64, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO))
    }
}

/// Pages of `[offset, offset + len)` in the page cache, by cachestat(2)
/// (Linux 6.5); None where the kernel lacks it.
pub fn cached_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // cachestat is syscall 451 on every Linux architecture (new syscalls
    // share one number), but the libc crate does not name it on x86_64.
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct CacheStat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let range = Range { off: offset, len };
    let mut stat = CacheStat::default();
    // SAFETY: both pointers refer to live, properly laid out #[repr(C)]
    // structs of the kernel's ABI; the kernel only writes into `stat`.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut CacheStat,
            0,
        )
    };
    (rc == 0).then_some(stat.nr_cache)
}

/// Where the data at or after `offset` starts (SEEK_DATA): Ok(None) when
/// only a hole is left up to end of file. Moves the file offset.
pub fn next_data(fd: BorrowedFd<'_>, offset: u64) -> Result<Option<u64>, Errno> {
    match rustix::fs::seek(fd, SeekFrom::Data(offset)) {
        Ok(at) => Ok(Some(at)),
        Err(Errno::NXIO) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where the data at `offset` ends (SEEK_HOLE): the next hole, or the end
/// of file, which counts as one. Moves the file offset.
pub fn next_hole(fd: BorrowedFd<'_>, offset: u64) -> Result<u64, Errno> {
    rustix::fs::seek(fd, SeekFrom::Hole(offset))
}

/// splice(2) from `input` to `output` at their file offsets (one of them
/// must be a pipe): up to `len` bytes moved inside the kernel.
pub fn splice(input: BorrowedFd<'_>, output: BorrowedFd<'_>, len: usize) -> Result<usize, Errno> {
    rustix::pipe::splice(
        input,
        None,
        output,
        None,
        len,
        rustix::pipe::SpliceFlags::empty(),
    )
}

/// The first bytes waiting in the pipe `fd`, at most `len`, left in it
/// for its next reader: tee(2) copies them into a pipe of ddx's own,
/// which is then read. Waits for the first bytes to arrive; `Ok` of an
/// empty vector at end of input. What arrives later is not waited for:
/// the caller asks again (each call sees the bytes from the start).
pub fn peek_pipe(fd: BorrowedFd<'_>, len: usize) -> Result<Vec<u8>, Errno> {
    use rustix::pipe::{pipe_with, tee, PipeFlags, SpliceFlags};
    let (reader, writer) = pipe_with(PipeFlags::CLOEXEC)?;
    let copied = retry_eintr(|| tee(fd, &writer, len, SpliceFlags::empty()))?;
    let mut head = vec![0; copied];
    let mut filled = 0;
    while filled < copied {
        match retry_eintr(|| rustix::io::read(&reader, &mut head[filled..]))? {
            0 => break,
            n => filled += n,
        }
    }
    head.truncate(filled);
    Ok(head)
}

/// A second, independent open of the same file for reading with O_DIRECT
/// (through /proc/self/fd, so it needs no path), to measure the device
/// under a file without the page cache; fails where O_DIRECT is not
/// supported (tmpfs, some FUSE filesystems).
pub fn reopen_direct(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
}

/// Whether the file has a hole at or after `offset` before its end
/// (SEEK_HOLE finds the implicit one at end of file otherwise). Leaves the
/// file offset where it was.
pub fn has_hole_after(fd: BorrowedFd<'_>, offset: u64) -> bool {
    let Ok(here) = current_offset(fd) else {
        return false;
    };
    let hole = rustix::fs::seek(fd, SeekFrom::Hole(offset));
    let size = rustix::fs::fstat(fd).map(|st| st.st_size as u64);
    let _ = rustix::fs::seek(fd, SeekFrom::Start(here.max(0) as u64));
    matches!((hole, size), (Ok(hole), Ok(size)) if hole < size)
}

/// The bytes of data (not holes) in `[offset, offset + len)`, by walking
/// SEEK_DATA and SEEK_HOLE over at most `max_extents` data extents (the
/// rest of the range then counts as data); None where the file cannot
/// tell (not a regular file, or a filesystem without SEEK_DATA). Leaves
/// the file offset where it was.
pub fn data_in_range(fd: BorrowedFd<'_>, offset: u64, len: u64, max_extents: usize) -> Option<u64> {
    let here = current_offset(fd).ok()?;
    let end = offset.saturating_add(len);
    let mut at = offset;
    let mut data = 0u64;
    let mut walked = Some(());
    for _ in 0..max_extents {
        if at >= end {
            break;
        }
        let start = match rustix::fs::seek(fd, SeekFrom::Data(at)) {
            Ok(start) => start,
            Err(Errno::NXIO) => {
                at = end;
                break;
            }
            Err(_) => {
                walked = None;
                break;
            }
        };
        if start >= end {
            at = end;
            break;
        }
        let Ok(hole) = rustix::fs::seek(fd, SeekFrom::Hole(start)) else {
            walked = None;
            break;
        };
        data += hole.min(end) - start;
        at = hole;
    }
    let _ = rustix::fs::seek(fd, SeekFrom::Start(here.max(0) as u64));
    walked.map(|()| data + end.saturating_sub(at))
}

pub fn seek_to(fd: BorrowedFd<'_>, offset: u64) -> Result<(), Errno> {
    rustix::fs::seek(fd, SeekFrom::Start(offset)).map(|_| ())
}

/// pread(2): read at `offset` without moving the file offset.
pub fn read_at(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    retry_eintr(|| rustix::io::pread(fd, &mut *buf, offset))
}

/// pwrite(2): write at `offset` without moving the file offset.
pub fn write_at(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> Result<usize, Errno> {
    retry_eintr(|| rustix::io::pwrite(fd, buf, offset))
}

/// open(2) with explicit flags, for callers (the benchmark) that choose
/// O_DIRECT/O_DSYNC/O_SYNC per test rather than from dd's symbols.
pub fn open_with(path: &Path, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
    retry_eintr(|| rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::from_raw_mode(mode)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn data_in_range_counts_what_is_not_a_hole_and_keeps_the_offset() {
        const MIB: u64 = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(16 * MIB).unwrap();
        for at in [2 * MIB, 10 * MIB] {
            write_at(file.as_fd(), &[7u8; MIB as usize], at).unwrap();
        }
        let fd = file.as_fd();
        seek_to(fd, 12345).unwrap();
        let Some(all) = data_in_range(fd, 0, 16 * MIB, 64) else {
            return; // a filesystem without SEEK_DATA: nothing to count
        };
        if all == 16 * MIB {
            return; // one that reports no holes (allowed by lseek(2))
        }
        assert_eq!(all, 2 * MIB);
        assert_eq!(data_in_range(fd, 2 * MIB + 4096, MIB, 64), Some(MIB - 4096));
        assert_eq!(data_in_range(fd, 4 * MIB, 4 * MIB, 64), Some(0));
        // Past the extents it may walk, the rest counts as data.
        assert_eq!(data_in_range(fd, 0, 16 * MIB, 1), Some(MIB + 13 * MIB));
        assert_eq!(current_offset(fd), Ok(12345));
    }
}
