//! Disks read by what their file systems use (`--used-only`): partition
//! tables, each file system's allocation map, and the used set they make
//! together. A disk's structures are whatever wrote it last left there.
//!
//! Every target here reads its input as a [`Sparse`] disk: the first
//! byte gives the disk's size, and the rest place sectors on it, zeros
//! elsewhere, as a freshly made file system is mostly zeros; so that a
//! small input stands for a file system of many groups, with its backup
//! structures and its log far apart, and its geometry is the fuzzer's to
//! change. The seeds are real images made by the file systems' own tools
//! (`fuzz/seed.py`), their sectors that are not all zeros.

use std::ops::Range;

use super::assert_one_line;
use super::input::drain;
use crate::allocation::{self, Extents, FileSystem, Found, ReadError, Source, Table, Verdict};
use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::image::UsedOnly;
use crate::sys::Errno;

/// The largest disk an input may say it is: 256 MiB, which ext4's and
/// XFS's smallest geometries cut into thousands of groups.
const LARGEST_LOG: u8 = 28;
/// Disks up to this size are also read through [`UsedOnly`].
const READ_THROUGH: u64 = 1 << 20;

/// Bytes of a sector, and of its place in a [`Sparse`] input.
const SECTOR: usize = 512;
const PLACED: usize = 4 + SECTOR;

/// A disk of `1 << (data[0] % 29)` bytes, zeros but for the sectors the
/// rest of `data` places: each [`PLACED`] bytes are a sector's number (4
/// bytes, little-endian, taken modulo the disk's sectors) and its 512
/// bytes, a later one over an earlier; a shorter last piece is the start
/// of the sector it names, if it names one.
pub struct Sparse<'a> {
    sectors: std::collections::BTreeMap<u64, &'a [u8]>,
    size: u64,
}

impl<'a> Sparse<'a> {
    pub fn new(data: &'a [u8]) -> Sparse<'a> {
        let mut sectors = std::collections::BTreeMap::new();
        let Some((&first, placed)) = data.split_first() else {
            return Sparse { sectors, size: 0 };
        };
        let size = 1u64 << (first % (LARGEST_LOG + 1));
        let count = size.div_ceil(SECTOR as u64);
        for piece in placed.chunks(PLACED) {
            if piece.len() > 4 {
                let number = u32::from_le_bytes([piece[0], piece[1], piece[2], piece[3]]);
                sectors.insert(u64::from(number) % count, &piece[4..]);
            }
        }
        Sparse { sectors, size }
    }

    /// The whole disk, zeros and all.
    fn materialise(&self) -> Vec<u8> {
        let mut disk = vec![0; self.size as usize];
        self.copy_into(0, &mut disk);
        disk
    }

    /// The placed bytes that fall in `offset..offset + buf.len()`, over
    /// zeros.
    fn copy_into(&self, offset: u64, buf: &mut [u8]) {
        let sector = SECTOR as u64;
        let end = offset + buf.len() as u64;
        for (&number, bytes) in self.sectors.range(offset / sector..end.div_ceil(sector)) {
            let at = number * sector;
            let from = offset.max(at);
            let to = end.min(at + bytes.len() as u64).min(self.size);
            if from < to {
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
            }
        }
    }
}

impl Source for Sparse<'_> {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.size) {
            return Err(ReadError {
                offset,
                len: buf.len(),
                cause: "past the end".into(),
            });
        }
        buf.fill(0);
        self.copy_into(offset, buf);
        Ok(())
    }
}

/// Whether `extents` covers all of `range`.
fn covers(extents: &Extents, range: &Range<u64>) -> bool {
    extents.bytes_within(range) == range.end - range.start
}

/// An [`Extents`] keeps its promise: sorted, non-empty, apart.
fn assert_well_formed(what: &str, extents: &Extents) {
    let ranges = extents.ranges();
    for range in ranges {
        assert!(range.start < range.end, "{what}: an empty range {range:?}");
    }
    for pair in ranges.windows(2) {
        assert!(
            pair[0].end < pair[1].start,
            "{what}: {:?} and {:?} out of order or touching",
            pair[0],
            pair[1]
        );
    }
}

/// `data` is a disk; its partition table is read as a disk of 512-byte
/// sectors, of 4096, and of either (the sizes tried where the disk's are
/// not known).
pub fn partition_table(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    for sector in [None, Some(512), Some(4096)] {
        let (table, parts) = allocation::read_table(&mut disk, sector);
        assert_one_line("a partition table", &table.to_string());
        if matches!(table, Table::None | Table::Unreadable(_)) {
            assert!(parts.is_empty(), "{table}: {parts:?}");
        }
        let mut numbers: Vec<u32> = parts.iter().map(|p| p.number).collect();
        for part in &parts {
            assert!(
                part.range.start < part.range.end && part.range.end <= size,
                "partition {} at {:?} on a disk of {size} bytes",
                part.number,
                part.range
            );
            // A logical partition may start at its own boot record, or an
            // extended partition at the MBR: the kernel reads them so.
            assert!(part.number >= 1);
        }
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            parts.len(),
            "a number given twice: {parts:?}"
        );
    }
}

/// What must hold of one parser's verdict on all of `disk`: a mapped file
/// system lies on the disk, its used set is well formed, on the disk,
/// and holds the structure that names it (`named`: a range from its
/// start); a message is one line.
fn check_verdict(verdict: Option<Verdict>, size: u64, named: Range<u64>) {
    match verdict {
        None => {}
        Some(Verdict::Whole { name, why }) => {
            assert!(!why.is_empty(), "{name}: copied whole, and no reason");
            assert_one_line("why a file system is copied whole", &why);
            assert_one_line("a file system's name", &name);
        }
        Some(Verdict::Mapped {
            name,
            size: fs_size,
            used,
            note,
        }) => {
            assert!(
                0 < fs_size && fs_size <= size,
                "{name} of {fs_size} bytes on a disk of {size}"
            );
            assert_well_formed(&name, &used);
            if let Some(last) = used.ranges().last() {
                assert!(last.end <= size, "{name} uses {last:?}, past the disk");
            }
            let named = named.start.min(fs_size)..named.end.min(fs_size);
            assert!(
                covers(&used, &named),
                "{name} leaves out bytes {named:?}, which make it one"
            );
            if let Some(note) = note {
                assert_one_line("a note on a file system", &note);
            }
        }
    }
}

/// `data` is a disk holding ext2, ext3 or ext4 (its superblock at byte
/// 1024): its block bitmaps, descriptors and their checksums.
pub fn ext(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    check_verdict(
        allocation::probe_as(FileSystem::Ext, &mut disk),
        size,
        1024..2048,
    );
}

/// `data` is a disk holding a FAT12, FAT16 or FAT32: its boot sector and
/// every copy of the FAT.
pub fn fat(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    check_verdict(
        allocation::probe_as(FileSystem::Fat, &mut disk),
        size,
        0..512,
    );
}

/// `data` is a disk holding a Linux swap area: its header page.
pub fn swap(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    check_verdict(
        allocation::probe_as(FileSystem::Swap, &mut disk),
        size,
        0..4096,
    );
}

/// `data` is a disk holding an XFS: its superblock, the log's head and
/// last record, each allocation group's free-space header and tree.
pub fn xfs(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    check_verdict(
        allocation::probe_as(FileSystem::Xfs, &mut disk),
        size,
        0..512,
    );
}

/// `data` is a disk holding an NTFS: its boot sector, the MFT records of
/// $MFT, $MFTMirr, $LogFile, $Volume and $Bitmap with their update
/// sequences and runlists, $LogFile's restart pages, and $Bitmap.
pub fn ntfs(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    check_verdict(
        allocation::probe_as(FileSystem::Ntfs, &mut disk),
        size,
        0..512,
    );
}

/// `data` is a disk read as `--used-only` reads one (in 512-byte, 4096-
/// byte or unknown sectors, from the first byte's top bits): the used
/// set is whole blocks on the disk; every byte outside the partitions,
/// of a partition copied whole, and of a table is in it; and a small
/// disk read through [`UsedOnly`] gives its used bytes as they are and
/// zeros elsewhere.
pub fn used_blocks(data: &[u8]) {
    let mut disk = Sparse::new(data);
    let size = disk.size();
    let sector = match data.first().map(|b| b >> 6) {
        Some(1) => Some(512),
        Some(2) => Some(4096),
        _ => None,
    };
    let analysis = allocation::analyse(&mut disk, sector);
    assert_eq!(analysis.size, size);
    let used = &analysis.used;
    assert_well_formed("the used set", used);
    for range in used.ranges() {
        assert!(range.end <= size, "{range:?} past a disk of {size} bytes");
        assert!(
            range.start % allocation::BLOCK == 0
                && (range.end % allocation::BLOCK == 0 || range.end == size),
            "{range:?} is not whole blocks"
        );
    }
    assert_one_line("a partition table", &analysis.table.to_string());
    if analysis.table != Table::None && size >= 512 {
        assert!(covers(used, &(0..512)), "the table's own sector left out");
    }
    let parts = Extents::from_ranges(analysis.parts.iter().map(|p| p.range.clone()).collect());
    for outside in parts.complement(0..size).ranges() {
        assert!(
            covers(used, outside),
            "{outside:?}, outside the partitions, left out"
        );
    }
    assert_eq!(analysis.outside, size - parts.bytes());
    let show = |bytes: u64| bytes.to_string();
    for part in &analysis.parts {
        let len = part.range.end - part.range.start;
        assert!(part.range.end <= size && part.used <= len, "{part:?}");
        assert_eq!(part.used, used.bytes_within(&part.range), "{part:?}");
        if let Found::Whole { .. } = part.found {
            assert!(covers(used, &part.range), "{part:?} left out in part");
        }
        assert_one_line("a partition's line", &part.describe(&show));
    }
    if size <= READ_THROUGH {
        read_through(&disk, used);
    }
}

/// `disk` read through [`UsedOnly`] as a file: its used bytes as they are,
/// the rest zeros, and the holes where the used set says.
fn read_through(disk: &Sparse<'_>, used: &Extents) {
    let bytes = disk.materialise();
    let image = Box::new(Image {
        data: bytes.clone(),
        at: 0,
    });
    let (mut wrapped, analysis) = UsedOnly::wrap(image, "'disk'", None).expect("a file has a size");
    assert_eq!(&analysis.used, used, "the same disk analysed twice");
    let mut at = 0;
    while let Ok(Some(data)) = wrapped.next_data(at) {
        let hole = wrapped.next_hole(data).expect("data ends");
        assert!(
            covers(used, &(data..hole)) && data >= at,
            "data {data}..{hole} is not used"
        );
        at = hole;
    }
    let read = drain(&mut wrapped, 65536, bytes.len() + 1);
    assert!(read.error.is_none() && !read.cut, "{:?}", read.error);
    assert_eq!(read.data.len(), bytes.len());
    let mut from = 0;
    for range in used.ranges() {
        let (start, end) = (range.start as usize, range.end as usize);
        assert!(
            read.data[from..start].iter().all(|&b| b == 0),
            "unused bytes read"
        );
        assert!(
            read.data[start..end] == bytes[start..end],
            "used bytes {range:?} differ"
        );
        from = end;
    }
    assert!(
        read.data[from..].iter().all(|&b| b == 0),
        "unused bytes read"
    );
    assert_eq!(wrapped.progress().read(), used.bytes());
}

/// A disk image in memory, read by position as `--used-only` reads one.
#[derive(Debug)]
struct Image {
    data: Vec<u8>,
    at: u64,
}

impl Stream for Image {
    fn kind(&self) -> Kind {
        Kind::RegularFile
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let start = usize::try_from(offset).map_or(self.data.len(), |o| o.min(self.data.len()));
        let n = buf.len().min(self.data.len() - start);
        buf[..n].copy_from_slice(&self.data[start..start + n]);
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        self.at = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(delta) => self.at.checked_add_signed(delta),
            Whence::End(delta) => (self.data.len() as u64).checked_add_signed(delta),
        }
        .ok_or(Errno::INVAL)?;
        Ok(self.at)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.data.len() as u64))
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        Ok(())
    }
}
