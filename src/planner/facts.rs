//! The facts about a copy's two ends, and about the machine, that the
//! planner decides by, gathered once and in one place: this is the only
//! part of planning that looks at the system (fstat, statfs, sysfs, the
//! page cache, the memory ddx may use, its CPUs). Everything after it is a
//! pure function of these values, tested by tables.
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
use crate::ends::{Capabilities, Input, Kind};
use crate::engine::depth::{self, QueueHint};
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

/// Gather the facts: the input as opened, the output and the files
/// beside the copy as they stand.
pub fn gather(input: &Input, output: OutputProbe<'_>, beside: Beside<&Path>) -> Facts {
    Facts {
        input: input_facts(input),
        output: output_facts(output),
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

/// The facts of the input: as opened, for the option table; wrapped by
/// the image options, for the plan.
pub fn input_facts(input: &Input) -> EndFacts {
    let mut facts = match input.end.fd() {
        Some(fd) => of_descriptor(fd, input.end.kind()),
        None => EndFacts {
            size: input.end.size().ok().flatten(),
            ..without_descriptor(input.end.kind(), input.end.capabilities())
        },
    };
    facts.can = input.end.capabilities();
    facts.seekable = input.seekable;
    if let (Kind::RegularFile, Some(fd)) = (facts.kind, input.end.fd()) {
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
            Some(fd) => {
                let kind = crate::sys::file::file_type(fd.as_fd())
                    .map_or(Kind::Other, crate::ends::file::kind_of);
                let mut facts = of_descriptor(fd.as_fd(), kind);
                // An O_PATH descriptor cannot lseek; the opened output will
                // where its kind can.
                facts.seekable = facts.can.reads_at;
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
    }
}
