//! What a whole disk holds, read from the disk itself, so that the notice
//! before overwriting it names what will be destroyed: a file system made
//! directly on the device (which has no partitions), or a partition table
//! the kernel has not scanned (whose partitions sysfs does not list).
//!
//! The probing is libblkid's, through its own front-ends rather than a
//! binding: `blkid -p` (the device's superblock or partition-table
//! signature, read from the device, not from a cache), `partx` (the
//! table's entries, read by libblkid, whatever the kernel knows) and, for
//! the ext file systems, `dumpe2fs -h` (block counts, for the space used).
//! The Rust binding (libblkid-rs) generates its bindings with bindgen at
//! build time, which would make libclang a build dependency of ddx for
//! one notice; the tools are util-linux's and e2fsprogs', on every Debian
//! system. The probe only reads, and only runs when a person is about to
//! be asked; what it finds is [`Contents`], and [`describe`] turns that
//! into words without looking at anything.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::text::human::{human, Base};
use crate::text::quote::quote;

/// What the start of a device (or of one of its partitions) holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// The signatures could not be read (why, in a few words).
    Unknown(String),
    /// No signature libblkid knows.
    Nothing,
    /// Signatures of several kinds at once (blkid's "ambivalent result").
    Several,
    /// A file system, or another superblock (swap, RAID or LVM member,
    /// encrypted volume).
    Volume(Volume),
    /// A partition table and its entries.
    Table(Table),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// blkid's TYPE: "ext4", "vfat", "swap", "LVM2_member"...
    pub kind: String,
    /// blkid's USAGE: "filesystem", "raid", "crypto", "other".
    pub usage: String,
    pub label: Option<String>,
    /// Bytes in use, where the file system says (ext2/3/4).
    pub used: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// blkid's PTTYPE: "gpt", "dos"...
    pub kind: String,
    pub partitions: Vec<Entry>,
}

/// One entry of a partition table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub number: u32,
    /// Bytes from the start of the disk.
    pub start: u64,
    pub size: u64,
    /// What the partition holds (never a table: not looked for inside).
    pub contents: Contents,
}

/// Read what `device` holds. Never fails: what cannot be read is
/// `Contents::Unknown`, with the reason.
pub fn probe(device: &Path) -> Contents {
    let top = match probe_at(device, None) {
        Ok(contents) => contents,
        Err(why) => return Contents::Unknown(why),
    };
    let Contents::Table(table) = top else {
        return top;
    };
    let entries = match run(
        "partx",
        &[
            "--pairs".as_ref(),
            "-o".as_ref(),
            "NR,START,SECTORS".as_ref(),
            device.as_os_str(),
        ],
    ) {
        Ok(text) => parse_partx(&text),
        Err(_) => Vec::new(),
    };
    let partitions = entries
        .into_iter()
        .map(|(number, start, size)| Entry {
            number,
            start,
            size,
            contents: probe_at(device, Some((start, size))).unwrap_or_else(Contents::Unknown),
        })
        .collect();
    Contents::Table(Table {
        kind: table.kind,
        partitions,
    })
}

/// The signature at the device's start, or in `[start, start + size)`.
fn probe_at(device: &Path, part: Option<(u64, u64)>) -> Result<Contents, String> {
    let mut args: Vec<std::ffi::OsString> = vec!["-p".into(), "-o".into(), "export".into()];
    if let Some((start, size)) = part {
        args.extend([
            "-O".into(),
            start.to_string().into(),
            "-S".into(),
            size.to_string().into(),
        ]);
    }
    args.push(device.into());
    let out = command("blkid", &args)
        .output()
        .map_err(|e| format!("blkid: {e}"))?;
    // blkid -p: 0 found, 2 nothing found, 8 ambivalent (several kinds).
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Ok(Contents::Nothing),
        Some(8) => return Ok(Contents::Several),
        _ => {
            return Err(format!(
                "blkid: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
    let fields = parse_export(&String::from_utf8_lossy(&out.stdout));
    Ok(classify(&fields, || {
        let mut name = device.as_os_str().to_owned();
        if let Some((start, _)) = part {
            // e2fsprogs' own syntax for a file system at an offset.
            name.push(format!("?offset={start}"));
        }
        run("dumpe2fs", &["-h".as_ref(), name.as_os_str()])
            .ok()
            .and_then(|text| ext_used(&text))
    }))
}

/// What blkid's `fields` say is there; `ext_used` gives the bytes an ext
/// file system has in use (asked only for one).
fn classify(fields: &HashMap<String, String>, ext_used: impl FnOnce() -> Option<u64>) -> Contents {
    if let Some(kind) = fields
        .get("PTTYPE")
        .filter(|_| !fields.contains_key("TYPE"))
    {
        return Contents::Table(Table {
            kind: kind.clone(),
            partitions: Vec::new(),
        });
    }
    let Some(kind) = fields.get("TYPE") else {
        return Contents::Nothing;
    };
    let used = if kind.starts_with("ext") {
        ext_used()
    } else {
        None
    };
    Contents::Volume(Volume {
        kind: kind.clone(),
        usage: fields.get("USAGE").cloned().unwrap_or_default(),
        label: fields.get("LABEL").cloned().filter(|l| !l.is_empty()),
        used,
    })
}

/// What [`probe`] makes of the tools' outputs, given instead of run:
/// `export` is blkid's for the device and for each partition, `pairs`
/// partx's, `dumpe2fs` the header of every ext file system. (The fuzzing
/// target of these parsers: a device's labels and partition table are
/// whatever it holds.)
pub(crate) fn from_tools(export: &str, pairs: &str, dumpe2fs: &str) -> Contents {
    let fields = parse_export(export);
    let top = classify(&fields, || ext_used(dumpe2fs));
    let Contents::Table(table) = top else {
        return top;
    };
    let partitions = parse_partx(pairs)
        .into_iter()
        .map(|(number, start, size)| Entry {
            number,
            start,
            size,
            contents: classify(&fields, || ext_used(dumpe2fs)),
        })
        .collect();
    Contents::Table(Table {
        kind: table.kind,
        partitions,
    })
}

fn command(program: &str, args: &[impl AsRef<std::ffi::OsStr>]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    cmd
}

/// A tool's standard output, if it ran and succeeded.
fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let out = command(program, args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `blkid -o export`: KEY=value lines, the value shell-escaped with
/// backslashes.
fn parse_export(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| {
            let mut plain = String::new();
            let mut chars = value.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => plain.extend(chars.next()),
                    c => plain.push(c),
                }
            }
            (key.to_owned(), plain)
        })
        .collect()
}

/// `partx --pairs -o NR,START,SECTORS`: (number, start, size) in bytes
/// (libblkid counts partitions in 512-byte sectors whatever the device's).
fn parse_partx(text: &str) -> Vec<(u32, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut number = None;
            let mut start = None;
            let mut sectors = None;
            for pair in line.split_whitespace() {
                let (key, value) = pair.split_once('=')?;
                let value = value.trim_matches('"');
                match key {
                    "NR" => number = value.parse().ok(),
                    "START" => start = value.parse::<u64>().ok(),
                    "SECTORS" => sectors = value.parse::<u64>().ok(),
                    _ => {}
                }
            }
            // A table can say anything; a partition whose bytes do not
            // fit a u64 is on no device.
            Some((
                number?,
                start?.checked_mul(512)?,
                sectors?.checked_mul(512)?,
            ))
        })
        .collect()
}

/// Bytes in use from `dumpe2fs -h`: (block count - free blocks) * block size.
fn ext_used(text: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
    };
    let blocks = field("Block count")?;
    let free = field("Free blocks")?;
    let size = field("Block size")?;
    blocks.checked_sub(free)?.checked_mul(size)
}

fn size(bytes: u64) -> String {
    human(bytes, Base::Iec, 1, 1)
}

/// What a volume is, in words: "a file system (ext4, labelled 'root',
/// 2.1 GiB used)".
fn volume_text(volume: &Volume) -> String {
    let what = match volume.usage.as_str() {
        "filesystem" => "a file system",
        "raid" => "a RAID or LVM member",
        "crypto" => "an encrypted volume",
        _ => "a signature",
    };
    let mut text = format!("{what} ({}", volume.kind);
    if let Some(label) = &volume.label {
        text.push_str(&format!(", labelled {}", quote(label.as_bytes())));
    }
    match volume.used {
        Some(used) => text.push_str(&format!(", {} used)", size(used))),
        None => text.push_str(", size used unknown)"),
    }
    text
}

/// What `contents` are, in words, after "which holds" / "holding".
pub fn describe(contents: &Contents) -> String {
    match contents {
        Contents::Unknown(why) => format!("contents unknown ({why})"),
        Contents::Nothing => "no file system or partition table that blkid knows".into(),
        Contents::Several => {
            "signatures of several kinds (see wipefs --no-act for the list)".into()
        }
        Contents::Volume(volume) => volume_text(volume),
        Contents::Table(table) => {
            let kind = match table.kind.as_str() {
                "gpt" => "GPT".to_owned(),
                "dos" => "DOS (MBR)".to_owned(),
                other => other.to_owned(),
            };
            let count = table.partitions.len();
            let mut text = format!(
                "a {kind} partition table with {count} partition{}",
                if count == 1 { "" } else { "s" }
            );
            let entries: Vec<String> = table
                .partitions
                .iter()
                .map(|entry| {
                    let inside = match &entry.contents {
                        Contents::Volume(volume) => volume_text(volume),
                        Contents::Nothing => "no file system".into(),
                        // A DOS extended partition: its logical ones
                        // (5, 6...) are entries of their own.
                        Contents::Table(_) => "extended, holding the logical partitions".into(),
                        other => describe(other),
                    };
                    format!("{} ({}): {inside}", entry.number, size(entry.size))
                })
                .collect();
            if !entries.is_empty() {
                text.push_str(": ");
                text.push_str(&entries.join("; "));
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext4(label: Option<&str>, used: Option<u64>) -> Contents {
        Contents::Volume(Volume {
            kind: "ext4".into(),
            usage: "filesystem".into(),
            label: label.map(Into::into),
            used,
        })
    }

    #[test]
    fn what_a_disk_holds_in_words() {
        let table = [
            (
                ext4(Some("my disk"), Some(9 << 20)),
                "a file system (ext4, labelled 'my disk', 9.0 MiB used)",
            ),
            (
                Contents::Volume(Volume {
                    kind: "xfs".into(),
                    usage: "filesystem".into(),
                    label: None,
                    used: None,
                }),
                "a file system (xfs, size used unknown)",
            ),
            (
                Contents::Volume(Volume {
                    kind: "swap".into(),
                    usage: "other".into(),
                    label: None,
                    used: None,
                }),
                "a signature (swap, size used unknown)",
            ),
            (
                Contents::Table(Table {
                    kind: "gpt".into(),
                    partitions: vec![
                        Entry {
                            number: 1,
                            start: 1 << 20,
                            size: 16 << 20,
                            contents: Contents::Nothing,
                        },
                        Entry {
                            number: 2,
                            start: 17 << 20,
                            size: 46 << 20,
                            contents: ext4(None, Some(3 << 20)),
                        },
                    ],
                }),
                "a GPT partition table with 2 partitions: 1 (16 MiB): no file system; \
                 2 (46 MiB): a file system (ext4, 3.0 MiB used)",
            ),
            (
                Contents::Table(Table {
                    kind: "dos".into(),
                    partitions: vec![],
                }),
                "a DOS (MBR) partition table with 0 partitions",
            ),
            (
                Contents::Table(Table {
                    kind: "dos".into(),
                    partitions: vec![
                        Entry {
                            number: 2,
                            start: 1 << 20,
                            size: 8 << 20,
                            contents: Contents::Table(Table {
                                kind: "dos".into(),
                                partitions: vec![],
                            }),
                        },
                        Entry {
                            number: 5,
                            start: 2 << 20,
                            size: 4 << 20,
                            contents: Contents::Several,
                        },
                    ],
                }),
                "a DOS (MBR) partition table with 2 partitions: 2 (8.0 MiB): extended, \
                 holding the logical partitions; 5 (4.0 MiB): signatures of several kinds \
                 (see wipefs --no-act for the list)",
            ),
            (
                Contents::Nothing,
                "no file system or partition table that blkid knows",
            ),
        ];
        for (contents, words) in table {
            assert_eq!(describe(&contents), words);
        }
    }

    #[test]
    fn tool_output_is_read() {
        let fields = parse_export("DEVNAME=/dev/loop0\nLABEL=my\\ disk\nTYPE=ext4\n");
        assert_eq!(fields["LABEL"], "my disk");
        assert_eq!(fields["TYPE"], "ext4");
        assert_eq!(
            parse_partx(
                "NR=\"1\" START=\"2048\" SECTORS=\"32768\"\n\
                 NR=\"2\" START=\"34816\" SECTORS=\"94208\"\n"
            ),
            vec![(1, 2048 * 512, 32768 * 512), (2, 34816 * 512, 94208 * 512)]
        );
        assert_eq!(
            ext_used("Block count:              65536\nFree blocks:              56023\nBlock size:               1024\n"),
            Some((65536 - 56023) * 1024)
        );
        assert_eq!(ext_used("Block count: 10\n"), None);
        // A GPT entry's 64-bit sector numbers, past what bytes can count.
        assert_eq!(
            parse_partx("NR=\"1\" START=\"36028797018963968\" SECTORS=\"8\"\n"),
            vec![]
        );
    }
}
