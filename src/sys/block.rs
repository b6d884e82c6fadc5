//! What sysfs says about one block device, for the wrong-device guard and
//! the notice before a whole disk is overwritten: its name, size, model,
//! where a partition starts on its disk, a disk's partitions, and who
//! holds it (RAID, LVM, device-mapper).
//!
//! Only reads `/sys/dev/block/MAJOR:MINOR`; a missing file means "unknown",
//! never an error, because the guard must not stop a copy it cannot judge.

use std::fs;
use std::path::{Path, PathBuf};

/// A device number, as in `st_rdev` and sysfs's `dev` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceNumber {
    pub major: u32,
    pub minor: u32,
}

impl DeviceNumber {
    pub fn from_raw(dev: u64) -> Self {
        DeviceNumber {
            major: rustix::fs::major(dev),
            minor: rustix::fs::minor(dev),
        }
    }

    /// "8:1" as sysfs and /proc/self/mountinfo write it.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DeviceNumber {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// A partition of a whole disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub number: DeviceNumber,
    pub size: u64,
}

/// One block device as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    pub number: DeviceNumber,
    /// Kernel name: "sda", "sda1", "loop0", "nvme0n1p2".
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// The whole disk this device is, or is a partition of.
    pub disk: DeviceNumber,
    /// Byte offset of this device on its disk (0 for a whole disk).
    pub start: u64,
    pub is_partition: bool,
    /// "VENDOR MODEL", or what a virtual device is ("loop device over
    /// /tmp/img", "device-mapper vg-root").
    pub model: Option<String>,
    /// A whole disk's partitions (empty for a partition).
    pub partitions: Vec<Partition>,
    /// Kernel names of the devices stacked on this one (holders/).
    pub holders: Vec<String>,
}

const SECTOR: u64 = 512;

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn read_number(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// The sysfs directory of a device number.
fn sysfs_dir(number: DeviceNumber) -> Option<PathBuf> {
    PathBuf::from(format!("/sys/dev/block/{}:{}", number.major, number.minor))
        .canonicalize()
        .ok()
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Describe the block device `number`; None when sysfs does not know it.
pub fn describe(number: DeviceNumber) -> Option<BlockDevice> {
    let dir = sysfs_dir(number)?;
    let is_partition = dir.join("partition").exists();
    let size = read_number(&dir.join("size")).unwrap_or(0) * SECTOR;
    let (disk_dir, start) = if is_partition {
        let parent = dir.parent()?.to_path_buf();
        let start = read_number(&dir.join("start")).unwrap_or(0) * SECTOR;
        (parent, start)
    } else {
        (dir.clone(), 0)
    };
    let disk = read_trimmed(&disk_dir.join("dev"))
        .and_then(|d| DeviceNumber::parse(&d))
        .unwrap_or(number);
    let partitions = if is_partition {
        Vec::new()
    } else {
        partitions_in(&dir)
    };
    Some(BlockDevice {
        number,
        name: name_of(&dir),
        size,
        disk,
        start,
        is_partition,
        model: model_of(&disk_dir),
        partitions,
        holders: holders_of(&dir),
    })
}

fn partitions_in(dir: &Path) -> Vec<Partition> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut partitions: Vec<Partition> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("partition").exists())
        .filter_map(|p| {
            Some(Partition {
                name: name_of(&p),
                number: DeviceNumber::parse(&read_trimmed(&p.join("dev"))?)?,
                size: read_number(&p.join("size")).unwrap_or(0) * SECTOR,
            })
        })
        .collect();
    partitions.sort_by_key(|p| p.number.minor);
    partitions
}

fn holders_of(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir.join("holders")) else {
        return Vec::new();
    };
    let mut holders: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    holders.sort();
    holders
}

/// What a person would recognise the disk by.
fn model_of(disk_dir: &Path) -> Option<String> {
    if let Some(backing) = read_trimmed(&disk_dir.join("loop/backing_file")) {
        return Some(format!("loop device over {backing}"));
    }
    if let Some(name) = read_trimmed(&disk_dir.join("dm/name")) {
        return Some(format!("device-mapper {name}"));
    }
    let vendor = read_trimmed(&disk_dir.join("device/vendor"));
    let model = read_trimmed(&disk_dir.join("device/model"));
    match (vendor, model) {
        (Some(v), Some(m)) if !m.starts_with(&v) => Some(format!("{v} {m}")),
        (_, Some(m)) => Some(m),
        (Some(v), None) => Some(v),
        (None, None) => None,
    }
}

/// The name a holder goes by: a dm device's own name, or its kernel name.
pub fn holder_label(kernel_name: &str) -> String {
    let dm = PathBuf::from(format!("/sys/class/block/{kernel_name}/dm/name"));
    match read_trimmed(&dm) {
        Some(name) => format!("{kernel_name} ({name})"),
        None => kernel_name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_parse_as_sysfs_writes_them() {
        assert_eq!(
            DeviceNumber::parse("8:17\n"),
            Some(DeviceNumber {
                major: 8,
                minor: 17
            })
        );
        assert_eq!(DeviceNumber::parse("8"), None);
    }

    #[test]
    fn unknown_devices_are_none() {
        assert_eq!(
            describe(DeviceNumber {
                major: 4095,
                minor: 1_000_000
            }),
            None
        );
    }
}
