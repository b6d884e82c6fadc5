//! Partition tables: the MBR with its extended partition's chain of boot
//! records, and the GPT with its backup header at the end of the disk.
//!
//! Read by hand (see the module above for why not `gpt` or `mbrman`), and
//! as the Linux kernel reads them: an MBR is a sector ending in 55 AA
//! whose four entries have a boot flag of 0 or 0x80 (a FAT boot sector
//! without a table fails that, or lists nothing); an entry of type 0xEE
//! makes it a GPT's protective MBR. A GPT header counts only with its
//! checksum right, and its entry array with its own; the backup header
//! (at the disk's last sector) stands in for a primary that fails.

use std::ops::Range;

use super::{le32, le64, Source};

/// Which table the disk has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Table {
    /// No table: the disk is one file system, or nothing known.
    None,
    Mbr,
    /// `from_backup`: the primary header or its entries failed their
    /// checksums, and the backup's were used.
    Gpt {
        from_backup: bool,
    },
    /// A table that cannot be read (why): the whole disk is copied.
    Unreadable(String),
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Table::None => f.write_str("no partition table"),
            Table::Mbr => f.write_str("MBR partition table"),
            Table::Gpt { from_backup: false } => f.write_str("GPT"),
            Table::Gpt { from_backup: true } => {
                f.write_str("GPT (read from its backup: the primary fails its checksums)")
            }
            Table::Unreadable(why) => write!(f, "a partition table that cannot be read ({why})"),
        }
    }
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub number: u32,
    /// Its bytes on the disk (cut at the disk's end).
    pub range: Range<u64>,
}

/// Logical partitions followed at most: the kernel stops well before.
const MAX_LOGICAL: u32 = 256;
/// Bytes of GPT entries read at most (4096 entries of 256 bytes).
const MAX_GPT_ARRAY: u64 = 1 << 20;

const GPT_PROTECTIVE: u8 = 0xee;

fn is_extended(kind: u8) -> bool {
    matches!(kind, 0x05 | 0x0f | 0x85)
}

/// An MBR entry: type, first sector, sectors.
#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: u8,
    start: u64,
    sectors: u64,
}

/// The four entries of a boot record, or None when it is not one (no
/// 55 AA, or a boot flag that is neither 0 nor 0x80).
fn boot_record(sector: &[u8]) -> Option<[Entry; 4]> {
    if sector.len() < 512 || sector[510..512] != [0x55, 0xaa] {
        return None;
    }
    let mut entries = [Entry {
        kind: 0,
        start: 0,
        sectors: 0,
    }; 4];
    for (i, entry) in entries.iter_mut().enumerate() {
        let at = 446 + 16 * i;
        if !matches!(sector[at], 0x00 | 0x80) {
            return None;
        }
        *entry = Entry {
            kind: sector[at + 4],
            start: u64::from(le32(sector, at + 8)),
            sectors: u64::from(le32(sector, at + 12)),
        };
    }
    Some(entries)
}

/// The partition table and its partitions. `sector`: the logical sector
/// size where known (a device's), else 512 and, for a GPT, 4096 too.
pub fn read(source: &mut dyn Source, sector: Option<u64>) -> (Table, Vec<Partition>) {
    let size = source.size();
    let mut first = [0u8; 512];
    if size < 512 || source.read_exact_at(0, &mut first).is_err() {
        return (Table::None, Vec::new());
    }
    let Some(entries) = boot_record(&first) else {
        return (Table::None, Vec::new());
    };
    if entries.iter().any(|e| e.kind == GPT_PROTECTIVE) {
        let sizes: &[u64] = match sector {
            Some(s) => &[s][..],
            None => &[512, 4096][..],
        };
        let mut why = String::from("a GPT's protective MBR, but no valid GPT header");
        for &sector in sizes {
            match gpt(source, sector) {
                Ok((table, parts)) => return (table, parts),
                Err(reason) => why = reason,
            }
        }
        return (Table::Unreadable(why), Vec::new());
    }
    let sector = sector.unwrap_or(512);
    let mut parts = Vec::new();
    let mut add = |number: u32, start: u64, sectors: u64| {
        let (Some(start), Some(len)) = (start.checked_mul(sector), sectors.checked_mul(sector))
        else {
            return;
        };
        let end = start.saturating_add(len).min(size);
        if start < end {
            parts.push(Partition {
                number,
                range: start..end,
            });
        }
    };
    let mut listed = false;
    // Logical partitions are numbered from 5 on across every extended
    // partition the MBR lists, as the kernel numbers them.
    let mut next_logical = 5;
    for (i, entry) in entries.iter().enumerate() {
        if entry.kind == 0 || entry.sectors == 0 {
            continue;
        }
        listed = true;
        if is_extended(entry.kind) {
            for (number, start, sectors) in logical(source, entry.start, sector, next_logical) {
                add(number, start, sectors);
                next_logical = number + 1;
            }
        } else {
            add(i as u32 + 1, entry.start, entry.sectors);
        }
    }
    if !listed {
        // 55 AA and nothing listed: a file system's boot sector, or an
        // empty table; either way the disk is probed whole.
        return (Table::None, Vec::new());
    }
    (Table::Mbr, parts)
}

/// The logical partitions of the extended partition starting at sector
/// `base`, numbered from `first` on: (number, first sector, sectors).
/// Each boot record points to
/// the next, relative to `base`; a chain that goes back, or ends in a
/// sector that is not a boot record, ends there.
fn logical(source: &mut dyn Source, base: u64, sector: u64, first: u32) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    let mut ebr = base;
    for number in first..5 + MAX_LOGICAL {
        let mut record = [0u8; 512];
        let Some(offset) = ebr.checked_mul(sector) else {
            break;
        };
        if source.read_exact_at(offset, &mut record).is_err() {
            break;
        }
        let Some(entries) = boot_record(&record) else {
            break;
        };
        let [this, next, ..] = entries;
        if this.kind != 0 && this.sectors != 0 {
            if let Some(start) = ebr.checked_add(this.start) {
                out.push((number, start, this.sectors));
            }
        }
        if !is_extended(next.kind) || next.start == 0 {
            break;
        }
        match base.checked_add(next.start) {
            Some(at) if at > ebr => ebr = at,
            _ => break,
        }
    }
    out
}

/// One GPT header, checked.
struct Header {
    my_lba: u64,
    alternate_lba: u64,
    entries_lba: u64,
    count: u64,
    entry_size: u64,
    entries_crc: u32,
}

fn crc32(bytes: &[u8]) -> u32 {
    const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    CRC.checksum(bytes)
}

fn header_at(source: &mut dyn Source, lba: u64, sector: u64) -> Result<Header, String> {
    let offset = lba
        .checked_mul(sector)
        .ok_or("its header is past any disk")?;
    let mut buf = vec![0u8; sector as usize];
    source
        .read_exact_at(offset, &mut buf)
        .map_err(|e| e.to_string())?;
    if &buf[..8] != b"EFI PART" {
        return Err(format!("no GPT header at byte {offset}"));
    }
    let header_size = le32(&buf, 12) as usize;
    if !(92..=buf.len()).contains(&header_size) {
        return Err(format!("the GPT header at byte {offset} has a bad size"));
    }
    let stored = le32(&buf, 16);
    buf[16..20].fill(0);
    if crc32(&buf[..header_size]) != stored {
        return Err(format!(
            "the GPT header at byte {offset} fails its checksum"
        ));
    }
    let header = Header {
        my_lba: le64(&buf, 24),
        alternate_lba: le64(&buf, 32),
        entries_lba: le64(&buf, 72),
        count: u64::from(le32(&buf, 80)),
        entry_size: u64::from(le32(&buf, 84)),
        entries_crc: le32(&buf, 88),
    };
    if header.my_lba != lba {
        return Err(format!(
            "the GPT header at byte {offset} says it is elsewhere"
        ));
    }
    if header.entry_size < 128 || !header.entry_size.is_power_of_two() {
        return Err(format!(
            "the GPT header at byte {offset} has entries of {} bytes",
            header.entry_size
        ));
    }
    Ok(header)
}

/// The partitions a checked header's entry array lists.
fn entries(
    source: &mut dyn Source,
    header: &Header,
    sector: u64,
) -> Result<Vec<Partition>, String> {
    let len = header
        .count
        .checked_mul(header.entry_size)
        .filter(|&len| len <= MAX_GPT_ARRAY)
        .ok_or("its entry array is too large")?;
    let offset = header
        .entries_lba
        .checked_mul(sector)
        .ok_or("its entry array is past any disk")?;
    let mut array = vec![0u8; len as usize];
    source
        .read_exact_at(offset, &mut array)
        .map_err(|e| e.to_string())?;
    if crc32(&array) != header.entries_crc {
        return Err(format!(
            "the GPT entry array at byte {offset} fails its checksum"
        ));
    }
    let size = source.size();
    let mut parts = Vec::new();
    for (index, entry) in array.chunks_exact(header.entry_size as usize).enumerate() {
        if entry[..16].iter().all(|&b| b == 0) {
            continue;
        }
        let (first, last) = (le64(entry, 32), le64(entry, 40));
        let range = first
            .checked_mul(sector)
            .zip(last.checked_add(1).and_then(|end| end.checked_mul(sector)))
            .filter(|(start, end)| start < end);
        let Some((start, end)) = range else {
            return Err(format!("GPT entry {} has no valid range", index + 1));
        };
        let end = end.min(size);
        if start < end {
            parts.push(Partition {
                number: index as u32 + 1,
                range: start..end,
            });
        }
    }
    Ok(parts)
}

/// The GPT in `sector`-byte sectors: the primary header and its entries,
/// else the backup's.
fn gpt(source: &mut dyn Source, sector: u64) -> Result<(Table, Vec<Partition>), String> {
    let last = (source.size() / sector)
        .checked_sub(1)
        .ok_or("the disk is too small for a GPT")?;
    let primary = header_at(source, 1, sector);
    if let Ok(header) = &primary {
        if let Ok(parts) = entries(source, header, sector) {
            return Ok((Table::Gpt { from_backup: false }, parts));
        }
    }
    // The backup where the primary says it is, else at the last sector.
    let mut places = vec![last];
    if let Ok(header) = &primary {
        if header.alternate_lba != last {
            places.insert(0, header.alternate_lba);
        }
    }
    let mut why = match primary {
        Err(why) => why,
        Ok(_) => "the primary GPT entry array fails its checksum".into(),
    };
    for lba in places {
        match header_at(source, lba, sector).and_then(|h| entries(source, &h, sector)) {
            Ok(parts) => return Ok((Table::Gpt { from_backup: true }, parts)),
            Err(reason) => why = format!("{why}; backup: {reason}"),
        }
    }
    Err(why)
}
