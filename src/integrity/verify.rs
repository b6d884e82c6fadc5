//! `--verify`: read the output back from the device, not from the page
//! cache, and compare it with what the copy wrote, MiB by MiB, against the
//! digests the hasher thread kept. A differing MiB is then compared byte by
//! byte with the input, re-read, when the input can be read again, so that
//! the report names the first differing byte; otherwise it names the MiB.
//!
//! Bypassing the cache: the output is synced, its pages are dropped
//! (fadvise DONTNEED, which only drops clean pages: hence the sync first),
//! and it is read with O_DIRECT where the offsets allow; a filesystem that
//! refuses O_DIRECT is read through the (now empty) cache. An output that
//! is a remote end (an NBD export) is read back from its server through a
//! connection of its own: what the server stores is what is compared
//! (there is no local cache to bypass). A remote input is re-read the
//! same way to find the exact differing byte.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use crate::ends::remote::{self, Remote};
use crate::ends::End;
use crate::integrity::{ChunkDigests, VERIFY_CHUNK};
use crate::sys::buffer::AlignedBuf;
use crate::sys::file;
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

/// Read back `chunks.total` bytes of `path` from output offset `start`.
pub fn verify(
    path: &Path,
    start: u64,
    chunks: &ChunkDigests,
    reference: Option<Reference<'_>>,
) -> Result<Verdict, Errno> {
    let mut reader = match remote_end(path) {
        Some(end) => ReadBack {
            source: Source::Remote(end?),
            buf: AlignedBuf::new(VERIFY_CHUNK)?,
        },
        None => ReadBack::file(path, start, chunks.total)?,
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
            let n = match remote_end(r.path) {
                Some(end) => {
                    read_end_full(end.ok()?.as_mut(), &mut original, r.start + chunk_start)
                }
                None => {
                    let input = file::open_input(r.path, OFlags::empty()).ok()?;
                    read_full(&input, &mut original, r.start + chunk_start)
                }
            }
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

/// The end `path` names when it is a remote end's URI (opened for
/// reading), None when it is a file.
fn remote_end(path: &Path) -> Option<Result<Box<dyn End>, Errno>> {
    match remote::recognise(path)? {
        Ok(remote @ Remote::Nbd(_)) => Some(remote::open(&remote, false).map_err(|e| e.errno)),
        Err(_) => None,
    }
}

struct ReadBack {
    source: Source,
    buf: AlignedBuf,
}

enum Source {
    File {
        direct: Option<OwnedFd>,
        buffered: OwnedFd,
    },
    Remote(Box<dyn End>),
}

impl ReadBack {
    /// A file, synced and its cache dropped, read with O_DIRECT where the
    /// offsets allow.
    fn file(path: &Path, start: u64, total: u64) -> Result<ReadBack, Errno> {
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
        Ok(ReadBack {
            source: Source::File { direct, buffered },
            buf: AlignedBuf::new(VERIFY_CHUNK)?,
        })
    }

    /// Read `want` bytes at `offset` into the buffer; fewer at end of file.
    fn read_at(&mut self, offset: u64, want: usize) -> Result<usize, Errno> {
        let buf = &mut self.buf.as_mut_slice()[..want];
        let (direct, buffered) = match &mut self.source {
            Source::Remote(end) => return read_end_full(end.as_mut(), buf, offset),
            Source::File { direct, buffered } => (direct, buffered),
        };
        if let Some(fd) = direct {
            // O_DIRECT wants whole sectors: ask for the length rounded up.
            let asked = want.div_ceil(4096) * 4096;
            match read_full(fd, &mut self.buf.as_mut_slice()[..asked], offset) {
                Ok(n) => return Ok(n.min(want)),
                Err(Errno::INVAL) => *direct = None,
                Err(e) => return Err(e),
            }
        }
        read_full(buffered, &mut self.buf.as_mut_slice()[..want], offset)
    }
}

fn read_end_full(end: &mut dyn End, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        match end.read_at(&mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

fn read_full(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}
