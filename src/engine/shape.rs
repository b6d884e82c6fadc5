//! Request shaping: when the records dd reports can be decoupled from the
//! requests ddx makes.
//!
//! With a regular file (or block device) on both ends, no data conversion
//! and no flag that gives each request a meaning of its own (direct, dsync,
//! sync, append, nonblock), a read of ibs bytes always returns ibs bytes
//! until end of file, and coalescing writes is invisible. The statistics are
//! then a function of the byte count alone, so ddx may read and write in
//! large chunks ("bulk") and still report exactly GNU's records: GNU's
//! default bs=512 then costs nothing.

use std::os::fd::AsFd;

use rustix::fs::FileType;

use crate::engine::endpoints::{Input, Output};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::sys::file;

/// The request size bulk copies aim for.
pub const BULK_REQUEST: usize = 1 << 20;

/// How a bulk copy counts its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkShape {
    /// Bytes per request: a whole number of input records.
    pub chunk: usize,
    /// The block GNU writes (obs when re-blocking, else ibs): holes are
    /// passed on in whole blocks of it.
    pub write_block: usize,
    /// The input is a regular file whose holes can be found (SEEK_DATA).
    pub sparse_input: bool,
}

/// The conv= symbols that leave the data and the record pattern alone.
const NEUTRAL_CONVERSIONS: Conv = Conv::NOTRUNC
    .union(Conv::NOCREAT)
    .union(Conv::EXCL)
    .union(Conv::FDATASYNC)
    .union(Conv::FSYNC)
    .union(Conv::SPARSE);

/// Flags that give each request a meaning of its own.
const PER_REQUEST_FLAGS: IoFlags = IoFlags::DIRECT
    .union(IoFlags::DSYNC)
    .union(IoFlags::SYNC)
    .union(IoFlags::APPEND)
    .union(IoFlags::NONBLOCK);

/// A regular file or block device: storage that may be slow, where
/// overlapping reads and writes pays.
pub fn is_storage(fd: &impl AsFd) -> bool {
    matches!(
        file::file_type(fd.as_fd()),
        Ok(FileType::RegularFile | FileType::BlockDevice)
    )
}

/// Both ends are the same file or device: what is read may be what was
/// just written, so only GNU's exact order of requests gives GNU's result.
pub fn same_file(input: &Input, output: &Output) -> bool {
    let id = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::fs::fstat(fd).ok().map(|st| {
            if FileType::from_raw_mode(st.st_mode) == FileType::BlockDevice {
                (0, st.st_rdev, 0)
            } else {
                (1, st.st_dev, st.st_ino)
            }
        })
    };
    let a = id(input.handle.as_fd());
    a.is_some() && a == id(output.handle.as_fd())
}

/// Both ends on one disk (different files or ranges of it).
pub fn same_disk(input: &Input, output: &Output) -> bool {
    let disk = crate::sys::device::disk_of(input.handle.as_fd());
    disk.is_some() && disk == crate::sys::device::disk_of(output.handle.as_fd())
}

/// Requests for a sequential copy within one disk: large, so that the
/// head moves (or the queue switches) between reading and writing rarely.
pub const SAME_DISK_REQUEST: usize = 8 << 20;

/// The bulk shape with requests of about `size` bytes instead.
pub fn with_request_size(shape: BulkShape, size: usize, input_block_size: usize) -> BulkShape {
    let chunk = if input_block_size >= size {
        input_block_size
    } else {
        size / input_block_size * input_block_size
    };
    BulkShape { chunk, ..shape }
}

/// Whether records may move with splice(2), inside the kernel, one splice
/// per record: an end must be a pipe, and nothing may need the bytes (no
/// conversion, no padding, no sparse test) or give a request a meaning
/// splice cannot keep (direct, append, sync, nonblock, nocache, fullblock,
/// re-blocking into obs). A pipe read and a splice from it both return what
/// the pipe holds, up to the size asked, so records stay GNU's.
pub fn splice_fits(plan: &CopyPlan, input: &Input, output: &Output) -> bool {
    const NEUTRAL: Conv = Conv::NOTRUNC
        .union(Conv::NOCREAT)
        .union(Conv::EXCL)
        .union(Conv::FDATASYNC)
        .union(Conv::FSYNC);
    let is_pipe = |fd| file::file_type(fd) == Ok(FileType::Fifo);
    NEUTRAL.contains(plan.conv)
        && !plan.two_buffers
        && !plan
            .input_flags
            .intersects(PER_REQUEST_FLAGS | IoFlags::FULLBLOCK)
        && !plan.output_flags.intersects(PER_REQUEST_FLAGS)
        && !plan.input_nocache
        && !plan.output_nocache
        && (is_pipe(input.handle.as_fd()) || is_pipe(output.handle.as_fd()))
        && !same_file(input, output)
}

/// Whether a copy may be shaped into bulk requests, and how.
pub fn bulk_shape(plan: &CopyPlan, input: &Input, output: &Output) -> Option<BulkShape> {
    if !NEUTRAL_CONVERSIONS.contains(plan.conv)
        || plan.input_flags.intersects(PER_REQUEST_FLAGS)
        || plan.output_flags.intersects(PER_REQUEST_FLAGS)
        || plan.input_nocache
        || plan.output_nocache
    {
        return None;
    }
    if same_file(input, output) {
        return None;
    }
    let full_reads = |t| t == FileType::RegularFile || t == FileType::BlockDevice;
    let input_type = file::file_type(input.handle.as_fd()).ok()?;
    let output_type = file::file_type(output.handle.as_fd()).ok()?;
    if !full_reads(input_type) || !full_reads(output_type) || !input.seekable {
        return None;
    }
    // Whole input records per request, so records are counted per chunk;
    // the writer re-blocks to obs itself.
    let ibs = plan.input_block_size;
    let chunk = if ibs >= BULK_REQUEST {
        ibs
    } else {
        BULK_REQUEST / ibs * ibs
    };
    let write_block = if plan.two_buffers {
        plan.output_block_size
    } else {
        ibs
    };
    Some(BulkShape {
        chunk,
        write_block,
        sparse_input: input_type == FileType::RegularFile,
    })
}

/// Whether kernel offload (copy_file_range) may do a bulk copy, and the
/// unit its requests must be whole multiples of: both ends regular files
/// on one filesystem, no sparse (offload would write the zeros), and a unit in which whole
/// input records and whole output blocks coincide, so that stopping at any
/// unit boundary leaves GNU's counts exact.
pub fn offload_unit(plan: &CopyPlan, input: &Input, output: &Output) -> Option<usize> {
    bulk_shape(plan, input, output)?;
    let regular = |fd| file::file_type(fd).ok() == Some(FileType::RegularFile);
    let filesystem = |fd| rustix::fs::fstat(fd).ok().map(|st| st.st_dev);
    // Across filesystems the kernel copies by splicing, read then write in
    // one thread: the threads backend overlaps them instead. Within one,
    // it can share extents or copy on the server.
    if plan.conv.contains(Conv::SPARSE)
        || !regular(input.handle.as_fd())
        || !regular(output.handle.as_fd())
        || filesystem(input.handle.as_fd()) != filesystem(output.handle.as_fd())
    {
        return None;
    }
    let ibs = plan.input_block_size;
    if !plan.two_buffers {
        return Some(ibs);
    }
    let obs = plan.output_block_size;
    let unit = ibs / gcd(ibs, obs) * obs;
    (unit <= 64 << 20).then_some(unit)
}

/// Whether copy_file_range into this output can beat ddx's own overlapped
/// copy. Where the filesystem can only copy the data (ext4, tmpfs and the
/// like: no shared extents, no server), the kernel reads and writes in turn
/// on one CPU, while with a second CPU a reader thread ahead of the writer
/// takes the time of the slower of the two instead of their sum (and can
/// write uncached; see `cache`). With one CPU, the kernel's copy, which
/// moves each byte once, is the better one.
pub fn kernel_copy_pays(output: &Output) -> bool {
    use crate::sys::filesystem::{storage_of, Storage};
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus < 2 || storage_of(output.handle.as_fd()) == Storage::Other
}

/// Nearly all of a regular input file is in the page cache, so reading it
/// will hardly touch its disk (cachestat(2); false where that cannot be
/// told, and for anything but a regular file).
pub fn input_cached(input: &Input) -> bool {
    let fd = input.handle.as_fd();
    file::file_type(fd) == Ok(FileType::RegularFile)
        && crate::engine::cache::mostly_cached(fd, 0, u64::MAX)
}

/// Both ends live in memory (tmpfs): their pages are the data itself, and
/// dropping them behind a copy would do nothing but cost calls.
pub fn both_in_memory(input: &Input, output: &Output) -> bool {
    use crate::sys::filesystem::{storage_of, Storage};
    storage_of(input.handle.as_fd()) == Storage::Memory
        && storage_of(output.handle.as_fd()) == Storage::Memory
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::gcd;

    #[test]
    fn gcd_of_block_sizes() {
        assert_eq!(gcd(512, 4096), 512);
        assert_eq!(gcd(100_000, 1536), 32);
        assert_eq!(gcd(7, 5), 1);
    }
}
