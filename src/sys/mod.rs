//! The thin platform layer: file descriptors, open flags, positional and
//! sequential I/O, sizes, cache advice, aligned buffers, signals, and the
//! memory and CPU time the kernel says are available.
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
