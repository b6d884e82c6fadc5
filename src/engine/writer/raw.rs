//! The lowest layer of writing, dd's `iwrite`: one buffer written whole
//! (retrying short writes and EINTR), conv=sparse's seeks over all-zero
//! buffers and `--trim`'s discards of them, the unaligned O_DIRECT tail
//! that must go through the cache, GNU's nocache advice, and uncached
//! writes (RWF_DONTCACHE) where the copy drops its pages behind it.

use crate::diagnostic::{Diagnostic, Events};
use crate::ends::Whence;
use crate::engine::cache::CacheDropper;
use crate::engine::stream::Stream;
use crate::operands::{Conv, CopyPlan, IoFlags, StatusLevel};
use crate::sys::buffer::AlignedBuf;
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

/// `--trim`: whether all-zero blocks are discarded on the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trim {
    Off,
    On,
    /// The output cannot discard (EOPNOTSUPP): zeros are written as data
    /// from now on, without asking again for every block.
    Refused,
}

/// What `--trim` did, for `--verbose`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Discards {
    /// Bytes the output discarded (zero requests, punched holes).
    pub discarded: u64,
    /// Bytes of zeros written as data because the output refused.
    pub written: u64,
}

pub struct RawOutput {
    settings: Settings,
    trim: Trim,
    pub discards: Discards,
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
            trim: Trim::Off,
            discards: Discards::default(),
            ended_in_seek: false,
            fsync_required: false,
            cache: CacheDropper::new(
                plan.output_nocache,
                plan.output_nocache && plan.copies_nothing(),
            ),
            offset,
        }
    }

    /// `--trim`: discard all-zero blocks instead of writing them (and
    /// instead of conv=sparse's seeks, which would leave old data).
    pub fn set_trim(&mut self, trim: bool) {
        self.trim = if trim { Trim::On } else { Trim::Off };
    }

    /// Whether all-zero blocks are sought over (conv=sparse, and the
    /// output seeks, and no `--trim`).
    pub fn sparse(&self) -> bool {
        self.sparse_seeks && self.trim == Trim::Off
    }

    /// Whether `--trim` was asked: holes and zero blocks go to
    /// [`RawOutput::discard_over`] first.
    pub fn trims(&self) -> bool {
        self.trim != Trim::Off
    }

    /// Whether the writer looks for runs of all-zero blocks.
    pub fn zero_runs(&self) -> bool {
        self.sparse() || self.trims()
    }

    /// Discard `len` bytes at the position (`--trim`): true when the
    /// output did and the position moved past them; false when the
    /// caller must write the zeros (the output refused, or `--trim` is
    /// off).
    pub fn discard_over(&mut self, end: &mut dyn Stream, len: u64) -> bool {
        if !self.discard(end, len) {
            return false;
        }
        self.advance(len);
        true
    }

    /// As [`RawOutput::discard_over`], without moving the offset kept
    /// here.
    fn discard(&mut self, end: &mut dyn Stream, len: u64) -> bool {
        if self.trim != Trim::On {
            return false;
        }
        match end.write_zeroes(len) {
            Ok(()) => {
                // Like a seek over zeros, a hole punched past a file's
                // end leaves it short until the writer extends it.
                self.ended_in_seek = true;
                self.discards.discarded += len;
                true
            }
            // The filesystem, device or server cannot: for good.
            Err(Errno::NOTSUP) => {
                self.trim = Trim::Refused;
                false
            }
            // This range only (a device's partial logical block, a range
            // past an export's end, which the write then meets as GNU's).
            Err(_) => false,
        }
    }

    /// Seek over `len` bytes of zeros under conv=sparse, in `block`-sized
    /// pieces (the last may be short) as GNU seeks one block at a time:
    /// the bytes sought, fewer than `len` where a seek failed (sparse is
    /// then off from now on, as in GNU). A block device or an output
    /// export refuses to seek past its end: the pieces that fit are
    /// sought, the rest is for the caller to write, meeting ENOSPC where
    /// GNU does. One seek when all fit; else halving steps, so a long run
    /// that crosses the end costs a few dozen seeks, not one per block.
    pub fn seek_over(&mut self, end: &mut dyn Stream, len: u64, block: u64) -> u64 {
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

    fn try_seek(&mut self, end: &mut dyn Stream, len: u64) -> bool {
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
    pub fn skip_over(&mut self, end: &mut dyn Stream, len: u64) -> bool {
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

    /// Write `len` zeros at the position of a stream (an output that has
    /// no positions) through [`Stream::write_zeroes`], which a compressed
    /// stream takes without the zeros being sent: true when it did. An
    /// output with positions is not asked, where it would leave a hole
    /// or discard instead of writing the zeros.
    pub fn zeroes_over(&mut self, end: &mut dyn Stream, len: u64) -> bool {
        if end.capabilities().writes_at || end.write_zeroes(len).is_err() {
            return false;
        }
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
    #[inline(always)]
    pub fn write(
        &mut self,
        end: &mut dyn Stream,
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
        let zeros = self.zero_runs() && is_all_zero(buf);
        if zeros && self.trims() {
            if self.discard(end, buf.len() as u64) {
                written = buf.len();
            } else {
                self.discards.written += buf.len() as u64;
            }
        }
        while written < buf.len() {
            self.ended_in_seek = false;
            if zeros && self.sparse() {
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
            let result = if uncached {
                match end.fd() {
                    Some(fd) => file::write_uncached(fd, &buf[written..]),
                    None => end.write(&buf[written..]),
                }
            } else {
                match end.plain_fd() {
                    Some(fd) => file::write(fd, &buf[written..]),
                    None => end.write(&buf[written..]),
                }
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
        self.wrote(end, written, error, uncached_refused)
    }

    /// Write all of `buf` by handing the buffer itself to an end that
    /// writes behind ([`Stream::write_exchange`]): `buf` comes back another
    /// buffer of the same length. None where the write needs what only
    /// [`RawOutput::write`] does (zero runs to seek over or discard, the
    /// O_DIRECT tail) or the end does not take buffers.
    pub fn write_exchange(
        &mut self,
        end: &mut dyn Stream,
        buf: &mut AlignedBuf,
    ) -> Option<Written> {
        let len = buf.len();
        if self.zero_runs() || (self.settings.direct && len < self.settings.block_size) {
            return None;
        }
        self.ended_in_seek = false;
        let (written, error) = match end.write_exchange(buf)? {
            Ok(n) => (n, None),
            Err(errno) => (0, Some(errno)),
        };
        Some(self.wrote(end, written, error, false))
    }

    /// After a write of `written` bytes: the offset and the cache's books.
    fn wrote(
        &mut self,
        end: &mut dyn Stream,
        written: usize,
        error: Option<Errno>,
        uncached_refused: bool,
    ) -> Written {
        if written > 0 {
            if let Some(offset) = &mut self.offset {
                *offset += written as u64;
                if self.cache.enabled {
                    if let Some(fd) = end.fd() {
                        self.cache.after_io(fd, *offset as i64, written as u64);
                    }
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
    use crate::engine::window::Window;
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

    fn memfd() -> Window {
        let fd = rustix::fs::memfd_create("ddx-raw", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        Window::over(Box::new(FileEnd::new(Handle::Owned(fd))))
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
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(w))));
        let mut raw = RawOutput::new(&plan(&["conv=sparse"]), None);
        let written = raw.write(&mut end, b"p", &[0; 16], false, &Quiet);
        assert_eq!(written.bytes, 16);
        assert!(!raw.sparse());
        let mut buf = [1u8; 32];
        assert_eq!(rustix::io::read(&r, &mut buf).unwrap(), 16);
        assert_eq!(&buf[..16], &[0; 16]);
    }

    #[test]
    fn trim_punches_zero_buffers_over_old_data_where_sparse_would_seek() {
        let mut end = memfd();
        end.write(&[7; 8192]).unwrap();
        end.seek(Whence::Start(0)).unwrap();
        let mut raw = RawOutput::new(&plan(&["conv=sparse"]), Some(0));
        raw.set_trim(true);
        assert!(!raw.sparse(), "--trim replaces the seeks");
        let w = raw.write(&mut end, b"m", &[0; 4096], false, &Quiet);
        assert_eq!((w.bytes, w.error), (4096, None));
        assert_eq!(raw.offset, Some(4096));
        assert_eq!(end.seek(Whence::Current(0)), Ok(4096));
        let mut back = [1u8; 8192];
        assert_eq!(end.read_at(&mut back, 0), Ok(8192));
        assert!(back[..4096].iter().all(|&b| b == 0), "reads back as zeros");
        assert!(back[4096..].iter().all(|&b| b == 7), "the rest kept");
        assert_eq!(
            raw.discards,
            Discards {
                discarded: 4096,
                written: 0
            }
        );
    }

    #[test]
    fn trim_onto_an_end_that_cannot_discard_writes_the_zeros_and_counts_them() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(w))));
        let mut raw = RawOutput::new(&plan(&[]), None);
        raw.set_trim(true);
        for _ in 0..2 {
            let written = raw.write(&mut end, b"p", &[0; 16], false, &Quiet);
            assert_eq!(written.bytes, 16);
        }
        assert_eq!(raw.trim, Trim::Refused);
        assert_eq!(
            raw.discards,
            Discards {
                discarded: 0,
                written: 32
            }
        );
        let mut buf = [1u8; 64];
        assert_eq!(rustix::io::read(&r, &mut buf).unwrap(), 32);
        assert_eq!(&buf[..32], &[0; 32]);
    }

    #[test]
    fn a_full_pipe_reader_gone_is_the_error_returned() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        drop(r);
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(w))));
        let mut raw = RawOutput::new(&plan(&[]), None);
        let written = raw.write(&mut end, b"p", b"x", false, &Quiet);
        assert_eq!((written.bytes, written.error), (0, Some(Errno::PIPE)));
    }
}
