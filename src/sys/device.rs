//! What the system knows about the disk under an open file or block
//! device: sysfs (read through [`super::block`]), the sector-size ioctls,
//! statx's O_DIRECT alignment and the filesystem type from mountinfo.
//!
//! A file lives on the filesystem's device (st_dev), a block device is its
//! own (st_rdev); a partition belongs to its whole disk. Two ends on the
//! same disk compete for one head (or one queue), which changes how a copy
//! should be scheduled; the sector sizes, rotational flag and queue size in
//! [`DeviceInfo`] decide O_DIRECT alignment and how much to keep in flight.

use std::os::fd::BorrowedFd;

use rustix::fs::FileType;

use super::block::{DeviceNumber, Node};

/// A whole disk, by its device number.
pub type Disk = DeviceNumber;

/// The whole disk that holds the data of `fd`, if it is on one.
pub fn disk_of(fd: BorrowedFd<'_>) -> Option<Disk> {
    disk_node_of(fd)?.number()
}

/// The device number `fd`'s data lives on (st_rdev of a block device,
/// st_dev of a file or directory).
fn data_device(fd: BorrowedFd<'_>) -> Option<(FileType, DeviceNumber)> {
    let st = rustix::fs::fstat(fd).ok()?;
    let kind = FileType::from_raw_mode(st.st_mode);
    let dev = match kind {
        FileType::BlockDevice => st.st_rdev,
        FileType::RegularFile | FileType::Directory => st.st_dev,
        _ => return None,
    };
    Some((kind, DeviceNumber::from_raw(dev)))
}

/// The sysfs directory of the whole disk under `fd`.
fn disk_node_of(fd: BorrowedFd<'_>) -> Option<Node> {
    Node::of(data_device(fd)?.1)?.disk()
}

/// What the system knows about the storage under a file or block device.
/// Every field is optional: a file on tmpfs or NFS has no disk, an old
/// kernel has no DIO alignment.
///
/// `ddx bench` writes it into its JSON report as it is: the serialized
/// names and their order are part of that report's schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceInfo {
    /// The drive's model string, or for a loop device its backing file.
    pub model: Option<String>,
    /// Kernel name of the whole disk ("nvme0n1", "vda", "loop3").
    #[serde(rename = "disk")]
    pub disk_name: Option<String>,
    #[serde(skip)]
    pub disk: Option<Disk>,
    /// Size of the block device itself (for a file: of its whole disk).
    pub size_bytes: Option<u64>,
    pub logical_sector: Option<u32>,
    pub physical_sector: Option<u32>,
    pub rotational: Option<bool>,
    /// The active I/O scheduler ("none", "mq-deadline", ...).
    pub scheduler: Option<String>,
    /// Requests the block layer queues per hardware queue.
    pub nr_requests: Option<u32>,
    /// Filesystem type of a file or directory ("ext4"); None for a device.
    pub filesystem: Option<String>,
    /// O_DIRECT alignment from statx(STATX_DIOALIGN), Linux 6.1+; zero
    /// means the file does not support O_DIRECT.
    pub dio_mem_align: Option<u32>,
    pub dio_offset_align: Option<u32>,
}

/// Gather [`DeviceInfo`] for an open file, directory or block device.
pub fn device_info(fd: BorrowedFd<'_>) -> DeviceInfo {
    let mut info = DeviceInfo::default();
    let Some((kind, number)) = data_device(fd) else {
        return info;
    };
    let node = Node::of(number);
    if let Some(disk) = node.as_ref().and_then(Node::disk) {
        describe_disk(&disk, &mut info);
    }
    if kind == FileType::BlockDevice {
        // The ioctls describe the node itself (a partition, a loop device
        // with its own sector size) where sysfs describes the whole disk.
        if let Ok(n) = rustix::fs::ioctl_blksszget(fd) {
            info.logical_sector = Some(n);
        }
        if let Ok(n) = rustix::fs::ioctl_blkpbszget(fd) {
            info.physical_sector = Some(n);
        }
        if let Some(size) = node.as_ref().and_then(Node::size_bytes) {
            info.size_bytes = Some(size);
        }
    } else {
        info.filesystem = filesystem_of(number);
    }
    if let Ok(stx) = rustix::fs::statx(
        fd,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::DIOALIGN,
    ) {
        if stx.stx_mask & rustix::fs::StatxFlags::DIOALIGN.bits() != 0 {
            info.dio_mem_align = Some(stx.stx_dio_mem_align);
            info.dio_offset_align = Some(stx.stx_dio_offset_align);
        }
    }
    info
}

/// What sysfs says about the whole disk: its name, number, model, size and
/// queue.
fn describe_disk(disk: &Node, info: &mut DeviceInfo) {
    info.disk_name = disk.name();
    info.disk = disk.number();
    info.logical_sector = disk.queue("logical_block_size");
    info.physical_sector = disk.queue("physical_block_size");
    info.rotational = disk.queue::<u32>("rotational").map(|r| r != 0);
    info.scheduler = disk
        .queue::<String>("scheduler")
        .map(|s| active_scheduler(&s));
    info.nr_requests = disk.queue("nr_requests");
    info.model = disk
        .text("device/model")
        .or_else(|| disk.text("loop/backing_file").map(|f| format!("loop: {f}")));
    info.size_bytes = disk.size_bytes();
}

/// A loop device's backing file, as sysfs gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopBacking {
    /// The loop device's kernel name ("loop3").
    pub device: String,
    /// The backing file's path (`loop/backing_file`).
    pub file: String,
    /// Whether the loop device reads and writes the file with direct I/O
    /// (`loop/dio`); without it, through the host's page cache.
    pub direct_io: bool,
}

/// The backing file of the whole disk `disk` where it is a loop device.
pub fn loop_backing(disk: Disk) -> Option<LoopBacking> {
    loop_backing_of(&Node::of(disk)?)
}

fn loop_backing_of(disk: &Node) -> Option<LoopBacking> {
    Some(LoopBacking {
        device: disk.name()?,
        file: disk.text("loop/backing_file")?,
        direct_io: disk.value::<u8>("loop/dio") == Some(1),
    })
}

/// The bracketed entry of sysfs's scheduler list ("none [mq-deadline]").
fn active_scheduler(list: &str) -> String {
    list.split_whitespace()
        .find_map(|s| s.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
        .unwrap_or(list)
        .to_owned()
}

/// The filesystem type mounted from device `number`, by mountinfo (its
/// names are the ones people know; statfs only gives magic numbers).
fn filesystem_of(number: DeviceNumber) -> Option<String> {
    super::mounts::mounts()
        .into_iter()
        .find(|m| m.number == number)
        .map(|m| m.fstype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn two_files_in_one_directory_share_a_disk() {
        let dir = tempfile::tempdir().unwrap();
        let a = std::fs::File::create(dir.path().join("a")).unwrap();
        let b = std::fs::File::create(dir.path().join("b")).unwrap();
        let (da, db) = (disk_of(a.as_fd()), disk_of(b.as_fd()));
        assert_eq!(da, db);
    }

    #[test]
    fn a_file_knows_its_filesystem_and_sectors() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let f = std::fs::File::create(dir.path().join("a")).unwrap();
        let info = device_info(f.as_fd());
        assert!(info.filesystem.is_some(), "{info:?}");
        if let Some(sector) = info.logical_sector {
            assert!(sector >= 512 && sector.is_power_of_two(), "{info:?}");
        }
    }

    #[test]
    fn a_loop_device_names_its_backing_file_and_direct_io() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("loop3");
        let block = |files: &[(&str, &str)]| {
            super::super::block::fake::tree(&dir, &["loop"], files);
            loop_backing_of(&Node::at(&dir))
        };
        assert_eq!(block(&[("dev", "7:3\n")]), None, "no backing file: no loop");
        assert_eq!(
            block(&[
                ("loop/backing_file", "/var/disk.img\n"),
                ("loop/dio", "0\n")
            ]),
            Some(LoopBacking {
                device: "loop3".into(),
                file: "/var/disk.img".into(),
                direct_io: false,
            })
        );
        let direct = block(&[("loop/dio", "1\n")]).unwrap();
        assert!(direct.direct_io, "{direct:?}");
    }

    #[test]
    fn the_active_scheduler_is_the_bracketed_one() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber"), "mq-deadline");
        assert_eq!(active_scheduler("none"), "none");
    }

    #[test]
    fn a_disk_is_described_from_its_sysfs_directory() {
        let root = tempfile::tempdir().unwrap();
        let disk = Node::at(&super::super::block::fake::disk(root.path()));
        let mut info = DeviceInfo::default();
        describe_disk(&disk, &mut info);
        assert_eq!(
            info,
            DeviceInfo {
                disk_name: Some("sdz".into()),
                disk: Some(Disk {
                    major: 8,
                    minor: 16
                }),
                model: Some("Spinner 9000".into()),
                size_bytes: Some(1 << 30),
                logical_sector: Some(512),
                physical_sector: Some(4096),
                rotational: Some(true),
                scheduler: Some("mq-deadline".into()),
                nr_requests: Some(64),
                ..DeviceInfo::default()
            }
        );
    }

    #[test]
    fn pipes_are_on_no_disk() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        assert_eq!(disk_of(r.as_fd()), None);
    }
}
