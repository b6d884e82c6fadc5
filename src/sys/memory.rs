//! The memory this process may fill with page cache, as the kernel tells
//! it: `MemAvailable` (free memory plus what reclaim can take back
//! without swapping), the limit and usage of each memory cgroup on the way
//! from ddx's own up to the root (cgroup v2 `memory.max`, `memory.high`
//! and `memory.current`; v1 `memory.limit_in_bytes` and
//! `memory.usage_in_bytes`), and memory pressure (PSI: the share of the
//! last ten seconds in which some task waited for memory, the system's in
//! `/proc/pressure/memory` and each limited v2 cgroup's `memory.pressure`).
//!
//! It only reads and reports; the cache policy that weighs these figures
//! is the planner's (`planner::cache`). Parsing is apart from reading, so
//! that every format is tested on sample texts. By hand rather than with
//! the `procfs` crate: that crate reads /proc but not the cgroup
//! filesystem, and each format here is a few lines of `key value` text.

use std::path::{Path, PathBuf};

use crate::sys::mounts::{self, Mount};

/// What the kernel says about memory, each figure absent where it does
/// not say (no /proc, no cgroup hierarchy mounted, no PSI).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// `MemAvailable` of /proc/meminfo, in bytes.
    pub available: Option<u64>,
    /// `MemTotal`, in bytes.
    pub total: Option<u64>,
    /// Every memory cgroup from ddx's own up that has a limit.
    pub cgroups: Vec<CgroupLimit>,
    /// The system's memory pressure, and that of each limited cgroup
    /// (cgroup v2 only: v1 has no PSI file).
    pub pressure: Vec<Pressure>,
}

/// Which cgroup interface a limit was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// One memory cgroup with a limit, and how much of it is in use (page
/// cache included: the kernel charges a cgroup the pages its tasks read
/// and write, and reclaims within the cgroup when it reaches the limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLimit {
    /// The cgroup, as /proc/self/cgroup names it ("/user.slice/x").
    pub path: String,
    pub version: CgroupVersion,
    /// Bytes: v2's lower of `memory.max` and `memory.high`, v1's
    /// `memory.limit_in_bytes`.
    pub limit: u64,
    /// Bytes in use: `memory.current`, `memory.usage_in_bytes`.
    pub usage: u64,
}

/// The share of the last ten seconds in which at least one task waited
/// for memory (PSI "some avg10").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pressure {
    /// "system", or the cgroup's path.
    pub source: String,
    /// In hundredths of a percent (avg10=12.34 is 1234), so that facts
    /// compare exactly.
    pub some_avg10: u32,
}

/// Read everything; what cannot be read is left out.
pub fn read() -> Memory {
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    let (available, total) = read(Path::new("/proc/meminfo"))
        .map(|text| parse_meminfo(&text))
        .unwrap_or_default();
    let mut memory = Memory {
        available,
        total,
        ..Memory::default()
    };
    if let Some(some_avg10) = read(Path::new("/proc/pressure/memory"))
        .as_deref()
        .and_then(parse_pressure)
    {
        memory.pressure.push(Pressure {
            source: "system".into(),
            some_avg10,
        });
    }
    let (Some(membership), Some(mountinfo)) = (
        read(Path::new("/proc/self/cgroup")),
        read(Path::new("/proc/self/mountinfo")),
    ) else {
        return memory;
    };
    let mounts = mounts::parse_mountinfo(&mountinfo);
    for (version, path) in parse_membership(&membership) {
        let Some(mount) = hierarchy(&mounts, version) else {
            continue;
        };
        for (cgroup, dir) in levels(mount, &path) {
            let (limit, usage) = match version {
                CgroupVersion::V2 => {
                    let max = read(&dir.join("memory.max")).and_then(|t| parse_limit(&t));
                    let high = read(&dir.join("memory.high")).and_then(|t| parse_limit(&t));
                    let limit = match (max, high) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    (limit, read(&dir.join("memory.current")))
                }
                CgroupVersion::V1 => (
                    read(&dir.join("memory.limit_in_bytes")).and_then(|t| parse_limit(&t)),
                    read(&dir.join("memory.usage_in_bytes")),
                ),
            };
            let (Some(limit), Some(usage)) = (limit, usage.and_then(|t| t.trim().parse().ok()))
            else {
                continue;
            };
            if let Some(some_avg10) = read(&dir.join("memory.pressure"))
                .as_deref()
                .and_then(parse_pressure)
            {
                memory.pressure.push(Pressure {
                    source: cgroup.clone(),
                    some_avg10,
                });
            }
            memory.cgroups.push(CgroupLimit {
                path: cgroup,
                version,
                limit,
                usage,
            });
        }
    }
    memory
}

/// The mount of the v2 hierarchy, or of v1's memory controller.
fn hierarchy(mounts: &[Mount], version: CgroupVersion) -> Option<&Mount> {
    mounts.iter().find(|m| match version {
        CgroupVersion::V2 => m.fstype == "cgroup2",
        CgroupVersion::V1 => {
            m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "memory")
        }
    })
}

/// The cgroup `path` and each of its ancestors below the hierarchy's
/// root, as (name, directory under the mount): the root itself has no
/// limit to read. Empty where the path is outside what is mounted.
fn levels(mount: &Mount, path: &str) -> Vec<(String, PathBuf)> {
    let root = mount.root.to_string_lossy();
    let root = root.trim_end_matches('/');
    let Some(below) = path.strip_prefix(root) else {
        return Vec::new();
    };
    let mut levels = Vec::new();
    let mut below = below.trim_matches('/');
    while !below.is_empty() {
        levels.push((format!("{root}/{below}"), mount.mount_point.join(below)));
        below = below.rsplit_once('/').map_or("", |(parent, _)| parent);
    }
    levels
}

/// /proc/meminfo: (MemAvailable, MemTotal) in bytes.
pub fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let mut words = rest.split_whitespace();
            let value: u64 = words.next()?.parse().ok()?;
            match words.next() {
                Some("kB") => value.checked_mul(1024),
                None => Some(value),
                Some(_) => None,
            }
        })
    };
    (field("MemAvailable"), field("MemTotal"))
}

/// /proc/self/cgroup ("HIERARCHY:CONTROLLERS:PATH" per line): the v2
/// cgroup ("0::PATH") and the v1 memory controller's, where present.
pub fn parse_membership(text: &str) -> Vec<(CgroupVersion, String)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (hierarchy, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            if hierarchy == "0" && controllers.is_empty() {
                Some((CgroupVersion::V2, path.to_owned()))
            } else if controllers.split(',').any(|c| c == "memory") {
                Some((CgroupVersion::V1, path.to_owned()))
            } else {
                None
            }
        })
        .collect()
}

/// A limit file: bytes, or None for no limit (v2's "max"; v1 says
/// "no limit" with a number near 2^63).
pub fn parse_limit(text: &str) -> Option<u64> {
    const NO_LIMIT: u64 = 1 << 62;
    text.trim().parse().ok().filter(|&bytes| bytes < NO_LIMIT)
}

/// PSI ("some avg10=1.23 avg60=... total=..." then a "full" line): the
/// "some" line's avg10, in hundredths of a percent.
pub fn parse_pressure(text: &str) -> Option<u32> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("avg10="))?;
    let (whole, fraction) = value.split_once('.').unwrap_or((value, "0"));
    let fraction = format!("{fraction:0<2}");
    let whole: u32 = whole.parse().ok()?;
    let hundredths: u32 = fraction.get(..2)?.parse().ok()?;
    whole.checked_mul(100)?.checked_add(hundredths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_bytes() {
        let text = "MemTotal:       24683776 kB\nMemFree:        13414852 kB\n\
                    MemAvailable:   17115136 kB\nBuffers:          123 kB\n";
        assert_eq!(
            parse_meminfo(text),
            (Some(17_115_136 * 1024), Some(24_683_776 * 1024))
        );
        // A kernel too old for MemAvailable (before 3.14).
        assert_eq!(
            parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n"),
            (None, Some(1_024_000))
        );
        assert_eq!(parse_meminfo(""), (None, None));
    }

    #[test]
    fn membership_names_v2_and_v1_memory() {
        let hybrid = "12:pids:/\n4:memory:/process_api/b2c2\n1:cpu,cpuacct:/\n0::/\n";
        assert_eq!(
            parse_membership(hybrid),
            vec![
                (CgroupVersion::V1, "/process_api/b2c2".to_owned()),
                (CgroupVersion::V2, "/".to_owned())
            ]
        );
        let unified = "0::/user.slice/user-1000.slice/session-2.scope\n";
        assert_eq!(
            parse_membership(unified),
            vec![(
                CgroupVersion::V2,
                "/user.slice/user-1000.slice/session-2.scope".to_owned()
            )]
        );
        // A named v1 hierarchy is neither.
        assert!(parse_membership("9:name=systemd:/\n").is_empty());
    }

    #[test]
    fn limits_without_a_limit_are_none() {
        assert_eq!(parse_limit("1610612736\n"), Some(1_610_612_736));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None, "v1's none");
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn pressure_is_some_avg10_in_hundredths() {
        let text = "some avg10=12.34 avg60=0.50 avg300=0.10 total=123456\n\
                    full avg10=3.00 avg60=0.00 avg300=0.00 total=100\n";
        assert_eq!(parse_pressure(text), Some(1234));
        assert_eq!(
            parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
            Some(0)
        );
        assert_eq!(
            parse_pressure("some avg10=100.00 avg60=0 total=0"),
            Some(10000)
        );
        assert_eq!(parse_pressure("some avg10=7.5 total=0"), Some(750));
        assert_eq!(parse_pressure("full avg10=1.00\n"), None);
    }

    fn mount(root: &str, point: &str) -> Mount {
        Mount {
            number: crate::sys::block::DeviceNumber {
                major: 0,
                minor: 30,
            },
            root: root.into(),
            mount_point: point.into(),
            source: "cgroup2".into(),
            fstype: "cgroup2".into(),
            super_options: "rw".into(),
        }
    }

    #[test]
    fn levels_climb_to_below_the_mounted_root() {
        let whole = mount("/", "/sys/fs/cgroup");
        assert_eq!(
            levels(&whole, "/a/b"),
            vec![
                ("/a/b".to_owned(), PathBuf::from("/sys/fs/cgroup/a/b")),
                ("/a".to_owned(), PathBuf::from("/sys/fs/cgroup/a")),
            ]
        );
        assert!(levels(&whole, "/").is_empty(), "the root has no limit");
        // A container's view: the hierarchy mounted from /docker/x.
        let part = mount("/docker/x", "/sys/fs/cgroup");
        assert_eq!(
            levels(&part, "/docker/x/app"),
            vec![(
                "/docker/x/app".to_owned(),
                PathBuf::from("/sys/fs/cgroup/app")
            )]
        );
        assert!(levels(&part, "/elsewhere").is_empty());
    }

    #[test]
    fn hierarchies_are_found_by_type_and_controller() {
        let text = "\
30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
33 25 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
34 25 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let mounts = mounts::parse_mountinfo(text);
        assert_eq!(
            hierarchy(&mounts, CgroupVersion::V2).map(|m| m.mount_point.clone()),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            hierarchy(&mounts, CgroupVersion::V1).map(|m| m.mount_point.clone()),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
    }
}
