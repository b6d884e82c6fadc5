//! What a map says about the copy it records, beyond ddrescue's blocks:
//! which input it read and which output it wrote, so that `--resume`
//! continues that copy and no other.
//!
//! A map's finished ranges are only true of the input they were read
//! from and the output they were written to. A resumed copy that reads
//! another input (another file of the same size, a file rewritten in
//! place, another export) silently joins two inputs' bytes in one
//! output; one that writes another output leaves that output with holes.
//! So the map carries two comment lines (ddrescue and ddrescuelog skip
//! comments), written with every save:
//!
//! ```text
//! # Input: size=16777216 file=8:1:1311 modified=1700000000.500000000 name=disk.img
//! # Output: file=8:1:1312 modified=1700000000.600000000 name=rescued.img
//! ```
//!
//! and a resumed copy is held to them ([`Recorded::input_differs`]) before it
//! writes a byte: the input's size, and what identifies it (a file's
//! device, inode and modification time; a block device's number and the
//! disk behind it: its WWID or serial, or a loop device's backing file; a
//! remote end's URI). A map without these lines (ddrescue's, or an older
//! ddx's) is held to what its command line names, where it names it.

use std::fmt;
use std::path::Path;

use crate::text::quote::quote_file;

/// What identifies one end of a copy, as far as ddx can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A regular file: its file system's device number, its inode, and
    /// when its bytes last changed (seconds and nanoseconds).
    File {
        device: u64,
        inode: u64,
        modified: (i64, u32),
    },
    /// A block or character device: its number ("8:16"), and the disk
    /// behind it where one is known (a WWID or serial, or a loop device's
    /// backing file by device and inode).
    Device {
        number: String,
        disk: Option<String>,
    },
    /// An end named by a URI: the URI as it may be shown.
    Uri(String),
    /// Nothing identifies it (a pipe, standard input).
    Unknown,
}

/// What a map records of its copy's input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRecord {
    /// The end's size in bytes, where it has one (inputs only).
    pub size: Option<u64>,
    pub identity: Identity,
    /// The operand as given (a URI without its secrets), for messages.
    pub name: String,
}

/// The comment line's tags.
const INPUT: &str = "# Input:";
const OUTPUT: &str = "# Output:";

impl EndRecord {
    /// The record of the end `name` opened as `fd` (None: a URI or
    /// another end without a descriptor), `size` bytes long.
    pub fn of(
        name: &Path,
        fd: Option<std::os::fd::BorrowedFd<'_>>,
        size: Option<u64>,
    ) -> EndRecord {
        let shown = String::from_utf8_lossy(&crate::ends::uri::shown(name)).into_owned();
        let identity = match fd {
            Some(fd) => identity_of(fd),
            None if crate::ends::uri::recognise(name).is_some() => Identity::Uri(shown.clone()),
            None => Identity::Unknown,
        };
        // A block device's size is sysfs's (its descriptor's size is no
        // data size, and seeking it would move a stream copy's input).
        let size = size.or_else(|| {
            let st = rustix::fs::fstat(fd?).ok()?;
            (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::BlockDevice)
                .then(|| {
                    crate::sys::block::Node::of(crate::sys::block::DeviceNumber::from_raw(
                        st.st_rdev,
                    ))
                })??
                .size_bytes()
        });
        EndRecord {
            size,
            identity,
            name: shown,
        }
    }

    /// The record of what stands at `path` now (an output before it is
    /// opened), or None when nothing does.
    pub fn at(path: &Path) -> Option<EndRecord> {
        if crate::ends::uri::recognise(path).is_some() {
            return Some(EndRecord::of(path, None, None));
        }
        let file = std::fs::File::open(path)
            .ok()
            .or_else(|| std::fs::OpenOptions::new().write(true).open(path).ok());
        match file {
            Some(file) => {
                use std::os::fd::AsFd;
                Some(EndRecord::of(path, Some(file.as_fd()), None))
            }
            // Not readable by us, but there: identified by stat alone.
            None => rustix::fs::stat(path).ok().map(|st| EndRecord {
                size: None,
                identity: identity_of_stat(&st),
                name: path.to_string_lossy().into_owned(),
            }),
        }
    }

    fn render(&self, tag: &str) -> String {
        let mut line = tag.to_owned();
        if let Some(size) = self.size {
            line.push_str(&format!(" size={size}"));
        }
        match &self.identity {
            Identity::File {
                device,
                inode,
                modified: (seconds, nanos),
            } => line.push_str(&format!(
                " file={}:{inode} modified={seconds}.{nanos:09}",
                device_text(*device)
            )),
            Identity::Device { number, disk } => {
                line.push_str(&format!(" device={number}"));
                if let Some(disk) = disk {
                    line.push_str(&format!(" disk={}", one_word(disk)));
                }
            }
            Identity::Uri(uri) => line.push_str(&format!(" uri={}", one_word(uri))),
            Identity::Unknown => {}
        }
        // The name last: it may hold spaces, never a line break.
        line.push_str(&format!(" name={}", self.name.replace(['\n', '\r'], "?")));
        line.push('\n');
        line
    }

    fn parse(rest: &str) -> Option<EndRecord> {
        let (fields, name) = match rest.split_once(" name=") {
            Some((fields, name)) => (fields, name.to_owned()),
            None => (rest, String::new()),
        };
        let mut size = None;
        let mut file = None;
        let mut modified = None;
        let mut number = None;
        let mut disk = None;
        let mut uri = None;
        // A field that does not read is left out: what the others say
        // still holds.
        for field in fields.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "size" => size = value.parse().ok(),
                "file" => {
                    file = value.rsplit_once(':').and_then(|(device, inode)| {
                        Some((parse_device(device)?, inode.parse().ok()?))
                    });
                }
                "modified" => {
                    let (seconds, nanos) = value.split_once('.').unwrap_or((value, "0"));
                    modified = seconds.parse().ok().zip(nanos.parse().ok());
                }
                "device" => number = Some(value.to_owned()),
                "disk" => disk = Some(value.to_owned()),
                "uri" => uri = Some(value.to_owned()),
                // A field a later ddx added: not held to.
                _ => {}
            }
        }
        let identity = match (file, number, uri) {
            (Some((device, inode)), _, _) => Identity::File {
                device,
                inode,
                modified: modified.unwrap_or((0, 0)),
            },
            (None, Some(number), _) => Identity::Device { number, disk },
            (None, None, Some(uri)) => Identity::Uri(uri),
            (None, None, None) => Identity::Unknown,
        };
        Some(EndRecord {
            size,
            identity,
            name,
        })
    }
}

/// A device number as "major:minor".
fn device_text(device: u64) -> String {
    format!(
        "{}:{}",
        rustix::fs::major(device),
        rustix::fs::minor(device)
    )
}

fn parse_device(text: &str) -> Option<u64> {
    let (major, minor) = text.split_once(':')?;
    Some(rustix::fs::makedev(
        major.parse().ok()?,
        minor.parse().ok()?,
    ))
}

/// A value as one word of the line (spaces would end it).
fn one_word(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// What identifies the file or device open as `fd`.
fn identity_of(fd: std::os::fd::BorrowedFd<'_>) -> Identity {
    match rustix::fs::fstat(fd) {
        Ok(st) => identity_of_stat(&st),
        Err(_) => Identity::Unknown,
    }
}

fn identity_of_stat(st: &rustix::fs::Stat) -> Identity {
    use rustix::fs::FileType;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Identity::File {
            device: st.st_dev,
            inode: st.st_ino,
            modified: (st.st_mtime, st.st_mtime_nsec as u32),
        },
        FileType::BlockDevice => Identity::Device {
            number: device_text(st.st_rdev),
            disk: crate::sys::block::identity(crate::sys::block::DeviceNumber::from_raw(
                st.st_rdev,
            )),
        },
        FileType::CharacterDevice => Identity::Device {
            number: device_text(st.st_rdev),
            disk: None,
        },
        _ => Identity::Unknown,
    }
}

/// What a map records of its copy: the comment lines above, where it has
/// them, and its command line's `if=` and `of=` otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    pub input: Option<EndRecord>,
    pub output: Option<EndRecord>,
}

impl Recorded {
    /// The lines to keep in a map for a copy from `input` to `output`.
    pub fn notes(input: &EndRecord, output: Option<&EndRecord>) -> String {
        let mut notes = input.render(INPUT);
        if let Some(output) = output {
            let output = EndRecord {
                size: None,
                ..output.clone()
            };
            notes.push_str(&output.render(OUTPUT));
        }
        notes
    }

    /// What the map's text records.
    pub fn read(text: &str) -> Recorded {
        let mut recorded = Recorded::default();
        let mut command_line = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix(INPUT) {
                recorded.input = EndRecord::parse(rest);
            } else if let Some(rest) = line.strip_prefix(OUTPUT) {
                recorded.output = EndRecord::parse(rest);
            } else if let Some(rest) = line.strip_prefix("# Command line:") {
                command_line = Some(rest.trim().to_owned());
            }
        }
        // An older map: what its command line names, by name only.
        if let Some(words) = command_line {
            let named = |key: &str| {
                words
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(|name| EndRecord {
                        size: None,
                        identity: Identity::Unknown,
                        name: name.to_owned(),
                    })
            };
            if recorded.output.is_none() {
                recorded.output = named("of=");
            }
        }
        recorded
    }

    /// How the input a resumed copy reads (`now`) differs from the one
    /// the map records, in one clause naming both; None when nothing
    /// recorded differs.
    pub fn input_differs(&self, now: &EndRecord) -> Option<String> {
        let was = self.input.as_ref()?;
        let named = |record: &EndRecord| quote_file(record.name.as_bytes());
        if let (Some(was_size), Some(now_size)) = (was.size, now.size) {
            if was_size != now_size {
                return Some(format!(
                    "the input {} is {now_size} bytes, and the input the map's copy read \
                     ({}) was {was_size} bytes",
                    named(now),
                    named(was)
                ));
            }
        }
        let what = match (&was.identity, &now.identity) {
            (Identity::Unknown, _) | (_, Identity::Unknown) => return None,
            (
                Identity::File {
                    device,
                    inode,
                    modified,
                },
                Identity::File {
                    device: now_device,
                    inode: now_inode,
                    modified: now_modified,
                },
            ) => {
                if (device, inode) != (now_device, now_inode) {
                    format!(
                        "another file (device {}, inode {now_inode}; the map's was device \
                         {}, inode {inode})",
                        device_text(*now_device),
                        device_text(*device)
                    )
                } else if modified != now_modified {
                    format!(
                        "the same file, modified since the map was saved (at {}; the map \
                         records {})",
                        time_text(*now_modified),
                        time_text(*modified)
                    )
                } else {
                    return None;
                }
            }
            (
                Identity::Device { number, disk },
                Identity::Device {
                    number: now_number,
                    disk: now_disk,
                },
            ) => {
                // The disk behind a device, where both are known, is what
                // identifies it: the same disk plugged in again may get
                // another number.
                match (disk, now_disk) {
                    (Some(disk), Some(now_disk)) if disk != now_disk => {
                        format!("another disk ({now_disk}; the map's was {disk})")
                    }
                    (Some(_), Some(_)) => return None,
                    _ if number != now_number => {
                        format!("another device ({now_number}; the map's was {number})")
                    }
                    _ => return None,
                }
            }
            (Identity::Uri(uri), Identity::Uri(now_uri)) => {
                if uri == now_uri {
                    return None;
                }
                "another URI".to_owned()
            }
            (was_identity, now_identity) => format!(
                "{} (the map's was {})",
                kind_text(now_identity),
                kind_text(was_identity)
            ),
        };
        Some(format!(
            "the input {} is not the one the map's copy read ({}): {what}",
            named(now),
            named(was)
        ))
    }
}

/// What kind of end an identity is, for a message.
fn kind_text(identity: &Identity) -> &'static str {
    match identity {
        Identity::File { .. } => "a file",
        Identity::Device { .. } => "a device",
        Identity::Uri(_) => "a URI",
        Identity::Unknown => "a stream",
    }
}

/// A modification time as UTC, to the nanosecond.
fn time_text((seconds, nanos): (i64, u32)) -> String {
    let second = crate::text::time::utc(seconds);
    match second.strip_suffix(" UTC") {
        Some(to_second) => format!("{to_second}.{nanos:09} UTC"),
        None => second,
    }
}

impl fmt::Display for EndRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&quote_file(self.name.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(inode: u64, seconds: i64, size: u64) -> EndRecord {
        EndRecord {
            size: Some(size),
            identity: Identity::File {
                device: rustix::fs::makedev(8, 1),
                inode,
                modified: (seconds, 5),
            },
            name: format!("in {inode}.img"),
        }
    }

    #[test]
    fn records_round_trip_through_the_maps_comments() {
        let input = file(7, 1_700_000_000, 1 << 30);
        let output = EndRecord {
            size: Some(9),
            identity: Identity::Device {
                number: "7:3".into(),
                disk: Some("loop:8:1:42@0".into()),
            },
            name: "/dev/loop3".into(),
        };
        let notes = Recorded::notes(&input, Some(&output));
        assert_eq!(notes.lines().count(), 2, "{notes}");
        assert!(notes.lines().all(|l| l.starts_with("# ")), "{notes}");
        let read = Recorded::read(&format!("# Mapfile\n{notes}0 ? 1\n"));
        assert_eq!(read.input, Some(input));
        // An output's size is not recorded: it grows as the copy goes.
        assert_eq!(
            read.output,
            Some(EndRecord {
                size: None,
                ..output
            })
        );
        let uri = EndRecord {
            size: Some(512),
            identity: Identity::Uri("nbd://localhost:1/x".into()),
            name: "nbd://localhost:1/x".into(),
        };
        let read = Recorded::read(&Recorded::notes(&uri, None));
        assert_eq!(read.input, Some(uri));
    }

    #[test]
    fn a_map_without_records_names_the_output_of_its_command_line() {
        let read = Recorded::read("# Command line: ddx if=/dev/sdb of=rescued.img --rescue\n");
        assert_eq!(read.input, None);
        assert_eq!(read.output.map(|o| o.name), Some("rescued.img".to_owned()));
    }

    /// Every way an input can differ is named, and the same input is not.
    #[test]
    fn each_difference_of_the_input_is_named() {
        let was = file(7, 100, 4096);
        let recorded = Recorded {
            input: Some(was.clone()),
            output: None,
        };
        assert_eq!(recorded.input_differs(&was), None);
        let said = |now: &EndRecord| recorded.input_differs(now).unwrap_or_default();
        assert!(said(&file(7, 100, 8192)).contains("is 8192 bytes"));
        assert!(said(&file(7, 100, 8192)).contains("was 4096 bytes"));
        assert!(said(&file(8, 100, 4096)).contains("another file"));
        assert!(said(&file(7, 101, 4096)).contains("modified since"));
        let device = |disk: Option<&str>, number: &str| EndRecord {
            size: Some(4096),
            identity: Identity::Device {
                number: number.into(),
                disk: disk.map(str::to_owned),
            },
            name: "/dev/sdb".into(),
        };
        assert!(said(&device(None, "8:16")).contains("a device (the map's was a file)"));
        let recorded = Recorded {
            input: Some(device(Some("wwn-1"), "8:16")),
            output: None,
        };
        let said = |now: &EndRecord| recorded.input_differs(now).unwrap_or_default();
        assert!(said(&device(Some("wwn-2"), "8:16")).contains("another disk (wwn-2"));
        // The same disk under another number (plugged in again) is the same.
        assert_eq!(recorded.input_differs(&device(Some("wwn-1"), "8:32")), None);
        let recorded = Recorded {
            input: Some(device(None, "7:0")),
            output: None,
        };
        assert!(recorded
            .input_differs(&device(None, "7:1"))
            .unwrap()
            .contains("another device (7:1"));
        let uri = |text: &str| EndRecord {
            size: Some(4096),
            identity: Identity::Uri(text.into()),
            name: text.into(),
        };
        let recorded = Recorded {
            input: Some(uri("nbd://a/x")),
            output: None,
        };
        assert!(recorded
            .input_differs(&uri("nbd://b/x"))
            .unwrap()
            .contains("another URI"));
        assert_eq!(recorded.input_differs(&uri("nbd://a/x")), None);
        // Nothing recorded: nothing to hold to.
        assert_eq!(Recorded::default().input_differs(&uri("x")), None);
    }
}
