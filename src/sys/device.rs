//! What sysfs says about the disk under a file or block device.
//!
//! A file lives on the filesystem's device (st_dev), a block device is its
//! own (st_rdev); a partition belongs to its whole disk. Two ends on the
//! same disk compete for one head (or one queue), which changes how a copy
//! should be scheduled.

use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use rustix::fs::FileType;

/// A whole disk, by its device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    pub major: u32,
    pub minor: u32,
}

/// The whole disk that holds the data of `fd`, if it is on one.
pub fn disk_of(fd: BorrowedFd<'_>) -> Option<Disk> {
    let st = rustix::fs::fstat(fd).ok()?;
    let dev = match FileType::from_raw_mode(st.st_mode) {
        FileType::BlockDevice => st.st_rdev,
        FileType::RegularFile | FileType::Directory => st.st_dev,
        _ => return None,
    };
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let node = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let node = node.canonicalize().ok()?;
    // A partition's directory sits inside its disk's and has a "partition" file.
    let disk_dir = if node.join("partition").exists() {
        node.parent()?.to_path_buf()
    } else {
        node
    };
    let dev = std::fs::read_to_string(disk_dir.join("dev")).ok()?;
    let (major, minor) = dev.trim().split_once(':')?;
    Some(Disk {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
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
    fn pipes_are_on_no_disk() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        assert_eq!(disk_of(r.as_fd()), None);
    }
}
