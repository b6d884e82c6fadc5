//! What sysfs says about the disk under a file or block device.
//!
//! A file lives on the filesystem's device (st_dev), a block device is its
//! own (st_rdev); a partition belongs to its whole disk. Two ends on the
//! same disk compete for one head (or one queue), which changes how a copy
//! should be scheduled; the sector sizes, rotational flag and queue size in
//! [`DeviceInfo`] decide O_DIRECT alignment and how much to keep in flight.

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;

/// A whole disk, by its device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    pub major: u32,
    pub minor: u32,
}

/// The whole disk that holds the data of `fd`, if it is on one.
pub fn disk_of(fd: BorrowedFd<'_>) -> Option<Disk> {
    let disk_dir = disk_dir_of(fd)?;
    let dev = std::fs::read_to_string(disk_dir.join("dev")).ok()?;
    let (major, minor) = dev.trim().split_once(':')?;
    Some(Disk {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// The device number `fd`'s data lives on (st_rdev of a block device,
/// st_dev of a file or directory).
fn data_device(fd: BorrowedFd<'_>) -> Option<(FileType, u32, u32)> {
    let st = rustix::fs::fstat(fd).ok()?;
    let kind = FileType::from_raw_mode(st.st_mode);
    let dev = match kind {
        FileType::BlockDevice => st.st_rdev,
        FileType::RegularFile | FileType::Directory => st.st_dev,
        _ => return None,
    };
    Some((kind, rustix::fs::major(dev), rustix::fs::minor(dev)))
}

/// The sysfs directory of the whole disk under `fd`.
fn disk_dir_of(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    let (_, major, minor) = data_device(fd)?;
    let node = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let node = node.canonicalize().ok()?;
    // A partition's directory sits inside its disk's and has a "partition" file.
    if node.join("partition").exists() {
        Some(node.parent()?.to_path_buf())
    } else {
        Some(node)
    }
}

/// What the system knows about the storage under a file or block device.
/// Every field is optional: a file on tmpfs or NFS has no disk, an old
/// kernel has no DIO alignment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel name of the whole disk ("nvme0n1", "vda", "loop3").
    pub disk_name: Option<String>,
    pub disk: Option<Disk>,
    /// The drive's model string, or for a loop device its backing file.
    pub model: Option<String>,
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
    let Some((kind, major, minor)) = data_device(fd) else {
        return info;
    };
    if let Some(dir) = disk_dir_of(fd) {
        info.disk_name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        info.disk = disk_of(fd);
        let queue = dir.join("queue");
        info.logical_sector = read_number(&queue.join("logical_block_size"));
        info.physical_sector = read_number(&queue.join("physical_block_size"));
        info.rotational = read_number::<u32>(&queue.join("rotational")).map(|r| r != 0);
        info.scheduler = read_trimmed(&queue.join("scheduler")).map(|s| active_scheduler(&s));
        info.nr_requests = read_number(&queue.join("nr_requests"));
        info.model = read_trimmed(&dir.join("device/model"))
            .or_else(|| read_trimmed(&dir.join("loop/backing_file")).map(|f| format!("loop: {f}")));
        // sysfs sizes are in 512-byte units whatever the sector size.
        info.size_bytes = read_number::<u64>(&dir.join("size")).map(|s| s * 512);
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
        let node = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/size"));
        if let Some(sectors) = read_number::<u64>(&node) {
            info.size_bytes = Some(sectors * 512);
        }
    } else {
        info.filesystem = filesystem_of(major, minor);
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

/// The bracketed entry of sysfs's scheduler list ("none [mq-deadline]").
fn active_scheduler(list: &str) -> String {
    list.split_whitespace()
        .find_map(|s| s.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
        .unwrap_or(list)
        .to_owned()
}

/// The filesystem type mounted from device `major:minor`, by mountinfo
/// (its names are the ones people know; statfs only gives magic numbers).
fn filesystem_of(major: u32, minor: u32) -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = format!("{major}:{minor}");
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.nth(2)? != wanted {
            return None;
        }
        let (_, after) = line.split_once(" - ")?;
        after.split(' ').next().map(str::to_owned)
    })
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
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
    fn the_active_scheduler_is_the_bracketed_one() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber"), "mq-deadline");
        assert_eq!(active_scheduler("none"), "none");
    }

    #[test]
    fn pipes_are_on_no_disk() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        assert_eq!(disk_of(r.as_fd()), None);
    }
}
