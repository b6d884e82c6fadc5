//! What a disk's file systems use (`--used-only`): its partition table,
//! and within each partition the file system's own allocation map, as a
//! set of byte ranges. Everything else is what a backup may leave out.
//!
//! The rule is to leave out only what a file system says, in its own
//! structures and checksums, that it does not use: every byte outside
//! the partitions (the MBR and its extended boot records, both GPT
//! headers and tables, gaps), every byte of a partition whose file
//! system is not recognised (LUKS, LVM, btrfs, anything), every byte of a
//! file system past its own end, and all of a file system's metadata
//! (superblocks and their backups, group descriptors, bitmaps, inode
//! tables, FATs, root directories, XFS's allocation group headers and
//! log, NTFS's boot sectors, `$MFT`, `$MFTMirr`, `$LogFile` and
//! `$Bitmap`) are used. Where a structure is out of
//! its bounds, fails its checksum, or names a feature this module does
//! not know, the part concerned (a block group, a partition) is copied
//! whole, and the [`Part`] says why.
//!
//! The parsers are pure: bytes in through a [`Source`], ranges out. Each
//! format is read by hand, because no published crate reads what a
//! backup needs: `gpt` 4.1 panics on a table whose entries are not 128
//! bytes and does not check the table's checksum, `mbrman` 0.6 adds a
//! logical partition's start to its boot record's without checking for
//! overflow (a wrong start in release builds), the ext4 and FAT crates
//! read files, not allocation bitmaps, no crate reads XFS's
//! free-space trees or tells whether its log is clean, and the `ntfs`
//! crate is not hardened against crafted volumes (see ntfs.rs). Reading through a
//! [`Source`] keeps them fuzzable on plain memory ([`InMemory`]).
//!
//! Depends on nothing in ddx.

mod ext;
mod extents;
mod fat;
mod ntfs;
mod swap;
mod table;
mod xfs;

pub use extents::Extents;
pub(crate) use table::read as read_table;
pub use table::Table;

use std::ops::Range;

/// The unit the used set is rounded out to: bmaptool's block, so that a
/// map of the backup names exactly the blocks that hold used bytes.
pub const BLOCK: u64 = 4096;

/// Where the disk's bytes come from.
pub trait Source {
    /// The disk's size in bytes.
    fn size(&self) -> u64;

    /// Fill `buf` from `offset`; Err says why not (past the end, a read
    /// error).
    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError>;
}

/// A read that did not give what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {len} bytes at byte {offset}: {cause}")]
pub struct ReadError {
    pub offset: u64,
    pub len: usize,
    pub cause: String,
}

/// A disk image in memory (tests, fuzzing).
#[derive(Debug, Clone, Copy)]
pub struct InMemory<'a>(pub &'a [u8]);

impl Source for InMemory<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let error = |cause: &str| ReadError {
            offset,
            len: buf.len(),
            cause: cause.into(),
        };
        let start = usize::try_from(offset).map_err(|_| error("past the end"))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&end| end <= self.0.len())
            .ok_or_else(|| error("past the end"))?;
        buf.copy_from_slice(&self.0[start..end]);
        Ok(())
    }
}

/// A part of the disk (a partition) read by offsets from its start.
struct Region<'a> {
    source: &'a mut dyn Source,
    start: u64,
    len: u64,
}

impl Region<'_> {
    /// Read `buf.len()` bytes at `offset` from the region's start; past
    /// its end is an error, as a file system that points there is broken.
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Broken> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(Broken::Format(format!(
                "it points past its partition's end (byte {offset})"
            )));
        }
        self.source
            .read_exact_at(self.start + offset, buf)
            .map_err(Broken::Read)
    }

    fn bytes(&mut self, offset: u64, len: usize) -> Result<Vec<u8>, Broken> {
        let mut buf = vec![0; len];
        self.read(offset, &mut buf)?;
        Ok(buf)
    }
}

/// Why a file system's map could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Broken {
    /// Its structures are not what the format allows.
    Format(String),
    Read(ReadError),
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Format(why) => f.write_str(why),
            Broken::Read(error) => write!(f, "{error}"),
        }
    }
}

/// What a file system parser made of a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Its own map: it spans its first `size` bytes and uses `used`
    /// (offsets from the region's start) of them; `note` says what was
    /// copied whole within it, and why.
    Mapped {
        name: String,
        size: u64,
        used: Extents,
        note: Option<String>,
    },
    /// Recognised, copied whole, and why.
    Whole { name: String, why: String },
}

/// What one partition (or the whole disk, without a table) held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The partition's number in its table (None: the whole disk).
    pub number: Option<u32>,
    /// Its bytes on the disk.
    pub range: Range<u64>,
    pub found: Found,
    /// Bytes the backup reads from it (its used blocks, rounded out).
    pub used: u64,
}

/// What was recognised in a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A file system read by its own map ("ext4", "FAT32", "swap"); `note`:
    /// a part of it copied whole, and why.
    Mapped { name: String, note: Option<String> },
    /// Copied whole: what it is, if recognised, and why.
    Whole { name: Option<String>, why: String },
}

impl Part {
    /// One line for `--verbose`.
    pub fn describe(&self, show: &dyn Fn(u64) -> String) -> String {
        let which = match self.number {
            Some(n) => format!("partition {n}"),
            None => "the whole disk".into(),
        };
        let len = self.range.end - self.range.start;
        let place = format!(
            "{which} (bytes {}-{}, {})",
            self.range.start,
            self.range.end,
            show(len)
        );
        match &self.found {
            Found::Mapped { name, note } => {
                let note = note.as_ref().map_or(String::new(), |n| format!("; {n}"));
                format!(
                    "{place}: {name}, {} used, {} skipped{note}",
                    show(self.used),
                    show(len - self.used)
                )
            }
            Found::Whole {
                name: Some(name),
                why,
            } => {
                format!("{place}: {name}, copied whole: {why}")
            }
            Found::Whole { name: None, why } => format!("{place}: copied whole: {why}"),
        }
    }
}

/// A disk, analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub size: u64,
    pub table: Table,
    pub parts: Vec<Part>,
    /// Everything the backup reads, in whole [`BLOCK`]s (cut at the disk's
    /// end).
    pub used: Extents,
    /// Bytes outside every partition (all of them read).
    pub outside: u64,
}

/// Read `source`'s partition table (in `sector`-byte logical sectors,
/// where the caller knows them) and each partition's file system, and
/// say which bytes are used.
pub fn analyse(source: &mut dyn Source, sector: Option<u64>) -> Analysis {
    let size = source.size();
    let (table, partitions) = table::read(source, sector);
    let regions: Vec<(Option<u32>, Range<u64>)> = if partitions.is_empty() {
        match table {
            Table::None => vec![(None, 0..size)],
            // A table that lists nothing, or one not read: all of it is
            // outside the partitions.
            _ => Vec::new(),
        }
    } else {
        let mut listed: Vec<_> = partitions
            .into_iter()
            .map(|p| (Some(p.number), p.range))
            .collect();
        listed.sort_by_key(|(number, _)| *number);
        listed
    };
    let mut free = Vec::new();
    let mut used_anyway = Vec::new();
    let mut parts = Vec::new();
    for (number, range) in regions {
        let len = range.end - range.start;
        let verdict = probe(&mut Region {
            source: &mut *source,
            start: range.start,
            len,
        });
        let found = match verdict {
            Verdict::Mapped {
                name,
                size: fs_size,
                used,
                note,
            } => {
                let fs_end = range.start + fs_size.min(len);
                let used = used.shifted(range.start);
                free.extend(
                    used.complement(range.start..fs_end)
                        .ranges()
                        .iter()
                        .cloned(),
                );
                used_anyway.extend(used.ranges().iter().cloned());
                used_anyway.push(fs_end..range.end);
                Found::Mapped { name, note }
            }
            Verdict::Whole { name, why } => {
                used_anyway.push(range.clone());
                Found::Whole {
                    name: (!name.is_empty()).then_some(name),
                    why,
                }
            }
        };
        parts.push(Part {
            number,
            range,
            found,
            used: 0,
        });
    }
    // A byte is left out only where a file system says it is free and no
    // other partition (overlapping, as a broken table may have them) uses
    // it.
    let free = Extents::from_ranges(free);
    let used = free
        .complement(0..size)
        .union(&Extents::from_ranges(used_anyway))
        .rounded_out(BLOCK, size);
    for part in &mut parts {
        part.used = used.bytes_within(&part.range);
    }
    let inside = Extents::from_ranges(parts.iter().map(|p| p.range.clone()).collect());
    let outside = size - inside.bytes_within(&(0..size));
    Analysis {
        size,
        table,
        parts,
        used,
        outside,
    }
}

/// Signatures of what is copied whole, by name: (name, offset, magic).
const KNOWN_WHOLE: &[(&str, u64, &[u8])] = &[
    ("LUKS", 0, b"LUKS\xba\xbe"),
    ("LUKS2", 0, b"SKUL\xba\xbe"),
    ("LVM2 physical volume", 536, b"LVM2 001"),
    ("btrfs", 0x10040, b"_BHRfS_M"),
    ("exFAT", 3, b"EXFAT   "),
    ("squashfs", 0, b"hsqs"),
    ("F2FS", 1024, b"\x10\x20\xf5\xf2"),
    ("Linux RAID member", 4096, b"\xfc\x4e\x2b\xa9"),
    ("ISO 9660", 0x8001, b"CD001"),
];

type Parser = fn(&mut Region<'_>) -> Option<Verdict>;

/// The file systems whose own maps are read, in the order they are
/// tried.
const PARSERS: &[(FileSystem, Parser)] = &[
    (FileSystem::Ext, ext::probe),
    (FileSystem::Fat, fat::probe),
    (FileSystem::Swap, swap::probe),
    (FileSystem::Xfs, xfs::probe),
    (FileSystem::Ntfs, ntfs::probe),
];

/// A file system whose allocation map ddx reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileSystem {
    Ext,
    Fat,
    Swap,
    Xfs,
    Ntfs,
}

/// What the parser of `fs` alone makes of all of `source` (None: it does
/// not recognise it), as [`analyse`] asks it of each partition; for the
/// fuzz targets, which drive each parser on its own.
pub(crate) fn probe_as(fs: FileSystem, source: &mut dyn Source) -> Option<Verdict> {
    let len = source.size();
    let (_, parser) = PARSERS.iter().find(|(which, _)| *which == fs)?;
    parser(&mut Region {
        source,
        start: 0,
        len,
    })
}

/// What a region holds: the first file system that recognises it, unless
/// another recognises it too (a stale signature: then which is real is
/// not known, and it is copied whole).
fn probe(region: &mut Region<'_>) -> Verdict {
    let mut found: Vec<Verdict> = PARSERS.iter().filter_map(|(_, p)| p(region)).collect();
    let mut names: Vec<String> = found
        .iter()
        .map(|v| match v {
            Verdict::Mapped { name, .. } | Verdict::Whole { name, .. } => name.clone(),
        })
        .collect();
    for (name, offset, magic) in KNOWN_WHOLE {
        if offset + magic.len() as u64 > region.len {
            continue;
        }
        let mut buf = vec![0; magic.len()];
        if region.read(*offset, &mut buf).is_ok() && buf == *magic {
            names.push((*name).to_owned());
        }
    }
    match names.len() {
        0 => Verdict::Whole {
            name: String::new(),
            why: "no file system recognised".into(),
        },
        1 if found.len() == 1 => found.remove(0),
        1 => Verdict::Whole {
            name: names.remove(0),
            why: "ddx does not read its allocation map".into(),
        },
        _ => Verdict::Whole {
            name: String::new(),
            why: format!(
                "it carries the signatures of {}, so which one is in use is not known",
                names.join(" and ")
            ),
        },
    }
}

/// Little-endian fields of on-disk structures, bounds-checked by the
/// caller's slice.
fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | (u64::from(le32(b, at + 4)) << 32)
}

/// The runs of set bits among the first `bits` of a little-endian bitmap
/// (bit i is bit i % 8 of byte i / 8), as (first, end) bit numbers.
fn set_runs(bitmap: &[u8], bits: usize) -> Vec<(usize, usize)> {
    let bits = bits.min(bitmap.len() * 8);
    let bit = |i: usize| bitmap[i / 8] >> (i % 8) & 1 == 1;
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bits {
        // Whole bytes of zeros, then of ones, at a time.
        if i % 8 == 0 && bitmap[i / 8] == 0 {
            i += 8;
            continue;
        }
        if !bit(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bits {
            if i % 8 == 0 && i + 8 <= bits && bitmap[i / 8] == 0xff {
                i += 8;
            } else if bit(i) {
                i += 1;
            } else {
                break;
            }
        }
        runs.push((start, i.min(bits)));
    }
    runs
}

#[cfg(test)]
mod tests;
