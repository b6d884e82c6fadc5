//! Safe order for bootable media: the first MiB of a whole device is
//! written last.
//!
//! Firmware and kernels decide that a disk holds something by its first
//! sectors: the MBR's signature, the protective MBR and GPT header, a
//! filesystem's superblock. An image write that is interrupted (a pulled
//! card, a power cut) must not leave a disk that says "bootable" over
//! half-written partitions, nor the *previous* image's partition table
//! over new contents. So, before the first byte goes anywhere else, the
//! first MiB ([`HELD`]) is overwritten with zeros and flushed; writes that
//! fall in it are kept in memory; and at [`Stream::close`] everything else is
//! flushed, then the kept MiB written and flushed. An interrupted or
//! failed copy ([`Stream::abandon`]) leaves the zeros: a blank-looking disk.
//!
//! This is for a write of a whole device from its first byte (the planner
//! applies it with `--bmap` or `--decompress` onto a whole block device
//! and no `seek=`): it zeroes the first MiB even where the copy writes
//! less, which is right only there. The two flushes at close are part of
//! the order and happen whether or not `conv=fsync` asked for one.
//! Statistics after a failure count the kept MiB as written, though it
//! never reaches the device: on purpose.

use crate::ends::Whence;
use crate::engine::stream::{forward_to_inner, Stream};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// Bytes at the start of the device written last.
pub const HELD: usize = 1 << 20;

#[derive(Debug)]
pub struct SafeOrder {
    inner: Box<dyn Stream>,
    /// The first MiB as the copy writes it; zeros elsewhere. Page-aligned
    /// for an O_DIRECT output.
    held: AlignedBuf,
    /// How much of `held` the device has (less than a MiB on a tiny one);
    /// None until the first write wiped it.
    held_len: Option<usize>,
    /// The position the engine sees.
    pos: u64,
    /// Where the inner end's own position is, if known.
    inner_pos: Option<u64>,
}

impl SafeOrder {
    /// Wrap `output`, a positional end (a block device). An end that
    /// cannot seek is given back unwrapped: there is no "first MiB" to go
    /// back to.
    pub fn wrap(output: Box<dyn Stream>) -> Box<dyn Stream> {
        match SafeOrder::new(output) {
            Ok(safe) => Box::new(safe),
            Err(output) => output,
        }
    }

    pub fn new(mut output: Box<dyn Stream>) -> Result<SafeOrder, Box<dyn Stream>> {
        if !output.capabilities().writes_at {
            return Err(output);
        }
        let Ok(pos) = output.seek(Whence::Current(0)) else {
            return Err(output);
        };
        let Ok(held) = AlignedBuf::new(HELD) else {
            return Err(output);
        };
        Ok(SafeOrder {
            inner: output,
            held,
            held_len: None,
            pos,
            inner_pos: Some(pos),
        })
    }

    /// Before the first write: zero the first MiB on the device and flush,
    /// so that nothing written after can land while the old start stands.
    fn arm(&mut self) -> Result<usize, Errno> {
        if let Some(len) = self.held_len {
            return Ok(len);
        }
        let mut wiped = 0;
        while wiped < HELD {
            let zeros = &self.held.as_slice()[wiped..];
            match put_at(&mut *self.inner, zeros, wiped as u64, &mut self.inner_pos) {
                Ok(0) => break,
                Ok(n) => wiped += n,
                Err(Errno::NOSPC) if wiped > 0 => break,
                Err(errno) => return Err(errno),
            }
        }
        self.inner.sync(true)?;
        self.held_len = Some(wiped);
        Ok(wiped)
    }

    /// Split a write at `at` of `len` bytes: the part kept, the part that
    /// goes to the device.
    fn split(&self, at: u64, len: usize) -> (usize, usize) {
        let held = self.held_len.unwrap_or(0) as u64;
        let kept = if at < held {
            (held - at).min(len as u64) as usize
        } else {
            0
        };
        (kept, len - kept)
    }

    fn keep(&mut self, at: u64, data: &[u8]) {
        let at = at as usize;
        self.held.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
    }

    fn write_at_pos(&mut self, buf: &[u8], at: u64) -> Result<usize, Errno> {
        self.arm()?;
        let (kept, rest) = self.split(at, buf.len());
        if kept > 0 {
            self.keep(at, &buf[..kept]);
        }
        if rest == 0 {
            return Ok(kept);
        }
        match put_at(
            &mut *self.inner,
            &buf[kept..],
            at + kept as u64,
            &mut self.inner_pos,
        ) {
            Ok(n) => Ok(kept + n),
            // What was kept is written (it will be): the error comes with
            // the next write, as after any short write.
            Err(_) if kept > 0 => Ok(kept),
            Err(errno) => Err(errno),
        }
    }

    /// Write the kept MiB, in the safe order.
    fn release(&mut self) -> Result<(), Errno> {
        let Some(len) = self.held_len else {
            return Ok(());
        };
        self.inner.sync(true)?;
        let mut done = 0;
        while done < len {
            let data = &self.held.as_slice()[done..len];
            match put_at(&mut *self.inner, data, done as u64, &mut self.inner_pos)? {
                0 => return Err(Errno::NOSPC),
                n => done += n,
            }
        }
        self.inner.sync(true)
    }
}

/// pwrite where the end has it, else seek and write; `inner_pos` tracks
/// the end's own position.
fn put_at(
    end: &mut dyn Stream,
    data: &[u8],
    at: u64,
    inner_pos: &mut Option<u64>,
) -> Result<usize, Errno> {
    match end.write_at(data, at) {
        Err(Errno::SPIPE) | Err(Errno::NOTSUP) => {}
        other => return other,
    }
    if *inner_pos != Some(at) {
        *inner_pos = None;
        end.seek(Whence::Start(at))?;
    }
    let n = end.write(data)?;
    *inner_pos = Some(at + n as u64);
    Ok(n)
}

impl Stream for SafeOrder {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    /// The device's bytes, with the kept MiB as the copy wrote it.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let n = match self.inner.read_at(buf, offset) {
            Err(Errno::SPIPE) | Err(Errno::NOTSUP) => {
                self.inner.seek(Whence::Start(offset))?;
                let n = self.inner.read(buf)?;
                self.inner_pos = Some(offset + n as u64);
                n
            }
            other => other?,
        };
        let (kept, _) = self.split(offset, n);
        if kept > 0 {
            let at = offset as usize;
            buf[..kept].copy_from_slice(&self.held.as_slice()[at..at + kept]);
        }
        Ok(n)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let n = self.write_at_pos(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        self.write_at_pos(buf, offset)
    }

    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        self.arm()?;
        let (kept, _) = self.split(self.pos, len.min(HELD as u64) as usize);
        let at = self.pos as usize;
        if kept > 0 {
            self.held.as_mut_slice()[at..at + kept].fill(0);
        }
        let beyond = len - kept as u64;
        if beyond > 0 {
            let start = self.pos + kept as u64;
            if self.inner_pos != Some(start) {
                self.inner_pos = None;
                self.inner.seek(Whence::Start(start))?;
            }
            self.inner.write_zeroes(beyond)?;
            self.inner_pos = Some(start + beyond);
        }
        self.pos += len;
        Ok(())
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        self.pos = match to {
            Whence::Start(at) => at,
            Whence::Current(delta) => self.pos.checked_add_signed(delta).ok_or(Errno::INVAL)?,
            Whence::End(_) => {
                let at = self.inner.seek(to)?;
                self.inner_pos = Some(at);
                at
            }
        };
        Ok(self.pos)
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        self.inner_pos = None;
        self.inner.next_data(offset)
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        self.inner_pos = None;
        self.inner.next_hole(offset)
    }

    // sync passes on what has been written; the kept MiB is written (and
    // synced) at close. fd is not passed on (End's default, None): writes
    // straight to the descriptor would go around the kept MiB.
    forward_to_inner!(
        kind,
        size,
        truncate,
        sync,
        pipeline,
        settle,
        written_until,
        take_detail,
        abandon,
    );

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        let released = self.release();
        let closed = self.inner.close();
        released.and(closed)
    }

    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        // A failed copy never releases the held first blocks: the device
        // must not look bootable (see the module's comment).
        self.inner.close_failed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::Kind;
    use crate::image::testing::{sample, Memory};
    use std::sync::Arc;

    const MIB: usize = 1 << 20;

    fn write_image(safe: &mut SafeOrder, image: &[u8]) {
        for chunk in image.chunks(64 << 10) {
            assert_eq!(safe.write(chunk).unwrap(), chunk.len());
        }
    }

    #[test]
    fn the_first_mib_is_zeros_until_close_then_the_image() {
        let image = sample(2 * MIB + 5000, 3);
        let (device, bytes) = Memory::new(Kind::BlockDevice, vec![0xAA; 3 * MIB]);
        let synced = Arc::clone(&device.synced);
        let mut safe = SafeOrder::new(Box::new(device)).unwrap();
        write_image(&mut safe, &image);
        {
            let now = bytes.lock().unwrap();
            assert!(now[..MIB].iter().all(|&b| b == 0), "wiped first");
            assert_eq!(now[MIB..image.len()], image[MIB..]);
        }
        // Reading back through the end sees what the copy wrote.
        let mut head = vec![0u8; 4096];
        assert_eq!(safe.read_at(&mut head, 0).unwrap(), 4096);
        assert_eq!(head, image[..4096]);
        assert_eq!(*synced.lock().unwrap(), 1, "the wipe is flushed first");
        Box::new(safe).close().unwrap();
        let now = bytes.lock().unwrap();
        assert_eq!(now[..image.len()], image[..]);
        assert!(now[image.len()..].iter().all(|&b| b == 0xAA));
        assert_eq!(*synced.lock().unwrap(), 3, "flush, first MiB, flush");
    }

    #[test]
    fn an_abandoned_write_leaves_a_blank_start() {
        let image = sample(2 * MIB, 4);
        let (device, bytes) = Memory::new(Kind::BlockDevice, vec![0xAA; 3 * MIB]);
        let mut safe = SafeOrder::new(Box::new(device)).unwrap();
        write_image(&mut safe, &image[..MIB + 4096]);
        Box::new(safe).abandon();
        let now = bytes.lock().unwrap();
        assert!(now[..MIB].iter().all(|&b| b == 0));
        assert_eq!(now[MIB..MIB + 4096], image[MIB..MIB + 4096]);
        assert!(now[MIB + 4096..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn holes_sought_over_in_the_first_mib_stay_zero_and_a_pipe_is_not_wrapped() {
        let (device, bytes) = Memory::new(Kind::BlockDevice, vec![0xAA; 2 * MIB]);
        let mut safe = SafeOrder::new(Box::new(device)).unwrap();
        safe.write(b"MBR").unwrap();
        safe.seek(Whence::Start(8192)).unwrap();
        safe.write_zeroes(10).unwrap();
        safe.write(b"GPT").unwrap();
        Box::new(safe).close().unwrap();
        let now = bytes.lock().unwrap();
        assert_eq!(&now[..3], b"MBR");
        assert!(now[3..8202].iter().all(|&b| b == 0));
        assert_eq!(&now[8202..8205], b"GPT");
        assert!(now[MIB..].iter().all(|&b| b == 0xAA));
        let (pipe, _) = Memory::boxed(Kind::Pipe, Vec::new());
        assert!(SafeOrder::new(pipe).is_err());
    }
}
