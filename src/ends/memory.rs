//! An end held in memory: `mem:PATH` names the file at PATH, read whole
//! into memory when the end is opened; every read and write is served
//! from there, and an output is written back to PATH, whole, when it is
//! closed.
//!
//! It exists for the tests. It is storage-like (reads whole, reads and
//! writes at any offset, read back by opening it again) yet has no
//! descriptor and no server, so the paths every end without a descriptor
//! takes (the planner's and the option table's answers, the engine's
//! generic reads and writes, `--verify` reopening a URI) run over it
//! without nbdkit, and the refusal matrix holds it to the same table as
//! every other end. It is also the smallest end made by the recipe in
//! ARCHITECTURE.md: this module, its arm where URIs are recognised, and
//! its kind's capabilities.
//!
//! As an NBD export, an output is never truncated when opened: it holds
//! the file's bytes until they are written over (a file that was not there
//! is created empty when the end is opened). A copy that failed still
//! writes back what it wrote, as GNU keeps a file's; one abandoned
//! (interrupted) writes nothing back, so PATH is left as it was.

use std::path::{Path, PathBuf};

use super::{End, Kind, Whence};
use crate::sys::Errno;

/// The most bytes the end holds: more is refused with ENOSPC rather than
/// taking the machine's memory (a seek= far past the end, a device read
/// whole).
pub const MAX_BYTES: u64 = 4 << 30;

/// What `mem:PATH` names: None for a value without the scheme, Some(Err)
/// for one without a path.
pub fn recognise(text: &str) -> Option<Result<PathBuf, String>> {
    let path = text.strip_prefix("mem:")?;
    if path.is_empty() {
        return Some(Err("mem: names a file to hold in memory: mem:PATH".into()));
    }
    Some(Ok(PathBuf::from(path)))
}

/// The file behind a memory end, held whole.
#[derive(Debug)]
pub struct MemoryEnd {
    path: PathBuf,
    data: Vec<u8>,
    pos: u64,
    /// An output: written back to `path` when closed.
    writing: bool,
    detail: Option<String>,
}

/// Why a memory end could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryError {
    pub errno: Errno,
    pub detail: String,
}

impl MemoryEnd {
    /// Read `path` into memory: for an input it must exist; an output is
    /// created where nothing stands there yet (as open(2) with O_CREAT
    /// would, so that a place it cannot be written fails now, not after
    /// the copy), and starts with the bytes it holds.
    pub fn open(path: &Path, writing: bool) -> Result<MemoryEnd, MemoryError> {
        let failed = |errno: Errno, what: &str| MemoryError {
            errno,
            detail: format!("{what} {} into memory", path.display()),
        };
        if writing {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| MemoryError {
                    errno: errno_of(&e),
                    detail: format!("creating {}", path.display()),
                })?;
        }
        let data = match std::fs::metadata(path) {
            Ok(meta) if meta.len() > MAX_BYTES => {
                return Err(failed(Errno::FBIG, "too large to read"));
            }
            Ok(_) => std::fs::read(path).map_err(|e| failed(errno_of(&e), "reading"))?,
            Err(e) if writing && e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(failed(errno_of(&e), "reading")),
        };
        Ok(MemoryEnd {
            path: path.to_owned(),
            data,
            pos: 0,
            writing,
            detail: None,
        })
    }

    fn write_back(&mut self) -> Result<(), Errno> {
        std::fs::write(&self.path, &self.data).map_err(|e| {
            self.detail = Some(format!("writing it back to {}", self.path.display()));
            errno_of(&e)
        })
    }
}

fn errno_of(error: &std::io::Error) -> Errno {
    error
        .raw_os_error()
        .map_or(Errno::IO, Errno::from_raw_os_error)
}

impl End for MemoryEnd {
    fn kind(&self) -> Kind {
        Kind::Memory
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let len = self.data.len() as u64;
        let at = offset.min(len) as usize;
        let n = (self.data.len() - at).min(buf.len());
        buf[..n].copy_from_slice(&self.data[at..at + n]);
        Ok(n)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        if !self.writing {
            return Err(Errno::BADF);
        }
        let end = offset.saturating_add(buf.len() as u64);
        if end > MAX_BYTES {
            self.detail = Some(format!("a memory end holds at most {MAX_BYTES} bytes"));
            return Err(Errno::NOSPC);
        }
        let (start, end) = (offset as usize, end as usize);
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[start..end].copy_from_slice(buf);
        Ok(buf.len())
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let len = self.data.len() as u64;
        self.pos = to.from(self.pos, len).ok_or(Errno::INVAL)?;
        Ok(self.pos)
    }

    /// The file's size, as a regular file's is its data's.
    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.data.len() as u64))
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        if !self.writing {
            return Err(Errno::BADF);
        }
        if len > MAX_BYTES {
            return Err(Errno::FBIG);
        }
        self.data.resize(len as usize, 0);
        Ok(())
    }

    /// Nothing to flush: the bytes reach the file when the end is closed.
    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        if self.writing {
            self.write_back()?;
        }
        Ok(())
    }

    /// An interrupted copy leaves the file as it was.
    fn abandon(self: Box<Self>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_end_names_a_file() {
        assert_eq!(recognise("mem:disk.img"), Some(Ok("disk.img".into())));
        assert!(matches!(recognise("mem:"), Some(Err(_))));
        assert_eq!(recognise("disk.img"), None);
    }

    #[test]
    fn an_output_is_written_back_when_closed_and_not_when_abandoned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, b"0123456789").unwrap();
        let mut end = Box::new(MemoryEnd::open(&path, true).unwrap());
        assert_eq!(end.size(), Ok(Some(10)));
        assert_eq!(end.write_at(b"ab", 12), Ok(2));
        assert_eq!(end.seek(Whence::Start(1)), Ok(1));
        assert_eq!(end.write(b"X"), Ok(1));
        // Nothing reaches the file before close.
        assert_eq!(std::fs::read(&path).unwrap(), b"0123456789");
        end.close().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"0X23456789\0\0ab");

        let mut abandoned = Box::new(MemoryEnd::open(&path, true).unwrap());
        abandoned.truncate(0).unwrap();
        abandoned.abandon();
        assert_eq!(std::fs::read(&path).unwrap(), b"0X23456789\0\0ab");
    }

    #[test]
    fn an_input_reads_the_file_and_cannot_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, b"abcdef").unwrap();
        let mut end = MemoryEnd::open(&path, false).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(end.read(&mut buf), Ok(4));
        assert_eq!(&buf, b"abcd");
        assert_eq!(end.read(&mut buf), Ok(2));
        assert_eq!(end.read(&mut buf), Ok(0));
        assert_eq!(end.read_at(&mut buf, 1), Ok(4));
        assert_eq!(&buf, b"bcde");
        assert_eq!(end.write(b"x"), Err(Errno::BADF));
        let missing = MemoryEnd::open(&dir.path().join("none"), false).unwrap_err();
        assert_eq!(missing.errno, Errno::NOENT);
    }

    #[test]
    fn more_than_it_may_hold_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut end = MemoryEnd::open(&dir.path().join("big"), true).unwrap();
        assert_eq!(end.write_at(b"x", MAX_BYTES), Err(Errno::NOSPC));
        assert!(end.take_detail().is_some());
    }
}
