//! Image writes straight to the device: what `--bmap` and `--decompress`
//! write onto a block device goes with O_DIRECT where it is aligned.
//!
//! Why: an image written through the page cache is copied twice, once
//! into the cache by ddx's writer and once more by the device's driver
//! when the pages are written back, and with `conv=fsync` (as images are
//! written) most of that writeback happens in the final fsync, after the
//! last byte was decoded: a tail during which nothing else runs. An image
//! is not read back from the cache either (its blocks go to a card), so
//! keeping its pages there is of no use. A direct write hands the engine's
//! buffer to the device, which works while ddx decodes the next MiB.
//!
//! How: O_DIRECT is an open-file flag that Linux lets fcntl(F_SETFL) turn
//! on and off, so this wrapper sets it for a write whose offset, length
//! and buffer are aligned to the device's logical block (at least a page:
//! the engine's buffers are page-aligned, and so are the map's blocks),
//! and clears it for anything else (a partial last block, a read), which
//! then goes through the cache as it did. The kernel keeps the two kinds
//! coherent (a direct write first writes back and drops cached pages in
//! its range). A device that refuses a direct write (EINVAL) is written
//! through the cache from then on. `conv=fsync` and the safe order's
//! flushes keep their meaning: the flush still reaches the device (its
//! own write cache) and anything written through the page cache.
//!
//! [`DirectReport`] counts the bytes each way, for `--verbose`.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::ends::{Capabilities, Kind, Whence};
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::Errno;

/// The least alignment used: a page, whatever the device's sector.
const PAGE: usize = 4096;

/// What the image writes did, for `--verbose`.
#[derive(Debug, Default)]
pub struct DirectReport {
    /// Bytes written with O_DIRECT.
    pub direct: AtomicU64,
    /// Bytes written through the page cache (unaligned, or refused).
    pub cached: AtomicU64,
    /// The device refused O_DIRECT: everything after went through the cache.
    pub refused: AtomicBool,
}

impl DirectReport {
    /// The `--verbose` line's text.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "{} bytes written straight to the device (O_DIRECT, aligned), {} through the page \
             cache",
            self.direct.load(Ordering::Relaxed),
            self.cached.load(Ordering::Relaxed)
        );
        if self.refused.load(Ordering::Relaxed) {
            line.push_str(" (the device refused O_DIRECT: the rest went through the cache)");
        }
        line
    }
}

#[derive(Debug)]
pub struct DirectWrites {
    inner: Box<dyn Stream>,
    /// Offsets, lengths and buffers aligned to this go direct.
    align: usize,
    /// O_DIRECT is set on the descriptor now.
    on: bool,
    /// The device refused: no more direct writes.
    refused: bool,
    report: Arc<DirectReport>,
}

impl DirectWrites {
    /// Wrap `output`, a block device end with a descriptor; given back
    /// unwrapped otherwise (nothing to set O_DIRECT on).
    pub fn wrap(
        output: Box<dyn Stream>,
    ) -> Result<(DirectWrites, Arc<DirectReport>), Box<dyn Stream>> {
        if !output.capabilities().device {
            return Err(output);
        }
        let Some(fd) = output.fd() else {
            return Err(output);
        };
        let sector = rustix::fs::ioctl_blksszget(fd)
            .ok()
            .map(|s| s as usize)
            .filter(|s| s.is_power_of_two())
            .unwrap_or(PAGE);
        let report = Arc::new(DirectReport::default());
        Ok((
            DirectWrites {
                inner: output,
                align: sector.max(PAGE),
                on: false,
                refused: false,
                report: Arc::clone(&report),
            },
            report,
        ))
    }

    fn descriptor(&self) -> BorrowedFd<'_> {
        self.inner.fd().expect("checked in wrap")
    }

    fn aligned(&self, buf: &[u8], offset: u64) -> bool {
        let align = self.align;
        !self.refused
            && !buf.is_empty()
            && buf.len() % align == 0
            && offset % align as u64 == 0
            && (buf.as_ptr() as usize) % align == 0
    }

    /// Set O_DIRECT on or off; false where the descriptor will not.
    fn set(&mut self, direct: bool) -> bool {
        if self.on == direct {
            return true;
        }
        let fd = self.descriptor();
        let flags = match rustix::fs::fcntl_getfl(fd) {
            Ok(flags) => flags,
            Err(_) => return false,
        };
        let flags = if direct {
            flags | rustix::fs::OFlags::DIRECT
        } else {
            flags - rustix::fs::OFlags::DIRECT
        };
        if rustix::fs::fcntl_setfl(fd, flags).is_err() {
            return false;
        }
        self.on = direct;
        true
    }

    /// Through the cache from now on.
    fn refuse(&mut self) {
        self.refused = true;
        self.report.refused.store(true, Ordering::Relaxed);
    }

    /// Write `buf` at `offset` with `write` (pwrite, or write at the
    /// position), direct where aligned.
    fn put(
        &mut self,
        buf: &[u8],
        offset: u64,
        write: fn(&mut dyn Stream, &[u8], u64) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        if self.aligned(buf, offset) {
            if self.set(true) {
                match write(&mut *self.inner, buf, offset) {
                    Err(Errno::INVAL) => self.refuse(),
                    Ok(n) => {
                        self.report.direct.fetch_add(n as u64, Ordering::Relaxed);
                        return Ok(n);
                    }
                    Err(errno) => return Err(errno),
                }
            } else {
                self.refuse();
            }
        }
        if !self.set(false) {
            return Err(Errno::INVAL);
        }
        let n = write(&mut *self.inner, buf, offset)?;
        self.report.cached.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn pwrite(end: &mut dyn Stream, buf: &[u8], offset: u64) -> Result<usize, Errno> {
    end.write_at(buf, offset)
}

fn write_here(end: &mut dyn Stream, buf: &[u8], _offset: u64) -> Result<usize, Errno> {
    end.write(buf)
}

impl Stream for DirectWrites {
    fn kind(&self) -> Kind {
        self.inner.kind()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    /// None: a write straight to the descriptor would meet O_DIRECT
    /// unaligned.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if !self.set(false) {
            return Err(Errno::INVAL);
        }
        self.inner.read(buf)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        if !self.set(false) {
            return Err(Errno::INVAL);
        }
        self.inner.read_at(buf, offset)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let offset = self.inner.seek(Whence::Current(0))?;
        self.put(buf, offset, write_here)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        self.put(buf, offset, pwrite)
    }

    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        self.inner.write_zeroes(len)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        self.inner.seek(to)
    }

    forward_to_inner!(
        size,
        next_data,
        next_hole,
        truncate,
        sync,
        pipeline,
        settle,
        written_until,
        take_detail,
        close,
        close_failed,
        abandon,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::testing::Memory;

    #[test]
    fn an_end_without_a_block_device_descriptor_is_given_back() {
        for kind in [Kind::RegularFile, Kind::BlockDevice, Kind::Stream] {
            let (memory, _) = Memory::new(kind, vec![0; 4096]);
            let end: Box<dyn Stream> = Box::new(memory);
            let back = DirectWrites::wrap(end).expect_err("nothing to set O_DIRECT on");
            assert_eq!(back.kind(), kind);
        }
    }
}
