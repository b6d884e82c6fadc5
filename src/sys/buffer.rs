//! Page-aligned I/O buffers that cost nothing until used.
//!
//! O_DIRECT needs buffers aligned to the device's logical block size; a page
//! covers every device. The memory comes from an anonymous mapping, so a
//! `bs=1G` buffer takes no RAM until the copy touches it (std's aligned
//! zeroed allocation would write every byte up front).

use std::ptr::NonNull;

use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};

/// A zero-filled, page-aligned byte buffer backed by an anonymous mapping.
/// Its length may be set anywhere up to the mapping's size (its
/// capacity), so that a pool can reuse one buffer for requests of
/// different sizes.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: AlignedBuf owns its mapping exclusively (like a Box<[u8]>); no
// other handle to the memory exists, so moving it across threads is sound.
unsafe impl Send for AlignedBuf {}

// SAFETY: through a shared reference the memory can only be read
// (`as_slice`); writing needs `&mut self` (`as_mut_slice`), as for a
// Box<[u8]>, so threads sharing one AlignedBuf only read it.
unsafe impl Sync for AlignedBuf {}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl AlignedBuf {
    /// Map `len` bytes (at least one), or fail with the mapping's error.
    pub fn new(len: usize) -> rustix::io::Result<AlignedBuf> {
        let map_len = len.max(1);
        // SAFETY: a fresh private anonymous mapping with a null hint aliases
        // no existing memory; the kernel picks the address.
        let ptr = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                map_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )?
        };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(rustix::io::Errno::NOMEM)?;
        Ok(AlignedBuf {
            ptr,
            len: map_len,
            capacity: map_len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes mapped: the most `set_len` allows.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Make the buffer `len` bytes long, within its mapping. The bytes
    /// are those the mapping holds (zeros, or what was written before).
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity, "AlignedBuf::set_len past its mapping");
        self.len = len;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr maps capacity >= len readable bytes, initialised
        // (zeros from the kernel, or what was written since), and lives
        // as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr/capacity are exactly the mapping made in new(); no
        // slice borrowed from it can outlive self.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.capacity) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        let mut b = AlignedBuf::new(10_000).unwrap();
        assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
    }

    #[test]
    fn a_shorter_length_keeps_the_mapping_and_its_bytes() {
        let mut b = AlignedBuf::new(8192).unwrap();
        b.as_mut_slice()[5000] = 9;
        b.set_len(100);
        assert_eq!((b.len(), b.capacity()), (100, 8192));
        b.set_len(8192);
        assert_eq!(b.as_slice()[5000], 9);
    }

    #[test]
    #[should_panic(expected = "past its mapping")]
    fn a_length_past_the_mapping_is_refused() {
        AlignedBuf::new(4096).unwrap().set_len(4097);
    }

    #[test]
    fn huge_buffers_cost_nothing_until_touched() {
        // Mapping 4 GiB takes no time or memory; only touched pages count.
        let b = AlignedBuf::new(4 << 30).unwrap();
        assert_eq!(b.len(), 4 << 30);
    }
}
