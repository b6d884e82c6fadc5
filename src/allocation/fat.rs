//! FAT12, FAT16 and FAT32: the file allocation table.
//!
//! Used is everything before the data area (the boot sector, the
//! reserved sectors with FAT32's FSInfo and backup boot sector, every
//! FAT, and FAT12/16's root directory) and every cluster whose entry is
//! not zero in any of the FATs (a cluster marked bad holds nothing to
//! keep). FAT32's root directory is a cluster chain like any other. The
//! type is told by the count of clusters, as the specification says, not
//! by the label in the boot sector.

use super::{le16, le32, set_runs, Broken, Extents, Region, Verdict};

/// FAT bytes read in one request at most.
const CHUNK: usize = 1 << 20;

/// The BIOS parameter block's fields, where they make a FAT.
struct Bpb {
    sector: u64,
    per_cluster: u64,
    reserved: u64,
    fats: u64,
    root_entries: u64,
    total: u64,
    fat_sectors: u64,
}

fn bpb(boot: &[u8]) -> Option<Bpb> {
    if !matches!(boot[0], 0xeb | 0xe9) {
        return None;
    }
    let sector = u64::from(le16(boot, 0x0b));
    let per_cluster = u64::from(boot[0x0d]);
    let reserved = u64::from(le16(boot, 0x0e));
    let fats = u64::from(boot[0x10]);
    let media = boot[0x15];
    let total = match le16(boot, 0x13) {
        0 => u64::from(le32(boot, 0x20)),
        n => u64::from(n),
    };
    let fat_sectors = match le16(boot, 0x16) {
        0 => u64::from(le32(boot, 0x24)),
        n => u64::from(n),
    };
    let valid = matches!(sector, 512 | 1024 | 2048 | 4096)
        && per_cluster.is_power_of_two()
        && per_cluster <= 128
        && reserved >= 1
        && (1..=4).contains(&fats)
        && (media == 0xf0 || media >= 0xf8)
        && total > 0
        && fat_sectors > 0;
    valid.then(|| Bpb {
        sector,
        per_cluster,
        reserved,
        fats,
        root_entries: u64::from(le16(boot, 0x11)),
        total,
        fat_sectors,
    })
}

/// A FAT at the region's start, or None.
pub(super) fn probe(region: &mut Region<'_>) -> Option<Verdict> {
    if region.len < 512 {
        return None;
    }
    let boot = region.bytes(0, 512).ok()?;
    let bpb = bpb(&boot)?;
    let clusters = layout(&bpb).map(|(_, clusters)| clusters);
    let name = match clusters {
        Ok(n) if n < 4085 => "FAT12",
        Ok(n) if n < 65525 => "FAT16",
        _ => "FAT32",
    }
    .to_owned();
    Some(match map(region, &bpb, &name) {
        Ok(verdict) => verdict,
        Err(broken) => Verdict::Whole {
            name,
            why: broken.to_string(),
        },
    })
}

/// The first sector of the data area and the count of clusters.
fn layout(bpb: &Bpb) -> Result<(u64, u64), Broken> {
    let root_sectors = (bpb.root_entries * 32).div_ceil(bpb.sector);
    let data = bpb.reserved + bpb.fats * bpb.fat_sectors + root_sectors;
    if data >= bpb.total {
        return Err(Broken::Format("its boot sector leaves no data area".into()));
    }
    Ok((data, (bpb.total - data) / bpb.per_cluster))
}

fn map(region: &mut Region<'_>, bpb: &Bpb, name: &str) -> Result<Verdict, Broken> {
    let (data, clusters) = layout(bpb)?;
    let size = bpb.total * bpb.sector;
    if size > region.len {
        return Err(Broken::Format(format!(
            "its boot sector gives {size} bytes, more than its partition's {}",
            region.len
        )));
    }
    let bits = match name {
        "FAT12" => 12,
        "FAT16" => 16,
        _ => 32,
    };
    let fat_bytes = bpb.fat_sectors * bpb.sector;
    if (fat_bytes * 8 / bits) < clusters + 2 {
        return Err(Broken::Format(
            "its FAT is too small for its clusters".into(),
        ));
    }
    // Entries 2.. of every FAT, as one bit per cluster: in use in any.
    let mut in_use = vec![0u8; (clusters as usize).div_ceil(8)];
    let entries = clusters + 2;
    let needed = (entries * bits).div_ceil(8);
    for copy in 0..bpb.fats {
        let base = (bpb.reserved + copy * bpb.fat_sectors) * bpb.sector;
        if bits == 12 {
            let fat = region.bytes(base, needed as usize)?;
            for cluster in 2..entries {
                let at = (cluster * 3 / 2) as usize;
                let pair = le16(&fat, at);
                let value = if cluster % 2 == 0 {
                    pair & 0xfff
                } else {
                    pair >> 4
                };
                if value != 0 && value != 0xff7 {
                    mark(&mut in_use, cluster - 2);
                }
            }
            continue;
        }
        let width = (bits / 8) as usize;
        let mut cluster = 0u64;
        let mut offset = 0u64;
        while offset < needed {
            let len = (CHUNK as u64).min(needed - offset) as usize;
            let chunk = region.bytes(base + offset, len)?;
            for entry in chunk.chunks_exact(width) {
                let value = if width == 2 {
                    u32::from(le16(entry, 0))
                } else {
                    le32(entry, 0) & 0x0fff_ffff
                };
                let bad = if width == 2 { 0xfff7 } else { 0x0fff_fff7 };
                if cluster >= 2 && cluster < entries && value != 0 && value != bad {
                    mark(&mut in_use, cluster - 2);
                }
                cluster += 1;
            }
            offset += len as u64;
        }
    }
    let cluster_bytes = bpb.per_cluster * bpb.sector;
    let data_start = data * bpb.sector;
    // The boot sector, the reserved sectors, the FATs, the root directory.
    let mut used = Vec::new();
    used.push(0..data_start);
    for (first, end) in set_runs(&in_use, clusters as usize) {
        used.push(
            data_start + first as u64 * cluster_bytes..data_start + end as u64 * cluster_bytes,
        );
    }
    Ok(Verdict::Mapped {
        name: name.to_owned(),
        size,
        used: Extents::from_ranges(used),
        note: None,
    })
}

fn mark(bits: &mut [u8], index: u64) {
    bits[(index / 8) as usize] |= 1 << (index % 8);
}
