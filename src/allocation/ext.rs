//! ext2, ext3 and ext4: the block groups' allocation bitmaps.
//!
//! Used is every block (bigalloc: cluster) whose bit is set in its group's
//! bitmap, and always the metadata, whatever the bitmaps say: the boot
//! block and superblock, every superblock backup with its group
//! descriptors and reserved descriptor blocks (sparse_super,
//! sparse_super2 or every group), meta_bg's descriptor blocks and their
//! two backups, and every group's two bitmaps and inode table (wherever
//! flex_bg put them). The journal is a file, and its blocks are set in
//! the bitmaps.
//!
//! Where the descriptors carry checksums (uninit_bg's crc16, or
//! metadata_csum's crc32c), a group flagged BLOCK_UNINIT has never had
//! its bitmap written, and uses only its own superblock backup and the
//! metadata placed in it; a group whose descriptor fails its checksum,
//! or whose bitmap fails its own (metadata_csum), is copied whole.
//! Without those checksums the flag means nothing, as for e2fsck. A file
//! system whose journal still holds changes (needs_recovery), that is
//! not marked clean, or has errors recorded, has features this parser
//! does not know, or is an external journal, is copied whole: its bitmaps
//! on disk may not be the truth.

use super::{le16, le32, set_runs, Broken, Extents, Region, Verdict};

const MAGIC: u16 = 0xef53;

const COMPAT_HAS_JOURNAL: u32 = 0x4;
const COMPAT_RESIZE_INODE: u32 = 0x10;
const COMPAT_EXCLUDE_BITMAP: u32 = 0x100;
const COMPAT_SPARSE_SUPER2: u32 = 0x200;

const INCOMPAT_RECOVER: u32 = 0x4;
const INCOMPAT_JOURNAL_DEV: u32 = 0x8;
const INCOMPAT_META_BG: u32 = 0x10;
const INCOMPAT_EXTENTS: u32 = 0x40;
const INCOMPAT_64BIT: u32 = 0x80;
const INCOMPAT_FLEX_BG: u32 = 0x200;
const INCOMPAT_CSUM_SEED: u32 = 0x2000;
/// filetype, meta_bg, extents, 64bit, mmp, flex_bg, ea_inode, dirdata,
/// csum_seed, largedir, inline_data, encrypt, casefold: none changes
/// where blocks are or how they are counted as allocated.
const INCOMPAT_KNOWN: u32 = 0x2
    | INCOMPAT_META_BG
    | INCOMPAT_EXTENTS
    | INCOMPAT_64BIT
    | 0x100
    | INCOMPAT_FLEX_BG
    | 0x400
    | 0x1000
    | INCOMPAT_CSUM_SEED
    | 0x4000
    | 0x8000
    | 0x10000
    | 0x20000;

const RO_SPARSE_SUPER: u32 = 0x1;
const RO_HUGE_FILE: u32 = 0x8;
const RO_GDT_CSUM: u32 = 0x10;
const RO_DIR_NLINK: u32 = 0x20;
const RO_EXTRA_ISIZE: u32 = 0x40;
const RO_HAS_SNAPSHOT: u32 = 0x80;
const RO_BIGALLOC: u32 = 0x200;
const RO_METADATA_CSUM: u32 = 0x400;
/// sparse_super, large_file, btree_dir, huge_file, gdt_csum, dir_nlink,
/// extra_isize, quota, bigalloc, metadata_csum, replica, readonly,
/// project, shared_blocks, verity, orphan_present.
const RO_KNOWN: u32 = RO_SPARSE_SUPER
    | 0x2
    | 0x4
    | RO_HUGE_FILE
    | RO_GDT_CSUM
    | RO_DIR_NLINK
    | RO_EXTRA_ISIZE
    | 0x100
    | RO_BIGALLOC
    | RO_METADATA_CSUM
    | 0x800
    | 0x1000
    | 0x2000
    | 0x4000
    | 0x8000
    | 0x10000;

const STATE_VALID: u16 = 0x1;
const STATE_ERROR: u16 = 0x2;

const BG_BLOCK_UNINIT: u16 = 0x2;

/// Bitmap blocks read in one request at most.
const BITMAP_RUN: u64 = 256;

/// ext2/3/4 at the region's start (its superblock at byte 1024), or None.
pub(super) fn probe(region: &mut Region<'_>) -> Option<Verdict> {
    if region.len < 2048 {
        return None;
    }
    let sb = region.bytes(1024, 1024).ok()?;
    if le16(&sb, 0x38) != MAGIC {
        return None;
    }
    let name = name(&sb);
    Some(match map(region, &sb, &name) {
        Ok(verdict) => verdict,
        Err(broken) => Verdict::Whole {
            name,
            why: broken.to_string(),
        },
    })
}

/// What blkid would call it.
fn name(sb: &[u8]) -> String {
    let compat = le32(sb, 0x5c);
    let incompat = le32(sb, 0x60);
    let ro = le32(sb, 0x64);
    let ext4 = incompat & (INCOMPAT_EXTENTS | INCOMPAT_64BIT | INCOMPAT_FLEX_BG) != 0
        || ro
            & (RO_HUGE_FILE
                | RO_GDT_CSUM
                | RO_DIR_NLINK
                | RO_EXTRA_ISIZE
                | RO_BIGALLOC
                | RO_METADATA_CSUM)
            != 0;
    if incompat & INCOMPAT_JOURNAL_DEV != 0 {
        "ext4 external journal".into()
    } else if ext4 {
        "ext4".into()
    } else if compat & COMPAT_HAS_JOURNAL != 0 {
        "ext3".into()
    } else {
        "ext2".into()
    }
}

/// The raw crc32c the kernel's `ext4_chksum` computes (no inversions).
fn crc32c(seed: u32, bytes: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, bytes)
}

fn crc16(parts: &[&[u8]]) -> u16 {
    // ext2fs_crc16 from ~0, no final inversion: CRC-16/MODBUS.
    const CRC: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_MODBUS);
    let mut digest = CRC.digest();
    for part in parts {
        digest.update(part);
    }
    digest.finalize()
}

fn format(why: impl Into<String>) -> Broken {
    Broken::Format(why.into())
}

/// The geometry the superblock gives, checked.
struct Geometry {
    block: u64,
    /// Blocks per cluster (1 without bigalloc).
    ratio: u64,
    blocks: u64,
    first_data: u64,
    per_group: u64,
    clusters_per_group: u64,
    groups: u64,
    desc_size: u64,
    descs_per_block: u64,
    /// Descriptor blocks after each superblock (all of them without
    /// meta_bg, the first s_first_meta_bg with it).
    old_descriptors: u64,
    reserved_descriptors: u64,
    meta_bg: bool,
    inode_table_blocks: u64,
    sparse_super: bool,
    sparse_super2: Option<[u32; 2]>,
}

impl Geometry {
    fn group_start(&self, group: u64) -> u64 {
        self.first_data + group * self.per_group
    }

    fn has_super(&self, group: u64) -> bool {
        if group == 0 {
            return true;
        }
        if let Some(backups) = self.sparse_super2 {
            return backups.iter().any(|&b| u64::from(b) == group);
        }
        if !self.sparse_super || group == 1 {
            return true;
        }
        [3u64, 5, 7].iter().any(|&base| {
            let mut power = base;
            while power < group {
                power *= base;
            }
            power == group
        })
    }

    /// The block the superblock is in: 1 with 1 KiB blocks, else 0.
    fn superblock_block(&self) -> u64 {
        1024 / self.block
    }

    /// Where descriptor block `index` is (the primary copy).
    fn descriptor_block(&self, index: u64) -> u64 {
        if !self.meta_bg || index < self.old_descriptors {
            return self.superblock_block() + 1 + index;
        }
        let group = index * self.descs_per_block;
        let mut after = u64::from(self.has_super(group));
        if group == 0 && self.block == 1024 && self.first_data == 0 {
            after += 1;
        }
        self.group_start(group) + after
    }
}

fn geometry(sb: &[u8], region_len: u64) -> Result<Geometry, Broken> {
    let compat = le32(sb, 0x5c);
    let incompat = le32(sb, 0x60);
    let ro = le32(sb, 0x64);
    let log_block = le32(sb, 0x18);
    if log_block > 6 {
        return Err(format("its superblock gives a block size over 64 KiB"));
    }
    let block = 1024u64 << log_block;
    let ratio = if ro & RO_BIGALLOC != 0 {
        let log_cluster = le32(sb, 0x1c);
        if log_cluster < log_block || log_cluster > log_block + 16 {
            return Err(format("its superblock gives a bad cluster size"));
        }
        1u64 << (log_cluster - log_block)
    } else {
        1
    };
    let mut blocks = u64::from(le32(sb, 0x4));
    if incompat & INCOMPAT_64BIT != 0 {
        blocks |= u64::from(le32(sb, 0x150)) << 32;
    }
    let first_data = u64::from(le32(sb, 0x14));
    let per_group = u64::from(le32(sb, 0x20));
    let clusters_per_group = if ratio > 1 {
        u64::from(le32(sb, 0x24))
    } else {
        per_group
    };
    if first_data > 1 || (first_data == 1 && block != 1024) || (ratio > 1 && first_data != 0) {
        return Err(format("its superblock gives a bad first data block"));
    }
    if clusters_per_group == 0
        || clusters_per_group > 8 * block
        || clusters_per_group * ratio != per_group
    {
        return Err(format("its superblock gives bad blocks per group"));
    }
    if blocks <= first_data {
        return Err(format("its superblock gives no blocks"));
    }
    let groups = (blocks - first_data).div_ceil(per_group);
    let size = blocks
        .checked_mul(block)
        .ok_or_else(|| format("its superblock gives a size past any disk"))?;
    if size > region_len {
        return Err(format(format!(
            "its superblock gives {size} bytes, more than its partition's {region_len}"
        )));
    }
    let desc_size = if incompat & INCOMPAT_64BIT != 0 {
        u64::from(le16(sb, 0xfe))
    } else {
        32
    };
    if desc_size < 32 || desc_size > block || !desc_size.is_power_of_two() {
        return Err(format("its superblock gives a bad descriptor size"));
    }
    let descs_per_block = block / desc_size;
    let descriptor_blocks = groups.div_ceil(descs_per_block);
    let meta_bg = incompat & INCOMPAT_META_BG != 0;
    let old_descriptors = if meta_bg {
        u64::from(le32(sb, 0x104)).min(descriptor_blocks)
    } else {
        descriptor_blocks
    };
    let reserved_descriptors = if compat & COMPAT_RESIZE_INODE != 0 {
        u64::from(le16(sb, 0xce))
    } else {
        0
    };
    let rev = le32(sb, 0x4c);
    let inode_size = if rev >= 1 {
        u64::from(le16(sb, 0x58))
    } else {
        128
    };
    if inode_size < 128 || inode_size > block || !inode_size.is_power_of_two() {
        return Err(format("its superblock gives a bad inode size"));
    }
    let inodes_per_group = u64::from(le32(sb, 0x28));
    let inode_table_blocks = (inodes_per_group * inode_size).div_ceil(block);
    let sparse_super2 =
        (compat & COMPAT_SPARSE_SUPER2 != 0).then(|| [le32(sb, 0x24c), le32(sb, 0x250)]);
    Ok(Geometry {
        block,
        ratio,
        blocks,
        first_data,
        per_group,
        clusters_per_group,
        groups,
        desc_size,
        descs_per_block,
        old_descriptors,
        reserved_descriptors,
        meta_bg,
        inode_table_blocks,
        sparse_super: ro & RO_SPARSE_SUPER != 0,
        sparse_super2,
    })
}

/// One group's descriptor, as far as allocation goes.
#[derive(Debug, Clone, Copy)]
struct Group {
    block_bitmap: u64,
    inode_bitmap: u64,
    inode_table: u64,
    uninit: bool,
    /// The bitmap's checksum as stored, and whether it has its high half.
    bitmap_csum: Option<(u32, bool)>,
    /// Its descriptor failed its checksum: nothing in it is trusted.
    bad: bool,
}

fn map(region: &mut Region<'_>, sb: &[u8], name: &str) -> Result<Verdict, Broken> {
    let compat = le32(sb, 0x5c);
    let incompat = le32(sb, 0x60);
    let ro = le32(sb, 0x64);
    let whole = |why: &str| {
        Ok(Verdict::Whole {
            name: name.to_owned(),
            why: why.to_owned(),
        })
    };
    if incompat & INCOMPAT_JOURNAL_DEV != 0 {
        return whole("an external journal is copied whole");
    }
    if incompat & INCOMPAT_RECOVER != 0 {
        return whole(
            "its journal holds changes not yet written in place (it was not unmounted \
             cleanly, or is mounted), so its bitmaps may be behind",
        );
    }
    if incompat & !INCOMPAT_KNOWN != 0 || ro & !RO_KNOWN != 0 {
        return whole(&format!(
            "it has features ddx does not know (incompat {:#x}, ro_compat {:#x})",
            incompat & !INCOMPAT_KNOWN,
            ro & !RO_KNOWN
        ));
    }
    if ro & RO_HAS_SNAPSHOT != 0 || compat & COMPAT_EXCLUDE_BITMAP != 0 {
        return whole("it holds snapshots, whose blocks its bitmaps do not show");
    }
    let state = le16(sb, 0x3a);
    if state & STATE_ERROR != 0 {
        return whole("it has errors recorded (e2fsck has not repaired it)");
    }
    if state & STATE_VALID == 0 {
        return whole("it is not marked clean (not unmounted cleanly, or mounted)");
    }
    let metadata_csum = ro & RO_METADATA_CSUM != 0;
    let uuid = &sb[0x68..0x78];
    let seed = if incompat & INCOMPAT_CSUM_SEED != 0 {
        le32(sb, 0x270)
    } else {
        crc32c(!0, uuid)
    };
    if metadata_csum && crc32c(!0, &sb[..0x3fc]) != le32(sb, 0x3fc) {
        return Err(format("its superblock fails its checksum"));
    }
    let uninit_known = metadata_csum || ro & RO_GDT_CSUM != 0;
    let geo = geometry(sb, region.len)?;
    let groups = descriptors(region, &geo, |group, desc| {
        if !uninit_known {
            return true;
        }
        let number = (group as u32).to_le_bytes();
        let stored = le16(desc, 0x1e);
        if metadata_csum {
            let mut copy = desc.to_vec();
            copy[0x1e..0x20].fill(0);
            (crc32c(crc32c(seed, &number), &copy) & 0xffff) as u16 == stored
        } else {
            crc16(&[uuid, &number, &desc[..0x1e], &desc[0x20.min(desc.len())..]]) == stored
        }
    })?;

    let block = geo.block;
    // The boot block and the primary superblock.
    let mut used: Vec<std::ops::Range<u64>> = Vec::new();
    used.push(0..block.max(2048));
    let blocks = |first: u64, count: u64| first * block..(first + count) * block;
    let mut notes = Vec::new();
    let mut to_read = Vec::new();
    for (index, group) in groups.iter().enumerate() {
        let g = index as u64;
        let start = geo.group_start(g);
        let end = (start + geo.per_group).min(geo.blocks);
        if geo.has_super(g) {
            let first = if g == 0 {
                geo.superblock_block()
            } else {
                start
            };
            used.push(blocks(
                first,
                1 + geo.old_descriptors + geo.reserved_descriptors,
            ));
        }
        if group.bad {
            notes.push(g);
            used.push(blocks(start, end - start));
            continue;
        }
        for (what, first, count) in [
            ("block bitmap", group.block_bitmap, 1),
            ("inode bitmap", group.inode_bitmap, 1),
            ("inode table", group.inode_table, geo.inode_table_blocks),
        ] {
            if first < geo.first_data || first.saturating_add(count) > geo.blocks {
                return Err(format(format!(
                    "group {g}'s {what} is outside the file system (block {first})"
                )));
            }
            used.push(blocks(first, count));
        }
        if !(group.uninit && uninit_known) {
            to_read.push(g);
        }
    }
    if geo.meta_bg {
        let descriptor_blocks = geo.groups.div_ceil(geo.descs_per_block);
        for index in geo.old_descriptors..descriptor_blocks {
            let first = index * geo.descs_per_block;
            for g in [first, first + 1, first + geo.descs_per_block - 1] {
                if g < geo.groups {
                    let after = u64::from(geo.has_super(g));
                    used.push(blocks(geo.group_start(g) + after, 1));
                }
            }
        }
    }
    let mut bad_bitmaps = Vec::new();
    read_bitmaps(region, &geo, &groups, &to_read, |g, bitmap| {
        let group = &groups[g as usize];
        if metadata_csum {
            if let Some((stored, high)) = group.bitmap_csum {
                let computed = crc32c(seed, bitmap);
                let computed = if high { computed } else { computed & 0xffff };
                if computed != stored {
                    bad_bitmaps.push(g);
                    let start = geo.group_start(g);
                    let end = (start + geo.per_group).min(geo.blocks);
                    used.push(blocks(start, end - start));
                    return;
                }
            }
        }
        let start = geo.group_start(g);
        let clusters = (geo.blocks - start)
            .div_ceil(geo.ratio)
            .min(geo.clusters_per_group);
        for (from, to) in set_runs(bitmap, clusters as usize) {
            let first = start + from as u64 * geo.ratio;
            let last = (start + to as u64 * geo.ratio).min(geo.blocks);
            used.push(first * block..last * block);
        }
    })?;
    let mut note = Vec::new();
    if !notes.is_empty() {
        note.push(format!(
            "{} block group(s) copied whole, their descriptors failing their checksums \
             (first: group {})",
            notes.len(),
            notes[0]
        ));
    }
    if !bad_bitmaps.is_empty() {
        note.push(format!(
            "{} block group(s) copied whole, their bitmaps failing their checksums \
             (first: group {})",
            bad_bitmaps.len(),
            bad_bitmaps[0]
        ));
    }
    // Reserved descriptor blocks and meta_bg's backups may be counted
    // past the file system's last block: nothing there is its own.
    let end = (geo.blocks * block).max(2048).min(region.len);
    let used = used
        .into_iter()
        .map(|r| r.start.min(end)..r.end.min(end))
        .collect();
    Ok(Verdict::Mapped {
        name: name.to_owned(),
        size: geo.blocks * block,
        used: Extents::from_ranges(used),
        note: (!note.is_empty()).then(|| note.join("; ")),
    })
}

/// Every group's descriptor; `checks(group, bytes)` says whether its
/// checksum holds.
fn descriptors(
    region: &mut Region<'_>,
    geo: &Geometry,
    checks: impl Fn(u64, &[u8]) -> bool,
) -> Result<Vec<Group>, Broken> {
    let count = geo.groups.div_ceil(geo.descs_per_block);
    let mut groups = Vec::with_capacity(geo.groups as usize);
    let wide = geo.desc_size >= 64;
    let mut index = 0;
    while index < count {
        // Consecutive descriptor blocks in one read.
        let first = geo.descriptor_block(index);
        let mut run = 1;
        while index + run < count
            && run < BITMAP_RUN
            && geo.descriptor_block(index + run) == first + run
        {
            run += 1;
        }
        let bytes = region.bytes(first * geo.block, (run * geo.block) as usize)?;
        for desc in bytes.chunks_exact(geo.desc_size as usize) {
            let g = groups.len() as u64;
            if g == geo.groups {
                break;
            }
            let high = |at: usize| {
                if wide {
                    u64::from(le32(desc, at)) << 32
                } else {
                    0
                }
            };
            groups.push(Group {
                block_bitmap: u64::from(le32(desc, 0x0)) | high(0x20),
                inode_bitmap: u64::from(le32(desc, 0x4)) | high(0x24),
                inode_table: u64::from(le32(desc, 0x8)) | high(0x28),
                uninit: le16(desc, 0x12) & BG_BLOCK_UNINIT != 0,
                bitmap_csum: Some(if geo.desc_size >= 0x3c {
                    (
                        u32::from(le16(desc, 0x18)) | u32::from(le16(desc, 0x38)) << 16,
                        true,
                    )
                } else {
                    (u32::from(le16(desc, 0x18)), false)
                }),
                bad: !checks(g, desc),
            });
        }
        index += run;
    }
    Ok(groups)
}

/// Read the bitmaps of groups `wanted`, consecutive blocks together, and
/// hand each to `each(group, bitmap)`.
fn read_bitmaps(
    region: &mut Region<'_>,
    geo: &Geometry,
    groups: &[Group],
    wanted: &[u64],
    mut each: impl FnMut(u64, &[u8]),
) -> Result<(), Broken> {
    let mut order: Vec<(u64, u64)> = wanted
        .iter()
        .map(|&g| (groups[g as usize].block_bitmap, g))
        .collect();
    order.sort_unstable();
    let bytes_per_bitmap = (geo.clusters_per_group / 8) as usize;
    let mut i = 0;
    while i < order.len() {
        let first = order[i].0;
        let mut run = 1;
        while i + run < order.len()
            && run < BITMAP_RUN as usize
            && order[i + run].0 == first + run as u64
        {
            run += 1;
        }
        let bytes = region.bytes(first * geo.block, run * geo.block as usize)?;
        for (k, &(_, g)) in order[i..i + run].iter().enumerate() {
            let at = k * geo.block as usize;
            each(g, &bytes[at..at + bytes_per_bitmap]);
        }
        i += run;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_backups_sit_in_groups_0_1_and_powers_of_3_5_7() {
        let mut geo = Geometry {
            block: 4096,
            ratio: 1,
            blocks: 1 << 22,
            first_data: 0,
            per_group: 32768,
            clusters_per_group: 32768,
            groups: 128,
            desc_size: 32,
            descs_per_block: 128,
            old_descriptors: 1,
            reserved_descriptors: 0,
            meta_bg: false,
            inode_table_blocks: 512,
            sparse_super: true,
            sparse_super2: None,
        };
        let with: Vec<u64> = (0..130).filter(|&g| geo.has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125]);
        geo.sparse_super2 = Some([1, 31]);
        let with: Vec<u64> = (0..40).filter(|&g| geo.has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 31]);
    }
}
