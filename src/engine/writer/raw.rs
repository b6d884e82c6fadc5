//! The lowest layer of writing, dd's `iwrite`: one buffer written whole
//! (retrying short writes and EINTR), conv=sparse's seeks over all-zero
//! buffers, the unaligned O_DIRECT tail that must go through the cache,
//! GNU's nocache advice, and uncached writes (RWF_DONTCACHE) where the
//! copy drops its pages behind it.

use crate::ends::{End, Whence};
use crate::engine::cache::CacheDropper;
use crate::engine::diagnostic::{Diagnostic, Events};
use crate::operands::{Conv, CopyPlan, IoFlags, StatusLevel};
use crate::sys::file;
use crate::sys::Errno;
use crate::transform::is_all_zero;

/// How a write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub bytes: usize,
    /// Why fewer bytes than asked were written.
    pub error: Option<Errno>,
    /// An uncached write was asked for and the kernel cannot do it here:
    /// the bytes went through the cache.
    pub uncached_refused: bool,
}

/// What is fixed for the whole copy.
#[derive(Debug, Clone, Copy)]
struct Settings {
    block_size: usize,
    direct: bool,
    quiet: bool,
}

pub struct RawOutput {
    settings: Settings,
    /// conv=sparse: all-zero buffers are sought over; off for good once
    /// the output turns out not to seek (sparse is only advice).
    sparse_seeks: bool,
    /// The last thing done was a seek over zeros: a file may need
    /// extending to its full size at the end.
    pub ended_in_seek: bool,
    /// An unaligned O_DIRECT tail went through the cache: it must be
    /// synced (and its pages dropped) at the end.
    pub fsync_required: bool,
    /// oflag=nocache's advice.
    pub cache: CacheDropper,
    /// The output's offset, for cache advice and drop-behind; None when
    /// the output cannot tell it (a pipe).
    pub offset: Option<u64>,
}

impl RawOutput {
    pub fn new(plan: &CopyPlan, offset: Option<u64>) -> RawOutput {
        RawOutput {
            settings: Settings {
                block_size: plan.output_block_size,
                direct: plan.output_flags.contains(IoFlags::DIRECT),
                quiet: plan.status == StatusLevel::None,
            },
            sparse_seeks: plan.conv.contains(Conv::SPARSE),
            ended_in_seek: false,
            fsync_required: false,
            cache: CacheDropper::new(
                plan.output_nocache,
                plan.output_nocache && plan.copies_nothing(),
            ),
            offset,
        }
    }

    /// Whether all-zero blocks are sought over (conv=sparse, and the
    /// output seeks).
    pub fn sparse(&self) -> bool {
        self.sparse_seeks
    }

    /// Seek over `len` bytes of zeros under conv=sparse, in `block`-sized
    /// pieces (the last may be short) as GNU seeks one block at a time:
    /// the bytes sought, fewer than `len` where a seek failed (sparse is
    /// then off from now on, as in GNU). A block device or an output
    /// export refuses to seek past its end: the pieces that fit are
    /// sought, the rest is for the caller to write, meeting ENOSPC where
    /// GNU does. One seek when all fit; else halving steps, so a long run
    /// that crosses the end costs a few dozen seeks, not one per block.
    pub fn seek_over(&mut self, end: &mut dyn End, len: u64, block: u64) -> u64 {
        if self.try_seek(end, len) {
            return len;
        }
        let pieces = len.div_ceil(block.max(1));
        let mut sought_pieces = 0;
        let mut step = pieces / 2;
        while step > 0 {
            let from = (sought_pieces * block).min(len);
            let to = ((sought_pieces + step) * block).min(len);
            if sought_pieces + step < pieces && self.try_seek(end, to - from) {
                sought_pieces += step;
            } else {
                step /= 2;
            }
        }
        self.sparse_seeks = false;
        (sought_pieces * block).min(len)
    }

    fn try_seek(&mut self, end: &mut dyn End, len: u64) -> bool {
        if end.seek(Whence::Current(len as i64)).is_err() {
            return false;
        }
        self.ended_in_seek = true;
        self.advance(len);
        true
    }

    /// Seek over `len` bytes the output keeps as they are (a block map's
    /// unmapped blocks); false where the output cannot seek, and the
    /// caller writes zeros instead. Unlike [`RawOutput::seek_over`], this
    /// leaves conv=sparse as it was.
    pub fn skip_over(&mut self, end: &mut dyn End, len: u64) -> bool {
        let Ok(len_signed) = i64::try_from(len) else {
            return false;
        };
        if end.seek(Whence::Current(len_signed)).is_err() {
            return false;
        }
        self.ended_in_seek = true;
        self.advance(len);
        true
    }

    /// Bytes were written past the writer (splice, the kernel's copy).
    pub fn advance(&mut self, len: u64) {
        if let Some(offset) = &mut self.offset {
            *offset += len;
        }
    }

    /// Write all of `buf` (uncached if asked and possible).
    pub fn write(
        &mut self,
        end: &mut dyn End,
        name: &[u8],
        buf: &[u8],
        mut uncached: bool,
        events: &dyn Events,
    ) -> Written {
        if self.settings.direct && buf.len() < self.settings.block_size {
            if let Err(errno) = end.fd().map_or(Ok(()), file::clear_direct) {
                if !self.settings.quiet {
                    events.diagnostic(Diagnostic::DirectOffFailed {
                        file: name.to_vec(),
                        errno,
                    });
                }
            }
            // The tail goes through the cache: make it durable and drop it.
            self.cache.enabled = true;
            self.cache.to_eof = true;
            self.fsync_required = true;
        }
        let mut written = 0;
        let mut error = None;
        let mut uncached_refused = false;
        while written < buf.len() {
            self.ended_in_seek = false;
            if self.sparse_seeks && is_all_zero(buf) {
                match end.seek(Whence::Current(buf.len() as i64)) {
                    Ok(_) => {
                        self.ended_in_seek = true;
                        written = buf.len();
                        break;
                    }
                    // Not seekable: sparse is only advice, write instead.
                    Err(_) => self.sparse_seeks = false,
                }
            }
            let result = match end.fd() {
                Some(fd) if uncached => file::write_uncached(fd, &buf[written..]),
                _ => end.write(&buf[written..]),
            };
            match result {
                Err(Errno::OPNOTSUPP) if uncached => {
                    uncached = false;
                    uncached_refused = true;
                }
                Ok(0) => {
                    // Some drivers say 0 at the end of the device.
                    error = Some(Errno::NOSPC);
                    break;
                }
                Ok(n) => written += n,
                Err(Errno::INTR) => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        if written > 0 {
            if let Some(offset) = &mut self.offset {
                *offset += written as u64;
                if let Some(fd) = end.fd() {
                    self.cache.after_io(fd, *offset as i64, written as u64);
                }
            }
        }
        Written {
            bytes: written,
            error,
            uncached_refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::file::FileEnd;
    use crate::sys::file::Handle;

    struct Quiet;
    impl Events for Quiet {
        fn diagnostic(&self, d: Diagnostic) {
            panic!("unexpected diagnostic: {d}");
        }
        fn statistics(&self) {}
        fn progress(&self) {}
        fn before_sync(&self) {}
    }

    fn plan(words: &[&str]) -> CopyPlan {
        let words: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
        crate::operands::parse(&words).plan.expect("valid operands")
    }

    fn memfd() -> FileEnd {
        let fd = rustix::fs::memfd_create("ddx-raw", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        FileEnd::new(Handle::Owned(fd))
    }

    #[test]
    fn sparse_zero_buffers_become_seeks_and_the_offset_follows() {
        let mut end = memfd();
        let mut raw = RawOutput::new(&plan(&["conv=sparse"]), Some(0));
        let w = raw.write(&mut end, b"m", &[0; 4096], false, &Quiet);
        assert_eq!((w.bytes, w.error), (4096, None));
        assert!(raw.ended_in_seek);
        assert_eq!(end.size().unwrap(), Some(0), "nothing written");
        let w = raw.write(&mut end, b"m", b"data", false, &Quiet);
        assert_eq!(w.bytes, 4);
        assert!(!raw.ended_in_seek);
        assert_eq!(end.size().unwrap(), Some(4100));
        assert_eq!(raw.offset, Some(4100));
    }

    #[test]
    fn a_pipe_turns_sparse_into_writes() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let mut end = FileEnd::new(Handle::Owned(w));
        let mut raw = RawOutput::new(&plan(&["conv=sparse"]), None);
        let written = raw.write(&mut end, b"p", &[0; 16], false, &Quiet);
        assert_eq!(written.bytes, 16);
        assert!(!raw.sparse());
        let mut buf = [1u8; 32];
        assert_eq!(rustix::io::read(&r, &mut buf).unwrap(), 16);
        assert_eq!(&buf[..16], &[0; 16]);
    }

    #[test]
    fn a_full_pipe_reader_gone_is_the_error_returned() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        drop(r);
        let mut end = FileEnd::new(Handle::Owned(w));
        let mut raw = RawOutput::new(&plan(&[]), None);
        let written = raw.write(&mut end, b"p", b"x", false, &Quiet);
        assert_eq!((written.bytes, written.error), (0, Some(Errno::PIPE)));
    }
}
