//! The facts about a copy's two ends, and about the machine, that the
//! planner decides by, gathered once and in one place: this is the only
//! part of planning that looks at the system (fstat, statfs, sysfs, the
//! page cache, the memory ddx may use, its CPUs). Everything after it is a
//! pure function of these values, tested by tables.
//!
//! Whether the disk under an end serves requests in parallel is measured
//! here, once, where the end is large enough to be worth it ([`probe`]): a
//! few random O_DIRECT reads at depth 1 and at depth 8, tens of
//! milliseconds. Its `rotational` flag is not trusted alone: virtual disks
//! set it whatever is behind them.
//!
//! The output is examined before it is opened for writing, through a
//! descriptor that can neither create nor truncate (O_PATH on the output
//! or, when it does not exist yet, on the directory that will hold it; or
//! the inherited standard output), so that a copy the planner refuses
//! has written nothing.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};

use crate::ends::uri::UriEnd;
use crate::ends::{Capabilities, Kind};
use crate::engine::depth::{self, Probe, QueueHint, Transport, PROBE_DEPTH, PROBE_READ};
use crate::engine::stream::{Input, Output};
use crate::image::Format;
use crate::sys::block::{self, DeviceNumber};
use crate::sys::filesystem::{storage_of, Storage};
use crate::sys::memory::Memory;
use crate::sys::Errno;

/// Which file an end is, for "both ends are the same file".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// A file: its filesystem and inode.
    File { device: u64, inode: u64 },
    /// A block device: its device number (two nodes of one device are it).
    Device(u64),
}

/// What is known of one end before the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndFacts {
    /// What the end is, as messages name it.
    pub kind: Kind,
    /// What it can do: what the planner and the option table decide by.
    pub can: Capabilities,
    /// A descriptor is behind the end: the kernel's copies (splice,
    /// copy_file_range, io_uring) and cache advice can apply.
    pub descriptor: bool,
    /// lseek works (an input that can be read again, a hole skipped).
    pub seekable: bool,
    /// The size of its data: a file's, a block device's, an export's.
    pub size: Option<u64>,
    /// Bytes a regular file has allocated on its filesystem (st_blocks):
    /// less than its size for a sparse file.
    pub allocated: Option<u64>,
    pub identity: Option<Identity>,
    /// The filesystem a regular file is on (st_dev).
    pub filesystem: Option<u64>,
    /// What that filesystem can do for a copy.
    pub storage: Storage,
    /// The whole disk under the end, and what its queue says.
    pub disk: Option<DeviceNumber>,
    pub queue: Option<QueueHint>,
    /// Nearly all of the data is in the page cache already (a regular
    /// input file read back soon after it was written, say).
    pub cached: bool,
    /// The input is read through a block map (`--bmap`): its holes are
    /// the blocks the map leaves out, found at any block boundary, and
    /// they are left unwritten in the output, as bmaptool leaves them.
    pub mapped: bool,
    /// The null device (/dev/null): takes every write at any offset and
    /// keeps none, so a copy by position can scan into it, and nothing
    /// can be read back from it.
    pub null_device: bool,
    /// The compression format the input's first bytes are in, where they
    /// were looked at (see `image::peek`: only when an output would take
    /// them as a disk image, and neither `--decompress` nor
    /// `--no-decompress` says what is meant).
    pub compressed: Option<Format>,
    /// The most bytes one command carries, for a generic node (see
    /// `sys::passthrough::command_limit`): bulk requests of that size
    /// pass between the end and the engine whole, without a copy.
    pub command_bytes: Option<usize>,
}

impl EndFacts {
    /// An end with nothing known beyond its kind (an end without a
    /// descriptor, or a test's starting point).
    pub fn of_kind(kind: Kind) -> EndFacts {
        EndFacts::of(kind, kind.capabilities())
    }

    /// An end with nothing known beyond what it is and can do.
    pub fn of(kind: Kind, can: Capabilities) -> EndFacts {
        EndFacts {
            kind,
            can,
            descriptor: false,
            seekable: can.reads_at,
            size: None,
            allocated: None,
            identity: None,
            filesystem: None,
            storage: Storage::Other,
            disk: None,
            queue: None,
            cached: false,
            mapped: false,
            null_device: false,
            compressed: None,
            command_bytes: None,
        }
    }
}

/// Everything the planner decides by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub input: EndFacts,
    pub output: EndFacts,
    /// CPUs this process may run on (its affinity mask and CPU quota, as
    /// `taskset` and cgroups set them): the overlap of a reader and a
    /// writer needs two.
    pub cpus: usize,
    /// CPU pressure (PSI "some avg10", hundredths of a percent; see
    /// `sys::cpu`): how often a runnable task lately found no CPU free.
    pub cpu_pressure: Option<u32>,
    /// The memory ddx may fill with page cache (see `planner::cache`).
    pub memory: Memory,
    /// The files ddx writes beside the copy, where they will be.
    pub beside: Beside<Place>,
}

/// The files ddx writes beside the copy's two ends: the map of a copy by
/// position (`--map=FILE`, or the checkpoint `--resume` keeps beside the
/// output), `--hash-file=FILE` and `--bmap-create=FILE`. Paths before gathering, [`Place`]s
/// after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beside<T> {
    pub map: Option<T>,
    pub hash_file: Option<T>,
    /// `--bmap-create=FILE`.
    pub bmap_create: Option<T>,
}

// Not derived: the derive would ask `T: Default`, and nothing beside the
// copy needs no `T` at all.
impl<T> Default for Beside<T> {
    fn default() -> Self {
        Beside {
            map: None,
            hash_file: None,
            bmap_create: None,
        }
    }
}

/// Where a file ddx writes beside the copy will be: what stands there
/// now, and whether it can be written (its directory too: a map is saved
/// by writing a new file and renaming it over the old).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// What stands at the path now; None when nothing does.
    pub kind: Option<Kind>,
    /// Which file that is, to tell it from the copy's own ends.
    pub identity: Option<Identity>,
    /// Why the file or its directory cannot be written (EROFS on a
    /// read-only file system, EACCES, ENOENT for a missing directory).
    pub unwritable: Option<Errno>,
}

/// Where the output will be, to examine before it is opened for writing.
#[derive(Clone, Copy)]
pub enum OutputProbe<'a> {
    /// `of=PATH`.
    Path(&'a Path),
    /// Standard output, inherited.
    Stdout,
    /// `of=URI`: an end on another machine, as its URI names it.
    Uri(&'a UriEnd),
}

/// What a remote end's queue can take: a network block device or an
/// object store serves many requests at once, as a solid-state disk does.
const REMOTE_QUEUE: QueueHint = QueueHint::solid_state(64);

/// What the copy saw the input hold before the facts were gathered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// The compression format of its first bytes, where it was looked at.
    pub format: Option<Format>,
    /// The size a compressed image decodes to, where its format records
    /// it: what the copy writes, which an output of fixed size must hold.
    pub decoded_size: Option<u64>,
}

/// Gather the facts: the input as opened (with its stages but
/// `--used-only`'s, see [`Facts::used_only_input`]) and what it was seen
/// to hold, the output and the files beside the copy as they stand.
pub fn gather(input: &Input, seen: Seen, output: OutputProbe<'_>, beside: Beside<&Path>) -> Facts {
    let mut input_facts = input_facts(input);
    input_facts.compressed = seen.format;
    if let Some(size) = seen.decoded_size {
        input_facts.size = Some(size);
    }
    if let Some(fd) = input.stream.fd().filter(|_| worth_probing(&input_facts)) {
        input_facts.queue = measured(input_facts.queue, probe(fd, input_facts.size));
    }
    let mut output_facts = output_facts(output);
    if output_facts.disk.is_some() && output_facts.disk == input_facts.disk {
        // One disk: what was measured of it holds for both ends.
        output_facts.queue = input_facts.queue;
    } else if worth_probing(&output_facts) {
        let opened = match output {
            OutputProbe::Path(path) => rustix::fs::open(
                path,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .ok(),
            OutputProbe::Stdout | OutputProbe::Uri(_) => None,
        };
        if let Some(fd) = opened {
            output_facts.queue = measured(output_facts.queue, probe(fd.as_fd(), output_facts.size));
        }
    }
    Facts {
        input: input_facts,
        output: output_facts,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_pressure: crate::sys::cpu::pressure(),
        memory: crate::sys::memory::read(),
        beside: Beside {
            map: beside.map.map(place),
            hash_file: beside.hash_file.map(place),
            bmap_create: beside.bmap_create.map(place),
        },
    }
}

impl Facts {
    /// The input as `--used-only` reads it, once the option table has
    /// admitted the disk it reads: the stage's facts, with the disk's
    /// queue as probed when opened (the stage reads through the disk's
    /// descriptor) and the format the input was seen to hold.
    pub fn used_only_input(self, input: &Input) -> Facts {
        let mut wrapped = input_facts(input);
        wrapped.compressed = self.input.compressed;
        if wrapped.descriptor {
            wrapped.queue = self.input.queue;
        }
        Facts {
            input: wrapped,
            ..self
        }
    }

    /// The output as opened, where only its opening tells its size (an
    /// export's): None where the size was known before.
    pub fn output_opened(&self, output: &Output) -> Option<EndFacts> {
        let can = output.stream.capabilities();
        (self.output.size.is_none() && can.fixed_size).then(|| EndFacts {
            size: output.stream.size().ok().flatten(),
            kind: output.stream.kind(),
            can,
            ..self.output.clone()
        })
    }

    /// The ends as the copy's stages made them, once the output is open:
    /// whether the input stage reads by a map of its blocks (`mapped`),
    /// and an output stage's kind and capabilities in place of the file
    /// or device under it, which the stage's writes do not reach by a
    /// descriptor.
    pub fn with_stages(self, output: &Output, mapped: bool) -> Facts {
        let mut facts = self;
        facts.input.mapped = mapped;
        if output.stream.fd().is_none() {
            facts.output.descriptor = false;
            facts.output.kind = output.stream.kind();
            facts.output.can = output.stream.capabilities();
        }
        facts
    }
}

/// The facts of the input, its disk not probed: as opened, for the option
/// table; wrapped by the image options, for the plan.
fn input_facts(input: &Input) -> EndFacts {
    use std::os::unix::ffi::OsStrExt;
    let input_path = Path::new(std::ffi::OsStr::from_bytes(&input.name));
    let mut facts = match input.stream.fd() {
        Some(fd) => of_descriptor(fd, input.stream.kind()),
        None => generic_node_facts(input_path).unwrap_or_else(|| EndFacts {
            size: input.stream.size().ok().flatten(),
            ..without_descriptor(input.stream.kind(), input.stream.capabilities())
        }),
    };
    facts.can = input.stream.capabilities();
    facts.seekable = input.seekable;
    if let (Kind::RegularFile, Some(fd)) = (facts.kind, input.stream.fd()) {
        facts.cached = crate::engine::cache::mostly_cached(fd, 0, u64::MAX);
    }
    facts
}

/// Which files the input and the output named by `plan` are, as they
/// stand (None for standard input or output, or nothing there yet).
pub fn identities(plan: &crate::operands::CopyPlan) -> [Option<Identity>; 2] {
    let identity = |path: Option<&Path>| path.and_then(|path| place(path).identity);
    [
        identity(plan.input.as_deref()),
        identity(plan.output.as_deref()),
    ]
}

/// What stands at `path`, and whether it (and its directory) can be
/// written: access(2) answers as open(2) will, EROFS included.
pub fn place(path: &Path) -> Place {
    use rustix::fs::{Access, CWD};
    let st = rustix::fs::stat(path).ok();
    let kind = st.map(|st| crate::ends::file::kind_of(FileType::from_raw_mode(st.st_mode)));
    let identity = st.map(|st| match FileType::from_raw_mode(st.st_mode) {
        FileType::BlockDevice => Identity::Device(st.st_rdev),
        _ => Identity::File {
            device: st.st_dev,
            inode: st.st_ino,
        },
    });
    let directory = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let writable = |p: &Path| rustix::fs::accessat(CWD, p, Access::WRITE_OK, AtFlags::empty());
    let unwritable = writable(directory)
        .and_then(|()| match kind {
            Some(_) => writable(path),
            None => Ok(()),
        })
        .err();
    Place {
        kind,
        identity,
        unwritable,
    }
}

/// What is known of an end that has no descriptor: what it is and can
/// do.
fn without_descriptor(kind: Kind, can: Capabilities) -> EndFacts {
    EndFacts {
        queue: can.served.then_some(REMOTE_QUEUE),
        ..EndFacts::of(kind, can)
    }
}

/// The facts of the output as it stands, before it is opened (what
/// [`gather`] finds of it).
pub fn output_facts_now(output: OutputProbe<'_>) -> EndFacts {
    output_facts(output)
}

/// The facts of a further output (`--tee=PATH`), as of= would have them.
pub fn output_facts_at(path: &Path) -> EndFacts {
    match crate::ends::uri::recognise(path) {
        Some(Ok(remote)) => output_facts(OutputProbe::Uri(&remote)),
        // A URI of a remote scheme that cannot be right: an end on
        // another machine all the same, which would fail to open.
        Some(Err(_)) => without_descriptor(
            Kind::Other,
            Capabilities {
                served: true,
                ..Kind::Other.capabilities()
            },
        ),
        None => output_facts(OutputProbe::Path(path)),
    }
}

/// Ends smaller than this are not probed: a copy of them is over in a
/// moment whatever its depth, and the probe's tens of milliseconds would
/// be a share of it worth noticing.
pub const PROBE_MIN_SIZE: u64 = 256 << 20;

/// Reads at depth 1, and at most at depth [`PROBE_DEPTH`] (spread over
/// its threads).
const PROBE_READS: usize = 32;

/// Each half of the probe stops after this long, however few reads it
/// made: a slow device (a spinning disk's seeks, a network volume) is
/// judged by fewer reads rather than by a longer wait.
const PROBE_PHASE: std::time::Duration = std::time::Duration::from_millis(25);

/// Reads at depth 1 made however long they take: the median of so few
/// cannot be one stalled read (a busy machine's 60 ms scheduling delay
/// would otherwise make a serial disk look several times faster at
/// depth 8 than alone).
const PROBE_MIN_READS: usize = 5;

/// Whether an end's disk is worth probing: local storage reached through
/// a descriptor (a block device, or a file whose data is on its disk: not
/// a sparse file, whose holes read as fast as memory, not tmpfs), and
/// large. Its reads are O_DIRECT: the page cache answers none of them.
pub fn worth_probing(end: &EndFacts) -> bool {
    why_not_probed(end).is_none()
}

/// Why an end's disk is not probed, as `--verbose` says it.
pub fn why_not_probed(end: &EndFacts) -> Option<&'static str> {
    let size = end.size.unwrap_or(0);
    if !(end.can.local_storage && end.descriptor) || end.null_device {
        Some("not local storage")
    } else if !matches!(end.kind, Kind::BlockDevice | Kind::RegularFile) {
        Some("neither a file nor a block device")
    } else if end.kind == Kind::RegularFile && end.storage == Storage::Memory {
        Some("a file in memory")
    } else if size < PROBE_MIN_SIZE {
        Some("smaller than 256 MiB")
    } else if end.kind == Kind::RegularFile
        // No blocks at all: a file system that does not count them (FUSE
        // files say 0), which says nothing of holes.
        && end
            .allocated
            .is_some_and(|allocated| allocated > 0 && allocated < size / 2)
    {
        Some("a sparse file")
    } else {
        None
    }
}

/// `hint` with what the probe measured (a hint of its own where the end
/// is on no block device: a file on FUSE, say).
fn measured(hint: Option<QueueHint>, probe: Option<Probe>) -> Option<QueueHint> {
    match probe {
        Some(probe) => Some(QueueHint {
            measured: Some(probe),
            ..hint.unwrap_or_default()
        }),
        None => hint,
    }
}

/// The probe's judgement from its timings: each read at depth 1 took
/// one of `alone` (the median counts, so that one read held up by
/// anything else on the machine does not decide), and `together` reads
/// took `together_time` at depth [`PROBE_DEPTH`]. None where either half
/// made no read.
pub fn judge(
    alone: &mut [std::time::Duration],
    together: usize,
    together_time: std::time::Duration,
) -> Option<Probe> {
    if alone.is_empty() || together == 0 {
        return None;
    }
    alone.sort_unstable();
    let latency = alone[alone.len() / 2].as_secs_f64().max(1e-9);
    let together_rate = together as f64 / together_time.as_secs_f64().max(1e-9);
    Some(Probe {
        latency_us: (latency * 1e6).round() as u32,
        scaling_percent: (together_rate * latency * 100.0).round() as u32,
    })
}

/// Time random O_DIRECT reads of the first `size` bytes of `fd` at depth
/// 1, then at depth [`PROBE_DEPTH`] (one thread per read in flight: what
/// the copy's reader keeps in flight is ordinary reads too). None where
/// O_DIRECT or a read fails: the end then is judged by what its device
/// says.
fn probe(fd: BorrowedFd<'_>, size: Option<u64>) -> Option<Probe> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;
    let blocks = size? / PROBE_READ as u64;
    if blocks == 0 {
        return None;
    }
    // A descriptor of its own, O_DIRECT, so that the page cache answers
    // none of the reads; by /proc, as the end's may be O_PATH.
    let direct = rustix::fs::open(
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)),
        OFlags::RDONLY | OFlags::DIRECT | OFlags::NONBLOCK | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos() as u64);
    // Offsets spread over the whole end, none read twice (splitmix64: a
    // few lines where no random numbers are needed beyond these).
    let offset = |n: usize| {
        let mut z = seed.wrapping_add((n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % blocks * PROBE_READ as u64
    };
    let read = |buf: &mut crate::sys::buffer::AlignedBuf, n: usize| {
        crate::sys::file::read_at(direct.as_fd(), buf.as_mut_slice(), offset(n))
            .is_ok_and(|got| got > 0)
    };

    let mut buf = crate::sys::buffer::AlignedBuf::new(PROBE_READ).ok()?;
    // One read first, untimed: the first finds the file's extents and
    // wakes the device.
    if !read(&mut buf, PROBE_READS * (PROBE_DEPTH + 1)) {
        return None;
    }
    let start = Instant::now();
    let mut alone = Vec::with_capacity(PROBE_READS);
    while alone.len() < PROBE_READS
        && (alone.len() < PROBE_MIN_READS || start.elapsed() < PROBE_PHASE)
    {
        let began = Instant::now();
        if !read(&mut buf, alone.len()) {
            return None;
        }
        alone.push(began.elapsed());
    }

    let together = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    // The clock starts once every thread is ready: starting threads is
    // not the device's time.
    let ready = std::sync::Barrier::new(PROBE_DEPTH + 1);
    let began = std::thread::scope(|scope| {
        for thread in 0..PROBE_DEPTH {
            let (together, failed, ready, read) = (&together, &failed, &ready, &read);
            scope.spawn(move || {
                let buf = crate::sys::buffer::AlignedBuf::new(PROBE_READ).ok();
                ready.wait();
                let deadline = Instant::now() + PROBE_PHASE;
                let Some(mut buf) = buf else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                for n in 0..PROBE_READS * 2 / PROBE_DEPTH {
                    if Instant::now() >= deadline {
                        break;
                    }
                    if !read(&mut buf, PROBE_READS * (thread + 1) + n) {
                        failed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    together.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        ready.wait();
        Instant::now()
    });
    let together_time = began.elapsed();
    if failed.load(Ordering::Relaxed) > 0 {
        return None;
    }
    judge(&mut alone, together.into_inner(), together_time)
}

/// Why a read-only block device cannot be written: the open succeeds,
/// and every write fails with EPERM, which reads as a matter of
/// permissions.
pub const READ_ONLY_DEVICE: &str = "the device is read-only (a loop device attached with \
--read-only, a card's write-protect switch, or blockdev --setro): make it writable first \
(blockdev --setrw, or attach the loop device again without --read-only)";

/// Whether the block device open as `fd` is read-only (sysfs's `ro`).
fn device_read_only(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        crate::sys::block::read_only(crate::sys::block::DeviceNumber::from_raw(st.st_rdev))
    })
}

fn output_facts(output: OutputProbe<'_>) -> EndFacts {
    match output {
        OutputProbe::Uri(remote) => without_descriptor(remote.kind(), remote.capabilities()),
        OutputProbe::Stdout => {
            let stdout = std::io::stdout();
            let fd = stdout.as_fd();
            let kind =
                crate::sys::file::file_type(fd).map_or(Kind::Other, crate::ends::file::kind_of);
            let mut facts = of_descriptor(fd, kind);
            facts.seekable = crate::sys::file::current_offset(fd).is_ok();
            facts
        }
        OutputProbe::Path(path) => match path_descriptor(path) {
            Some(_) if generic_node_facts(path).is_some() => {
                generic_node_facts(path).expect("just seen")
            }
            Some(fd) => {
                let kind = crate::sys::file::file_type(fd.as_fd())
                    .map_or(Kind::Other, crate::ends::file::kind_of);
                let mut facts = of_descriptor(fd.as_fd(), kind);
                // An O_PATH descriptor cannot lseek; the opened output will
                // where its kind can.
                facts.seekable = facts.can.reads_at;
                if kind == Kind::BlockDevice && device_read_only(fd.as_fd()) {
                    facts.can.read_only = Some(READ_ONLY_DEVICE);
                }
                facts
            }
            // Not there yet: open(2) will make a regular file in the
            // directory that holds the path.
            None => {
                let parent = path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let mut facts = match path_descriptor(parent) {
                    Some(dir) => of_descriptor(dir.as_fd(), Kind::RegularFile),
                    None => EndFacts::of_kind(Kind::RegularFile),
                };
                facts.kind = Kind::RegularFile;
                facts.can = Kind::RegularFile.capabilities();
                facts.identity = None;
                facts.size = Some(0);
                facts.descriptor = true;
                facts.seekable = true;
                facts
            }
        },
    }
}

/// What is known of a generic node (an sg, bsg or ng device): a
/// disk, as its block device is, without a descriptor the kernel's
/// copies, cache advice or O_DIRECT could use; its size, identity and
/// queue are the block device's. None for any other path.
fn generic_node_facts(path: &Path) -> Option<EndFacts> {
    use crate::sys::passthrough;
    let st = rustix::fs::stat(path).ok()?;
    let node = DeviceNumber::from_raw(st.st_rdev);
    passthrough::interface_at(path)?;
    let mut facts = EndFacts::of_kind(Kind::GenericNode);
    let block_device = passthrough::block_device_of(node);
    facts.command_bytes = Some(passthrough::command_limit(block_device.as_deref()));
    if let Some(name) = block_device {
        let disk = block::Node::named(&name);
        if let Some(number) = disk.number() {
            facts.identity = Some(Identity::Device(rustix::fs::makedev(
                number.major,
                number.minor,
            )));
            facts.disk = Some(number);
        }
        facts.size = disk.size_bytes();
        facts.queue = Some(QueueHint {
            rotational: disk.queue::<u8>("rotational").map(|v| v == 1),
            nr_requests: disk.queue("nr_requests"),
            transport: Transport::of(&name, disk.driver().as_deref()),
            measured: None,
        });
    }
    Some(facts)
}

/// A descriptor that can only be examined: it neither creates, nor
/// truncates, nor blocks on a FIFO.
fn path_descriptor(path: &Path) -> Option<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

fn of_descriptor(fd: BorrowedFd<'_>, kind: Kind) -> EndFacts {
    let st = rustix::fs::fstat(fd).ok();
    let file_type = st.map(|st| FileType::from_raw_mode(st.st_mode));
    let identity = st.and_then(|st| match file_type {
        Some(FileType::BlockDevice) => Some(Identity::Device(st.st_rdev)),
        Some(_) => Some(Identity::File {
            device: st.st_dev,
            inode: st.st_ino,
        }),
        None => None,
    });
    let size = st.and_then(|st| match file_type {
        Some(FileType::RegularFile) => Some(st.st_size.max(0) as u64),
        Some(FileType::BlockDevice) => {
            block::describe(DeviceNumber::from_raw(st.st_rdev)).map(|d| d.size)
        }
        _ => None,
    });
    let allocated = st
        .filter(|_| file_type == Some(FileType::RegularFile))
        .map(|st| (st.st_blocks.max(0) as u64).saturating_mul(512));
    let on_filesystem = matches!(file_type, Some(FileType::RegularFile | FileType::Directory));
    EndFacts {
        kind,
        can: kind.capabilities(),
        descriptor: true,
        seekable: crate::sys::file::current_offset(fd).is_ok(),
        size,
        allocated,
        identity,
        filesystem: st.filter(|_| on_filesystem).map(|st| st.st_dev),
        // Of a device node, the filesystem holding the node (devtmpfs):
        // what the cache policy has always been decided by.
        storage: storage_of(fd),
        disk: crate::sys::device::disk_of(fd),
        queue: depth::hint_of(fd),
        cached: false,
        mapped: false,
        null_device: st.is_some_and(|st| {
            file_type == Some(FileType::CharacterDevice)
                && (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev)) == (1, 3)
        }),
        compressed: None,
        command_bytes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn end(kind: Kind, size: u64, allocated: Option<u64>, storage: Storage) -> EndFacts {
        EndFacts {
            descriptor: true,
            size: Some(size),
            allocated,
            storage,
            ..EndFacts::of_kind(kind)
        }
    }

    #[test]
    fn which_ends_are_probed() {
        const GIB: u64 = 1 << 30;
        let disk = end(Kind::BlockDevice, GIB, None, Storage::Memory);
        let file = end(Kind::RegularFile, GIB, Some(GIB), Storage::LocalBlocks);
        let rows = [
            (disk.clone(), None),
            (file.clone(), None),
            // A file on FUSE (the slow-device lab) counts no blocks.
            (end(Kind::RegularFile, GIB, Some(0), Storage::Other), None),
            (end(Kind::RegularFile, GIB, None, Storage::Other), None),
            (
                EndFacts {
                    cached: true,
                    ..file.clone()
                },
                None,
            ),
            (
                end(Kind::RegularFile, GIB, Some(GIB), Storage::Memory),
                Some("a file in memory"),
            ),
            (
                EndFacts {
                    size: Some(PROBE_MIN_SIZE - 1),
                    ..disk.clone()
                },
                Some("smaller than 256 MiB"),
            ),
            (
                EndFacts {
                    size: Some(PROBE_MIN_SIZE),
                    ..disk.clone()
                },
                None,
            ),
            (
                EndFacts {
                    allocated: Some(GIB / 2 - 1),
                    ..file.clone()
                },
                Some("a sparse file"),
            ),
            (
                EndFacts {
                    descriptor: false,
                    ..disk.clone()
                },
                Some("not local storage"),
            ),
            (
                end(Kind::Pipe, GIB, None, Storage::Other),
                Some("not local storage"),
            ),
            (
                EndFacts {
                    null_device: true,
                    ..end(Kind::CharDevice, GIB, None, Storage::Memory)
                },
                Some("not local storage"),
            ),
        ];
        for (end, why) in rows {
            assert_eq!(why_not_probed(&end), why, "{end:?}");
            assert_eq!(worth_probing(&end), why.is_none());
        }
        assert_eq!(PROBE_MIN_SIZE, 256 << 20, "the reason's words name it");
    }

    #[test]
    fn the_probe_judges_by_the_median_read_and_the_rate_at_depth() {
        let ms = Duration::from_millis;
        // (reads alone, reads together, their time, latency µs, scaling %)
        let rows: [(&[u64], usize, Duration, u32, u32); 4] = [
            // One at a time: 8 reads of 3 ms take 24 ms at depth 8 too.
            (&[3, 3, 3, 3, 3], 8, ms(24), 3000, 100),
            // In parallel: 64 reads of 3 ms in 24 ms.
            (&[3, 3, 3, 3, 3], 64, ms(24), 3000, 800),
            // One read held up does not move the median.
            (&[3, 3, 40, 3, 3], 8, ms(24), 3000, 100),
            (&[1], 3, ms(1), 1000, 300),
        ];
        for (alone, together, time, latency_us, scaling_percent) in rows {
            let mut alone: Vec<Duration> = alone.iter().map(|&t| ms(t)).collect();
            assert_eq!(
                judge(&mut alone, together, time),
                Some(Probe {
                    latency_us,
                    scaling_percent
                })
            );
        }
        assert_eq!(judge(&mut [], 8, ms(1)), None);
        assert_eq!(judge(&mut [ms(1)], 0, ms(1)), None);
    }
}
