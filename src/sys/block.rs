//! sysfs for block devices, the one place ddx reads it: from a device
//! number to its directory under `/sys/dev/block`, from a partition to its
//! whole disk, and the attributes the rest of ddx asks about (size, start,
//! queue limits, model, partitions, holders).
//!
//! Two views are built on [`Node`]: [`describe`] here, what the wrong-device
//! guard and the notice before a whole disk is overwritten need (name, size,
//! model, partitions, holders), and `sys::device`, what the engine and
//! `ddx bench` need about the disk under an open file (sector sizes,
//! rotational, queue size).
//!
//! A missing file means "unknown", never an error, because the guard must
//! not stop a copy it cannot judge and a file on tmpfs has no disk at all.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

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

/// sysfs sizes and offsets are in 512-byte units whatever the sector size.
const SECTOR: u64 = 512;

/// One block device's sysfs directory: a whole disk's, or a partition's
/// (which sits inside its disk's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    dir: PathBuf,
}

impl Node {
    /// The directory of device `number`; None when sysfs does not know it.
    pub fn of(number: DeviceNumber) -> Option<Node> {
        let link = format!("/sys/dev/block/{}:{}", number.major, number.minor);
        // Canonical, so that a partition's parent is its disk.
        let dir = PathBuf::from(link).canonicalize().ok()?;
        Some(Node { dir })
    }

    /// The directory of the device with kernel name `name` ("dm-0").
    pub fn named(name: &str) -> Node {
        Node {
            dir: PathBuf::from(format!("/sys/class/block/{name}")),
        }
    }

    /// A directory laid out like sysfs's, for tests.
    #[cfg(test)]
    pub(crate) fn at(dir: &Path) -> Node {
        Node {
            dir: dir.to_owned(),
        }
    }

    pub fn is_partition(&self) -> bool {
        self.dir.join("partition").exists()
    }

    /// The whole disk this device is, or is a partition of.
    pub fn disk(&self) -> Option<Node> {
        if self.is_partition() {
            Some(Node {
                dir: self.dir.parent()?.to_path_buf(),
            })
        } else {
            Some(self.clone())
        }
    }

    /// Kernel name: "sda", "sda1", "loop0", "nvme0n1p2".
    pub fn name(&self) -> Option<String> {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    }

    /// The device number, from the `dev` file.
    pub fn number(&self) -> Option<DeviceNumber> {
        DeviceNumber::parse(&self.text("dev")?)
    }

    /// Bytes.
    pub fn size_bytes(&self) -> Option<u64> {
        self.value::<u64>("size").map(|s| s * SECTOR)
    }

    /// Byte offset of a partition on its disk.
    pub fn start_bytes(&self) -> Option<u64> {
        self.value::<u64>("start").map(|s| s * SECTOR)
    }

    /// An attribute's text, trimmed; None when missing or empty.
    pub fn text(&self, attribute: &str) -> Option<String> {
        read_trimmed(&self.dir.join(attribute))
    }

    /// An attribute parsed as a number (or anything else `FromStr`).
    pub fn value<T: FromStr>(&self, attribute: &str) -> Option<T> {
        self.text(attribute)?.parse().ok()
    }

    /// The name of the driver behind the device ("virtio_blk", "nvme"),
    /// from the `device/driver` link.
    pub fn driver(&self) -> Option<String> {
        let link = std::fs::read_link(self.dir.join("device/driver")).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }

    /// A block-layer queue attribute ("rotational", "nr_requests", ...).
    pub fn queue<T: FromStr>(&self, attribute: &str) -> Option<T> {
        self.value(&format!("queue/{attribute}"))
    }

    /// A whole disk's partitions, by minor number (empty for a partition).
    pub fn partitions(&self) -> Vec<Partition> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut partitions: Vec<Partition> = entries
            .flatten()
            .map(|e| Node { dir: e.path() })
            .filter(Node::is_partition)
            .filter_map(|p| {
                Some(Partition {
                    name: p.name().unwrap_or_default(),
                    number: p.number()?,
                    size: p.size_bytes().unwrap_or(0),
                })
            })
            .collect();
        partitions.sort_by_key(|p| p.number.minor);
        partitions
    }

    /// Kernel names of the devices stacked on this one (holders/), sorted.
    pub fn holders(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.dir.join("holders")) else {
            return Vec::new();
        };
        let mut holders: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        holders.sort();
        holders
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
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

/// Describe the block device `number`; None when sysfs does not know it.
pub fn describe(number: DeviceNumber) -> Option<BlockDevice> {
    describe_node(number, &Node::of(number)?)
}

fn describe_node(number: DeviceNumber, node: &Node) -> Option<BlockDevice> {
    let is_partition = node.is_partition();
    let disk = node.disk()?;
    let start = if is_partition {
        node.start_bytes().unwrap_or(0)
    } else {
        0
    };
    let partitions = if is_partition {
        Vec::new()
    } else {
        node.partitions()
    };
    Some(BlockDevice {
        number,
        name: node.name().unwrap_or_default(),
        size: node.size_bytes().unwrap_or(0),
        disk: disk.number().unwrap_or(number),
        start,
        is_partition,
        model: model_of(&disk),
        partitions,
        holders: node.holders(),
    })
}

/// What a person would recognise the disk by.
fn model_of(disk: &Node) -> Option<String> {
    if let Some(backing) = disk.text("loop/backing_file") {
        return Some(format!("loop device over {backing}"));
    }
    if let Some(name) = disk.text("dm/name") {
        return Some(format!("device-mapper {name}"));
    }
    let vendor = disk.text("device/vendor");
    let model = disk.text("device/model");
    match (vendor, model) {
        (Some(v), Some(m)) if !m.starts_with(&v) => Some(format!("{v} {m}")),
        (_, Some(m)) => Some(m),
        (Some(v), None) => Some(v),
        (None, None) => None,
    }
}

/// What identifies the disk behind device `number` whatever number it
/// gets: its WWID, else its serial (virtio, NVMe, SCSI), a device-mapper
/// device's UUID, or a loop device's backing file (by device and inode,
/// and the offset into it); a partition adds where it starts. None when
/// sysfs says none of these.
pub fn identity(number: DeviceNumber) -> Option<String> {
    identity_of_node(&Node::of(number)?)
}

fn identity_of_node(node: &Node) -> Option<String> {
    let disk = node.disk()?;
    let whole = if let Some(backing) = disk.text("loop/backing_file") {
        let offset = disk.value::<u64>("loop/offset").unwrap_or(0);
        match rustix::fs::stat(backing.as_str()) {
            Ok(st) => format!(
                "loop:{}:{}:{}@{offset}",
                rustix::fs::major(st.st_dev),
                rustix::fs::minor(st.st_dev),
                st.st_ino
            ),
            Err(_) => format!("loop:{backing}@{offset}"),
        }
    } else {
        ["wwid", "device/wwid", "serial", "device/serial", "dm/uuid"]
            .iter()
            .find_map(|attribute| disk.text(attribute))
            .map(|id| format!("id:{id}"))?
    };
    if node.is_partition() {
        Some(format!("{whole}+{}", node.start_bytes().unwrap_or(0)))
    } else {
        Some(whole)
    }
}

/// Whether block device `number` is read-only (sysfs's `ro`: a loop
/// device attached read-only, a write-protected card, `blockdev
/// --setro`, or a partition of such a disk).
pub fn read_only(number: DeviceNumber) -> bool {
    Node::of(number).is_some_and(|node| node.value::<u8>("ro") == Some(1))
}

/// The name a holder goes by: a dm device's own name, or its kernel name.
pub fn holder_label(kernel_name: &str) -> String {
    match Node::named(kernel_name).text("dm/name") {
        Some(name) => format!("{kernel_name} ({name})"),
        None => kernel_name.to_owned(),
    }
}

/// A directory tree laid out like sysfs, for the tests of this module and
/// of `sys::device`.
#[cfg(test)]
pub(crate) mod fake {
    use std::path::Path;

    /// Write `files` (path relative to `root`, contents) and create `dirs`.
    pub fn tree(root: &Path, dirs: &[&str], files: &[(&str, &str)]) {
        for dir in dirs {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// A 1 GiB SCSI disk "sdz" (8:16) with partitions sdz2 (8:18, from
    /// sector 4096) and sdz1 (8:17, from 2048), sdz1 held by dm-3.
    pub fn disk(root: &Path) -> std::path::PathBuf {
        let disk = root.join("sdz");
        tree(
            &disk,
            &["holders", "sdz1/holders/dm-3", "sdz2/holders"],
            &[
                ("dev", "8:16\n"),
                ("size", "2097152\n"),
                ("device/vendor", "ATA     \n"),
                ("device/model", "Spinner 9000\n"),
                ("queue/logical_block_size", "512\n"),
                ("queue/physical_block_size", "4096\n"),
                ("queue/rotational", "1\n"),
                ("queue/nr_requests", "64\n"),
                ("queue/scheduler", "none [mq-deadline] kyber\n"),
                ("sdz1/dev", "8:17\n"),
                ("sdz1/partition", "1\n"),
                ("sdz1/size", "2048\n"),
                ("sdz1/start", "2048\n"),
                ("sdz2/dev", "8:18\n"),
                ("sdz2/partition", "2\n"),
                ("sdz2/size", "4096\n"),
                ("sdz2/start", "4096\n"),
            ],
        );
        disk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SDZ: DeviceNumber = DeviceNumber {
        major: 8,
        minor: 16,
    };
    const SDZ1: DeviceNumber = DeviceNumber {
        major: 8,
        minor: 17,
    };

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

    #[test]
    fn a_whole_disk_lists_its_partitions_in_order() {
        let root = tempfile::tempdir().unwrap();
        let disk = fake::disk(root.path());
        let device = describe_node(SDZ, &Node::at(&disk)).unwrap();
        assert_eq!(device.name, "sdz");
        assert_eq!(device.size, 1 << 30);
        assert_eq!(device.disk, SDZ);
        assert_eq!((device.start, device.is_partition), (0, false));
        assert_eq!(device.model.as_deref(), Some("ATA Spinner 9000"));
        let names: Vec<&str> = device.partitions.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["sdz1", "sdz2"]);
        assert_eq!(device.partitions[0].number, SDZ1);
        assert_eq!(device.partitions[1].size, 4096 * 512);
        assert!(device.holders.is_empty());
    }

    #[test]
    fn a_partition_knows_its_disk_start_and_holders() {
        let root = tempfile::tempdir().unwrap();
        let disk = fake::disk(root.path());
        let device = describe_node(SDZ1, &Node::at(&disk.join("sdz1"))).unwrap();
        assert_eq!(device.name, "sdz1");
        assert_eq!(device.size, 1 << 20);
        assert_eq!(device.disk, SDZ);
        assert_eq!((device.start, device.is_partition), (1 << 20, true));
        assert_eq!(device.model.as_deref(), Some("ATA Spinner 9000"));
        assert!(device.partitions.is_empty());
        assert_eq!(device.holders, ["dm-3"]);
    }

    #[test]
    fn a_loop_device_is_named_by_its_backing_file() {
        let root = tempfile::tempdir().unwrap();
        let disk = root.path().join("loop7");
        fake::tree(
            &disk,
            &[],
            &[("dev", "7:7\n"), ("loop/backing_file", "/tmp/disk.img\n")],
        );
        let number = DeviceNumber { major: 7, minor: 7 };
        let device = describe_node(number, &Node::at(&disk)).unwrap();
        assert_eq!(
            device.model.as_deref(),
            Some("loop device over /tmp/disk.img")
        );
        // No size file: unknown reads as 0, not as a failure.
        assert_eq!(device.size, 0);
    }

    /// A disk is identified by what stays with it (its WWID, a loop
    /// device's backing file and offset), a partition by its disk and
    /// start; a disk that says nothing of itself, by nothing.
    #[test]
    fn a_disk_is_identified_by_what_stays_with_it() {
        let root = tempfile::tempdir().unwrap();
        let disk = fake::disk(root.path());
        assert_eq!(identity_of_node(&Node::at(&disk)), None);
        fake::tree(&disk, &[], &[("device/wwid", "naa.5000c500a1b2c3d4\n")]);
        assert_eq!(
            identity_of_node(&Node::at(&disk)).as_deref(),
            Some("id:naa.5000c500a1b2c3d4")
        );
        assert_eq!(
            identity_of_node(&Node::at(&disk.join("sdz1"))).as_deref(),
            Some("id:naa.5000c500a1b2c3d4+1048576")
        );
        let backing = root.path().join("disk.img");
        std::fs::write(&backing, b"").unwrap();
        let st = rustix::fs::stat(&backing).unwrap();
        let loop_disk = root.path().join("loop7");
        fake::tree(
            &loop_disk,
            &[],
            &[
                ("dev", "7:7\n"),
                ("loop/backing_file", &format!("{}\n", backing.display())),
                ("loop/offset", "4096\n"),
            ],
        );
        let expected = format!(
            "loop:{}:{}:{}@4096",
            rustix::fs::major(st.st_dev),
            rustix::fs::minor(st.st_dev),
            st.st_ino
        );
        assert_eq!(
            identity_of_node(&Node::at(&loop_disk)).as_deref(),
            Some(expected.as_str())
        );
    }

    #[test]
    fn queue_attributes_parse_and_missing_ones_are_none() {
        let root = tempfile::tempdir().unwrap();
        let disk = Node::at(&fake::disk(root.path()));
        assert_eq!(disk.queue::<u32>("physical_block_size"), Some(4096));
        assert_eq!(disk.queue::<u32>("nr_requests"), Some(64));
        assert_eq!(disk.queue::<u32>("no_such_attribute"), None);
        // Present but not a number.
        assert_eq!(disk.queue::<u32>("scheduler"), None);
    }
}
