//! Bulk reads: where records can be decoupled from requests (see
//! `planner::bulk_shape`), whole chunks of records in one request, holes
//! passed on without being read, and a hand-over to GNU's loop at the
//! record that fails, so an error is met exactly as GNU meets it.

use super::{advance_offset, Closed, Event, Reader, Sink};
use crate::ends::Whence;
use crate::engine::cache::DropBehind;
use crate::engine::shape::BulkShape;
use crate::sys::buffer::AlignedBuf;
use crate::sys::fill::{fill, Filled};

impl Reader {
    /// Bulk reads: whole chunks up to count= (in bytes), then End.
    pub(super) fn run_bulk(
        &mut self,
        sink: &mut dyn Sink,
        shape: BulkShape,
        scratch: Option<AlignedBuf>,
    ) -> Result<(), Closed> {
        let ibs = self.plan.input_block_size as u64;
        let mut remaining = if self.plan.has_count() {
            self.plan
                .count
                .records
                .saturating_mul(ibs)
                .saturating_add(self.plan.count.bytes)
                .saturating_sub(self.bulk_done)
        } else {
            u64::MAX
        };
        let mut next_buffer = scratch.filter(|b| b.len() >= shape.chunk);
        let mut copied = self.bulk_done;
        let mut behind = self
            .settings
            .drop_after
            .map(|after| DropBehind::new(false, after));
        let result = self.bulk_loop(
            sink,
            shape,
            &mut remaining,
            &mut copied,
            &mut next_buffer,
            &mut behind,
        );
        if let (Some(behind), Some(fd)) = (&mut behind, self.input.stream.fd()) {
            behind.finish(fd);
        }
        match result {
            Ok(true) => {}
            other => return other.map(|_| ()),
        }
        let late = self.finish_cache();
        sink.send(Event::End {
            failed: false,
            late,
        })
    }

    /// The bulk reads; Ok(false) when the stream has been handed over or
    /// ended already.
    fn bulk_loop(
        &mut self,
        sink: &mut dyn Sink,
        shape: BulkShape,
        remaining: &mut u64,
        copied: &mut u64,
        next_buffer: &mut Option<AlignedBuf>,
        behind: &mut Option<DropBehind>,
    ) -> Result<bool, Closed> {
        let ibs = self.plan.input_block_size as u64;
        while *remaining > 0 {
            let mut buf = match next_buffer.take() {
                Some(buf) => buf,
                None => match sink.buffer(shape.chunk) {
                    Ok(buf) => buf,
                    Err(Some(closed)) => return Err(closed),
                    Err(None) => return self.no_memory(sink, shape.chunk).map(|()| false),
                },
            };
            if let Some(hole) = self.whole_pieces_of_hole(shape, *copied, *remaining) {
                advance_offset(&mut self.input.offset, hole);
                *remaining -= hole;
                *copied += hole;
                // The buffer goes round again: it belongs to the pool.
                *next_buffer = Some(buf);
                sink.send(Event::Hole { len: hole })?;
                continue;
            }
            let mut want = (shape.chunk as u64).min(*remaining) as usize;
            if shape.mapped_holes {
                // Read a mapped range up to its end only: the hole after
                // it is passed on as one, never written.
                let offset = self.input.offset.max(0) as u64;
                if let Ok(hole) = self.input.stream.next_hole(offset) {
                    if hole > offset {
                        want = want.min((hole - offset).min(usize::MAX as u64) as usize);
                    }
                }
            }
            if let (Some(behind), Some(fd)) = (behind.as_mut(), self.input.stream.fd()) {
                let offset = self.input.offset.max(0) as u64;
                behind.before(fd, offset, want as u64);
            }
            // A regular file returns short only at end of file; fill anyway
            // so that a signal-shortened read changes nothing.
            let end = &mut self.input.stream;
            let exchanged = if want == buf.len() {
                end.read_exchange(&mut buf)
            } else {
                None
            };
            let Filled { len, error } = match exchanged {
                Some(Ok(len)) => Filled { len, error: None },
                Some(Err(errno)) => Filled {
                    len: 0,
                    error: Some(errno),
                },
                None => fill(&mut buf.as_mut_slice()[..want], |rest, _| end.read(rest)),
            };
            if let (Some(errno), false) = (error, self.input.stream.capabilities().reads_at) {
                // A stream ddx decodes (--decompress, --bmap) cannot be
                // read again from the record that failed: what was read
                // goes on, then GNU's message, and the copy ends there.
                advance_offset(&mut self.input.offset, len as u64);
                *copied += len as u64;
                if len > 0 {
                    sink.send(Event::Bulk { buf, len })?;
                }
                self.send_read_error(sink, errno)?;
                let late = self.finish_cache();
                sink.send(Event::End { failed: true, late })?;
                return Ok(false);
            }
            if error.is_some() {
                // Hand over to the per-record loop at the record that
                // failed, so that the error is met exactly as GNU meets it.
                let good = len / ibs as usize * ibs as usize;
                let rewind = (len - good) as i64;
                if rewind > 0 && self.input.stream.seek(Whence::Current(-rewind)).is_err() {
                    sink.send(Event::End {
                        failed: true,
                        late: None,
                    })?;
                    return Ok(false);
                }
                advance_offset(&mut self.input.offset, good as u64);
                *copied += good as u64;
                if good > 0 {
                    sink.send(Event::Bulk { buf, len: good })?;
                }
                self.records_read = *copied / ibs;
                self.run_records(sink, None)?;
                return Ok(false);
            }
            advance_offset(&mut self.input.offset, len as u64);
            *remaining -= len as u64;
            *copied += len as u64;
            if let (Some(behind), Some(fd)) = (behind.as_mut(), self.input.stream.fd()) {
                behind.after(fd, len as u64);
            }
            if len > 0 {
                sink.send(Event::Bulk { buf, len })?;
            }
            if len < want {
                break;
            }
        }
        Ok(true)
    }

    /// If the input's next bytes are a hole (SEEK_DATA) spanning whole write
    /// blocks of the stream, skip over them and return their length: they
    /// need not be read (nor written, under conv=sparse). Bytes of the hole
    /// before the first block boundary are read as usual.
    fn whole_pieces_of_hole(
        &mut self,
        shape: BulkShape,
        copied: u64,
        remaining: u64,
    ) -> Option<u64> {
        const MAX_HOLE_EVENT: u64 = 1 << 30;
        if !shape.sparse_input || self.input.offset < 0 {
            return None;
        }
        let offset = self.input.offset as u64;
        let data = match self.input.stream.next_data(offset) {
            Ok(Some(data)) => data,
            Ok(None) => self.input.stream.size().ok().flatten().unwrap_or(offset),
            Err(_) => offset,
        };
        // A block map's holes are passed on wherever they start.
        let piece = if shape.mapped_holes {
            1
        } else {
            shape.write_block as u64
        };
        let hole = (data.saturating_sub(offset))
            .min(remaining)
            .min(MAX_HOLE_EVENT);
        // Whole pieces only, counted from the stream's start.
        let whole = if copied % piece == 0 {
            hole / piece * piece
        } else {
            0
        };
        let resume_at = offset + whole;
        if self.input.stream.seek(Whence::Start(resume_at)).is_err() {
            return None;
        }
        (whole > 0).then_some(whole)
    }
}
