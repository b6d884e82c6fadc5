//! `--verify`: read the output back from the device, not from the page
//! cache, and compare it with what the copy wrote, MiB by MiB, against the
//! digests the hasher thread kept. A differing MiB is then compared byte by
//! byte with the input, re-read, when the input can be read again, so that
//! the report names the first differing byte; otherwise it names the MiB.
//!
//! The output is read back through what the copy gives here ([`Reopen`]):
//! it is opened again as the copy opened it, with the copy's options, its
//! requests kept in flight by the engine's window, and what it wrote
//! synced and out of the page cache first (`copy::read_back`). This module
//! only compares.
//!
//! An image written through a block map (`--bmap`) is read back by
//! [`verify_ranges`] instead: only its mapped ranges (the unmapped
//! blocks were never written and hold what they held), each checked
//! against its digest (the map's, or one taken of the decoded range as
//! it was written where the map gives none), several ranges at once on
//! threads of their own, each with the output opened on its own.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::integrity::{ChunkDigests, VERIFY_CHUNK};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// An output (or an input) opened again to be read back.
pub trait ReadBack: Send {
    /// Fill `buf` from `offset`: fewer bytes only at the end.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno>;
}

/// How to open what is read back, as many times as there are readers.
pub trait Reopen: Sync {
    /// Before the first read: make what was written reach the device
    /// and leave the cache, over `total` bytes from `start`.
    fn prepare(&self, start: u64, total: u64) -> Result<(), Errno>;

    /// Open it for reading, in order from `start` on (`total` bytes: the
    /// reads ahead need not pass them) or, with `total` None, by
    /// position (a range at a time).
    fn open(&self, start: u64, total: Option<u64>) -> Result<Box<dyn ReadBack>, Errno>;
}

/// How the read-back went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte read back equals what was written.
    Identical { bytes: u64 },
    /// The output differs from the stream at output `offset`; `exact` is
    /// false when only the MiB holding the first difference is known (its
    /// start is given).
    Differs { offset: u64, exact: bool },
}

/// Read back `chunks.total` bytes of the output `reopen` opens, from
/// output offset `start`; `reference`: the input, opened again, and the
/// input offset of the stream's first byte.
pub fn verify(
    reopen: &dyn Reopen,
    start: u64,
    chunks: &ChunkDigests,
    reference: Option<(&dyn Reopen, u64)>,
) -> Result<Verdict, Errno> {
    reopen.prepare(start, chunks.total)?;
    let mut reader = reopen.open(start, Some(chunks.total))?;
    let mut buf = AlignedBuf::new(VERIFY_CHUNK)?;
    for (index, &expected) in chunks.digests.iter().enumerate() {
        let chunk_start = index as u64 * VERIFY_CHUNK as u64;
        let want = (chunks.total - chunk_start).min(VERIFY_CHUNK as u64) as usize;
        let got = reader.read_at(&mut buf.as_mut_slice()[..want], start + chunk_start)?;
        let data = &buf.as_slice()[..got];
        if got == want && xxhash_rust::xxh3::xxh3_64(data) == expected {
            continue;
        }
        let exact = reference.and_then(|(input, input_start)| {
            let mut original = vec![0u8; want];
            let mut from = input.open(input_start + chunk_start, None).ok()?;
            let n = from
                .read_at(&mut original, input_start + chunk_start)
                .ok()?;
            if n != want || xxhash_rust::xxh3::xxh3_64(&original) != expected {
                // The input changed since: it cannot say what was written.
                return None;
            }
            let at = data
                .iter()
                .zip(&original)
                .position(|(a, b)| a != b)
                .unwrap_or(got);
            Some(at as u64)
        });
        return Ok(match exact {
            Some(at) => Verdict::Differs {
                offset: start + chunk_start + at,
                exact: true,
            },
            None if got < want => Verdict::Differs {
                offset: start + chunk_start + got as u64,
                exact: true,
            },
            None => Verdict::Differs {
                offset: start + chunk_start,
                exact: false,
            },
        });
    }
    Ok(Verdict::Identical {
        bytes: chunks.total,
    })
}

/// What one range of an image must read back as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeDigest {
    /// A block map's SHA-1 or SHA-256, lower-case hex.
    Sha1(String),
    Sha256(String),
    /// XXH3-64 of the range as it was written (a map without digests).
    Xxh3(u64),
}

impl RangeDigest {
    fn hasher(&self) -> RangeHasher {
        use sha2::Digest as _;
        match self {
            RangeDigest::Sha1(_) => RangeHasher::Sha1(sha1::Sha1::new()),
            RangeDigest::Sha256(_) => RangeHasher::Sha256(sha2::Sha256::new()),
            RangeDigest::Xxh3(_) => RangeHasher::Xxh3(Box::default()),
        }
    }
}

/// A running digest of a range being read back.
enum RangeHasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl RangeHasher {
    fn update(&mut self, data: &[u8]) {
        use sha2::Digest as _;
        match self {
            RangeHasher::Sha1(h) => h.update(data),
            RangeHasher::Sha256(h) => h.update(data),
            RangeHasher::Xxh3(h) => h.update(data),
        }
    }

    fn matches(self, expected: &RangeDigest) -> bool {
        use sha2::Digest as _;
        match (self, expected) {
            (RangeHasher::Sha1(h), RangeDigest::Sha1(hex)) => format!("{:x}", h.finalize()) == *hex,
            (RangeHasher::Sha256(h), RangeDigest::Sha256(hex)) => {
                format!("{:x}", h.finalize()) == *hex
            }
            (RangeHasher::Xxh3(h), RangeDigest::Xxh3(value)) => h.digest() == *value,
            _ => false,
        }
    }
}

/// A range of the output, `[start, end)`, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeCheck {
    pub start: u64,
    pub end: u64,
    pub digest: RangeDigest,
}

/// How the read-back of the mapped ranges went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangesVerdict {
    /// Every range read back as its digest says: `bytes` in all.
    Identical { bytes: u64 },
    /// The range at this index of those given does not (the first such
    /// range found, in the order given).
    Differs { index: usize },
}

/// Bytes per read of a range.
const RANGE_READ: usize = 4 << 20;

/// Read back `ranges` of the output `reopen` opens (sorted, disjoint)
/// on up to `workers` threads, each range by one thread in order, and
/// check each against its digest. Nothing outside the ranges is read.
/// The output is prepared once (synced, its cache emptied), so that the
/// device, not the cache, is read.
pub fn verify_ranges(
    reopen: &dyn Reopen,
    ranges: &[RangeCheck],
    workers: usize,
) -> Result<RangesVerdict, Errno> {
    let Some(last) = ranges.last() else {
        return Ok(RangesVerdict::Identical { bytes: 0 });
    };
    reopen.prepare(0, last.end)?;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let differs = Mutex::new(None::<usize>);
    let failed = Mutex::new(None::<Errno>);
    let workers = workers.clamp(1, ranges.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let outcome = (|| -> Result<(), Errno> {
                    let mut reader = reopen.open(0, None)?;
                    let mut buf = AlignedBuf::new(RANGE_READ)?;
                    while !stop.load(Ordering::Relaxed) {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(range) = ranges.get(index) else {
                            break;
                        };
                        if !matches(reader.as_mut(), &mut buf, range)? {
                            let mut first = differs.lock().unwrap_or_else(|e| e.into_inner());
                            *first = Some(first.map_or(index, |f| f.min(index)));
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })();
                if let Err(errno) = outcome {
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(errno);
                    stop.store(true, Ordering::Relaxed);
                }
            });
        }
    });
    if let Some(index) = differs.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Ok(RangesVerdict::Differs { index });
    }
    if let Some(errno) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(errno);
    }
    Ok(RangesVerdict::Identical {
        bytes: ranges.iter().map(|r| r.end - r.start).sum(),
    })
}

/// Whether `range` reads back as its digest says (a range cut short by
/// the output's end does not).
fn matches(
    reader: &mut dyn ReadBack,
    buf: &mut AlignedBuf,
    range: &RangeCheck,
) -> Result<bool, Errno> {
    let mut hasher = range.digest.hasher();
    let mut at = range.start;
    while at < range.end {
        let want = (range.end - at).min(RANGE_READ as u64) as usize;
        let got = reader.read_at(&mut buf.as_mut_slice()[..want], at)?;
        hasher.update(&buf.as_slice()[..got]);
        if got < want {
            return Ok(false);
        }
        at += got as u64;
    }
    Ok(hasher.matches(&range.digest))
}
