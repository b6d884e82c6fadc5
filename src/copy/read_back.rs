//! `--verify`'s read-back, opened as the copy opens its ends: the output
//! (or, to find the first differing byte, the input) through
//! `ends::open` with the copy's own options (a generic node's, a store's)
//! and the engine's window, so that a remote end or a disk's commands
//! keep their requests in flight while the comparison goes on.
//!
//! What the copy wrote is read from the device, not from the page cache:
//! a file or block device is synced and its pages dropped first (fadvise
//! DONTNEED drops only clean pages: hence the sync), then read with
//! O_DIRECT where the offsets allow, and through the (now empty) cache
//! where a filesystem refuses O_DIRECT. An end with no page cache of
//! ddx's (an NBD export, an object, a generic node) is read through a
//! connection or a queue of its own.

use std::os::fd::AsFd;
use std::path::Path;

use crate::ends::generic_node::Options as GenericNodeOptions;
use crate::ends::open::open_input;
use crate::ends::Whence;
use crate::engine::stream::{stream_of, Pipeline, Stream};
use crate::integrity::verify::{ReadBack, Reopen};
use crate::integrity::VERIFY_CHUNK;
use crate::operands::{CopyPlan, IoFlags};
use crate::sys::file;
use crate::sys::fill::fill;
use crate::sys::Errno;

/// Requests kept in flight reading an end back in order.
const IN_FLIGHT: usize = 8;

/// O_DIRECT's alignment on any device this read-back meets.
const DIRECT_ALIGN: u64 = 4096;

/// A path of the copy's, opened again for reading as the copy opens it.
pub struct ReadBackOf<'a> {
    path: &'a Path,
    plan: &'a CopyPlan,
    passthrough: GenericNodeOptions,
}

impl<'a> ReadBackOf<'a> {
    /// `path` (of=, a `--tee` output, or if=), with the copy's `plan` and
    /// generic-node options.
    pub fn new(path: &'a Path, plan: &'a CopyPlan, passthrough: GenericNodeOptions) -> Self {
        ReadBackOf {
            path,
            plan,
            passthrough,
        }
    }

    /// The stream of `path` opened for reading, with `flags`.
    fn stream(&self, flags: IoFlags) -> Result<Box<dyn Stream>, Errno> {
        let plan = CopyPlan {
            input: Some(self.path.to_owned()),
            input_flags: flags,
            ..self.plan.clone()
        };
        let opened = open_input(&plan, self.passthrough.into()).map_err(|e| e.errno())?;
        Ok(stream_of(opened.stream))
    }

    /// Whether `path` is a file or block device reached through a
    /// descriptor, whose page cache is ddx's to bypass.
    fn through_cache(&self) -> bool {
        crate::ends::uri::recognise(self.path).is_none()
            && crate::sys::passthrough::interface_at(self.path).is_none()
    }
}

impl Reopen for ReadBackOf<'_> {
    fn prepare(&self, start: u64, total: u64) -> Result<(), Errno> {
        if !self.through_cache() {
            return Ok(());
        }
        let fd = file::open_input(self.path, rustix::fs::OFlags::empty())?;
        file::fdatasync(fd.as_fd()).or_else(|e| match e {
            // Not every output can be synced (a pipe cannot be verified
            // anyway).
            Errno::INVAL | Errno::ROFS => Ok(()),
            e => Err(e),
        })?;
        let _ = file::drop_cache(fd.as_fd(), start, total);
        Ok(())
    }

    fn open(&self, start: u64, total: Option<u64>) -> Result<Box<dyn ReadBack>, Errno> {
        if !self.through_cache() {
            let mut stream = self.stream(IoFlags::empty())?;
            if let Some(total) = total {
                // Read in order, ahead of the comparison.
                stream.pipeline(Pipeline {
                    chunk: VERIFY_CHUNK,
                    depth: IN_FLIGHT,
                    total: Some(total),
                });
                stream.seek(Whence::Start(start))?;
            }
            return Ok(Box::new(InOrder {
                stream,
                in_order: total.is_some(),
            }));
        }
        let direct = (start % DIRECT_ALIGN == 0)
            .then(|| self.stream(IoFlags::DIRECT).ok())
            .flatten();
        Ok(Box::new(Local {
            direct,
            buffered: self.stream(IoFlags::empty())?,
            aligned: None,
        }))
    }
}

/// An end read back through its stream: in order where the window reads
/// ahead, else by position.
struct InOrder {
    stream: Box<dyn Stream>,
    in_order: bool,
}

impl ReadBack for InOrder {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        if self.in_order {
            self.stream.seek(Whence::Start(offset))?;
            return fill(buf, |rest, _| self.stream.read(rest)).all_or_error();
        }
        match fill(buf, |rest, done| self.stream.read_at(rest, offset + done)).all_or_error() {
            Err(Errno::SPIPE) => {
                self.stream.seek(Whence::Start(offset))?;
                fill(buf, |rest, _| self.stream.read(rest)).all_or_error()
            }
            other => other,
        }
    }
}

/// A file or device read back with O_DIRECT where the offsets and the
/// filesystem allow, else through its (emptied) cache.
struct Local {
    direct: Option<Box<dyn Stream>>,
    buffered: Box<dyn Stream>,
    /// Whole sectors for O_DIRECT, reused from read to read.
    aligned: Option<crate::sys::buffer::AlignedBuf>,
}

impl ReadBack for Local {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        if offset % DIRECT_ALIGN != 0 {
            self.direct = None;
        }
        if let Some(direct) = &mut self.direct {
            // O_DIRECT wants whole sectors: ask for the length rounded up.
            let want = buf.len();
            let asked = want.div_ceil(DIRECT_ALIGN as usize) * DIRECT_ALIGN as usize;
            let aligned = match self.aligned.take() {
                Some(mut held) if held.capacity() >= asked => {
                    held.set_len(asked);
                    held
                }
                _ => crate::sys::buffer::AlignedBuf::new(asked)?,
            };
            let aligned = self.aligned.insert(aligned);
            let read = fill(aligned.as_mut_slice(), |rest, done| {
                direct.read_at(rest, offset + done)
            })
            .all_or_error();
            match read {
                Ok(n) => {
                    let n = n.min(want);
                    buf[..n].copy_from_slice(&aligned.as_slice()[..n]);
                    return Ok(n);
                }
                Err(Errno::INVAL) => self.direct = None,
                Err(e) => return Err(e),
            }
        }
        fill(buf, |rest, done| self.buffered.read_at(rest, offset + done)).all_or_error()
    }
}
