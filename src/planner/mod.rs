//! How a copy runs: a pure function of what was asked ([`Request`]) and
//! what is known of the ends ([`Facts`], gathered once by [`facts`]).
//!
//! It decides the backend (GNU's loop, a reader thread ahead of the
//! writer, io_uring, in turn within one disk), the queue depth, and the
//! shaping: bulk requests where records can be decoupled from requests,
//! kernel offload (copy_file_range), splice, drop-behind. Whatever it
//! decides, the bytes and the statistics are GNU's; only the requests and
//! their overlap differ. Being pure, every row of the README's backend
//! table is a row of this module's table tests, needing neither root nor
//! devices.

pub mod facts;

pub use facts::{EndFacts, Facts, Identity, OutputProbe};

use crate::ends::Kind;
use crate::engine::backend::{Backend, BulkShape, Shaping};
use crate::engine::depth;
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::request::{BackendChoice, Offload, Request};
use crate::sys::filesystem::Storage;

/// The request size bulk copies aim for.
pub const BULK_REQUEST: usize = 1 << 20;

/// Requests for a sequential copy within one disk: large, so that the
/// head moves (or the queue switches) between reading and writing rarely.
pub const SAME_DISK_REQUEST: usize = 8 << 20;

/// Records at least this large are worth a hand-off between two threads
/// when they cannot be coalesced into bulk requests.
const OVERLAP_MIN_RECORD: usize = 16 * 1024;

/// How a copy runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    pub backend: Backend,
    pub shaping: Shaping,
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

/// Decide how the copy runs.
pub fn plan(request: &Request, facts: &Facts) -> Strategy {
    let Request { plan, settings } = request;
    let hashing = !settings.hash.is_empty() || settings.verify;
    let bulk = bulk_shape(plan, facts);
    let same_file = same_file(facts);
    let storage_end = (is_storage(facts.input.kind) || is_storage(facts.output.kind)) && !same_file;
    let queue_depth = settings.queue_depth.unwrap_or_else(|| {
        let request_bytes = match (&bulk, settings.request_size) {
            (Some(_), Some(size)) => size,
            (Some(shape), None) => shape.chunk,
            (None, _) => plan.input_block_size,
        };
        depth::default_depth(request_bytes, &[facts.input.queue, facts.output.queue])
    });
    let nocache = plan.input_nocache || plan.output_nocache;
    let backend = match settings.backend {
        Some(BackendChoice::Threads) => Backend::Threads { queue_depth },
        Some(BackendChoice::Uring) => Backend::Uring { queue_depth },
        Some(BackendChoice::Sync) => Backend::Sync,
        // Overlapped where a device may be slow (a file or block device at
        // either end): in bulk requests when records can be decoupled,
        // else record by record if records are large enough for the
        // hand-off to be cheap. Pipes and character devices keep the
        // reference loop, and so does nocache, whose cache advice GNU
        // gives (and tools trace) from the one copying thread.
        None if bulk.is_some()
            || (storage_end && plan.input_block_size >= OVERLAP_MIN_RECORD && !nocache) =>
        {
            Backend::Threads { queue_depth }
        }
        None => Backend::Sync,
    };
    // Reading ahead of the writer changes what a copy of a file onto itself
    // reads back, whatever backend was asked for; count=0 copies nothing
    // and needs no thread.
    let backend = if same_file || plan.copies_nothing() {
        Backend::Sync
    } else {
        backend
    };
    // Within one rotating disk, overlapping reads and writes makes the head
    // seek between the two places: copy in turn, in large requests (auto
    // only). A solid-state disk has no head to move, and gains from the
    // overlap like any other pair of ends (a disk that does not say which
    // it is is taken to rotate); an input already in the page cache will
    // not be read from the disk, so only the writes go to it.
    let same_disk = settings.backend.is_none()
        && bulk.is_some()
        && facts.input.disk.is_some()
        && facts.input.disk == facts.output.disk
        && facts
            .input
            .queue
            .and_then(|hint| hint.rotational)
            .unwrap_or(true)
        && !facts.input.cached;
    let backend = if same_disk {
        Backend::Sequential
    } else {
        backend
    };
    let request_size = match (settings.request_size, same_disk) {
        (Some(size), _) => Some(size),
        (None, true) => Some(SAME_DISK_REQUEST),
        (None, false) => None,
    };
    let bulk = match (bulk, request_size) {
        (Some(shape), Some(size)) => Some(with_request_size(shape, size, plan.input_block_size)),
        (shape, _) => shape,
    };
    // The reference backend keeps GNU's requests too, not only its results;
    // chosen by auto (pipes), it may splice (not when hashing: the bytes
    // must pass through ddx). Splicing moves each record with one call and
    // no copy into ddx: for a pipe end it beats a reader thread, which
    // copies every byte twice.
    let splice = settings.backend.is_none()
        && settings.offload != Offload::Never
        && !hashing
        && splice_fits(plan, facts);
    let backend = if splice { Backend::Sync } else { backend };
    let shaping = match backend {
        Backend::Sync => Shaping {
            splice,
            ..Shaping::default()
        },
        Backend::Threads { .. } | Backend::Uring { .. } | Backend::Sequential => Shaping {
            bulk,
            // In turn within one disk, the kernel's copy is the cheaper
            // one; overlapped, ddx's may be the faster.
            offload_unit: offload_unit(plan, facts).filter(|_| {
                !hashing
                    && match settings.offload {
                        Offload::Never => false,
                        Offload::Always => true,
                        Offload::Auto => backend == Backend::Sequential || kernel_copy_pays(facts),
                    }
            }),
            drop_behind: !settings.keep_cache && !both_in_memory(facts),
            splice: false,
        },
    };
    Strategy { backend, shaping }
}

/// A regular file, a block device, an export on another machine or an
/// object in a store: storage that may be slow, where overlapping reads
/// and writes pays, and whose reads return all they are asked for until
/// its end.
fn is_storage(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::RegularFile | Kind::BlockDevice | Kind::Remote | Kind::Object
    )
}

/// Both ends are the same file or device: what is read may be what was
/// just written, so only GNU's exact order of requests gives GNU's result.
pub fn same_file(facts: &Facts) -> bool {
    facts.input.identity.is_some() && facts.input.identity == facts.output.identity
}

/// Whether a copy may be shaped into bulk requests, and how.
///
/// With a regular file (or block device) on both ends, no data conversion
/// and no flag that gives each request a meaning of its own (direct, dsync,
/// sync, append, nonblock), a read of ibs bytes always returns ibs bytes
/// until end of file, and coalescing writes is invisible. The statistics are
/// then a function of the byte count alone, so ddx may read and write in
/// large chunks ("bulk") and still report exactly GNU's records: GNU's
/// default bs=512 then costs nothing.
pub fn bulk_shape(plan: &CopyPlan, facts: &Facts) -> Option<BulkShape> {
    if !NEUTRAL_CONVERSIONS.contains(plan.conv)
        || plan.input_flags.intersects(PER_REQUEST_FLAGS)
        || plan.output_flags.intersects(PER_REQUEST_FLAGS)
        || plan.input_nocache
        || plan.output_nocache
        || same_file(facts)
    {
        return None;
    }
    if !is_storage(facts.input.kind) || !is_storage(facts.output.kind) || !facts.input.seekable {
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
        // A file's holes (SEEK_DATA), an export's (block status).
        sparse_input: matches!(facts.input.kind, Kind::RegularFile | Kind::Remote),
    })
}

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
pub fn splice_fits(plan: &CopyPlan, facts: &Facts) -> bool {
    const NEUTRAL: Conv = Conv::NOTRUNC
        .union(Conv::NOCREAT)
        .union(Conv::EXCL)
        .union(Conv::FDATASYNC)
        .union(Conv::FSYNC);
    NEUTRAL.contains(plan.conv)
        && !plan.two_buffers
        && !plan
            .input_flags
            .intersects(PER_REQUEST_FLAGS | IoFlags::FULLBLOCK)
        && !plan.output_flags.intersects(PER_REQUEST_FLAGS)
        && !plan.input_nocache
        && !plan.output_nocache
        && facts.input.descriptor
        && facts.output.descriptor
        && (facts.input.kind == Kind::Pipe || facts.output.kind == Kind::Pipe)
        && !same_file(facts)
}

/// Whether kernel offload (copy_file_range) may do a bulk copy, and the
/// unit its requests must be whole multiples of: both ends regular files
/// on one filesystem, no sparse (offload would write the zeros), and a
/// unit in which whole input records and whole output blocks coincide, so
/// that stopping at any unit boundary leaves GNU's counts exact.
pub fn offload_unit(plan: &CopyPlan, facts: &Facts) -> Option<usize> {
    bulk_shape(plan, facts)?;
    // Across filesystems the kernel copies by splicing, read then write in
    // one thread: the threads backend overlaps them instead. Within one,
    // it can share extents or copy on the server.
    if plan.conv.contains(Conv::SPARSE)
        || facts.input.kind != Kind::RegularFile
        || facts.output.kind != Kind::RegularFile
        || !facts.input.descriptor
        || !facts.output.descriptor
        || facts.input.filesystem.is_none()
        || facts.input.filesystem != facts.output.filesystem
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
/// write uncached; see `engine::cache`). With one CPU, the kernel's copy,
/// which moves each byte once, is the better one.
pub fn kernel_copy_pays(facts: &Facts) -> bool {
    facts.cpus < 2 || facts.output.storage == Storage::Other
}

/// Both ends live in memory (tmpfs): their pages are the data itself, and
/// dropping them behind a copy would do nothing but cost calls.
pub fn both_in_memory(facts: &Facts) -> bool {
    facts.input.storage == Storage::Memory && facts.output.storage == Storage::Memory
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests;
