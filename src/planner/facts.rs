//! The facts about a copy's two ends that the planner decides by, gathered
//! once and in one place: this is the only part of planning that looks at
//! the system (fstat, statfs, sysfs, the page cache). Everything after it
//! is a pure function of these values, tested by tables.
//!
//! The output is examined before it is opened for writing, through a
//! descriptor that can neither create nor truncate (O_PATH on the output
//! or, when it does not exist yet, on the directory that will hold it; or
//! the inherited standard output), so that a copy the planner refuses
//! has written nothing.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, OFlags};

use crate::ends::{Input, Kind};
use crate::engine::depth::{self, QueueHint};
use crate::sys::block::{self, DeviceNumber};
use crate::sys::filesystem::{storage_of, Storage};

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
    pub kind: Kind,
    /// A descriptor is behind the end: the kernel's copies (splice,
    /// copy_file_range, io_uring) and cache advice can apply.
    pub descriptor: bool,
    /// lseek works (an input that can be read again, a hole skipped).
    pub seekable: bool,
    /// The size of its data: a file's, a block device's, an export's.
    pub size: Option<u64>,
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
}

impl EndFacts {
    /// An end with nothing known beyond its kind (an end without a
    /// descriptor, or a test's starting point).
    pub fn of_kind(kind: Kind) -> EndFacts {
        EndFacts {
            kind,
            descriptor: false,
            seekable: kind.positional(),
            size: None,
            identity: None,
            filesystem: None,
            storage: Storage::Other,
            disk: None,
            queue: None,
            cached: false,
        }
    }
}

/// Everything the planner decides by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub input: EndFacts,
    pub output: EndFacts,
    /// CPUs this process may run on: the overlap of a reader and a writer
    /// needs two.
    pub cpus: usize,
}

/// Where the output will be, to examine before it is opened for writing.
pub enum OutputProbe<'a> {
    /// `of=PATH`.
    Path(&'a Path),
    /// Standard output, inherited.
    Stdout,
    /// `of=URI`: an end on another machine, of this kind.
    Remote(Kind),
}

/// What a remote end's queue can take: a network block device or an
/// object store serves many requests at once, as a solid-state disk does.
const REMOTE_QUEUE: QueueHint = QueueHint {
    rotational: Some(false),
    nr_requests: Some(64),
};

/// Gather the facts: the input as opened, the output as it stands.
pub fn gather(input: &Input, output: OutputProbe<'_>) -> Facts {
    let mut input_facts = match input.end.fd() {
        Some(fd) => of_descriptor(fd, input.end.kind()),
        None => EndFacts {
            size: input.end.size().ok().flatten(),
            ..without_descriptor(input.end.kind())
        },
    };
    input_facts.seekable = input.seekable;
    if let (Kind::RegularFile, Some(fd)) = (input_facts.kind, input.end.fd()) {
        input_facts.cached = crate::engine::cache::mostly_cached(fd, 0, u64::MAX);
    }
    Facts {
        input: input_facts,
        output: output_facts(output),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// What is known of an end that has no descriptor: its kind.
fn without_descriptor(kind: Kind) -> EndFacts {
    EndFacts {
        queue: matches!(kind, Kind::Remote | Kind::Object).then_some(REMOTE_QUEUE),
        ..EndFacts::of_kind(kind)
    }
}

fn output_facts(output: OutputProbe<'_>) -> EndFacts {
    match output {
        OutputProbe::Remote(kind) => without_descriptor(kind),
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
                facts.seekable = kind.positional();
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
    let on_filesystem = matches!(file_type, Some(FileType::RegularFile | FileType::Directory));
    EndFacts {
        kind,
        descriptor: true,
        seekable: crate::sys::file::current_offset(fd).is_ok(),
        size,
        identity,
        filesystem: st.filter(|_| on_filesystem).map(|st| st.st_dev),
        // Of a device node, the filesystem holding the node (devtmpfs):
        // what the cache policy has always been decided by.
        storage: storage_of(fd),
        disk: crate::sys::device::disk_of(fd),
        queue: depth::hint_of(fd),
        cached: false,
    }
}
