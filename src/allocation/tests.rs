//! Partition tables and FAT built byte by byte; ext4 and the rest, as
//! their own tools make them, are tested through the binary
//! (tests/all/used_only.rs).

// The expected sets are written as slices of ranges, one range or more.
#![allow(clippy::single_range_in_vec_init)]

use super::*;

const S: u64 = 512;

fn put32(disk: &mut [u8], at: usize, value: u32) {
    disk[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put64(disk: &mut [u8], at: usize, value: u64) {
    disk[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// A boot record at sector `lba` with `entries` (type, first, sectors).
fn boot_record(disk: &mut [u8], lba: u64, entries: &[(u8, u32, u32)]) {
    let base = (lba * S) as usize;
    for (i, &(kind, start, sectors)) in entries.iter().enumerate() {
        let at = base + 446 + 16 * i;
        disk[at + 4] = kind;
        put32(disk, at + 8, start);
        put32(disk, at + 12, sectors);
    }
    disk[base + 510] = 0x55;
    disk[base + 511] = 0xaa;
}

fn numbers_and_ranges(parts: &[table::Partition]) -> Vec<(u32, Range<u64>)> {
    parts.iter().map(|p| (p.number, p.range.clone())).collect()
}

#[test]
fn an_mbr_lists_its_primary_and_logical_partitions() {
    let mut disk = vec![0u8; 200 * S as usize];
    boot_record(&mut disk, 0, &[(0x83, 10, 20), (0x05, 40, 100)]);
    // The first logical's record at the extended partition's start,
    // pointing to the next one 20 sectors on.
    boot_record(&mut disk, 40, &[(0x83, 2, 10), (0x05, 20, 30)]);
    boot_record(&mut disk, 60, &[(0x0c, 2, 5)]);
    let (table, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(table, Table::Mbr);
    assert_eq!(
        numbers_and_ranges(&parts),
        vec![
            (1, 10 * S..30 * S),
            (5, 42 * S..52 * S),
            (6, 62 * S..67 * S)
        ]
    );
}

#[test]
fn a_chain_of_boot_records_that_goes_back_ends_there() {
    let mut disk = vec![0u8; 200 * S as usize];
    boot_record(&mut disk, 0, &[(0x05, 40, 100)]);
    boot_record(&mut disk, 40, &[(0x83, 2, 10), (0x05, 20, 30)]);
    // The second points back at the first.
    boot_record(&mut disk, 60, &[(0x83, 2, 5), (0x05, 0, 30)]);
    let (_, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(parts.len(), 2);
    let mut disk = vec![0u8; 200 * S as usize];
    boot_record(&mut disk, 0, &[(0x05, 40, 100)]);
    boot_record(&mut disk, 40, &[(0x83, 2, 10), (0x05, 20, 30)]);
    boot_record(&mut disk, 60, &[(0x83, 2, 5), (0x05, 10, 30)]);
    let (_, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(parts.len(), 2, "a record before the one pointing to it");
}

#[test]
fn logical_partitions_of_two_extended_partitions_are_numbered_on() {
    let mut disk = vec![0u8; 200 * S as usize];
    // Two extended partitions, both at sector 40: the kernel follows
    // each, numbering the second's logical partitions after the first's.
    boot_record(&mut disk, 0, &[(0x05, 40, 100), (0x05, 40, 100)]);
    boot_record(&mut disk, 40, &[(0x83, 2, 10), (0x05, 20, 30)]);
    boot_record(&mut disk, 60, &[(0x0c, 2, 5)]);
    let (_, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(
        numbers_and_ranges(&parts),
        vec![
            (5, 42 * S..52 * S),
            (6, 62 * S..67 * S),
            (7, 42 * S..52 * S),
            (8, 62 * S..67 * S)
        ]
    );
}

#[test]
fn a_boot_flag_other_than_0_or_0x80_is_not_an_mbr() {
    let mut disk = vec![0u8; 200 * S as usize];
    boot_record(&mut disk, 0, &[(0x83, 10, 20)]);
    disk[446 + 16] = 0x12;
    assert_eq!(table::read(&mut InMemory(&disk), None).0, Table::None);
}

fn crc32(bytes: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(bytes)
}

/// A GPT header at `lba` for an entry array at `entries_lba`.
fn gpt_header(disk: &mut [u8], lba: u64, alternate: u64, entries_lba: u64, array_crc: u32) {
    let at = (lba * S) as usize;
    let h = &mut disk[at..at + 92];
    h[..8].copy_from_slice(b"EFI PART");
    put32(h, 8, 0x10000);
    put32(h, 12, 92);
    put64(h, 24, lba);
    put64(h, 32, alternate);
    put64(h, 72, entries_lba);
    put32(h, 80, 4);
    put32(h, 84, 128);
    put32(h, 88, array_crc);
    let crc = crc32(h);
    put32(h, 16, crc);
}

fn gpt_disk() -> Vec<u8> {
    let sectors = 300u64;
    let mut disk = vec![0u8; (sectors * S) as usize];
    boot_record(&mut disk, 0, &[(0xee, 1, sectors as u32 - 1)]);
    let mut array = vec![0u8; 4 * 128];
    for (i, (first, last)) in [(34u64, 99u64), (100, 199)].iter().enumerate() {
        let e = &mut array[i * 128..(i + 1) * 128];
        e[..16].copy_from_slice(&[0xaf; 16]);
        put64(e, 32, *first);
        put64(e, 40, *last);
    }
    let array_crc = crc32(&array);
    for (header, entries) in [(1u64, 2u64), (sectors - 1, sectors - 2)] {
        let at = (entries * S) as usize;
        disk[at..at + array.len()].copy_from_slice(&array);
        let alternate = if header == 1 { sectors - 1 } else { 1 };
        gpt_header(&mut disk, header, alternate, entries, array_crc);
    }
    disk
}

#[test]
fn a_gpt_lists_its_partitions() {
    let disk = gpt_disk();
    let (table, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(table, Table::Gpt { from_backup: false });
    assert_eq!(
        numbers_and_ranges(&parts),
        vec![(1, 34 * S..100 * S), (2, 100 * S..200 * S)]
    );
}

#[test]
fn a_gpt_whose_primary_fails_its_checksum_is_read_from_its_backup() {
    let mut disk = gpt_disk();
    disk[S as usize + 40] ^= 1;
    let (table, parts) = table::read(&mut InMemory(&disk), None);
    assert_eq!(table, Table::Gpt { from_backup: true });
    assert_eq!(parts.len(), 2);
    // The primary's entries broken instead.
    let mut disk = gpt_disk();
    disk[2 * S as usize + 40] ^= 1;
    assert_eq!(
        table::read(&mut InMemory(&disk), None).0,
        Table::Gpt { from_backup: true }
    );
    // Both broken: nothing is left out.
    let last = disk.len() - S as usize;
    disk[last + 40] ^= 1;
    let analysis = analyse(&mut InMemory(&disk), None);
    assert!(matches!(analysis.table, Table::Unreadable(_)));
    assert_eq!(analysis.used.ranges(), &[0..disk.len() as u64]);
}

/// A FAT12 file system of `sectors` 512-byte sectors, one sector per
/// cluster, whose clusters `used` (numbered from 2) are allocated.
fn fat12(sectors: u64, used: &[u16]) -> Vec<u8> {
    let mut fs = vec![0xa5u8; (sectors * S) as usize];
    fs[..512].fill(0);
    fs[0] = 0xeb;
    fs[1] = 0x3c;
    fs[2] = 0x90;
    fs[0x0b..0x0d].copy_from_slice(&512u16.to_le_bytes());
    fs[0x0d] = 1;
    fs[0x0e..0x10].copy_from_slice(&1u16.to_le_bytes());
    fs[0x10] = 2;
    fs[0x11..0x13].copy_from_slice(&16u16.to_le_bytes());
    fs[0x13..0x15].copy_from_slice(&(sectors as u16).to_le_bytes());
    fs[0x15] = 0xf8;
    fs[0x16..0x18].copy_from_slice(&1u16.to_le_bytes());
    fs[510] = 0x55;
    fs[511] = 0xaa;
    // Two FATs of one sector, then one sector of root directory.
    for copy in 0..2 {
        let fat = &mut fs[(1 + copy) * 512..(2 + copy) * 512];
        fat.fill(0);
        for &cluster in used {
            let at = cluster as usize * 3 / 2;
            let value: u16 = 0xfff;
            if cluster % 2 == 0 {
                fat[at] = value as u8;
                fat[at + 1] = (fat[at + 1] & 0xf0) | (value >> 8) as u8;
            } else {
                fat[at] = (fat[at] & 0x0f) | ((value & 0xf) << 4) as u8;
                fat[at + 1] = (value >> 4) as u8;
            }
        }
    }
    fs
}

#[test]
fn a_fat12_uses_its_metadata_and_its_allocated_clusters() {
    let fs = fat12(64, &[2, 3, 7]);
    let analysis = analyse(&mut InMemory(&fs), None);
    assert_eq!(analysis.table, Table::None);
    assert_eq!(
        analysis.parts[0].found,
        Found::Mapped {
            name: "FAT12".into(),
            note: None
        }
    );
    // Boot, two FATs, the root directory: 4 sectors; clusters 2 and 3 at
    // sectors 4 and 5, cluster 7 at sector 9; all in whole 4 KiB blocks.
    let used = fs_used(&fs);
    assert_eq!(used.ranges(), &[0..6 * S, 9 * S..10 * S]);
    assert_eq!(analysis.used.ranges(), &[0..2 * 4096]);
}

/// The used bytes the FAT parser gives for a whole-disk file system,
/// before rounding.
fn fs_used(fs: &[u8]) -> Extents {
    let mut source = InMemory(fs);
    let mut region = Region {
        source: &mut source,
        start: 0,
        len: fs.len() as u64,
    };
    match fat::probe(&mut region) {
        Some(Verdict::Mapped { used, .. }) => used,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cluster_in_use_in_either_fat_is_used() {
    let mut fs = fat12(64, &[]);
    fs[1024 + 3] = 0xf0; // cluster 2 in the second FAT only
    assert_eq!(fs_used(&fs).ranges(), &[0..5 * S]);
}

#[test]
fn partitions_are_mapped_and_what_is_outside_them_is_kept() {
    // 1 MiB: a FAT12 at sector 256 (64 KiB), and 64 KiB of an unknown
    // kind at sector 512.
    let mut disk = vec![0x5au8; 1 << 20];
    disk[..512].fill(0);
    boot_record(&mut disk, 0, &[(0x01, 256, 128), (0x83, 512, 128)]);
    let fs = fat12(128, &[2]);
    disk[256 * 512..384 * 512].copy_from_slice(&fs);
    let analysis = analyse(&mut InMemory(&disk), None);
    assert_eq!(analysis.table, Table::Mbr);
    assert_eq!(analysis.parts.len(), 2);
    assert_eq!(
        analysis.parts[1].found,
        Found::Whole {
            name: None,
            why: "no file system recognised".into()
        }
    );
    // The FAT's first 4 KiB block is used, the rest of its 64 KiB not.
    let fat_start = 256 * 512;
    let fat_end = 384 * 512;
    assert_eq!(
        analysis.used.complement(0..1 << 20).ranges(),
        &[fat_start + 4096..fat_end]
    );
    assert_eq!(analysis.parts[0].used, 4096);
    assert_eq!(analysis.parts[1].used, 64 << 10);
    assert_eq!(analysis.outside, (1 << 20) - 2 * (64 << 10));
}

#[test]
fn overlapping_partitions_keep_what_either_uses() {
    let mut disk = vec![0x5au8; 1 << 20];
    disk[..512].fill(0);
    // The same FAT listed twice, and an unknown partition over its tail.
    boot_record(&mut disk, 0, &[(0x01, 256, 128), (0x83, 320, 64)]);
    disk[256 * 512..384 * 512].copy_from_slice(&fat12(128, &[2]));
    let analysis = analyse(&mut InMemory(&disk), None);
    assert_eq!(
        analysis.used.complement(0..1 << 20).ranges(),
        &[256 * 512 + 4096..320 * 512]
    );
}

#[test]
fn two_signatures_in_one_partition_copy_it_whole() {
    let mut fs = fat12(64, &[2]);
    // An ext superblock's magic left at byte 1080.
    fs[1080] = 0x53;
    fs[1081] = 0xef;
    let analysis = analyse(&mut InMemory(&fs), None);
    assert!(
        matches!(&analysis.parts[0].found, Found::Whole { why, .. }
            if why.contains("FAT12") && why.contains(" and ")),
        "{:?}",
        analysis.parts[0].found
    );
    assert_eq!(analysis.used.bytes(), fs.len() as u64);
}

#[test]
fn swap_keeps_its_header_page_only() {
    let mut disk = vec![0x77u8; 64 << 10];
    disk[4096 - 10..4096].copy_from_slice(b"SWAPSPACE2");
    put32(&mut disk, 1024, 1);
    put32(&mut disk, 1028, 15);
    let analysis = analyse(&mut InMemory(&disk), None);
    assert_eq!(analysis.used.ranges(), &[0..4096]);
    disk[4096 - 10..4096].copy_from_slice(b"S1SUSPEND\0");
    let analysis = analyse(&mut InMemory(&disk), None);
    assert_eq!(analysis.used.bytes(), 64 << 10);
}

#[test]
fn nothing_breaks_on_short_or_empty_disks() {
    for len in [0usize, 1, 511, 512, 1500, 4096] {
        let disk = vec![0u8; len];
        let analysis = analyse(&mut InMemory(&disk), None);
        assert_eq!(analysis.used.bytes(), len as u64);
    }
}

/// ext4 file systems of 3 MiB in 1 KiB blocks and three groups of 1024,
/// made by `mkfs.ext4 -b 1024 -g 1024 -N 64 -d` from a few text files:
/// one with flex_bg, 64bit and metadata_csum (crc32c), one without
/// flex_bg and with uninit_bg (crc16); in both, group 1 is BLOCK_UNINIT.
fn ext4_fixture(name: &str) -> Vec<u8> {
    let packed: &[u8] = match name {
        "csum" => include_bytes!("testdata/ext4-csum.img.zst"),
        _ => include_bytes!("testdata/ext4-crc16.img.zst"),
    };
    zstd::decode_all(packed).unwrap()
}

/// What the ext parser makes of `fs` as a whole disk.
fn ext_verdict(fs: &[u8]) -> Verdict {
    let mut source = InMemory(fs);
    let mut region = Region {
        source: &mut source,
        start: 0,
        len: fs.len() as u64,
    };
    ext::probe(&mut region).expect("an ext superblock")
}

#[test]
fn ext4_descriptors_and_bitmaps_pass_their_checksums_and_free_blocks_are_left_out() {
    for name in ["csum", "crc16"] {
        let fs = ext4_fixture(name);
        let Verdict::Mapped {
            name: kind,
            used,
            note,
            size,
        } = ext_verdict(&fs)
        else {
            panic!("{name}: not mapped");
        };
        assert_eq!(
            (kind.as_str(), note, size),
            ("ext4", None, 3 << 20),
            "{name}"
        );
        // dumpe2fs: 1558 of 3072 blocks in use; group 1 (blocks 1025 to
        // 2048) is BLOCK_UNINIT: used are its superblock backup, its
        // descriptors and reserved descriptor blocks, and (without
        // flex_bg) its bitmaps and inode table: "Free blocks: 1218-2048"
        // ("1226-2048" without flex_bg).
        let free_from = if name == "csum" { 1218 } else { 1226 };
        assert!(used.bytes() >= 1558 * 1024, "{name}: {}", used.bytes());
        assert!(used.bytes() < 2 << 20, "{name}: {}", used.bytes());
        assert_eq!(
            used.bytes_within(&(1025 * 1024..2049 * 1024)),
            (free_from - 1025) * 1024,
            "{name}: {used:?}"
        );
        assert_eq!(used.next_hole(1025 * 1024), free_from * 1024, "{name}");
    }
}

#[test]
fn an_ext4_group_whose_descriptor_fails_its_checksum_is_copied_whole() {
    for name in ["csum", "crc16"] {
        let mut fs = ext4_fixture(name);
        // Group 1's descriptor (block 2, 64 bytes each): its count of
        // directories.
        fs[2048 + 64 + 0x10] ^= 1;
        let Verdict::Mapped { used, note, .. } = ext_verdict(&fs) else {
            panic!("{name}: not mapped");
        };
        let note = note.expect("a note");
        assert!(
            note.contains("descriptors failing their checksums (first: group 1)"),
            "{note}"
        );
        assert_eq!(
            used.bytes_within(&(1025 * 1024..2049 * 1024)),
            1024 * 1024,
            "{name}"
        );
    }
}

#[test]
fn an_ext4_bitmap_that_fails_its_checksum_copies_its_group_whole() {
    let mut fs = ext4_fixture("csum");
    // Group 2's block bitmap, where its descriptor says.
    let bitmap = le32(&fs, 2048 + 2 * 64) as usize * 1024;
    fs[bitmap + 100] ^= 0x10;
    let Verdict::Mapped { used, note, .. } = ext_verdict(&fs) else {
        panic!("not mapped");
    };
    assert!(note
        .unwrap()
        .contains("bitmaps failing their checksums (first: group 2)"));
    assert_eq!(used.bytes_within(&(2049 * 1024..3072 * 1024)), 1023 * 1024);
}

#[test]
fn an_ext4_whose_journal_needs_recovery_is_copied_whole() {
    let mut fs = ext4_fixture("csum");
    fs[1024 + 0x60] |= 0x4;
    assert!(matches!(ext_verdict(&fs), Verdict::Whole { why, .. } if why.contains("journal")));
}

/// An NTFS of 4 MiB in 4 KiB clusters made by `mkntfs -f -Q -F`, three
/// text files written through ntfs-3g and a fourth of 600 KB written and
/// deleted. Its $MFT lies at cluster 4 (1 KiB records), its $Bitmap at
/// cluster 0x87, its $LogFile at clusters 0x200-0x2ff.
fn ntfs_fixture() -> Vec<u8> {
    zstd::decode_all(&include_bytes!("testdata/ntfs.img.zst")[..]).unwrap()
}

const NTFS_MFT: usize = 4 * 4096;
const NTFS_LOG: usize = 0x200 * 4096;

fn ntfs_verdict(fs: &[u8]) -> Verdict {
    let mut source = InMemory(fs);
    let mut region = Region {
        source: &mut source,
        start: 0,
        len: fs.len() as u64,
    };
    ntfs::probe(&mut region).expect("an NTFS boot sector")
}

fn ntfs_whole_why(fs: &[u8]) -> String {
    match ntfs_verdict(fs) {
        Verdict::Whole { name, why } => {
            assert_eq!(name, "NTFS");
            why
        }
        mapped => panic!("mapped: {mapped:?}"),
    }
}

#[test]
fn ntfs_uses_what_its_bitmap_marks_as_partclone_does() {
    let fs = ntfs_fixture();
    let Verdict::Mapped {
        name,
        size,
        used,
        note,
    } = ntfs_verdict(&fs)
    else {
        panic!("not mapped");
    };
    assert_eq!((name.as_str(), size, note), ("NTFS", 1023 * 4096, None));
    // `partclone.ntfs -D` of the same volume: the boot file, the MFT and
    // the small files, $Bitmap and what follows it, $MFTMirr with the
    // $LogFile; the deleted file's clusters and the rest are free.
    assert_eq!(
        used.ranges(),
        &[
            0..0x3000,
            0x4000..0x17000,
            0x83000..0x10_0000,
            0x1f_f000..0x30_0000
        ]
    );
    // On a disk, what lies past the last whole cluster (the backup boot
    // sector) is kept too.
    let analysis = analyse(&mut InMemory(&fs), None);
    assert_eq!(analysis.used.ranges().last(), Some(&(0x3f_f000..0x40_0000)));
}

#[test]
fn a_dirty_ntfs_is_copied_whole() {
    let mut fs = ntfs_fixture();
    // $Volume (record 3): its volume information's flags.
    let flags = NTFS_MFT + 3 * 1024 + 0x1a8 + 0x0a;
    assert_eq!(le16(&fs, flags), 0);
    fs[flags] |= 1;
    assert!(ntfs_whole_why(&fs).contains("marked dirty"));
    fs[flags + 1] = 0x40;
    fs[flags] = 0;
    assert!(ntfs_whole_why(&fs).contains("chkdsk"));
}

#[test]
fn an_ntfs_record_whose_update_sequence_does_not_match_is_not_trusted() {
    let mut fs = ntfs_fixture();
    // $Bitmap's record: the check word closing its first 512 bytes.
    fs[NTFS_MFT + 6 * 1024 + 510] ^= 1;
    let why = ntfs_whole_why(&fs);
    assert!(why.contains("$Bitmap (MFT record 6)"), "{why}");
    assert!(why.contains("torn write"), "{why}");
}

#[test]
fn an_ntfs_bitmap_that_marks_its_own_mft_free_is_not_trusted() {
    let mut fs = ntfs_fixture();
    // Cluster 4, the $MFT's first.
    fs[0x87 * 4096] &= !0x10;
    let why = ntfs_whole_why(&fs);
    assert!(
        why.contains("marks clusters of its $MFT free (from cluster 4)"),
        "{why}"
    );
}

/// A restart page at `offset` in the fixture's $LogFile (4 KiB, its
/// update sequence applied), its restart area's LSN, client list and
/// flags.
fn restart_page(fs: &mut [u8], offset: usize, lsn: u64, in_use: u16, flags: u16) {
    let page = &mut fs[NTFS_LOG + offset..NTFS_LOG + offset + 4096];
    page.fill(0);
    page[..4].copy_from_slice(b"RSTR");
    page[4..6].copy_from_slice(&0x1eu16.to_le_bytes());
    page[6..8].copy_from_slice(&9u16.to_le_bytes());
    page[0x10..0x14].copy_from_slice(&4096u32.to_le_bytes());
    page[0x14..0x18].copy_from_slice(&4096u32.to_le_bytes());
    page[0x18..0x1a].copy_from_slice(&0x40u16.to_le_bytes());
    // Sequence number 7; each stride's last word, 0, kept in the array.
    page[0x1e..0x20].copy_from_slice(&7u16.to_le_bytes());
    for i in 1..9 {
        page[i * 512 - 2..i * 512].copy_from_slice(&7u16.to_le_bytes());
    }
    page[0x40..0x48].copy_from_slice(&lsn.to_le_bytes());
    page[0x4c..0x4e].copy_from_slice(&in_use.to_le_bytes());
    page[0x4e..0x50].copy_from_slice(&flags.to_le_bytes());
}

#[test]
fn an_ntfs_whose_log_holds_changes_is_copied_whole() {
    let mut fs = ntfs_fixture();
    // mkntfs and ntfs-3g leave the log empty (0xff); Windows leaves
    // restart pages, the later one current.
    assert!(fs[NTFS_LOG..NTFS_LOG + 8192].iter().all(|&b| b == 0xff));
    restart_page(&mut fs, 0, 10, 0, 0);
    restart_page(&mut fs, 4096, 20, 0xffff, 0);
    assert!(matches!(ntfs_verdict(&fs), Verdict::Mapped { .. }));
    restart_page(&mut fs, 4096, 5, 0xffff, 0);
    assert!(ntfs_whole_why(&fs).contains("$LogFile holds changes"));
    restart_page(&mut fs, 0, 10, 0, 2);
    assert!(matches!(ntfs_verdict(&fs), Verdict::Mapped { .. }));
    // A torn restart page is not read; with neither readable, whether the
    // log is clean is not known.
    fs[NTFS_LOG + 1022] ^= 1;
    restart_page(&mut fs, 4096, 5, 0, 0);
    assert!(ntfs_whole_why(&fs).contains("$LogFile holds changes"));
    fs[NTFS_LOG + 4096 + 510] ^= 1;
    assert!(ntfs_whole_why(&fs).contains("no restart page ddx can read"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Bytes changed anywhere in a table or a file system's metadata never
    /// make the analysis panic, and it never leaves out a byte that no
    /// file system it recognised called free.
    #[test]
    fn changed_bytes_never_panic_nor_leave_out_what_is_not_free(
        which in 0usize..5,
        changes in proptest::collection::vec((0usize..100_000, proptest::prelude::any::<u8>()), 1..12),
    ) {
        let mut disk = match which {
            0 => ext4_fixture("csum"),
            1 => ext4_fixture("crc16"),
            2 => gpt_disk(),
            3 => ntfs_fixture(),
            _ => fat12(128, &[2, 3, 9]),
        };
        for (at, byte) in changes {
            let at = at % disk.len();
            disk[at] = byte;
        }
        let analysis = analyse(&mut InMemory(&disk), None);
        let size = disk.len() as u64;
        proptest::prop_assert!(analysis.used.ranges().iter().all(|r| r.end <= size));
        for part in &analysis.parts {
            if matches!(part.found, Found::Whole { .. }) {
                proptest::prop_assert_eq!(
                    analysis.used.bytes_within(&part.range),
                    part.range.end - part.range.start
                );
            }
        }
    }
}
