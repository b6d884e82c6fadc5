//! The end's own buffers, reused from request to request: a read-ahead
//! or write-behind buffer goes to libnbd with its command (see
//! `handle`'s ownership rule) and comes back here when the command is
//! retired. Reuse spares the mappings and the page faults of fresh
//! memory on every megabyte moved. They are the engine's own kind of
//! buffer ([`AlignedBuf`]), so that the end and the engine can exchange
//! a whole buffer instead of copying its bytes (see
//! [`crate::ends::End::read_exchange`]).

use crate::sys::buffer::AlignedBuf;

#[derive(Debug, Default)]
pub struct Buffers {
    spare: Vec<AlignedBuf>,
    /// Most spares worth keeping (about what can be in flight).
    keep: usize,
}

impl Buffers {
    pub fn keep(&mut self, count: usize) {
        self.keep = count;
        self.spare.truncate(count);
    }

    /// A buffer of exactly `len` bytes (contents unspecified but
    /// initialised). Out of memory ends the process, as a `Vec` would.
    pub fn take(&mut self, len: usize) -> AlignedBuf {
        let mut buf = match self.spare.iter().rposition(|b| b.capacity() >= len) {
            Some(at) => self.spare.swap_remove(at),
            None => AlignedBuf::new(len).unwrap_or_else(|_| {
                std::alloc::handle_alloc_error(
                    std::alloc::Layout::from_size_align(len.max(1), 4096).expect("a page layout"),
                )
            }),
        };
        buf.set_len(len);
        buf
    }

    pub fn give(&mut self, buf: AlignedBuf) {
        if self.spare.len() < self.keep.max(2) {
            self.spare.push(buf);
        }
    }
}
