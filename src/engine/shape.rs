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
    Some(BulkShape { chunk })
}
