//! `--used-only`: a disk read as the blocks its file systems use.
//!
//! [`UsedOnly`] wraps the input (a disk, a partition, a disk image) once
//! [`crate::allocation`] has read its partition table and allocation
//! maps. It answers [`Stream::next_data`] and [`Stream::next_hole`] from the
//! used set, so that the engine passes every unused range on as a hole
//! without reading it (a hole in a file, nothing in a compressed stream,
//! a range left alone on a device, and `--bmap-create` maps exactly the
//! used blocks), and reads an unused range that is asked for anyway as
//! zeros, without touching the device. The image keeps the disk's full
//! size.
//!
//! Reads go to the disk by position (`read_at`), so the wrapped end's own
//! offset never matters; none offers a descriptor, which would let the
//! engine read around the map.
//!
//! The used ranges are many and apart, so each read would wait for the
//! device, and the kernel's own read-ahead, which follows sequential
//! reads, stops at every gap. The next [`AHEAD`] bytes of used ranges are
//! therefore asked of the kernel ahead of the reads (posix_fadvise
//! WILLNEED, which returns at once and keeps the device busy with many
//! requests), ranges a small gap apart as one.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::allocation::{self, Analysis, ReadError, Source};
use crate::ends::Whence;
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::Errno;

/// Used bytes asked of the kernel ahead of the reads; asked again once
/// half of them are read.
const AHEAD: u64 = 64 << 20;
/// Used ranges at most this far apart are asked for as one: reading the
/// gap costs less than a request of its own.
const GAP: u64 = 256 << 10;

/// Used bytes read so far, of how many: the progress line's measure.
#[derive(Debug)]
pub struct UsedProgress {
    read: AtomicU64,
    pub total: u64,
}

impl UsedProgress {
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

/// The input end as the allocation parsers read it.
struct Disk<'a> {
    end: &'a mut dyn Stream,
    size: u64,
}

impl Source for Disk<'_> {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let len = buf.len();
        let error = |cause: String| ReadError { offset, len, cause };
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(error("past the end of the disk".into()));
        }
        let mut done = 0;
        while done < buf.len() {
            match self.end.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => return Err(error("the disk ended early".into())),
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(errno) => return Err(error(crate::sys::errno_text(errno))),
            }
        }
        Ok(())
    }
}

/// Why a disk cannot be read by its used blocks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsedError {
    #[error("{name}: --used-only cannot find the size of the input: {cause}")]
    Size { name: String, cause: String },
}

/// The input read as its used blocks.
#[derive(Debug)]
pub struct UsedOnly {
    inner: Box<dyn Stream>,
    used: allocation::Extents,
    size: u64,
    pos: u64,
    progress: Arc<UsedProgress>,
    /// Where the used ranges asked of the kernel end.
    advised: u64,
}

impl UsedOnly {
    /// Analyse `inner` (named `name` in messages; its logical sector,
    /// where known) and wrap it. The analysis is returned for `--verbose`.
    pub fn wrap(
        mut inner: Box<dyn Stream>,
        name: &str,
        sector: Option<u64>,
    ) -> Result<(UsedOnly, Analysis), UsedError> {
        let size_error = |errno: Errno| UsedError::Size {
            name: name.to_owned(),
            cause: crate::sys::errno_text(errno),
        };
        let here = inner.seek(Whence::Current(0)).map_err(size_error)?;
        let size = inner.seek(Whence::End(0)).map_err(size_error)?;
        inner.seek(Whence::Start(here)).map_err(size_error)?;
        let analysis = allocation::analyse(
            &mut Disk {
                end: inner.as_mut(),
                size,
            },
            sector,
        );
        let progress = Arc::new(UsedProgress {
            read: AtomicU64::new(0),
            total: analysis.used.bytes_within(&(here.min(size)..size)),
        });
        Ok((
            UsedOnly {
                inner,
                used: analysis.used.clone(),
                size,
                pos: here,
                progress,
                advised: 0,
            },
            analysis,
        ))
    }

    pub fn progress(&self) -> Arc<UsedProgress> {
        Arc::clone(&self.progress)
    }

    /// Ask the kernel for the next [`AHEAD`] used bytes from `offset` on,
    /// once fewer than half of them are asked for already. Advice only:
    /// an end without a descriptor, or one that refuses, is read as it
    /// comes.
    fn read_ahead(&mut self, offset: u64) {
        if self.advised >= offset.saturating_add(AHEAD / 2) {
            return;
        }
        let Some(fd) = self.inner.fd() else {
            return;
        };
        let ranges = self.used.ranges();
        let mut from = self.advised.max(offset);
        let mut budget = AHEAD;
        let mut asked: Option<Range<u64>> = None;
        let advise = |range: &Range<u64>| {
            let _ = crate::sys::file::will_need(fd, range.start, range.end - range.start);
        };
        let mut next = ranges.partition_point(|range| range.end <= from);
        while budget > 0 {
            let Some(range) = ranges.get(next) else {
                from = self.size;
                break;
            };
            let start = range.start.max(from);
            let end = range.end.min(start + budget);
            budget -= end - start;
            asked = match asked {
                Some(joined) if start - joined.end <= GAP => Some(joined.start..end),
                Some(apart) => {
                    advise(&apart);
                    Some(start..end)
                }
                None => Some(start..end),
            };
            from = end;
            if end == range.end {
                next += 1;
            }
        }
        if let Some(last) = asked {
            advise(&last);
        }
        self.advised = from;
    }

    /// Fill `buf` from `offset`: used ranges from the disk, the rest as
    /// zeros. Short only at the disk's end.
    fn fill(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.read_ahead(offset);
        let want = (buf.len() as u64).min(self.size.saturating_sub(offset)) as usize;
        let mut done = 0;
        while done < want {
            let at = offset + done as u64;
            let left = want - done;
            match self.used.next_data(at) {
                Some(data) if data == at => {
                    let end = self.used.next_hole(at);
                    let piece = ((end - at) as usize).min(left);
                    let n = match self.inner.read_at(&mut buf[done..done + piece], at) {
                        Ok(0) => return Ok(done),
                        Ok(n) => n,
                        // What was read before the error is given first,
                        // as a read(2) that stops short.
                        Err(_) if done > 0 => return Ok(done),
                        Err(errno) => return Err(errno),
                    };
                    self.progress.read.fetch_add(n as u64, Ordering::Relaxed);
                    done += n;
                }
                next => {
                    let hole_end = next.unwrap_or(self.size);
                    let piece = ((hole_end - at) as usize).min(left);
                    buf[done..done + piece].fill(0);
                    done += piece;
                }
            }
        }
        Ok(done)
    }
}

impl Stream for UsedOnly {
    forward_to_inner!(
        kind,
        size,
        sync,
        settle,
        take_detail,
        close,
        close_failed,
        abandon
    );

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.fill(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.fill(buf, offset)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(delta) => self.pos.checked_add_signed(delta),
            Whence::End(delta) => self.size.checked_add_signed(delta),
        }
        .ok_or(Errno::INVAL)?;
        self.pos = target;
        Ok(target)
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        if offset >= self.size {
            return Ok(None);
        }
        Ok(self.used.next_data(offset))
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        if offset >= self.size {
            return Err(Errno::NXIO);
        }
        Ok(self.used.next_hole(offset).min(self.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::Kind;
    use crate::image::testing::Memory;

    #[test]
    fn unused_ranges_read_as_zeros_and_are_holes() {
        // A whole-disk swap area: its first 4 KiB are used, the rest not.
        let mut disk = vec![0x77u8; 64 << 10];
        disk[4096 - 10..4096].copy_from_slice(b"SWAPSPACE2");
        let (end, _) = Memory::boxed(Kind::BlockDevice, disk.clone());
        let (mut used, analysis) = UsedOnly::wrap(end, "disk", None).unwrap();
        assert_eq!(analysis.used.bytes(), 4096);
        assert_eq!(used.next_data(0), Ok(Some(0)));
        assert_eq!(used.next_hole(0), Ok(4096));
        assert_eq!(used.next_data(4096), Ok(None));
        let mut buf = vec![0xeeu8; 8192];
        assert_eq!(used.read(&mut buf), Ok(8192));
        assert_eq!(&buf[..4096], &disk[..4096]);
        assert!(buf[4096..].iter().all(|&b| b == 0));
        assert_eq!(used.progress().read(), 4096);
        assert_eq!(used.progress().total, 4096);
        assert_eq!(used.seek(Whence::End(-10)), Ok((64 << 10) - 10));
        assert_eq!(used.read(&mut buf), Ok(10));
        assert_eq!(used.read(&mut buf), Ok(0));
    }
}
