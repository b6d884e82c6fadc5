//! What is in use on this machine: mounted filesystems
//! (`/proc/self/mountinfo`) and active swap (`/proc/swaps`), for the
//! wrong-device guard, for naming the filesystem under a file and for
//! finding the cgroup hierarchies (`sys::memory`). Parsing is split from
//! reading so it can be tested on fixed text.

use std::path::PathBuf;

use crate::sys::block::DeviceNumber;

/// One mounted filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The filesystem's device number (anonymous for btrfs and the like,
    /// hence `source` too).
    pub number: DeviceNumber,
    /// The directory of the filesystem that is mounted here ("/" for a
    /// whole filesystem; a cgroup hierarchy mounted inside a cgroup
    /// namespace, or a bind mount, shows the part it exposes).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// What was mounted ("/dev/sda1", "tmpfs", "host:/export").
    pub source: String,
    /// The filesystem type ("ext4", "tmpfs", "nfs4").
    pub fstype: String,
    /// The filesystem's own options ("rw,memory" for cgroup v1's memory
    /// hierarchy).
    pub super_options: String,
}

/// The mounts of this process's namespace; empty if unreadable.
pub fn mounts() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| parse_mountinfo(&text))
        .unwrap_or_default()
}

/// Active swap areas (devices or files); empty if unreadable.
pub fn swaps() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/swaps")
        .map(|text| parse_swaps(&text))
        .unwrap_or_default()
}

/// mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let number = DeviceNumber::parse(fields.get(2)?)?;
            let root = PathBuf::from(unescape(fields.get(3)?));
            let mount_point = PathBuf::from(unescape(fields.get(4)?));
            let dash = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(dash + 1)?.to_string();
            let source = unescape(fields.get(dash + 2)?);
            let super_options = fields.get(dash + 3).map_or("", |o| o).to_owned();
            Some(Mount {
                number,
                root,
                mount_point,
                source,
                fstype,
                super_options,
            })
        })
        .collect()
}

/// /proc/swaps: a header, then "FILENAME TYPE SIZE USED PRIORITY".
pub fn parse_swaps(text: &str) -> Vec<PathBuf> {
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(|name| PathBuf::from(unescape(name)))
        .collect()
}

/// The kernel writes space, tab, newline and backslash in paths as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let text = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
43 27 7:0 / /tmp/a\\040b rw,relatime shared:1 master:2 - ext4 /dev/loop0 rw
";
        let mounts = parse_mountinfo(text);
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[1].number, DeviceNumber { major: 7, minor: 0 });
        assert_eq!(mounts[1].mount_point, PathBuf::from("/tmp/a b"));
        assert_eq!(mounts[1].source, "/dev/loop0");
        assert_eq!(mounts[1].fstype, "ext4");
        assert_eq!(mounts[0].fstype, "proc");
        assert_eq!(mounts[1].root, PathBuf::from("/"));
        assert_eq!(mounts[1].super_options, "rw");
    }

    #[test]
    fn swaps_lines() {
        let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                    /dev/sda2 partition 8388604 0 -2\n\
                    /swap\\040file file 1024 0 -3\n";
        assert_eq!(
            parse_swaps(text),
            vec![PathBuf::from("/dev/sda2"), PathBuf::from("/swap file")]
        );
    }
}
