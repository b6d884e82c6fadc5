//! NTFS: the volume's cluster bitmap, `$Bitmap`.
//!
//! NTFS keeps everything, its own metadata included, in files listed in
//! its master file table (`$MFT`), found through the boot sector. Record
//! 6 of the MFT is `$Bitmap`, whose unnamed data stream holds one bit
//! per cluster of the volume, set where the cluster is allocated. Used
//! is every cluster whose bit is set; and, whatever the bitmap says, the
//! boot sector's cluster, the clusters of `$MFT`, `$MFTMirr`, `$LogFile`
//! and `$Bitmap` itself (which a sound bitmap marks in use: one that
//! marks any of them free is not trusted, and the volume is copied
//! whole), and everything past the last whole cluster, where the backup
//! boot sector lies.
//!
//! Every MFT record and restart page is read through its update
//! sequence (the check words NTFS stamps at the end of each 512 bytes of
//! a structure that spans several sectors, to catch a torn write), and
//! one whose check words do not match is not trusted. The streams are
//! read through their runlists (runs of clusters as signed deltas from
//! the previous run's start, sparse runs reading as zeros), so a
//! fragmented `$MFT` or `$Bitmap` is read where it lies.
//!
//! NTFS writes its metadata changes to `$LogFile` first and in place
//! later, so until the log is replayed the bitmap on disk may be behind
//! it. The bitmap is trusted only when the volume is clean: `$Volume`'s
//! flags neither dirty nor chkdsk under way, and `$LogFile` empty (as
//! ntfs-3g and ntfsfix leave it) or its current restart area saying it
//! holds nothing to replay (as Windows leaves it at a clean shutdown,
//! and not after a fast startup or a hibernation, which ntfs-3g refuses
//! to mount for the same reason). Not detected: a Windows hibernated
//! with its log clean, whose `hiberfil.sys` holds a memory image that
//! expects the volume as it left it (finding that file means reading the
//! root directory's index, which this module does not); the copy is
//! still the volume as it is on disk. A volume whose `$MFT` or
//! `$Bitmap` is compressed or encrypted, whose `$Bitmap` is described
//! across several MFT records, or whose structures do not parse, is
//! copied whole, and the verdict says why.
//!
//! Read by hand rather than through the `ntfs` crate: that crate reads
//! files and attributes well, but it is not fuzzed upstream and its
//! reported overflows on crafted volumes are panics in code ddx cannot
//! fix; what a backup needs is five MFT records, two restart pages and a
//! bitmap, each checked here against the volume's bounds.

use std::ops::Range;

use super::{le16, le32, le64, set_runs, Broken, Extents, Region, Verdict};

const NAME: &str = "NTFS";
const OEM: &[u8; 8] = b"NTFS    ";
const FILE_MAGIC: &[u8; 4] = b"FILE";
const RESTART_MAGIC: &[u8; 4] = b"RSTR";
const CHKDSK_MAGIC: &[u8; 4] = b"CHKD";

/// The stride of an update sequence: one check word at the end of every
/// 512 bytes, whatever the sector size.
const STRIDE: usize = 512;

/// The MFT records of the system files read here.
const MFT: u64 = 0;
const MFT_MIRR: u64 = 1;
const LOG_FILE: u64 = 2;
const VOLUME: u64 = 3;
const BITMAP: u64 = 6;

/// Attribute types.
const ATTRIBUTE_LIST: u32 = 0x20;
const VOLUME_INFORMATION: u32 = 0x70;
const DATA: u32 = 0x80;
const END: u32 = 0xffff_ffff;
/// An attribute's flags that change how its runs read.
const COMPRESSED: u16 = 0x0001;
const ENCRYPTED: u16 = 0x4000;

/// `$Volume`'s flags that say its maps may be behind.
const VOLUME_IS_DIRTY: u16 = 0x0001;
const VOLUME_CHKDSK_UNDERWAY: u16 = 0x4000;

/// A restart area's "no client" list end, and its clean flag.
const NO_CLIENT: u16 = 0xffff;
const RESTART_VOLUME_IS_CLEAN: u16 = 0x0002;

/// The largest cluster Windows makes (2 MiB), and MFT record.
const MAX_CLUSTER: u64 = 2 << 20;
const MAX_RECORD: u64 = 64 << 10;
/// Bitmap bytes read in one request at most.
const CHUNK: u64 = 1 << 20;

fn format(why: impl Into<String>) -> Broken {
    Broken::Format(why.into())
}

/// An NTFS at the region's start, or None.
pub(super) fn probe(region: &mut Region<'_>) -> Option<Verdict> {
    if region.len < 512 {
        return None;
    }
    let boot = region.bytes(0, 512).ok()?;
    if &boot[3..11] != OEM {
        return None;
    }
    Some(match map(region, &boot) {
        Ok(verdict) => verdict,
        Err(broken) => Verdict::Whole {
            name: NAME.into(),
            why: broken.to_string(),
        },
    })
}

/// What the boot sector gives, checked.
struct Geometry {
    cluster: u64,
    /// Whole clusters in the volume: the bits of `$Bitmap` that count.
    clusters: u64,
    record: u64,
    mft: u64,
}

fn geometry(boot: &[u8], region_len: u64) -> Result<Geometry, Broken> {
    let sector = u64::from(le16(boot, 0x0b));
    if !(256..=4096).contains(&sector) || !sector.is_power_of_two() {
        return Err(format("its boot sector gives a bad sector size"));
    }
    // Past 128 sectors a cluster is given as a negative power of two.
    let per_cluster = match boot[0x0d] {
        n @ 1..=0x80 if n.is_power_of_two() => u64::from(n),
        n if n > 0x80 && 256 - u32::from(n) <= 20 => 1 << (256 - u32::from(n)),
        _ => return Err(format("its boot sector gives a bad cluster size")),
    };
    let cluster = sector * per_cluster;
    if cluster > MAX_CLUSTER {
        return Err(format("its boot sector gives a bad cluster size"));
    }
    let sectors = le64(boot, 0x28);
    let size = sectors
        .checked_mul(sector)
        .ok_or_else(|| format("its boot sector gives a size past any disk"))?;
    if size > region_len {
        return Err(format(format!(
            "its boot sector gives {size} bytes, more than its partition's {region_len}"
        )));
    }
    let clusters = sectors / per_cluster;
    // Clusters per record, or (negative) the record's size as a power of
    // two.
    let record = match boot[0x40] as i8 {
        n @ 1.. => u64::from(n.unsigned_abs()) * cluster,
        n @ -31..=-1 => 1 << n.unsigned_abs(),
        _ => 0,
    };
    if !(STRIDE as u64..=MAX_RECORD).contains(&record) || !record.is_power_of_two() {
        return Err(format("its boot sector gives a bad MFT record size"));
    }
    let mft = le64(boot, 0x30);
    if mft >= clusters {
        return Err(format("its boot sector places its MFT outside the volume"));
    }
    Ok(Geometry {
        cluster,
        clusters,
        record,
        mft,
    })
}

/// Apply the update sequence of the structure in `bytes`, which starts
/// with `magic`: the check word at the end of every [`STRIDE`] must be
/// the sequence's number, and is replaced by the bytes it stands for.
fn fixup(bytes: &mut [u8], magic: &[u8; 4]) -> Result<(), String> {
    if &bytes[..4] != magic {
        return Err(format!(
            "it is not a {} record",
            String::from_utf8_lossy(magic)
        ));
    }
    let at = usize::from(le16(bytes, 4));
    let count = usize::from(le16(bytes, 6));
    if at % 2 != 0 || at < 8 || at + 2 * count > STRIDE || count != bytes.len() / STRIDE + 1 {
        return Err("its update sequence is out of place".into());
    }
    let sequence: Vec<u8> = bytes[at..at + 2 * count].to_vec();
    for i in 1..count {
        let end = i * STRIDE;
        if bytes[end - 2..end] != sequence[..2] {
            return Err("its update sequence does not match (a torn write)".into());
        }
        bytes[end - 2..end].copy_from_slice(&sequence[2 * i..2 * i + 2]);
    }
    Ok(())
}

/// One attribute of an MFT record.
struct Attribute<'r> {
    kind: u32,
    named: bool,
    flags: u16,
    bytes: &'r [u8],
}

impl Attribute<'_> {
    fn resident_value(&self) -> Result<&[u8], String> {
        if self.bytes[8] != 0 || self.bytes.len() < 0x18 {
            return Err("an attribute that should be resident is not".into());
        }
        let len = le32(self.bytes, 0x10) as usize;
        let at = usize::from(le16(self.bytes, 0x14));
        self.bytes
            .get(at..)
            .and_then(|rest| rest.get(..len))
            .ok_or_else(|| "an attribute's value lies past its end".into())
    }
}

/// An MFT record, its update sequence applied and its header checked.
struct Record {
    number: u64,
    bytes: Vec<u8>,
}

impl Record {
    fn new(number: u64, mut bytes: Vec<u8>) -> Result<Record, String> {
        fixup(&mut bytes, FILE_MAGIC)?;
        let usa_end = usize::from(le16(&bytes, 4)) + 2 * usize::from(le16(&bytes, 6));
        let first = usize::from(le16(&bytes, 0x14));
        let in_use = le32(&bytes, 0x18) as usize;
        if le16(&bytes, 0x16) & 1 == 0 {
            return Err("it is not in use".into());
        }
        if first < usa_end || in_use > bytes.len() || first >= in_use {
            return Err("its attributes are out of place".into());
        }
        if le64(&bytes, 0x20) != 0 {
            return Err("it is an extension of another record".into());
        }
        // NTFS 3.1 records carry their own number after the header.
        if le16(&bytes, 4) >= 0x30 && u64::from(le32(&bytes, 0x2c)) != number {
            return Err("it carries another record's number".into());
        }
        Ok(Record { number, bytes })
    }

    fn attributes(&self) -> Result<Vec<Attribute<'_>>, String> {
        let bytes = &self.bytes[..le32(&self.bytes, 0x18) as usize];
        let mut at = usize::from(le16(bytes, 0x14));
        let mut found = Vec::new();
        loop {
            if at + 4 > bytes.len() {
                return Err("its attributes run past its end".into());
            }
            let kind = le32(bytes, at);
            if kind == END {
                return Ok(found);
            }
            if at + 0x10 > bytes.len() {
                return Err("its attributes run past its end".into());
            }
            let len = le32(bytes, at + 4) as usize;
            if len < 0x18 || len % 8 != 0 || len > bytes.len() - at {
                return Err("an attribute's length is out of bounds".into());
            }
            let attribute = &bytes[at..at + len];
            found.push(Attribute {
                kind,
                named: attribute[9] != 0,
                flags: le16(attribute, 0x0c),
                bytes: attribute,
            });
            at += len;
        }
    }

    /// Its unnamed attribute of `kind`, the first if several; an
    /// attribute list, which may move it to another record, is refused.
    fn unnamed(&self, kind: u32) -> Result<Attribute<'_>, String> {
        let attributes = self.attributes()?;
        if self.number != MFT && attributes.iter().any(|a| a.kind == ATTRIBUTE_LIST) {
            return Err(
                "it is described across several MFT records (an attribute list), which ddx \
                 does not follow"
                    .into(),
            );
        }
        attributes
            .into_iter()
            .find(|a| a.kind == kind && !a.named)
            .ok_or_else(|| format!("it has no attribute {kind:#x}"))
    }
}

/// One run of a stream: `len` clusters from `vcn` on, at `lcn` (None: a
/// sparse run, zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    vcn: u64,
    len: u64,
    lcn: Option<u64>,
}

/// A non-resident stream: its runs (from cluster 0 of the stream on) and
/// the bytes of it that hold data.
struct Stream {
    runs: Vec<Run>,
    size: u64,
}

impl Stream {
    /// The stream of the non-resident attribute `attribute` on a volume
    /// of `clusters` clusters of `cluster` bytes.
    fn new(attribute: &Attribute<'_>, geo: &Geometry) -> Result<Stream, String> {
        let a = attribute.bytes;
        if a[8] == 0 || a.len() < 0x40 {
            return Err("its data is not held in runs".into());
        }
        if attribute.flags & (COMPRESSED | ENCRYPTED) != 0 {
            return Err("its data is compressed or encrypted".into());
        }
        let lowest = le64(a, 0x10);
        let highest = le64(a, 0x18);
        let pairs = usize::from(le16(a, 0x20));
        let size = le64(a, 0x30);
        let initialised = le64(a, 0x38);
        if lowest != 0 {
            return Err("its first runs are in another record".into());
        }
        if pairs < 0x40 || pairs >= a.len() {
            return Err("its runlist is out of place".into());
        }
        let runs = runlist(&a[pairs..], geo)?;
        let mapped = runs.last().map_or(0, |r| r.vcn + r.len);
        if highest.checked_add(1) != Some(mapped) {
            return Err("its runlist does not span the clusters its header says".into());
        }
        Ok(Stream {
            runs,
            size: size.min(initialised),
        })
    }

    /// Fill `buf` from byte `offset` of the stream.
    fn read(
        &self,
        region: &mut Region<'_>,
        geo: &Geometry,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), String> {
        let short = || "its runs end before its data".to_owned();
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.size)
            .ok_or_else(short)?;
        let mut at = offset;
        while at < end {
            let vcn = at / geo.cluster;
            let run = self
                .runs
                .iter()
                .find(|r| r.vcn <= vcn && vcn < r.vcn + r.len)
                .ok_or_else(short)?;
            let run_end = (run.vcn + run.len).saturating_mul(geo.cluster);
            let to = end.min(run_end);
            let part = &mut buf[(at - offset) as usize..(to - offset) as usize];
            match run.lcn {
                None => part.fill(0),
                Some(lcn) => region
                    .read(lcn * geo.cluster + (at - run.vcn * geo.cluster), part)
                    .map_err(|e| e.to_string())?,
            }
            at = to;
        }
        Ok(())
    }

    /// The bytes of the volume its runs hold.
    fn places(&self, geo: &Geometry) -> Vec<Range<u64>> {
        self.runs
            .iter()
            .filter_map(|r| Some(r.lcn? * geo.cluster..(r.lcn? + r.len) * geo.cluster))
            .collect()
    }
}

/// The runs of a mapping-pairs array: each a header byte (the sizes of
/// the length and offset fields, low nibble and high), the run's length
/// in clusters, and its start as a signed delta from the previous run's
/// (no offset field: a sparse run); a zero header ends the list. Every
/// run lies inside the volume.
fn runlist(pairs: &[u8], geo: &Geometry) -> Result<Vec<Run>, String> {
    let bad = || "its runlist is broken".to_owned();
    let mut runs = Vec::new();
    let (mut at, mut vcn, mut lcn) = (0usize, 0u64, 0i64);
    loop {
        let &header = pairs.get(at).ok_or_else(bad)?;
        if header == 0 {
            return Ok(runs);
        }
        let (len_size, off_size) = (usize::from(header & 0xf), usize::from(header >> 4));
        if len_size == 0 || len_size > 8 || off_size > 8 {
            return Err(bad());
        }
        let field = |from: usize, size: usize| -> Option<i64> {
            let bytes = pairs.get(from..from + size)?;
            // Little-endian, sign-extended from its top byte.
            let mut value = i64::from(bytes[size - 1] as i8);
            for &b in bytes[..size - 1].iter().rev() {
                value = value << 8 | i64::from(b);
            }
            Some(value)
        };
        let len = field(at + 1, len_size).ok_or_else(bad)?;
        let len = u64::try_from(len).ok().filter(|&l| l > 0).ok_or_else(bad)?;
        let place = if off_size == 0 {
            None
        } else {
            let delta = field(at + 1 + len_size, off_size).ok_or_else(bad)?;
            lcn = lcn.checked_add(delta).ok_or_else(bad)?;
            let start = u64::try_from(lcn).map_err(|_| bad())?;
            if start.checked_add(len).is_none_or(|end| end > geo.clusters) {
                return Err("its runlist places clusters outside the volume".into());
            }
            Some(start)
        };
        runs.push(Run {
            vcn,
            len,
            lcn: place,
        });
        vcn = vcn.checked_add(len).ok_or_else(bad)?;
        at += 1 + len_size + off_size;
    }
}

fn map(region: &mut Region<'_>, boot: &[u8]) -> Result<Verdict, Broken> {
    let whole = |why: String| {
        Ok(Verdict::Whole {
            name: NAME.into(),
            why,
        })
    };
    let geo = geometry(boot, region.len)?;
    let record_len = geo.record as usize;
    // Record 0, $MFT itself, where the boot sector says; the others
    // through its runs.
    let first = region.bytes(geo.mft * geo.cluster, record_len)?;
    let mft_record =
        Record::new(MFT, first).map_err(|why| format(format!("its MFT record 0: {why}")))?;
    let mft = mft_record
        .unnamed(DATA)
        .and_then(|data| Stream::new(&data, &geo))
        .map_err(|why| format(format!("its $MFT: {why}")))?;
    let mut record = |number: u64, name: &str| -> Result<Record, Broken> {
        let mut bytes = vec![0; record_len];
        mft.read(region, &geo, number * geo.record, &mut bytes)
            .and_then(|()| Record::new(number, bytes))
            .map_err(|why| format(format!("its {name} (MFT record {number}): {why}")))
    };
    let volume = record(VOLUME, "$Volume")?;
    let log_record = record(LOG_FILE, "$LogFile")?;
    let mirror_record = record(MFT_MIRR, "$MFTMirr")?;
    let bitmap_record = record(BITMAP, "$Bitmap")?;
    let stream_of = |record: &Record, name: &str| {
        record
            .unnamed(DATA)
            .and_then(|data| Stream::new(&data, &geo))
            .map_err(|why| format(format!("its {name}: {why}")))
    };
    let log = stream_of(&log_record, "$LogFile")?;
    let mirror = stream_of(&mirror_record, "$MFTMirr")?;
    let bitmap = stream_of(&bitmap_record, "$Bitmap")?;

    let flags = volume
        .unnamed(VOLUME_INFORMATION)
        .and_then(|a| a.resident_value().map(<[u8]>::to_vec))
        .and_then(|value| match value.len() {
            12.. => Ok(le16(&value, 0x0a)),
            _ => Err("its volume information is short".into()),
        })
        .map_err(|why| format(format!("its $Volume: {why}")))?;
    if flags & VOLUME_CHKDSK_UNDERWAY != 0 {
        return whole("chkdsk did not finish with it, so its $Bitmap may be wrong".into());
    }
    if flags & VOLUME_IS_DIRTY != 0 {
        return whole("it is marked dirty (due for chkdsk), so its $Bitmap may be wrong".into());
    }
    if let Err(why) = log_is_clean(region, &geo, &log) {
        return whole(why);
    }

    let in_bitmap =
        allocated(region, &geo, &bitmap).map_err(|why| format(format!("its $Bitmap: {why}")))?;
    // The metadata the volume cannot be read without: a bitmap that marks
    // any of it free is not this volume's.
    let metadata = [
        ("boot sector", std::iter::once(0..geo.cluster).collect()),
        ("$MFT", mft.places(&geo)),
        ("$MFTMirr", mirror.places(&geo)),
        ("$LogFile", log.places(&geo)),
        ("$Bitmap", bitmap.places(&geo)),
    ];
    for (name, places) in &metadata {
        if let Some(free) = places
            .iter()
            .find(|p| in_bitmap.bytes_within(p) != p.end - p.start)
        {
            return whole(format!(
                "its $Bitmap marks clusters of its {name} free (from cluster {}), so it is \
                 not to be trusted",
                free.start / geo.cluster
            ));
        }
    }
    let size = geo.clusters * geo.cluster;
    let used = in_bitmap.union(&Extents::from_ranges(
        metadata
            .into_iter()
            .flat_map(|(_, places)| places)
            .collect(),
    ));
    Ok(Verdict::Mapped {
        name: NAME.into(),
        size,
        used,
        note: None,
    })
}

/// The clusters `$Bitmap` marks allocated, in bytes of the volume.
fn allocated(region: &mut Region<'_>, geo: &Geometry, bitmap: &Stream) -> Result<Extents, String> {
    let bytes = geo.clusters.div_ceil(8);
    if bitmap.size < bytes {
        return Err(format!(
            "it holds {} bytes, too few for the volume's {} clusters",
            bitmap.size, geo.clusters
        ));
    }
    let mut used = Vec::new();
    let mut at = 0;
    while at < bytes {
        let len = CHUNK.min(bytes - at);
        let mut chunk = vec![0; len as usize];
        bitmap.read(region, geo, at, &mut chunk)?;
        let first = at * 8;
        let bits = (geo.clusters - first).min(len * 8) as usize;
        used.extend(set_runs(&chunk, bits).into_iter().map(|(start, end)| {
            (first + start as u64) * geo.cluster..(first + end as u64) * geo.cluster
        }));
        at += len;
    }
    Ok(Extents::from_ranges(used))
}

/// Ok when `$LogFile` holds nothing to replay: it is empty (all 0xff, as
/// ntfs-3g and ntfsfix leave it), or its current restart area (of the
/// two restart pages, the one with the later LSN) has no client in use
/// or says the volume is clean. Err says why not, or why that cannot be
/// told.
fn log_is_clean(region: &mut Region<'_>, geo: &Geometry, log: &Stream) -> Result<(), String> {
    let unreadable = |why: String| format!("its $LogFile cannot be read ({why})");
    let first_len = 4096.min(log.size);
    if first_len < STRIDE as u64 {
        return Err("its $LogFile is too small to be one".into());
    }
    let mut first = vec![0; first_len as usize];
    log.read(region, geo, 0, &mut first).map_err(unreadable)?;
    if first.iter().all(|&b| b == 0xff) {
        return Ok(());
    }
    // The second restart page follows the first, a system page on.
    let page_of = |page: &[u8]| {
        let size = u64::from(le32(page, 0x10));
        (size.is_power_of_two() && (STRIDE as u64..=MAX_RECORD).contains(&size)).then_some(size)
    };
    let second = page_of(&first).unwrap_or(4096);
    let mut current: Option<(u64, bool, bool)> = None;
    for offset in [0, second] {
        let mut header = vec![0; STRIDE];
        if log.read(region, geo, offset, &mut header).is_err() {
            continue;
        }
        let magic = match &header[..4] {
            m if m == RESTART_MAGIC => RESTART_MAGIC,
            m if m == CHKDSK_MAGIC => CHKDSK_MAGIC,
            _ => continue,
        };
        let Some(size) = page_of(&header) else {
            continue;
        };
        let mut page = vec![0; size as usize];
        if log.read(region, geo, offset, &mut page).is_err() || fixup(&mut page, magic).is_err() {
            continue;
        }
        let area = usize::from(le16(&page, 0x18));
        if area < 0x1e || area + 0x10 > page.len() {
            continue;
        }
        let lsn = le64(&page, area);
        let clean = le16(&page, area + 0x0c) == NO_CLIENT
            || le16(&page, area + 0x0e) & RESTART_VOLUME_IS_CLEAN != 0;
        if current.is_none_or(|(best, _, _)| lsn > best) {
            current = Some((lsn, clean, magic == CHKDSK_MAGIC));
        }
    }
    match current {
        None => Err(
            "its $LogFile has no restart page ddx can read, so whether it holds changes not \
             yet written in place is not known"
                .into(),
        ),
        Some((_, _, true)) => {
            Err("chkdsk left its $LogFile's restart page, so its $Bitmap may be wrong".into())
        }
        Some((_, false, _)) => Err(
            "its $LogFile holds changes not yet written in place (Windows hibernated or \
             fast-started, or the volume not unmounted cleanly), so its $Bitmap may be behind"
                .into(),
        ),
        Some((_, true, _)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(clusters: u64) -> Geometry {
        Geometry {
            cluster: 4096,
            clusters,
            record: 1024,
            mft: 4,
        }
    }

    #[test]
    fn runs_are_signed_deltas_from_the_previous_start_and_sparse_without_one() {
        // 16 clusters at 256; 5 at 240 (a delta of -16); 8 sparse; 2 at
        // 240 + 0x1000 (a delta of two bytes, the sparse run not moving
        // the start).
        let pairs = [
            0x21, 0x10, 0x00, 0x01, 0x11, 0x05, 0xf0, 0x01, 0x08, 0x21, 0x02, 0x00, 0x10, 0x00,
        ];
        let runs = runlist(&pairs, &volume(10_000)).unwrap();
        let expected = [
            (0, 16, Some(256)),
            (16, 5, Some(240)),
            (21, 8, None),
            (29, 2, Some(4336)),
        ];
        assert_eq!(
            runs,
            expected
                .map(|(vcn, len, lcn)| Run { vcn, len, lcn })
                .to_vec()
        );
        // Past the volume's end, before its start, or cut short: broken.
        assert!(runlist(&pairs, &volume(4000)).is_err());
        assert!(runlist(&[0x11, 0x05, 0xf0, 0x00], &volume(10_000)).is_err());
        assert!(runlist(&pairs[..12], &volume(10_000)).is_err());
        assert!(runlist(&[0x01, 0x00, 0x00], &volume(10_000)).is_err());
    }

    #[test]
    fn an_update_sequence_puts_back_the_words_it_stands_for() {
        let mut record = vec![0u8; 1024];
        record[..4].copy_from_slice(b"FILE");
        record[4] = 0x30;
        record[6] = 3;
        record[0x30..0x36].copy_from_slice(&[9, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        record[510..512].copy_from_slice(&[9, 0]);
        record[1022..1024].copy_from_slice(&[9, 0]);
        fixup(&mut record, FILE_MAGIC).unwrap();
        assert_eq!(
            (&record[510..512], &record[1022..1024]),
            (&[0xaa, 0xbb][..], &[0xcc, 0xdd][..])
        );
        record[510..512].copy_from_slice(&[9, 0]);
        record[1022..1024].copy_from_slice(&[8, 0]);
        assert!(fixup(&mut record, FILE_MAGIC).unwrap_err().contains("torn"));
    }
}
