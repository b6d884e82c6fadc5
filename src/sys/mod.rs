//! The thin platform layer: file descriptors, open flags, positional and
//! sequential I/O, sizes, cache advice, aligned buffers, signals (with the
//! commit gate: a signal after an output's completing request was sent
//! waits for its outcome), io_uring (`ring`: slots of the ring's own, and
//! a queue of requests that bring their buffers), the memory and CPU time
//! the kernel says are available, and a disk's own commands: which
//! character device is a SCSI or NVMe generic node and which disk is
//! behind it (`passthrough`), SCSI commands through SG_IO with the sense
//! decoder (`scsi`: on an sg node each slot a descriptor of its own whose
//! reserve buffer is mapped), NVMe commands through io_uring (`nvme`).
//!
//! It holds no policy: callers decide what to open and when; this module
//! only makes the system calls and reports their errors as `Errno`.

pub mod block;
pub mod buffer;
pub mod cpu;
pub mod device;
pub mod fd;
pub mod file;
pub mod filesystem;
pub mod fill;
pub mod memory;
pub mod mounts;
pub mod nvme;
pub mod passthrough;
pub mod ring;
pub mod scsi;
pub mod signals;
#[cfg(test)]
pub mod skips;
pub mod stdio;
pub mod threads;
pub mod usage;

pub use rustix::io::Errno;

/// The C library's text for an errno value, as `strerror` gives it
/// ("No such file or directory"), for GNU-identical messages.
pub fn errno_text(errno: Errno) -> String {
    let text = std::io::Error::from_raw_os_error(errno.raw_os_error()).to_string();
    match text.rfind(" (os error ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_text_is_strerror() {
        assert_eq!(errno_text(Errno::NOENT), "No such file or directory");
        assert_eq!(
            errno_text(Errno::OVERFLOW),
            "Value too large for defined data type"
        );
    }
}
