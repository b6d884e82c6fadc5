//! How a copy runs: a pure function of what was asked ([`Request`]) and
//! what is known of the ends ([`Facts`], gathered once by [`facts`]).
//!
//! It decides the backend (GNU's loop, a reader thread ahead of the
//! writer, io_uring, in turn within one disk or on one CPU), the queue
//! depth, and the shaping: bulk requests where records can be decoupled
//! from requests, kernel offload (copy_file_range), splice, and the cache
//! policy ([`cache`]: through the page cache or dropped behind the copy,
//! by the memory ddx may use). Whatever it
//! decides, the bytes and the statistics are GNU's; only the requests and
//! their overlap differ. Being pure, every row of the README's backend
//! table is a row of this module's table tests, needing neither root nor
//! devices.

pub mod cache;
pub mod facts;
pub mod needs;

pub use facts::{Beside, EndFacts, Facts, Identity, OutputProbe, Place};
pub use needs::{admit, check, Refusal};

use crate::engine::backend::{Backend, BulkShape, Shaping};
use crate::engine::depth;
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::request::{BackendChoice, Offload, Request, Settings};
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
    /// Why the cache policy (`shaping.cache`) is what it is.
    pub cache: cache::Reason,
    /// Why the copy runs in turn (`Backend::Sequential`), where it does.
    pub in_turn: Option<InTurn>,
    /// The input's requests kept in flight by its window (`engine::window`):
    /// an O_DIRECT file or device's reads where they pay ([`read_ahead`]),
    /// a served end's in the copy's bulk requests.
    pub input_in_flight: Option<InFlight>,
    /// The output's, likewise ([`write_behind`]).
    pub output_in_flight: Option<InFlight>,
    /// Both ends on one disk that shares itself between reads and writes
    /// ([`one_shared_disk`]): a direct copy keeps at most
    /// [`SHARED_DISK_DEPTH`] reads and writes in flight.
    pub one_shared_disk: bool,
}

/// Requests an end's window keeps in flight: how many, of up to how many
/// bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    pub depth: usize,
    pub request: usize,
}

/// Most memory the slots of writes in flight may take.
const WRITE_BEHIND_MEMORY: usize = 64 << 20;

/// Why a copy that could overlap its reads and writes runs them in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTurn {
    /// Both ends on one disk that serves one request at a time (a
    /// spinning disk): overlapping would make it seek between them.
    OneDisk,
    /// No second CPU for a reader thread.
    Crowded(Crowded),
}

/// Why a reader thread beside the writer would find no CPU of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crowded {
    /// The process may run on one CPU only (affinity, quota).
    OneCpu,
    /// Runnable tasks already wait for the CPUs (PSI "some avg10", in
    /// hundredths of a percent, at least [`CPU_CONTENDED_PERCENT`]).
    Contended { some_avg10: u32 },
}

/// CPU pressure (PSI "some avg10", percent) from which the CPUs count as
/// taken: in half of the last ten seconds some task waited for one.
/// A second thread of ddx's would then queue behind the others, and the
/// copy's cost is its CPU time: in turn, read then write in large
/// requests, costs less CPU than any overlap (which hands buffers
/// across threads).
pub const CPU_CONTENDED_PERCENT: u32 = 50;

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
    let storage_end = (facts.input.can.storage() || facts.output.can.storage()) && !same_file;
    let queue_depth = settings.queue_depth.unwrap_or_else(|| {
        let request_bytes = match (&bulk, settings.request_size) {
            (Some(_), Some(size)) => size,
            (Some(shape), None) => shape.chunk,
            (None, _) => plan.input_block_size,
        };
        let depth = depth::default_depth(request_bytes, &[facts.input.queue, facts.output.queue]);
        let direct = (plan.input_flags | plan.output_flags).contains(IoFlags::DIRECT);
        if direct && one_shared_disk(settings, facts) {
            depth.min(SHARED_DISK_DEPTH)
        } else {
            depth
        }
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
            // On one CPU a reader thread only takes turns with the writer,
            // and pays for the hand-offs, unless it waits for a device
            // meanwhile: in turn, in bulk requests where records allow.
            match (overlap_pays(facts), &bulk) {
                (true, _) => Backend::Threads { queue_depth },
                (false, Some(_)) => Backend::Sequential,
                (false, None) => Backend::Sync,
            }
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
    // Within one disk that serves one request at a time (a spinning disk),
    // overlapping reads and writes makes it seek between the two places:
    // copy in turn, in large requests (auto only). A disk that serves
    // requests in parallel (measured, or known by its kind: see
    // `QueueHint::parallel`) gains from the overlap like any other pair of
    // ends; a disk nothing is known of is taken to serve one at a time. An
    // input already in the page cache will not be read from the disk, so
    // only the writes go to it.
    let same_disk = settings.backend.is_none()
        && bulk.is_some()
        && facts.input.disk.is_some()
        && facts.input.disk == facts.output.disk
        && !facts.input.queue.is_some_and(overlaps_within_one_disk)
        && !facts.input.cached;
    let (backend, in_turn) = if same_disk {
        (Backend::Sequential, Some(InTurn::OneDisk))
    } else if backend == Backend::Sequential {
        (backend, crowded(facts).map(InTurn::Crowded))
    } else {
        (backend, None)
    };
    let request_size = match (settings.request_size, same_disk) {
        (Some(size), _) => Some(size),
        (None, true) => Some(SAME_DISK_REQUEST),
        (None, false) => command_request(bulk, facts),
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
        && !settings.trim
        && splice_fits(plan, facts);
    let backend = if splice { Backend::Sync } else { backend };
    let cache = cache::decide(plan, settings, facts);
    let shaping = match backend {
        Backend::Sync => Shaping {
            splice,
            cache: cache.policy,
            trim: settings.trim,
            ..Shaping::default()
        },
        Backend::Threads { .. } | Backend::Uring { .. } | Backend::Sequential => Shaping {
            bulk,
            // Within one disk, in turn, the kernel's copy moves each byte
            // once, but for a sparse input, whose holes it would read.
            // On one CPU (or CPUs taken) ddx's reads and writes in turn:
            // measured on ext4, a cached 1 GiB copy by copy_file_range
            // took 1.15x GNU dd's time, by read and write 1.03x (the
            // kernel splices page by page). Overlapped, ddx's may be the
            // faster. The kernel would write the zeros --trim discards.
            offload_unit: offload_unit(plan, facts).filter(|_| {
                !hashing
                    && !settings.trim
                    && match settings.offload {
                        Offload::Never => false,
                        Offload::Always => true,
                        Offload::Auto => {
                            kernel_copy_pays(facts) || (same_disk && !has_holes(&facts.input))
                        }
                    }
            }),
            cache: cache.policy,
            splice: false,
            trim: settings.trim,
        },
    };
    // An end that is not local storage (an export, an object, a disk's
    // generic node) keeps the bulk requests in flight, as deep as the
    // backend overlaps; a local file or device only where reads ahead or
    // writes behind pay (see [`read_ahead`], [`write_behind`]).
    let bulk_in_flight = shaping.bulk.map(|shape| InFlight {
        depth: match backend {
            Backend::Threads { queue_depth } | Backend::Uring { queue_depth } => queue_depth,
            Backend::Sync | Backend::Sequential => 1,
        },
        request: shape.chunk,
    });
    // GNU's records (a write per read, as the reads came) go in flight
    // too where an end is across a link (it says what a round trip is
    // worth): one at a time, a copy from a pipe to an export 25 ms away
    // moved 1.3 MB/s. Not where records are re-blocked (see
    // [`write_behind`]).
    let records = shaping.bulk.is_none();
    let records_in_flight = |end: &EndFacts, size: usize| match backend {
        Backend::Threads { queue_depth } | Backend::Uring { queue_depth }
            if records && end.can.requests.round_trip_bytes > 0 =>
        {
            Some(InFlight {
                depth: queue_depth,
                request: size,
            })
        }
        _ => None,
    };
    Strategy {
        backend,
        shaping,
        cache: cache.reason,
        in_turn: in_turn.filter(|_| backend == Backend::Sequential),
        input_in_flight: read_ahead(request, facts, backend)
            .or(bulk_in_flight.filter(|_| !facts.input.can.local_storage))
            .or_else(|| records_in_flight(&facts.input, plan.input_block_size)),
        output_in_flight: write_behind(request, facts, backend)
            .or(bulk_in_flight.filter(|_| !facts.output.can.local_storage))
            .or_else(|| {
                records_in_flight(&facts.output, plan.output_block_size)
                    .filter(|_| !plan.two_buffers)
            }),
        one_shared_disk: one_shared_disk(&request.settings, facts),
    }
}

/// The most direct reads, and writes, a copy keeps in flight within one
/// disk that shares itself between them. On this machine's virtio disk
/// (2 GiB, cold, alternated rounds) depth 2 took 0.97x GNU dd's time,
/// depth 1 1.01x, reads and writes in turn 0.98x, and 16 of each in
/// flight 1.22x; fio reading and writing it at once took as long as the
/// two one after the other (bench/cloud-disk.sh).
pub const SHARED_DISK_DEPTH: usize = 2;

/// Whether both ends are on one disk whose reads and writes share it, so
/// that a direct copy keeps at most [`SHARED_DISK_DEPTH`] of each in
/// flight ([`read_ahead`], [`write_behind`]) rather than the default
/// depth: the disk did not show the deep parallelism that pays for more
/// (`QueueHint::deep_within_itself`), and no `--queue-depth` was asked.
/// An input in the page cache leaves the disk to the writes.
pub fn one_shared_disk(settings: &Settings, facts: &Facts) -> bool {
    settings.queue_depth.is_none()
        && facts.input.disk.is_some()
        && facts.input.disk == facts.output.disk
        && !facts.input.cached
        && !facts.input.queue.is_some_and(|q| q.deep_within_itself())
}

/// Whether a copy within the disk of `hint` gains from reading and writing
/// at once. Where the probe measured, only a rate that grew with depth
/// says so: reads merely faster than a seek do not (a virtio disk whose
/// host caches it answers in tens of microseconds, yet a direct copy
/// within it with reads and writes in flight took 1.27x GNU dd's time,
/// against 0.98x in turn, in bench/cloud-disk.sh).
fn overlaps_within_one_disk(hint: crate::engine::depth::QueueHint) -> bool {
    match hint.measured {
        Some(probe) => probe.scaling_percent >= crate::engine::depth::PARALLEL_SCALING_PERCENT,
        None => hint.serves_in_parallel() == Some(true),
    }
}

/// Whether an end may be sent several requests at once without slowing
/// down: the user asked for a queue depth (`--queue-depth`), or its device
/// serves requests in parallel (a probe measured it, its kind says, or its
/// queue says it does not rotate: see `QueueHint::parallel`). A device
/// nothing is known of may take one request at a time: in the
/// slow-device lab (bench/lab) a 1 MiB O_DIRECT copy between two devices
/// that serve one request at a time took 1.2x as long with reads in
/// flight, and 1.3x with reads and writes in flight, as with one at a
/// time, while between devices that serve requests in parallel reads and
/// writes in flight took a third of the time.
fn takes_parallel_requests(settings: &Settings, end: &EndFacts) -> bool {
    settings.queue_depth.is_some()
        || end.queue.and_then(|queue| queue.serves_in_parallel()) == Some(true)
}

/// A local block device or file, reached through its descriptor: where
/// io_uring requests go straight to the device's queue.
fn local_storage(end: &EndFacts) -> bool {
    end.can.local_storage && end.descriptor && !end.null_device
}

/// Whether an O_DIRECT input's reads go several at once.
///
/// Under `iflag=direct` the kernel reads nothing ahead, so each record's
/// read waits for the device however deep its queue. A reader thread
/// that keeps the next records' reads in flight pays where the copy
/// overlaps anyway (a reader thread) with a queue depth above 1, on a
/// local block device or file that takes parallel requests, read in
/// records of one size (not `iflag=fullblock`, whose reads follow what
/// the previous one returned), and where the output, if local storage,
/// takes parallel requests too (see [`takes_parallel_requests`]).
pub fn read_ahead(request: &Request, facts: &Facts, backend: Backend) -> Option<InFlight> {
    let Request { plan, settings } = request;
    let queue_depth = match backend {
        Backend::Threads { queue_depth } => queue_depth,
        _ => return None,
    };
    let size = plan.input_block_size;
    let fits = plan.input_flags.contains(IoFlags::DIRECT)
        && !plan.input_flags.contains(IoFlags::FULLBLOCK)
        && local_storage(&facts.input)
        && facts.input.seekable
        && takes_parallel_requests(settings, &facts.input)
        && (!local_storage(&facts.output) || takes_parallel_requests(settings, &facts.output))
        && queue_depth > 1
        && size <= WRITE_BEHIND_MEMORY / 2;
    fits.then(|| InFlight {
        depth: queue_depth.min(WRITE_BEHIND_MEMORY / size),
        request: size,
    })
}

/// Whether an O_DIRECT output's writes go several at once.
///
/// Under `oflag=direct` each write waits for the device, so GNU's loop
/// (and a writer thread) keeps one request in flight however deep the
/// device's queue: keeping several pays where the copy overlaps anyway
/// (a reader thread or io_uring) with a queue depth above 1, on a local
/// block device or file the descriptor reaches directly. Not with
/// O_APPEND (a positional write there appends), nor when records are
/// re-blocked (two buffers: the writer's failure counts are per output
/// block there, which this does not keep yet). Where the input is read
/// O_DIRECT too, only together with its reads in flight ([`read_ahead`]):
/// with one read at a time, writes in flight made the lab's 1 MiB
/// O_DIRECT copy 1.24x slower.
pub fn write_behind(request: &Request, facts: &Facts, backend: Backend) -> Option<InFlight> {
    let Request { plan, .. } = request;
    let queue_depth = match backend {
        Backend::Threads { queue_depth } | Backend::Uring { queue_depth } => queue_depth,
        Backend::Sync | Backend::Sequential => return None,
    };
    let size = plan.input_block_size;
    let input_direct = plan.input_flags.contains(IoFlags::DIRECT);
    let fits = plan.output_flags.contains(IoFlags::DIRECT)
        && (!input_direct || read_ahead(request, facts, backend).is_some())
        && !plan.output_flags.contains(IoFlags::APPEND)
        && !plan.two_buffers
        && facts.output.can.local_storage
        && facts.output.descriptor
        && queue_depth > 1
        && size <= WRITE_BEHIND_MEMORY / 2;
    fits.then(|| InFlight {
        depth: queue_depth.min(WRITE_BEHIND_MEMORY / size),
        request: size,
    })
}

/// Whether a reader thread ahead of the writer can gain: with a second
/// CPU free for it, or while the reader waits for a device (an input not
/// in the page cache), or while either end waits for a server (an NBD
/// export, an object store: a round trip per request, which only
/// requests in flight hide). With one CPU, or CPUs other tasks already
/// wait for, between two local ends and an input in memory, both halves
/// are work for the same CPU time. Busy CPUs are a reason for fewer
/// threads, never for giving up the requests in flight of a network end:
/// a resumed upload measured its own previous run's pressure and, in
/// turn, took 0.91x the whole upload's time where it should take half.
pub fn overlap_pays(facts: &Facts) -> bool {
    crowded(facts).is_none()
        || !facts.input.cached
        || facts.input.can.served
        || facts.output.can.served
}

/// Why a reader thread would have no CPU of its own, if it would not.
pub fn crowded(facts: &Facts) -> Option<Crowded> {
    if facts.cpus < 2 {
        return Some(Crowded::OneCpu);
    }
    facts
        .cpu_pressure
        .filter(|&some_avg10| some_avg10 >= CPU_CONTENDED_PERCENT * 100)
        .map(|some_avg10| Crowded::Contended { some_avg10 })
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
    // Storage, and a stream ddx decodes or encodes itself (--decompress,
    // --bmap, --compress), read and write whole: bulk requests keep GNU's
    // records there. A stream cannot seek back; a read error then ends
    // the copy where it stands (see `engine::reader::bulk`).
    let input_placed = facts.input.seekable || !facts.input.can.reads_at;
    if !facts.input.can.reads_whole || !facts.output.can.reads_whole || !input_placed {
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
        // A file's holes (SEEK_DATA), an export's (block status), a
        // block map's unmapped blocks.
        sparse_input: facts.input.can.extents || facts.input.mapped,
        mapped_holes: facts.input.mapped,
    })
}

/// A generic-node end's command size where bulk requests would be larger:
/// a request of one command's bytes is read ahead (or written behind) in
/// one buffer, which the end and the engine exchange instead of copying.
fn command_request(bulk: Option<BulkShape>, facts: &Facts) -> Option<usize> {
    let command = [facts.input.command_bytes, facts.output.command_bytes]
        .into_iter()
        .flatten()
        .min()?;
    (command < bulk?.chunk).then_some(command)
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
        && (facts.input.can.splices || facts.output.can.splices)
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
        || !facts.input.can.kernel_copy
        || !facts.output.can.kernel_copy
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

/// Whether copy_file_range into this output can beat ddx's own copy:
/// where the filesystem shares extents or a server copies (no data moves
/// through this machine). Where it can only copy the data (ext4, tmpfs
/// and the like), the kernel reads and writes in turn, page by page: with
/// a second CPU a reader thread ahead of the writer takes the time of the
/// slower of the two instead of their sum (and can write uncached; see
/// `engine::cache`), and on one CPU ddx's own reads and writes in turn
/// measured cheaper than the kernel's splicing (see [`plan`]). A sparse
/// input is worse still for the kernel: it reads every hole as zeros,
/// where ddx finds the holes (SEEK_DATA) and never reads them.
pub fn kernel_copy_pays(facts: &Facts) -> bool {
    facts.output.storage == Storage::Other
}

/// A regular file with less allocated than its size: it has holes.
pub fn has_holes(end: &EndFacts) -> bool {
    matches!((end.allocated, end.size), (Some(allocated), Some(size)) if allocated < size)
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
