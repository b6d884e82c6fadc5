//! A file in memory, for the unit tests of the wrappers' own logic (the
//! integration tests in tests/image.rs use real files and real tools).

use std::sync::{Arc, Mutex};

use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::sys::Errno;

/// Bytes shared with the test, which looks at them after the end closed.
pub type Shared = Arc<Mutex<Vec<u8>>>;

#[derive(Debug)]
pub struct Memory {
    pub data: Shared,
    pub pos: u64,
    pub kind: Kind,
    /// Data extents (start, end), for SEEK_DATA/SEEK_HOLE; None: none
    /// known (EOPNOTSUPP).
    pub extents: Option<Vec<(u64, u64)>>,
    /// Writes reaching this offset fail with this errno.
    pub fail_at: Option<(u64, Errno)>,
    /// Most bytes one read returns (a pipe's short reads).
    pub read_limit: usize,
    pub synced: Arc<Mutex<u32>>,
}

impl Memory {
    pub fn new(kind: Kind, data: Vec<u8>) -> (Memory, Shared) {
        let shared = Arc::new(Mutex::new(data));
        (
            Memory {
                data: Arc::clone(&shared),
                pos: 0,
                kind,
                extents: None,
                fail_at: None,
                read_limit: usize::MAX,
                synced: Arc::new(Mutex::new(0)),
            },
            shared,
        )
    }

    pub fn boxed(kind: Kind, data: Vec<u8>) -> (Box<dyn Stream>, Shared) {
        let (memory, shared) = Memory::new(kind, data);
        (Box::new(memory), shared)
    }
}

impl Stream for Memory {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let data = self.data.lock().unwrap();
        let at = (offset as usize).min(data.len());
        let n = (data.len() - at).min(buf.len()).min(self.read_limit);
        buf[..n].copy_from_slice(&data[at..at + n]);
        Ok(n)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let n = self.write_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        let mut len = buf.len();
        if let Some((fail, errno)) = self.fail_at {
            if offset >= fail {
                return Err(errno);
            }
            len = len.min((fail - offset) as usize);
        }
        let mut data = self.data.lock().unwrap();
        let end = offset as usize + len;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(&buf[..len]);
        Ok(len)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        if !self.kind.capabilities().reads_at {
            return Err(Errno::SPIPE);
        }
        let len = self.data.lock().unwrap().len() as u64;
        self.pos = match to {
            Whence::Start(at) => at,
            Whence::Current(d) => self.pos.checked_add_signed(d).ok_or(Errno::INVAL)?,
            Whence::End(d) => len.checked_add_signed(d).ok_or(Errno::INVAL)?,
        };
        Ok(self.pos)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok((self.kind == Kind::RegularFile).then(|| self.data.lock().unwrap().len() as u64))
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        let extents = self.extents.as_ref().ok_or(Errno::NOTSUP)?;
        Ok(extents
            .iter()
            .find(|&&(_, end)| end > offset)
            .map(|&(start, _)| start.max(offset)))
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        let extents = self.extents.as_ref().ok_or(Errno::NOTSUP)?;
        let len = self.data.lock().unwrap().len() as u64;
        Ok(extents
            .iter()
            .find(|&&(start, end)| start <= offset && end > offset)
            .map_or(offset, |&(_, end)| end)
            .min(len))
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        self.data.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        *self.synced.lock().unwrap() += 1;
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        Ok(())
    }
}

/// Reproducible bytes that compress somewhat: runs, text and noise.
pub fn sample(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let word = (state >> 33) as u32;
        match word % 4 {
            0 => out.extend(std::iter::repeat_n(0u8, (word % 5000) as usize)),
            1 => out.extend_from_slice(b"the quick brown fox jumps over the lazy dog "),
            _ => out.extend_from_slice(&word.to_le_bytes()),
        }
    }
    out.truncate(len);
    out
}
