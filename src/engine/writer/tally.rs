//! Records counted from bytes. Where a copy is shaped into bulk requests
//! or done by the kernel (see `planner::bulk_shape`), ddx does not read
//! and write GNU's records one by one; the counts GNU would print are a
//! function of the bytes moved, and this is that function, in one place.
//!
//! GNU reads records of ibs and writes blocks of obs when it re-blocks
//! (conv=, or ibs differing from obs), else one write per record read:
//! that is the "write block" below.

use std::sync::atomic::Ordering::{Relaxed, Release};

use crate::engine::counters::{bump, Counters};
use crate::operands::CopyPlan;

#[derive(Debug, Clone, Copy)]
pub struct Tally {
    input_block: u64,
    write_block: u64,
    /// Bytes a kernel copy (offload, io_uring) moved before bulk reading
    /// took over: the stream's bulk part starts after them.
    kernel_in: u64,
    /// Bytes read in bulk since.
    bulk_in: u64,
}

impl Tally {
    pub fn new(plan: &CopyPlan) -> Tally {
        let input_block = plan.input_block_size as u64;
        Tally {
            input_block,
            write_block: if plan.two_buffers {
                plan.output_block_size as u64
            } else {
                input_block
            },
            kernel_in: 0,
            bulk_in: 0,
        }
    }

    /// The block GNU writes: obs when re-blocking, else the record read.
    pub fn write_block(&self) -> usize {
        self.write_block as usize
    }

    /// Bytes of the stream read so far (by the kernel, then in bulk).
    pub fn read(&self) -> u64 {
        self.kernel_in + self.bulk_in
    }

    /// `len` more bytes were read in bulk: whole records in as they
    /// complete (a hole may end inside one; the last, partial record is
    /// counted at the end).
    pub fn bulk_read(&mut self, counters: &Counters, len: u64) {
        self.bulk_in += len;
        counters
            .records_in_full
            .store(self.read() / self.input_block, Release);
    }

    /// The input ended inside a record: GNU's "+1" partial record in.
    pub fn end_of_bulk(&self, counters: &Counters) {
        if self.bulk_in % self.input_block != 0 {
            bump(&counters.records_in_partial);
        }
    }

    /// A write of bulk data failed in the block ending at stream offset
    /// `failed_end`: GNU, reading record by record, had read only the
    /// records up to that block's end (the last one perhaps partial), not
    /// all that bulk mode read ahead. The End event, which would count
    /// the partial record, never comes.
    pub fn read_at_failed_write(&self, counters: &Counters, failed_end: u64) {
        let end = failed_end
            .div_ceil(self.input_block)
            .saturating_mul(self.input_block)
            .min(self.read());
        counters
            .records_in_full
            .store(end / self.input_block, Release);
        if end % self.input_block != 0 {
            bump(&counters.records_in_partial);
        }
    }

    /// A kernel copy has moved `total` bytes so far (whole units in which
    /// records in and blocks out coincide): the counts GNU would show
    /// after reading and writing them. Returns the bytes new since the
    /// last call.
    pub fn kernel_copied(&mut self, counters: &Counters, total: u64) -> u64 {
        let before = counters.bytes_out.load(Relaxed);
        counters
            .records_in_full
            .store(total / self.input_block, Release);
        counters
            .records_out_full
            .store(total / self.write_block, Release);
        counters.bytes_out.store(total, Release);
        counters.bytes_offloaded.store(total, Release);
        self.kernel_in = total;
        total - before
    }

    /// The kernel copied everything, `total` bytes: also the partial
    /// record in and block out where the input ended inside one.
    pub fn kernel_copied_all(&mut self, counters: &Counters, total: u64) -> u64 {
        let new = self.kernel_copied(counters, total);
        if total % self.input_block != 0 {
            bump(&counters.records_in_partial);
        }
        if total % self.write_block != 0 {
            bump(&counters.records_out_partial);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(words: &[&str]) -> Tally {
        let words: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
        Tally::new(&crate::operands::parse(&words).plan.expect("valid operands"))
    }

    fn counts(c: &Counters) -> (u64, u64, u64, u64, u64) {
        let s = c.snapshot();
        (
            s.records_in_full,
            s.records_in_partial,
            s.records_out_full,
            s.records_out_partial,
            s.bytes_out,
        )
    }

    #[test]
    fn the_write_block_is_obs_only_when_reblocking() {
        assert_eq!(tally(&["bs=4k"]).write_block(), 4096);
        assert_eq!(tally(&["ibs=4k", "obs=1k"]).write_block(), 1024);
        assert_eq!(tally(&["bs=4k", "conv=ucase"]).write_block(), 4096);
        assert_eq!(tally(&["ibs=512"]).write_block(), 512);
    }

    #[test]
    fn records_in_complete_as_bytes_arrive_and_the_tail_is_partial() {
        let c = Counters::default();
        let mut t = tally(&["bs=1000"]);
        t.bulk_read(&c, 2500);
        assert_eq!(counts(&c).0, 2);
        t.bulk_read(&c, 600);
        assert_eq!(counts(&c).0, 3);
        t.end_of_bulk(&c);
        assert_eq!(counts(&c).1, 1, "3100 bytes: 3+1 records in");
    }

    #[test]
    fn a_failed_write_counts_only_what_gnu_had_read() {
        let c = Counters::default();
        let mut t = tally(&["bs=1000"]);
        t.bulk_read(&c, 10_000);
        // The block ending at 3000 failed: GNU read 3 records, not 10.
        t.read_at_failed_write(&c, 3000);
        assert_eq!((counts(&c).0, counts(&c).1), (3, 0));
        // Never more than was read, and the last one may be partial.
        let c = Counters::default();
        let mut t = tally(&["bs=1000"]);
        t.bulk_read(&c, 2500);
        t.read_at_failed_write(&c, 3000);
        assert_eq!((counts(&c).0, counts(&c).1), (2, 1));
    }

    #[test]
    fn kernel_copies_count_whole_units_then_the_tails() {
        let c = Counters::default();
        let mut t = tally(&["ibs=1536", "obs=4096"]);
        assert_eq!(t.kernel_copied(&c, 12288), 12288);
        assert_eq!(counts(&c), (8, 0, 3, 0, 12288));
        assert_eq!(t.kernel_copied_all(&c, 12288 + 2000), 2000);
        assert_eq!(counts(&c), (9, 1, 3, 1, 14288));
        assert_eq!(c.bytes_offloaded.load(Relaxed), 14288);
        // Bulk reading after the kernel's part counts on from it.
        t.bulk_read(&c, 1072);
        assert_eq!(counts(&c).0, 10);
    }
}
