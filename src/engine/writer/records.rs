//! GNU's second buffer (dd's C_TWOBUFS): records converted in place
//! (conv=ascii/ebcdic/ibm, lcase/ucase, swab), passed through
//! block/unblock, and re-blocked into obs-sized output blocks.
//!
//! Blocks go out through the caller's `emit`, one full obs block at a
//! time; the caller writes it and counts it (and stops the copy when the
//! write fails). The last, partial block stays in the buffer until the
//! end of input, when the caller writes what [`Reblocker::partial`] holds.

use crate::engine::reader::Stop;
use crate::operands::{Conv, CopyPlan};
use crate::sys::buffer::AlignedBuf;
use crate::transform::{Blocker, Swab, Translation, Unblocker};

pub struct Reblocker {
    conv: Conv,
    block_size: usize,
    buffer: Option<AlignedBuf>,
    fill: usize,
    translation: Option<Translation>,
    newline: u8,
    space: u8,
    swab: Swab,
    blocker: Blocker,
    unblocker: Unblocker,
}

impl Reblocker {
    pub fn new(plan: &CopyPlan) -> Reblocker {
        let translation = Translation::for_conversions(plan.conv);
        let (newline, space) = translation
            .as_ref()
            .map_or((b'\n', b' '), |t| (t.newline, t.space));
        Reblocker {
            conv: plan.conv,
            block_size: plan.output_block_size,
            buffer: None,
            fill: 0,
            translation,
            newline,
            space,
            swab: Swab::default(),
            blocker: Blocker::new(plan.conversion_block_size),
            unblocker: Unblocker::new(plan.conversion_block_size),
        }
    }

    /// The output buffer, allocated before the first record as GNU does
    /// (a bs too large for memory fails there); Err is its size.
    pub fn allocate(&mut self) -> Result<(), usize> {
        if self.buffer.is_none() {
            self.buffer = Some(AlignedBuf::new(self.block_size).map_err(|_| self.block_size)?);
        }
        Ok(())
    }

    /// Bytes waiting in the output buffer.
    pub fn fill(&self) -> usize {
        self.fill
    }

    /// Records conv=block truncated so far.
    pub fn truncated(&self) -> u64 {
        self.blocker.truncated
    }

    /// A record as read: converted in place, then appended as it becomes
    /// (blocked, unblocked or as is).
    pub fn record(
        &mut self,
        buf: &mut AlignedBuf,
        len: usize,
        emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        if let Some(t) = &self.translation {
            t.apply(&mut buf.as_mut_slice()[..len]);
        }
        let range = if self.conv.contains(Conv::SWAB) {
            self.swab.apply(buf.as_mut_slice(), len)
        } else {
            0..len
        };
        self.convert(&buf.as_slice()[range], emit)
    }

    /// Bytes that need no conversion (bulk copies): appended as they are.
    pub fn append(
        &mut self,
        mut data: &[u8],
        emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        let obs = self.block_size;
        loop {
            let room = obs - self.fill;
            let take = room.min(data.len());
            let buffer = self.buffer.as_mut().expect("output buffer allocated");
            buffer.as_mut_slice()[self.fill..self.fill + take].copy_from_slice(&data[..take]);
            self.fill += take;
            data = &data[take..];
            if self.fill >= obs {
                self.flush(emit)?;
            }
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    /// End of input: the byte swab kept back, conv=block's padding of the
    /// last record, conv=unblock's last newline.
    pub fn finish(&mut self, emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>) -> Result<(), Stop> {
        if let Some(saved) = self.swab.take_saved() {
            self.convert(&[saved], emit)?;
        }
        if self.conv.contains(Conv::BLOCK) {
            let space = self.space;
            let mut blocker = std::mem::replace(&mut self.blocker, Blocker::new(0));
            let result = blocker.finish(space, &mut |c| self.byte(c, emit));
            self.blocker = blocker;
            result?;
        }
        if self.conv.contains(Conv::UNBLOCK) {
            let newline = self.newline;
            let mut unblocker = std::mem::replace(&mut self.unblocker, Unblocker::new(0));
            let result = unblocker.finish(newline, &mut |c| self.byte(c, emit));
            self.unblocker = unblocker;
            result?;
        }
        Ok(())
    }

    /// The last block, shorter than obs (empty when the output ended on a
    /// block boundary).
    pub fn partial(&self) -> &[u8] {
        match &self.buffer {
            Some(buffer) => &buffer.as_slice()[..self.fill],
            None => &[],
        }
    }

    /// block/unblock, or the bytes as they are.
    fn convert(
        &mut self,
        data: &[u8],
        emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        let (newline, space) = (self.newline, self.space);
        if self.conv.contains(Conv::BLOCK) {
            let mut blocker = std::mem::replace(&mut self.blocker, Blocker::new(0));
            let result = blocker.push(data, newline, space, &mut |c| self.byte(c, emit));
            self.blocker = blocker;
            result
        } else if self.conv.contains(Conv::UNBLOCK) {
            let mut unblocker = std::mem::replace(&mut self.unblocker, Unblocker::new(0));
            let result = unblocker.push(data, newline, space, &mut |c| self.byte(c, emit));
            self.unblocker = unblocker;
            result
        } else {
            self.append(data, emit)
        }
    }

    /// One byte into the buffer, which goes out when full.
    fn byte(
        &mut self,
        c: u8,
        emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        let buffer = self.buffer.as_mut().expect("output buffer allocated");
        buffer.as_mut_slice()[self.fill] = c;
        self.fill += 1;
        if self.fill >= self.block_size {
            self.flush(emit)?;
        }
        Ok(())
    }

    /// The full buffer goes out; it is empty again only if that worked.
    fn flush(&mut self, emit: &mut impl FnMut(&[u8]) -> Result<(), Stop>) -> Result<(), Stop> {
        let buffer = self.buffer.as_ref().expect("output buffer allocated");
        emit(&buffer.as_slice()[..self.block_size])?;
        self.fill = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reblocker(words: &[&str]) -> Reblocker {
        let words: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
        let plan = crate::operands::parse(&words).plan.expect("valid operands");
        let mut r = Reblocker::new(&plan);
        r.allocate().unwrap();
        r
    }

    /// Push `records` (each as read) and collect the blocks and the tail.
    fn run(words: &[&str], records: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut r = reblocker(words);
        let mut blocks = Vec::new();
        let mut emit = |b: &[u8]| {
            blocks.push(b.to_vec());
            Ok(())
        };
        for record in records {
            let mut buf = AlignedBuf::new(record.len() + 1).unwrap();
            buf.as_mut_slice()[..record.len()].copy_from_slice(record);
            r.record(&mut buf, record.len(), &mut emit).unwrap();
        }
        r.finish(&mut emit).unwrap();
        let tail = r.partial().to_vec();
        (blocks, tail)
    }

    #[test]
    fn records_are_reblocked_into_obs() {
        let (blocks, tail) = run(&["ibs=3", "obs=4"], &[b"abc", b"def", b"gh"]);
        assert_eq!(blocks, vec![b"abcd".to_vec(), b"efgh".to_vec()]);
        assert!(tail.is_empty());
        let (blocks, tail) = run(&["ibs=3", "obs=4"], &[b"abc", b"de"]);
        assert_eq!(blocks, vec![b"abcd".to_vec()]);
        assert_eq!(tail, b"e");
    }

    #[test]
    fn conversions_apply_before_reblocking() {
        let (blocks, tail) = run(&["ibs=4", "obs=2", "conv=ucase,swab"], &[b"abcd", b"efg"]);
        assert_eq!(blocks, vec![b"BA".to_vec(), b"DC".to_vec(), b"FE".to_vec()]);
        // swab keeps the odd byte back until the end, and it goes as is.
        assert_eq!(tail, b"G");
    }

    #[test]
    fn block_pads_lines_to_cbs_and_counts_truncation() {
        let mut r = reblocker(&["ibs=64", "obs=64", "conv=block", "cbs=4"]);
        let mut out = Vec::new();
        let mut emit = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
        let mut buf = AlignedBuf::new(64).unwrap();
        let text = b"ab\ncdefgh\ni";
        buf.as_mut_slice()[..text.len()].copy_from_slice(text);
        r.record(&mut buf, text.len(), &mut emit).unwrap();
        r.finish(&mut emit).unwrap();
        out.extend_from_slice(r.partial());
        assert_eq!(out, b"ab  cdefi   ");
        assert_eq!(r.truncated(), 1);
    }

    #[test]
    fn a_failed_block_stops_and_stays_in_the_buffer() {
        let mut r = reblocker(&["ibs=2", "obs=2"]);
        let mut buf = AlignedBuf::new(4).unwrap();
        buf.as_mut_slice()[..2].copy_from_slice(b"xy");
        let mut refuse = |_: &[u8]| Err(Stop::Quit);
        assert_eq!(r.record(&mut buf, 2, &mut refuse), Err(Stop::Quit));
        assert_eq!(r.fill(), 2);
    }
}
