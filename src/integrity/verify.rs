//! `--verify`: read the output back from the device, not from the page
//! cache, and compare it with what the copy wrote, MiB by MiB, against the
//! digests the hasher thread kept. A differing MiB is then compared byte by
//! byte with the input, re-read, when the input can be read again, so that
//! the report names the first differing byte; otherwise it names the MiB.
//!
//! Bypassing the cache: the output is synced, its pages are dropped
//! (fadvise DONTNEED, which only drops clean pages: hence the sync first),
//! and it is read with O_DIRECT where the offsets allow; a filesystem that
//! refuses O_DIRECT is read through the (now empty) cache.
//!
//! An output named by a URI (an NBD export, an object) is read back
//! through its end, opened anew for reading: for an object that is the
//! store's copy, fetched by ranged GETs, not anything ddx kept.
//!
//! An image written through a block map (`--bmap`) is read back by
//! [`verify_ranges`] instead: only its mapped ranges (the unmapped
//! blocks were never written and hold what they held), each checked
//! against its digest (the map's, or one taken of the decoded range as
//! it was written where the map gives none), several ranges at once on
//! threads of their own, each with its own descriptor or connection.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::ends::{uri, End, Pipeline, Whence};
use crate::integrity::{ChunkDigests, VERIFY_CHUNK};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
use crate::sys::fill::fill;
use crate::sys::Errno;
use rustix::fs::OFlags;

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

/// Where the stream came from, to find the exact differing byte.
#[derive(Debug, Clone, Copy)]
pub struct Reference<'a> {
    pub path: &'a Path,
    /// Input offset of the stream's first byte.
    pub start: u64,
}

/// Requests in flight reading an end back.
const REMOTE_DEPTH: usize = 8;

/// Read back `chunks.total` bytes of `path` from output offset `start`.
pub fn verify(
    path: &Path,
    start: u64,
    chunks: &ChunkDigests,
    reference: Option<Reference<'_>>,
) -> Result<Verdict, Errno> {
    let mut reader = ReadBack {
        from: Source::open(path, start, chunks.total)?,
        buf: AlignedBuf::new(VERIFY_CHUNK)?,
    };
    for (index, &expected) in chunks.digests.iter().enumerate() {
        let chunk_start = index as u64 * VERIFY_CHUNK as u64;
        let want = (chunks.total - chunk_start).min(VERIFY_CHUNK as u64) as usize;
        let got = reader.read_at(start + chunk_start, want)?;
        let data = &reader.buf.as_slice()[..got];
        if got == want && xxhash_rust::xxh3::xxh3_64(data) == expected {
            continue;
        }
        let exact = reference.and_then(|r| {
            let mut original = vec![0u8; want];
            let n = read_reference(r.path, &mut original, r.start + chunk_start)?;
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

struct ReadBack {
    from: Source,
    buf: AlignedBuf,
}

/// What the output is read back from.
enum Source {
    /// A file or device: O_DIRECT where it can, else the emptied cache.
    Local {
        direct: Option<OwnedFd>,
        buffered: OwnedFd,
    },
    /// An end named by a URI, opened for reading.
    ByUri(Box<dyn End>),
}

impl Source {
    /// Open `path` to read `total` bytes from `start` back.
    fn open(path: &Path, start: u64, total: u64) -> Result<Source, Errno> {
        if let Some(opened) = open_by_uri(path) {
            let mut end = opened?;
            // Read in order, ahead of the comparison.
            end.pipeline(Pipeline {
                chunk: VERIFY_CHUNK,
                depth: REMOTE_DEPTH,
                total: Some(total),
            });
            end.seek(Whence::Start(start))?;
            return Ok(Source::ByUri(end));
        }
        let buffered = file::open_input(path, OFlags::empty())?;
        file::fdatasync(buffered.as_fd()).or_else(|e| match e {
            // Not every output can be synced (a pipe cannot be verified anyway).
            Errno::INVAL | Errno::ROFS => Ok(()),
            e => Err(e),
        })?;
        let _ = file::drop_cache(buffered.as_fd(), start, total);
        let direct = (start % 4096 == 0)
            .then(|| file::open_input(path, OFlags::DIRECT).ok())
            .flatten();
        Ok(Source::Local { direct, buffered })
    }
}

/// `path` opened for reading through its end, where it names one.
fn open_by_uri(path: &Path) -> Option<Result<Box<dyn End>, Errno>> {
    Some(match uri::recognise(path)? {
        Ok(named) => uri::open(&named, uri::Opening::Read).map_err(|e| e.errno),
        Err(_) => Err(Errno::INVAL),
    })
}

/// The input's bytes at `offset`, where it can be read again.
fn read_reference(path: &Path, buf: &mut [u8], offset: u64) -> Option<usize> {
    if let Some(opened) = open_by_uri(path) {
        return read_end_full(opened.ok()?.as_mut(), buf, offset).ok();
    }
    let input = file::open_input(path, OFlags::empty()).ok()?;
    read_full(&input, buf, offset).ok()
}

impl ReadBack {
    /// Read `want` bytes at `offset` into the buffer; fewer at end of file.
    fn read_at(&mut self, offset: u64, want: usize) -> Result<usize, Errno> {
        let buf = self.buf.as_mut_slice();
        match &mut self.from {
            Source::ByUri(end) => {
                end.seek(Whence::Start(offset))?;
                read_end_sequential(end.as_mut(), &mut buf[..want])
            }
            Source::Local { direct, buffered } => {
                if let Some(fd) = direct {
                    // O_DIRECT wants whole sectors: ask for the length rounded up.
                    let asked = want.div_ceil(4096) * 4096;
                    match read_full(fd, &mut buf[..asked], offset) {
                        Ok(n) => return Ok(n.min(want)),
                        Err(Errno::INVAL) => *direct = None,
                        Err(e) => return Err(e),
                    }
                }
                read_full(buffered, &mut buf[..want], offset)
            }
        }
    }
}

/// Read `buf` full from an end's position; short only at its end.
fn read_end_sequential(end: &mut dyn End, buf: &mut [u8]) -> Result<usize, Errno> {
    fill(buf, |rest, _| end.read(rest)).all_or_error()
}

fn read_end_full(end: &mut dyn End, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    fill(buf, |rest, done| end.read_at(rest, offset + done)).all_or_error()
}

fn read_full(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    fill(buf, |rest, done| rustix::io::pread(fd, rest, offset + done)).all_or_error()
}

/// What one range of an image must read back as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeDigest {
    /// A block map's SHA-1 or SHA-256, lower-case hex.
    Sha1(String),
    Sha256(String),
    /// A casync chunk's id (its default digest).
    Sha512_256(String),
    /// XXH3-64 of the range as it was written (a map without digests).
    Xxh3(u64),
}

impl RangeDigest {
    fn hasher(&self) -> RangeHasher {
        use sha2::Digest as _;
        match self {
            RangeDigest::Sha1(_) => RangeHasher::Sha1(sha1::Sha1::new()),
            RangeDigest::Sha256(_) => RangeHasher::Sha256(sha2::Sha256::new()),
            RangeDigest::Sha512_256(_) => RangeHasher::Sha512_256(sha2::Sha512_256::new()),
            RangeDigest::Xxh3(_) => RangeHasher::Xxh3(Box::default()),
        }
    }
}

/// A running digest of a range being read back.
enum RangeHasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
    Sha512_256(sha2::Sha512_256),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl RangeHasher {
    fn update(&mut self, data: &[u8]) {
        use sha2::Digest as _;
        match self {
            RangeHasher::Sha1(h) => h.update(data),
            RangeHasher::Sha256(h) => h.update(data),
            RangeHasher::Sha512_256(h) => h.update(data),
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
            (RangeHasher::Sha512_256(h), RangeDigest::Sha512_256(hex)) => {
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

/// Read back `ranges` of `path` (sorted, disjoint) on up to `workers`
/// threads, each range by one thread in order, and check each against
/// its digest. Nothing outside the ranges is read. The output is synced
/// and its cache dropped first, so that the device, not the cache, is
/// read.
pub fn verify_ranges(
    path: &Path,
    ranges: &[RangeCheck],
    workers: usize,
) -> Result<RangesVerdict, Errno> {
    let Some(last) = ranges.last() else {
        return Ok(RangesVerdict::Identical { bytes: 0 });
    };
    // A file or device is synced and its cache emptied once; each worker
    // then opens it (or connects to the end) on its own.
    if uri::recognise(path).is_none() {
        drop(Source::open(path, 0, last.end)?);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let differs = Mutex::new(None::<usize>);
    let failed = Mutex::new(None::<Errno>);
    let workers = workers.clamp(1, ranges.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let outcome = (|| -> Result<(), Errno> {
                    let mut reader = ReadBack {
                        from: Source::reopen(path)?,
                        buf: AlignedBuf::new(RANGE_READ)?,
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(range) = ranges.get(index) else {
                            break;
                        };
                        if !reader.matches(range)? {
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

impl Source {
    /// `path` opened again for reading, its cache already dropped.
    fn reopen(path: &Path) -> Result<Source, Errno> {
        if let Some(opened) = open_by_uri(path) {
            return Ok(Source::ByUri(opened?));
        }
        let buffered = file::open_input(path, OFlags::empty())?;
        let direct = file::open_input(path, OFlags::DIRECT).ok();
        Ok(Source::Local { direct, buffered })
    }
}

impl ReadBack {
    /// Whether `range` reads back as its digest says (a range cut short
    /// by the output's end does not).
    fn matches(&mut self, range: &RangeCheck) -> Result<bool, Errno> {
        let mut hasher = range.digest.hasher();
        let mut at = range.start;
        while at < range.end {
            let want = (range.end - at).min(RANGE_READ as u64) as usize;
            let got = self.range_read(at, want)?;
            hasher.update(&self.buf.as_slice()[..got]);
            if got < want {
                return Ok(false);
            }
            at += got as u64;
        }
        Ok(hasher.matches(&range.digest))
    }

    /// Read `want` bytes at `offset`, by position (a worker's own end is
    /// read where it is asked, not in order).
    fn range_read(&mut self, offset: u64, want: usize) -> Result<usize, Errno> {
        if let Source::ByUri(end) = &mut self.from {
            let buf = &mut self.buf.as_mut_slice()[..want];
            return match read_end_full(end.as_mut(), buf, offset) {
                Err(Errno::SPIPE) => {
                    end.seek(Whence::Start(offset))?;
                    read_end_sequential(end.as_mut(), buf)
                }
                other => other,
            };
        }
        if offset % 4096 != 0 {
            if let Source::Local { direct, .. } = &mut self.from {
                *direct = None;
            }
        }
        self.read_at(offset, want)
    }
}
