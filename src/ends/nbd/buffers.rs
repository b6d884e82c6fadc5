//! The end's own buffers, reused from request to request: a read-ahead
//! or write-behind buffer goes to libnbd with its command (see
//! `handle`'s ownership rule) and comes back here when the command is
//! retired. Reuse spares the allocator and the page faults of fresh
//! memory on every megabyte moved.

#[derive(Debug, Default)]
pub struct Buffers {
    spare: Vec<Vec<u8>>,
    /// Most spares worth keeping (about what can be in flight).
    keep: usize,
}

impl Buffers {
    pub fn keep(&mut self, count: usize) {
        self.keep = count;
        self.spare.truncate(count);
    }

    /// A buffer of exactly `len` bytes (contents unspecified but
    /// initialised).
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        match self.spare.iter().rposition(|b| b.capacity() >= len) {
            Some(at) => {
                let mut buf = self.spare.swap_remove(at);
                buf.resize(len, 0);
                buf
            }
            None => vec![0; len],
        }
    }

    pub fn give(&mut self, buf: Vec<u8>) {
        if self.spare.len() < self.keep.max(2) {
            self.spare.push(buf);
        }
    }
}
