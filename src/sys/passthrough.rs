//! Passthrough devices: character devices that take a disk's own commands
//! instead of reads and writes, SCSI generic (`/dev/sg*`, `/dev/bsg/*`)
//! and NVMe generic (`/dev/ngXnY`). A read(2) on them does not read the
//! disk: an sg node waits for the answer to a command never sent.
//!
//! This module tells them apart from other character devices (by the
//! sysfs class of their device number), finds the block device of the
//! same disk (what the wrong-device guard must examine, since a write
//! through passthrough bypasses the block layer's own exclusivity), and
//! defines [`CommandQueue`]: logical blocks read and written by commands
//! kept in flight, each in a buffer the queue owns, which the SCSI
//! (`sys::scsi`) and NVMe (`sys::nvme`) transports implement.
//!
//! Ownership rule, as `sys::ring`'s: a slot's buffer belongs to the kernel
//! from [`CommandQueue::submit`] until [`CommandQueue::wait`] returns that
//! slot; the queue hands out only idle slots' buffers, and waits for every
//! command in flight before its buffers are freed.

use std::fmt;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;

use super::block::DeviceNumber;
use super::Errno;

/// Which passthrough interface a character device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interface {
    /// The SCSI generic driver (`/dev/sgN`): SG_IO v3, and its
    /// asynchronous write/read interface.
    ScsiGeneric,
    /// The block layer's SCSI generic node (`/dev/bsg/H:C:T:L`): SG_IO v4.
    Bsg,
    /// An NVMe namespace's generic node (`/dev/ngXnY`): io_uring
    /// `URING_CMD` NVMe commands.
    NvmeGeneric,
}

impl Interface {
    /// How messages and `--verbose` name it.
    pub fn name(self) -> &'static str {
        match self {
            Interface::ScsiGeneric => "SCSI generic",
            Interface::Bsg => "SCSI generic (bsg)",
            Interface::NvmeGeneric => "NVMe generic",
        }
    }
}

/// The passthrough interface of the character device `number`, from the
/// sysfs class it belongs to; None for any other device.
pub fn interface_of_number(number: DeviceNumber) -> Option<Interface> {
    interface_in(Path::new("/sys"), number)
}

/// The passthrough interface of the device `fd` is open on (any kind of
/// descriptor, O_PATH too); None when it is not a passthrough node.
pub fn interface_of(fd: BorrowedFd<'_>) -> Option<Interface> {
    let st = rustix::fs::fstat(fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::CharacterDevice {
        return None;
    }
    interface_of_number(DeviceNumber::from_raw(st.st_rdev))
}

/// The passthrough interface of the node at `path`, without opening it.
pub fn interface_at(path: &Path) -> Option<Interface> {
    let st = rustix::fs::stat(path).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::CharacterDevice {
        return None;
    }
    interface_of_number(DeviceNumber::from_raw(st.st_rdev))
}

fn char_dir(sys: &Path, number: DeviceNumber) -> PathBuf {
    sys.join(format!("dev/char/{}:{}", number.major, number.minor))
}

fn interface_in(sys: &Path, number: DeviceNumber) -> Option<Interface> {
    let class = std::fs::read_link(char_dir(sys, number).join("subsystem")).ok()?;
    match class.file_name()?.to_str()? {
        "scsi_generic" => Some(Interface::ScsiGeneric),
        "bsg" => Some(Interface::Bsg),
        "nvme-generic" => Some(Interface::NvmeGeneric),
        _ => None,
    }
}

/// The kernel name of the block device of the same disk as the
/// passthrough node `number` ("sda" for sg0, "nvme0n1" for ng0n1); None
/// where the disk has none (a SCSI device no block driver claimed, an
/// NVMe namespace the block layer hid).
pub fn block_device_of(number: DeviceNumber) -> Option<String> {
    block_device_in(Path::new("/sys"), number)
}

/// [`block_device_of`] the passthrough node at `path`, without opening
/// it.
pub fn block_device_at(path: &Path) -> Option<String> {
    let st = rustix::fs::stat(path).ok()?;
    block_device_of(DeviceNumber::from_raw(st.st_rdev))
}

fn block_device_in(sys: &Path, number: DeviceNumber) -> Option<String> {
    let dir = char_dir(sys, number);
    match interface_in(sys, number)? {
        // Both hang under the SCSI device, whose block/ names its disk.
        Interface::ScsiGeneric | Interface::Bsg => only_entry(&dir.join("device/block")),
        Interface::NvmeGeneric => {
            let name = dir.canonicalize().ok()?;
            let name = name.file_name()?.to_str()?.to_owned();
            nvme_block_of(sys, &dir.join("device"), &name)
        }
    }
}

fn only_entry(dir: &Path) -> Option<String> {
    let mut names = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok());
    let first = names.next()?;
    names.next().is_none().then_some(first)
}

/// `ngCnN` is namespace head N seen through controller C. Without
/// multipath its disk is `nvmeCnN` beside it under the controller; with
/// multipath the controller holds the hidden path `nvmeCcXnN` and the
/// disk is `nvmeSnN` of the subsystem S the controller belongs to.
fn nvme_block_of(sys: &Path, controller: &Path, generic: &str) -> Option<String> {
    let head = generic.strip_prefix("ng")?.split_once('n')?.1;
    let suffix = format!("n{head}");
    let entries: Vec<String> = std::fs::read_dir(controller)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let is_disk = |name: &str| {
        name.strip_prefix("nvme")
            .and_then(|rest| rest.strip_suffix(&suffix))
            .is_some_and(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
    };
    if let Some(disk) = entries.iter().find(|n| is_disk(n)) {
        return Some(disk.clone());
    }
    let controller_name = controller.canonicalize().ok()?;
    let controller_name = controller_name.file_name()?.to_owned();
    for subsystem in std::fs::read_dir(sys.join("class/nvme-subsystem")).ok()? {
        let dir = subsystem.ok()?.path();
        if !dir.join(&controller_name).exists() {
            continue;
        }
        let disks = std::fs::read_dir(&dir).ok()?;
        if let Some(disk) = disks
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|n| is_disk(n))
        {
            return Some(disk);
        }
    }
    None
}

/// What a command queue reads and writes: the disk's geometry and what
/// one command may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per logical block.
    pub block_len: u32,
    /// Logical blocks on the disk.
    pub blocks: u64,
    /// The most blocks one command carries (the transport's and the
    /// device queue's limits, and the slot buffers' size).
    pub max_blocks: u32,
}

impl Geometry {
    pub fn size(&self) -> u64 {
        self.blocks * u64::from(self.block_len)
    }
}

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    /// `fua`: force unit access, durable when the command completes.
    Write {
        fua: bool,
    },
}

/// Why a command failed: the errno a block device would have given, the
/// device's own words, and the logical block it named, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    pub errno: Errno,
    /// One line: "medium error, unrecovered read error at LBA 4660",
    /// "NVMe status: unrecovered read error (sct 2h, sc 81h)".
    pub cause: String,
    /// The first block the device reported it could not read or write.
    pub bad_block: Option<u64>,
}

impl CommandError {
    pub fn system(errno: Errno, what: &str) -> CommandError {
        CommandError {
            errno,
            cause: format!("{what}: {}", super::errno_text(errno)),
            bad_block: None,
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.cause)
    }
}

/// Logical blocks read and written by commands in flight, each in one of
/// the queue's slots (see the module's ownership rule).
pub trait CommandQueue: Send + fmt::Debug {
    fn interface(&self) -> Interface;

    fn geometry(&self) -> Geometry;

    /// Slots: commands that can be in flight at once.
    fn slots(&self) -> usize;

    /// The commands this queue sends, for `--verbose` ("READ(10) and
    /// WRITE(10) through SG_IO").
    fn describe(&self) -> String;

    /// An idle slot's buffer (`max_blocks` blocks long).
    fn buffer(&self, slot: usize) -> Option<&[u8]>;

    fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]>;

    /// Send `op` on `blocks` blocks at `lba`, from or into the front of
    /// `slot`'s buffer. EBUSY on a slot in flight, EINVAL past the
    /// buffer.
    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), CommandError>;

    /// Put `buf` in the place of idle `slot`'s buffer and hand that one
    /// out in `buf`, as long as `buf` was: what a read left in the slot
    /// changes hands without a copy, and what `buf` held is the slot's to
    /// write. False, and nothing changed, where the slot's buffer is not
    /// ddx's to hand out (the driver's, mapped), or `buf` could not carry
    /// one of the slot's commands or is longer than the slot's buffer.
    fn exchange(&mut self, slot: usize, buf: &mut super::buffer::AlignedBuf) -> bool {
        let _ = (slot, buf);
        false
    }

    /// Whether the slots' data is the driver's own buffers, mapped into
    /// ddx (an sg node's reserve buffers), rather than ddx's buffers the
    /// driver reads and writes or copies.
    fn mapped(&self) -> bool {
        false
    }

    /// The next command to complete: its slot and outcome. None when
    /// nothing is in flight.
    fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)>;

    /// Make everything written so far durable (SYNCHRONIZE CACHE, NVMe
    /// Flush), once nothing is in flight.
    fn flush(&mut self) -> Result<(), CommandError>;
}

/// The most bytes one command to the disk may carry, by its block
/// device's queue limits (a passthrough command is never split): the
/// hardware's sector limit and its segments (a page each, at worst),
/// rounded down to a power of two so that commands fall on the device's
/// own boundaries.
pub fn transfer_limit(block_device: Option<&str>) -> usize {
    // sg_dd's default where nothing is known: 128 blocks of 512 bytes.
    const UNKNOWN: usize = 64 << 10;
    let Some(name) = block_device else {
        return UNKNOWN;
    };
    let node = super::block::Node::named(name);
    let sectors = node
        .queue::<usize>("max_hw_sectors_kb")
        .or_else(|| node.queue::<usize>("max_sectors_kb"))
        .map_or(UNKNOWN, |kb| kb << 10);
    let segments = node
        .queue::<usize>("max_segments")
        .map_or(usize::MAX, |n| n.saturating_sub(1).max(1) * 4096);
    let limit = sectors.min(segments).max(4096);
    1 << (usize::BITS - 1 - limit.leading_zeros())
}

/// The most bytes one command carries on the disk of `block_device`:
/// its [`transfer_limit`], and never more than half a MiB, past which a
/// larger command only costs memory per slot. Both queues size their
/// slots by it, and the planner its bulk requests, so that one request
/// is one command and a read-ahead buffer can pass to the engine whole.
pub fn command_limit(block_device: Option<&str>) -> usize {
    const COMMAND_CAP: usize = 512 << 10;
    transfer_limit(block_device).min(COMMAND_CAP)
}

/// [`CommandQueue::exchange`] for a queue whose slot buffers are
/// `len`-byte [`AlignedBuf`](super::buffer::AlignedBuf)s of its own: the
/// caller has checked that `slot` is idle.
pub fn exchange_slot(
    slot: &mut super::buffer::AlignedBuf,
    len: usize,
    buf: &mut super::buffer::AlignedBuf,
) -> bool {
    let want = buf.len();
    if buf.capacity() < len || want > len {
        return false;
    }
    std::mem::swap(slot, buf);
    slot.set_len(len);
    buf.set_len(want);
    true
}

/// Fill `slots` of `len` bytes each, for a queue's buffers.
pub fn slot_buffers(slots: usize, len: usize) -> Result<Vec<super::buffer::AlignedBuf>, Errno> {
    (0..slots)
        .map(|_| super::buffer::AlignedBuf::new(len))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::block::fake::tree;

    fn link(from: &Path, to: &str) {
        std::fs::create_dir_all(from.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(to, from).unwrap();
    }

    #[test]
    fn sg_and_bsg_nodes_lead_to_their_disk() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        let scsi = "devices/pci0/host0/target0:0:0/0:0:0:0";
        tree(
            s,
            &[
                &format!("{scsi}/block/sda"),
                &format!("{scsi}/scsi_generic/sg0"),
                "class/scsi_generic",
                "class/bsg",
            ],
            &[],
        );
        std::fs::create_dir_all(s.join(format!("{scsi}/bsg/0:0:0:0"))).unwrap();
        link(&s.join(format!("{scsi}/scsi_generic/sg0/device")), "../..");
        link(
            &s.join(format!("{scsi}/scsi_generic/sg0/subsystem")),
            "../../../../../../../class/scsi_generic",
        );
        link(&s.join(format!("{scsi}/bsg/0:0:0:0/device")), "../..");
        link(
            &s.join(format!("{scsi}/bsg/0:0:0:0/subsystem")),
            "../../../../../../../class/bsg",
        );
        link(
            &s.join("dev/char/21:0"),
            &format!("../../{scsi}/scsi_generic/sg0"),
        );
        link(
            &s.join("dev/char/248:0"),
            &format!("../../{scsi}/bsg/0:0:0:0"),
        );
        let sg = DeviceNumber {
            major: 21,
            minor: 0,
        };
        let bsg = DeviceNumber {
            major: 248,
            minor: 0,
        };
        assert_eq!(interface_in(s, sg), Some(Interface::ScsiGeneric));
        assert_eq!(interface_in(s, bsg), Some(Interface::Bsg));
        assert_eq!(block_device_in(s, sg).as_deref(), Some("sda"));
        assert_eq!(block_device_in(s, bsg).as_deref(), Some("sda"));
        assert_eq!(interface_in(s, DeviceNumber { major: 1, minor: 3 }), None);
    }

    #[test]
    fn an_nvme_generic_node_leads_to_its_namespace_disk() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        let ctrl = "devices/pci0/nvme/nvme0";
        tree(
            s,
            &[
                &format!("{ctrl}/ng0n1"),
                &format!("{ctrl}/ng0n2"),
                &format!("{ctrl}/nvme0n1"),
                &format!("{ctrl}/nvme0n12"),
                "class/nvme-generic",
            ],
            &[],
        );
        for n in ["1", "2"] {
            link(&s.join(format!("{ctrl}/ng0n{n}/device")), "..");
            link(
                &s.join(format!("{ctrl}/ng0n{n}/subsystem")),
                "../../../../../class/nvme-generic",
            );
            link(
                &s.join(format!("dev/char/245:{n}")),
                &format!("../../{ctrl}/ng0n{n}"),
            );
        }
        let first = DeviceNumber {
            major: 245,
            minor: 1,
        };
        assert_eq!(interface_in(s, first), Some(Interface::NvmeGeneric));
        assert_eq!(block_device_in(s, first).as_deref(), Some("nvme0n1"));
        // Namespace 2 has no disk beside it ("nvme0n12" is namespace 12).
        assert_eq!(
            block_device_in(
                s,
                DeviceNumber {
                    major: 245,
                    minor: 2
                }
            ),
            None
        );
    }
}
