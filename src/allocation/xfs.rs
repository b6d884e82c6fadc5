//! XFS: each allocation group's free-space B+tree by block number.
//!
//! An XFS is cut into allocation groups (AGs), and each keeps its free
//! extents in a B+tree sorted by block number (the bnobt), rooted in the
//! AG's free-space header (the AGF, in the AG's second sector). Used is
//! every block that no record of those trees lists: the AGs' headers,
//! the inode chunks, every B+tree's blocks (the free list's too, which
//! the trees do not list), the internal log and the files' blocks; and,
//! whatever the trees say, each AG's header sectors and the log.
//!
//! XFS writes its metadata changes to its log first and in place later,
//! so until the log is replayed the trees on disk may be behind it. The
//! trees are trusted only when the log is clean: when the last record
//! before its head is an unmount record, the head found as the kernel
//! finds it (where the cycle numbers stamped in each 512-byte block drop
//! by one). A log that holds anything after that, one whose head cannot
//! be told, one on another device, a superblock that fails its checksum
//! (v5) or names features not known here, and a file system that
//! xfs_repair has not finished with, copy the file system whole, and the
//! verdict says why. An AG whose header or tree fails its checks (magic,
//! level, checksums, records out of order or past the AG, a count of free
//! blocks other than the header's) is copied whole, and the note says
//! how many.
//!
//! Big-endian, as XFS writes everything but its checksums.

use std::ops::Range;

use super::{Broken, Extents, Region, Verdict};

const SB_MAGIC: &[u8; 4] = b"XFSB";
const AGF_MAGIC: &[u8; 4] = b"XAGF";
/// The bnobt's block magic without (v4) and with (v5) self-describing
/// headers.
const BNO_MAGIC_V4: &[u8; 4] = b"ABTB";
const BNO_MAGIC_V5: &[u8; 4] = b"AB3B";
const LOG_MAGIC: u32 = 0xfeed_babe;

/// ftype, sparse inodes, meta_uuid, bigtime, nrext64: none changes how
/// free space is recorded.
const INCOMPAT_KNOWN: u32 = 0x1 | 0x2 | 0x4 | 0x8 | 0x20;
const INCOMPAT_NEEDSREPAIR: u32 = 0x10;
/// finobt, rmapbt, reflink, inobtcount.
const RO_COMPAT_KNOWN: u32 = 0x1 | 0x2 | 0x4 | 0x8;

/// The log's basic block, in which cycle numbers are stamped.
const BB: u64 = 512;
/// The most a log record's header spans before its extended headers.
const HEADER_CYCLE_SIZE: u64 = 32 << 10;
/// The log's blocks looked at around its head: eight in-core logs of the
/// largest size (256 KiB) may have been in flight when the last write
/// ended, and the last record lies within them.
const LOG_WINDOW: u64 = 8 * (256 << 10) / BB;
/// The flag of an unmount record's operation header.
const UNMOUNT_TRANS: u8 = 0x20;
/// B+tree levels followed at most (XFS's own bound for these trees is
/// lower).
const MAX_LEVELS: u32 = 10;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from(be32(b, at)) << 32 | u64::from(be32(b, at + 4))
}

/// XFS's crc32c, over `bytes` with the checksum's own four bytes at
/// `at` taken as zeros, against the little-endian value stored there.
fn checksum_holds(bytes: &[u8], at: usize) -> bool {
    let stored = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut crc = crc32c::crc32c(&bytes[..at]);
    crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &bytes[at + 4..]) == stored
}

fn format(why: impl Into<String>) -> Broken {
    Broken::Format(why.into())
}

/// An XFS at the region's start, or None.
pub(super) fn probe(region: &mut Region<'_>) -> Option<Verdict> {
    if region.len < BB {
        return None;
    }
    let first = region.bytes(0, BB as usize).ok()?;
    if &first[..4] != SB_MAGIC {
        return None;
    }
    let name = "XFS".to_owned();
    Some(match map(region, &first) {
        Ok(verdict) => verdict,
        Err(broken) => Verdict::Whole {
            name,
            why: broken.to_string(),
        },
    })
}

/// What the superblock gives, checked.
struct Geometry {
    v5: bool,
    sector: u64,
    block: u64,
    blocks: u64,
    ag_blocks: u64,
    ag_count: u64,
    ag_log: u32,
}

impl Geometry {
    /// The byte at block `block` of AG `ag`.
    fn byte(&self, ag: u64, block: u64) -> u64 {
        (ag * self.ag_blocks + block) * self.block
    }

    /// Blocks in AG `ag`: the last may be short.
    fn ag_len(&self, ag: u64) -> u64 {
        self.ag_blocks.min(self.blocks - ag * self.ag_blocks)
    }
}

fn geometry(sb: &[u8], region_len: u64) -> Result<Geometry, Broken> {
    let version = be16(sb, 0x64) & 0xf;
    let sector = u64::from(be16(sb, 0x66));
    let block = u64::from(be32(sb, 0x4));
    let block_log = u32::from(sb[0x78]);
    let blocks = be64(sb, 0x8);
    let ag_blocks = u64::from(be32(sb, 0x54));
    let ag_count = u64::from(be32(sb, 0x58));
    let ag_log = u32::from(sb[0x7c]);
    if !(512..=65536).contains(&block) || block_log > 16 || 1u64 << block_log != block {
        return Err(format("its superblock gives a bad block size"));
    }
    if ag_blocks == 0 || ag_count == 0 || ag_log > 31 {
        return Err(format("its superblock gives bad allocation groups"));
    }
    // The bits an AG's block number takes in a file system block number.
    if 1u64 << ag_log < ag_blocks || (ag_log > 0 && 1u64 << (ag_log - 1) >= ag_blocks) {
        return Err(format("its superblock gives a bad allocation group size"));
    }
    if blocks <= (ag_count - 1) * ag_blocks || blocks > ag_count * ag_blocks {
        return Err(format(
            "its superblock gives a size its allocation groups do not make",
        ));
    }
    let size = blocks
        .checked_mul(block)
        .ok_or_else(|| format("its superblock gives a size past any disk"))?;
    if size > region_len {
        return Err(format(format!(
            "its superblock gives {size} bytes, more than its partition's {region_len}"
        )));
    }
    Ok(Geometry {
        v5: version == 5,
        sector,
        block,
        blocks,
        ag_blocks,
        ag_count,
        ag_log,
    })
}

fn map(region: &mut Region<'_>, first: &[u8]) -> Result<Verdict, Broken> {
    let whole = |why: &str| {
        Ok(Verdict::Whole {
            name: "XFS".into(),
            why: why.to_owned(),
        })
    };
    let version = be16(first, 0x64) & 0xf;
    if !matches!(version, 4 | 5) {
        return whole(&format!(
            "a version {version} superblock, which ddx does not know"
        ));
    }
    let sector = u64::from(be16(first, 0x66));
    if !(512..=32768).contains(&sector) || !sector.is_power_of_two() {
        return Err(format("its superblock gives a bad sector size"));
    }
    let sb = region.bytes(0, sector as usize)?;
    if version == 5 && !checksum_holds(&sb, 0xe0) {
        return Err(format("its superblock fails its checksum"));
    }
    if sb[0x7e] != 0 {
        return whole("mkfs.xfs did not finish making it");
    }
    if version == 5 {
        let incompat = be32(&sb, 0xd8);
        let ro_compat = be32(&sb, 0xd4);
        if incompat & INCOMPAT_NEEDSREPAIR != 0 {
            return whole("it is marked as needing xfs_repair");
        }
        if incompat & !INCOMPAT_KNOWN != 0 || ro_compat & !RO_COMPAT_KNOWN != 0 {
            return whole(&format!(
                "it has features ddx does not know (incompat {:#x}, ro_compat {:#x})",
                incompat & !INCOMPAT_KNOWN,
                ro_compat & !RO_COMPAT_KNOWN
            ));
        }
        if be32(&sb, 0xdc) != 0 {
            return whole(
                "its log holds changes of a kind the kernel clears at a clean unmount, so \
                 its free-space trees may be behind",
            );
        }
    }
    let geo = geometry(&sb, region.len)?;
    let log = match log_place(&sb, &geo) {
        Ok(log) => log,
        Err(why) => return whole(&why),
    };
    if let Err(why) = log_is_clean(region, &log) {
        return whole(&why);
    }
    let size = geo.blocks * geo.block;
    let mut free = Vec::new();
    // Whatever the trees say: each AG's four header sectors (superblock,
    // AGF, AGI, free list) and the log.
    let mut used = vec![log.clone()];
    let mut bad = Vec::new();
    for ag in 0..geo.ag_count {
        let start = geo.byte(ag, 0);
        used.push(start..(start + 4 * geo.sector).min(size));
        match free_extents(region, &geo, ag) {
            Ok(extents) => free.extend(extents),
            Err(why) => bad.push((ag, why)),
        }
    }
    let used = Extents::from_ranges(free)
        .complement(0..size)
        .union(&Extents::from_ranges(used));
    let note = bad.first().map(|(ag, why)| {
        format!(
            "{} allocation group(s) copied whole, their free-space trees not to be trusted \
             (first: group {ag}: {why})",
            bad.len()
        )
    });
    Ok(Verdict::Mapped {
        name: "XFS".into(),
        size,
        used,
        note,
    })
}

/// The internal log's bytes, from the superblock; Err says why the file
/// system is copied whole.
fn log_place(sb: &[u8], geo: &Geometry) -> Result<Range<u64>, String> {
    let start = be64(sb, 0x30);
    if start == 0 {
        return Err("its log is on another device, which ddx does not read".into());
    }
    let blocks = u64::from(be32(sb, 0x60));
    let ag = start >> geo.ag_log;
    let block = start & ((1u64 << geo.ag_log) - 1);
    let bad = || "its superblock places its log outside the file system".to_owned();
    if ag >= geo.ag_count || block >= geo.ag_len(ag) || blocks == 0 {
        return Err(bad());
    }
    let first = ag * geo.ag_blocks + block;
    match first.checked_add(blocks) {
        Some(end) if end <= geo.blocks => Ok(first * geo.block..end * geo.block),
        _ => Err(bad()),
    }
}

/// The log's 512-byte blocks, read in runs.
struct Log<'r, 'a> {
    region: &'r mut Region<'a>,
    start: u64,
    /// Basic blocks in the log.
    len: u64,
}

impl Log<'_, '_> {
    /// Blocks `first..first + count` (within the log).
    fn blocks(&mut self, first: u64, count: u64) -> Result<Vec<u8>, String> {
        self.region
            .bytes(self.start + first * BB, (count * BB) as usize)
            .map_err(|e| format!("its log cannot be read: {e}"))
    }

    /// The cycle number stamped in block `at`: a record header's, or the
    /// first word of any other block.
    fn cycle(&mut self, at: u64) -> Result<u32, String> {
        Ok(cycle_of(&self.blocks(at, 1)?))
    }
}

fn cycle_of(block: &[u8]) -> u32 {
    if be32(block, 0) == LOG_MAGIC {
        be32(block, 4)
    } else {
        be32(block, 0)
    }
}

/// Ok when the log at `place` was left clean: its head is right after an
/// unmount record, and nothing around the head was written out of turn.
/// Err says why not, or why that cannot be told.
fn log_is_clean(region: &mut Region<'_>, place: &Range<u64>) -> Result<(), String> {
    let dirty = || {
        "its log holds changes not yet written in place (it was not unmounted cleanly, or \
         is mounted), so its free-space trees may be behind"
            .to_owned()
    };
    let mut log = Log {
        region,
        start: place.start,
        len: (place.end - place.start) / BB,
    };
    let n = log.len;
    if n < 2 {
        return Err("its log is too small to be one".into());
    }
    let first = log.cycle(0)?;
    let last = log.cycle(n - 1)?;
    if first == 0 {
        // Never written since it was zeroed: nothing in it to replay, if
        // all of it is zeros.
        return match log.blocks(0, n.min(LOG_WINDOW))?.iter().all(|&b| b == 0) && last == 0 {
            true => Ok(()),
            false => Err(dirty()),
        };
    }
    // The head: the first block of the previous cycle (the last pass's
    // blocks not yet overwritten by this one), else the log's end.
    let head = if last == first {
        n
    } else if last.wrapping_add(1) == first {
        let (mut low, mut high) = (0, n - 1);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if log.cycle(middle)? == first {
                low = middle;
            } else {
                high = middle;
            }
        }
        high
    } else {
        return Err(format!(
            "its log's cycle numbers ({first} at its start, {last} at its end) do not \
             tell where its head is"
        ));
    };
    // Out-of-turn writes around the head: every block before it is of
    // this cycle, every one after it of the previous.
    let before = head.saturating_sub(LOG_WINDOW);
    let behind = log.blocks(before, head - before)?;
    if behind
        .chunks_exact(BB as usize)
        .any(|b| cycle_of(b) != first)
    {
        return Err(dirty());
    }
    let after = n.min(head + LOG_WINDOW);
    let ahead = log.blocks(head, after - head)?;
    if ahead
        .chunks_exact(BB as usize)
        .any(|b| cycle_of(b) == first)
    {
        return Err(dirty());
    }
    // The last record's header, at most a window back (past the log's
    // start, on from its end).
    let header = (1..=n.min(LOG_WINDOW))
        .map(|back| (head + n - back) % n)
        .find_map(|at| match log.blocks(at, 1) {
            Ok(block) if be32(&block, 0) == LOG_MAGIC => Some(Ok((at, block))),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .transpose()?;
    let Some((at, header)) = header else {
        return Err(dirty());
    };
    let version = be32(&header, 8);
    let data = u64::from(be32(&header, 12));
    let ops = be32(&header, 40);
    let size = u64::from(be32(&header, 320));
    let header_blocks = if version & 2 != 0 && size > HEADER_CYCLE_SIZE {
        size.div_ceil(HEADER_CYCLE_SIZE)
    } else {
        1
    };
    let end = (at + header_blocks + data.div_ceil(BB)) % n;
    if ops != 1 || end != head % n {
        return Err(dirty());
    }
    // The operation's header opens the record's data: its flags at byte 9.
    let op = log.blocks((at + header_blocks) % n, 1)?;
    match op[9] & UNMOUNT_TRANS != 0 {
        true => Ok(()),
        false => Err(dirty()),
    }
}

/// AG `ag`'s free extents, in bytes from the file system's start, from
/// its AGF's bnobt; Err says why they cannot be trusted.
fn free_extents(
    region: &mut Region<'_>,
    geo: &Geometry,
    ag: u64,
) -> Result<Vec<Range<u64>>, String> {
    let ag_len = geo.ag_len(ag);
    let agf = region
        .bytes(geo.byte(ag, 0) + geo.sector, geo.sector as usize)
        .map_err(|e| e.to_string())?;
    if &agf[..4] != AGF_MAGIC || be32(&agf, 4) != 1 {
        return Err("no free-space header".into());
    }
    if u64::from(be32(&agf, 8)) != ag || u64::from(be32(&agf, 0xc)) != ag_len {
        return Err("its free-space header is another group's".into());
    }
    if geo.v5 && !checksum_holds(&agf, 0xd8) {
        return Err("its free-space header fails its checksum".into());
    }
    let root = u64::from(be32(&agf, 0x10));
    let levels = be32(&agf, 0x1c);
    let free_blocks = u64::from(be32(&agf, 0x34));
    if !(1..=MAX_LEVELS).contains(&levels) || root == 0 || root >= ag_len {
        return Err("its tree's root is out of place".into());
    }
    let (magic, header) = match geo.v5 {
        true => (BNO_MAGIC_V5, 56),
        false => (BNO_MAGIC_V4, 16),
    };
    let block = geo.block as usize;
    // Records (and keys) of 8 bytes, pointers of 4.
    let leaf_max = (block - header) / 8;
    let node_max = (block - header) / 12;
    let mut records: Vec<(u64, u64)> = Vec::new();
    let mut level_blocks = vec![root];
    let mut visited = 0u64;
    for level in (0..levels).rev() {
        let mut below = Vec::new();
        let mut seen = level_blocks.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != level_blocks.len() {
            return Err("its tree names a block twice".into());
        }
        visited += level_blocks.len() as u64;
        if visited > ag_len {
            return Err("its tree has more blocks than the group".into());
        }
        for &at in &level_blocks {
            let byte = geo.byte(ag, at);
            let node = region.bytes(byte, block).map_err(|e| e.to_string())?;
            if &node[..4] != magic || u32::from(be16(&node, 4)) != level {
                return Err(format!("its tree's block {at} is not one of its level"));
            }
            if geo.v5
                && (!checksum_holds(&node, 0x34)
                    || be64(&node, 0x10) != byte / BB
                    || u64::from(be32(&node, 0x30)) != ag)
            {
                return Err(format!("its tree's block {at} fails its checksum"));
            }
            let count = usize::from(be16(&node, 6));
            if level == 0 {
                if count > leaf_max {
                    return Err(format!("its tree's block {at} holds too many records"));
                }
                for i in 0..count {
                    let record = header + 8 * i;
                    records.push((
                        u64::from(be32(&node, record)),
                        u64::from(be32(&node, record + 4)),
                    ));
                }
            } else {
                if count == 0 || count > node_max {
                    return Err(format!("its tree's block {at} holds a bad count"));
                }
                let pointers = header + 8 * node_max;
                for i in 0..count {
                    let child = u64::from(be32(&node, pointers + 4 * i));
                    if child == 0 || child >= ag_len {
                        return Err(format!("its tree's block {at} points outside the group"));
                    }
                    below.push(child);
                }
            }
        }
        level_blocks = below;
    }
    let mut extents = Vec::with_capacity(records.len());
    let mut end = 0;
    let mut total = 0u64;
    for (start, count) in records {
        if count == 0 || start < end || start + count > ag_len {
            return Err(format!(
                "its tree lists blocks {start}+{count} out of order or outside the group"
            ));
        }
        end = start + count;
        total += count;
        extents.push(geo.byte(ag, start)..geo.byte(ag, end));
    }
    if total != free_blocks {
        return Err(format!(
            "its tree lists {total} free blocks, its header {free_blocks}"
        ));
    }
    Ok(extents)
}
