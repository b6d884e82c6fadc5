//! A disk reached through its passthrough node as the bench's TARGET: a
//! SCSI generic node (`/dev/sg*`, `/dev/bsg/*`) or an NVMe generic node
//! (`/dev/ngXnY`). A read(2) on such a node does not read the disk, so
//! the scenarios reach it through the copy's passthrough end (one request
//! at a time, as the copy sends them) or through its command queue (the
//! depths, each command in a slot of its own, as fio's `sg` and
//! `io_uring_cmd` engines keep them in flight).
//!
//! The node bypasses the block layer, its page cache and its exclusivity:
//! what is in use is the disk behind it. The copy's guard already judges
//! that disk (`guard::check_output` looks behind the node); while the
//! bench may write, the block device of the same disk is also held open
//! with O_EXCL, which the kernel refuses while the disk is mounted and
//! which keeps anyone from mounting it until the bench ends.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use super::BenchError;
use crate::ends::passthrough::{self, PassthroughEnd};
use crate::ends::End;
use crate::sys::device::{device_info, DeviceInfo};
use crate::sys::file;
use crate::sys::passthrough::{CommandError, CommandQueue, Geometry, Interface};

/// The node measured, and what its disk is.
#[derive(Debug)]
pub struct PassthroughTarget {
    pub path: PathBuf,
    pub interface: Interface,
    pub geometry: Geometry,
    /// The kernel name of the block device of the same disk ("sda").
    pub block_device: Option<String>,
    /// That block device, held with O_EXCL while the bench may write.
    _claim: Option<OwnedFd>,
}

impl PassthroughTarget {
    /// Open the node once to learn the disk's geometry (READ CAPACITY,
    /// Identify Namespace), and what the system knows of the disk behind
    /// it; with `writing`, claim that disk's block device.
    pub fn probe(
        path: &Path,
        interface: Interface,
        writing: bool,
    ) -> Result<(PassthroughTarget, DeviceInfo), BenchError> {
        let fd = open_node(path, interface, false)?;
        let (queue, block_device) =
            passthrough::open_queue(fd, interface, 1, false).map_err(|e| failed(path, e))?;
        let geometry = queue.geometry();
        drop(queue);
        let disk = block_device
            .as_deref()
            .map(|name| Path::new("/dev").join(name));
        let mut device = disk
            .as_deref()
            .and_then(|disk| file::open_with(disk, OFlags::RDONLY, 0).ok())
            .map(|fd| device_info(fd.as_fd()))
            .unwrap_or_default();
        device.size_bytes = Some(geometry.size());
        device.logical_sector = Some(geometry.block_len);
        let claim = match disk.as_deref().filter(|_| writing) {
            Some(disk) => claim(path, disk)?,
            None => None,
        };
        let target = PassthroughTarget {
            path: path.to_owned(),
            interface,
            geometry,
            block_device,
            _claim: claim,
        };
        Ok((target, device))
    }

    /// The most bytes one command carries: the largest request the bench
    /// makes of the node, so that every request is one command.
    pub fn command_bytes(&self) -> u64 {
        u64::from(self.geometry.max_blocks) * u64::from(self.geometry.block_len)
    }

    /// How the requests are sent, in fio's names for the same engines
    /// ("sg": the sg driver's queue; "io_uring_cmd": NVMe commands through
    /// io_uring), and "bsg" for SG_IO v4, one command at a time.
    pub fn engine(&self) -> &'static str {
        match self.interface {
            Interface::ScsiGeneric => "sg",
            Interface::Bsg => "bsg",
            Interface::NvmeGeneric => "io_uring_cmd",
        }
    }

    /// The copy's passthrough end on the node, one command in flight, its
    /// writes with force unit access where `fua`.
    pub fn end(&self, writing: bool, fua: bool) -> Result<Box<dyn End>, BenchError> {
        let fd = open_node(&self.path, self.interface, writing)?;
        let options = passthrough::Options { depth: 1, fua };
        let end: PassthroughEnd = passthrough::open(fd, self.interface, &self.path, options)
            .map_err(|e| failed(&self.path, e))?;
        Ok(Box::new(end))
    }

    /// A command queue on the node with up to `depth` slots (fewer where
    /// the interface keeps fewer in flight: see its `slots`), its data
    /// moved as fio's engine of the same name moves it (on an sg node,
    /// copied by the driver), so that the two measure the same thing.
    pub fn queue(&self, writing: bool, depth: u32) -> Result<Box<dyn CommandQueue>, BenchError> {
        let fd = open_node(&self.path, self.interface, writing)?;
        passthrough::open_queue(fd, self.interface, depth as usize, false)
            .map(|(queue, _)| queue)
            .map_err(|e| failed(&self.path, e))
    }
}

fn open_node(path: &Path, interface: Interface, writing: bool) -> Result<OwnedFd, BenchError> {
    file::open_with(path, passthrough::access(interface, writing), 0)
        .map_err(|e| BenchError::sys(format!("opening {}", path.display()), e))
}

fn failed(path: &Path, error: CommandError) -> BenchError {
    BenchError::msg(format!("{}: {}", path.display(), error.cause))
}

/// Hold `disk` (the block device behind `node`) with O_EXCL; refused
/// while it is in use. None where the node cannot be opened at all (no
/// such node in /dev): the guard has judged the disk already.
fn claim(node: &Path, disk: &Path) -> Result<Option<OwnedFd>, BenchError> {
    match file::open_with(disk, OFlags::RDONLY | OFlags::EXCL, 0) {
        Ok(fd) => Ok(Some(fd)),
        Err(errno) if errno == crate::sys::Errno::BUSY => Err(BenchError::msg(format!(
            "refusing to write {}: its disk {} is in use (mounted, or held by another \
             program)",
            node.display(),
            disk.display(),
        ))),
        Err(_) => Ok(None),
    }
}
