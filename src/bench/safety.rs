//! The minimal guard before `--destructive` writes to a block device: not
//! if it, or a partition of it, is mounted, used as swap, or held by
//! another device (LVM, RAID, dm-crypt). Self-contained on purpose, so the
//! copy's full wrong-device guard can replace it later; the device is also
//! opened with O_EXCL, which the kernel refuses for a device in use.

use std::path::{Path, PathBuf};

/// A device number, as sysfs and mountinfo write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DevNum(u32, u32);

/// Ok when the block device with number `major:minor` may be written.
/// The error is one line saying what holds it.
pub fn check_unused(major: u32, minor: u32) -> Result<(), String> {
    let mut devices = vec![(DevNum(major, minor), sysfs_node(major, minor))];
    devices.extend(partitions_of(&devices[0].1));

    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(number), Some(mount_point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        if let Some(dev) = parse_devnum(number) {
            if devices.iter().any(|(d, _)| *d == dev) {
                return Err(format!(
                    "device {}:{} is mounted on {mount_point}",
                    dev.0, dev.1
                ));
            }
        }
    }

    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    for path in swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
    {
        if let Ok(st) = rustix::fs::stat(path) {
            let dev = DevNum(rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
            if st.st_mode & libc::S_IFMT == libc::S_IFBLK && devices.iter().any(|(d, _)| *d == dev)
            {
                return Err(format!("{path} is in use as swap"));
            }
        }
    }

    for (dev, node) in &devices {
        let holders: Vec<String> = std::fs::read_dir(node.join("holders"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !holders.is_empty() {
            return Err(format!(
                "device {}:{} is held by {}",
                dev.0,
                dev.1,
                holders.join(", ")
            ));
        }
    }
    Ok(())
}

fn sysfs_node(major: u32, minor: u32) -> PathBuf {
    let node = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    node.canonicalize().unwrap_or(node)
}

/// The partitions of a whole disk: its sysfs subdirectories that have a
/// "partition" file.
fn partitions_of(node: &Path) -> Vec<(DevNum, PathBuf)> {
    std::fs::read_dir(node)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("partition").exists())
        .filter_map(|p| {
            let dev = std::fs::read_to_string(p.join("dev")).ok()?;
            Some((parse_devnum(dev.trim())?, p))
        })
        .collect()
}

fn parse_devnum(text: &str) -> Option<DevNum> {
    let (major, minor) = text.split_once(':')?;
    Some(DevNum(major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_under_the_root_filesystem_is_refused() {
        let st = rustix::fs::stat("/").unwrap();
        let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
        if !Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists() {
            eprintln!("skipped: / is not on a block device here ({major}:{minor})");
            return;
        }
        let refused = check_unused(major, minor).unwrap_err();
        assert!(refused.contains("mounted on /"), "{refused}");
    }

    #[test]
    fn device_numbers_parse() {
        assert_eq!(parse_devnum("7:3"), Some(DevNum(7, 3)));
        assert_eq!(parse_devnum("x"), None);
    }
}
