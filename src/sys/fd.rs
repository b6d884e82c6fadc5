//! A descriptor handed down by the caller (`--progress-fd=N`): taken over
//! by number, and written without letting a vanished reader kill the copy
//! with SIGPIPE (ddx restores SIGPIPE's default action for its output, as
//! dd dies when the pipe it copies into closes; a progress reader going
//! away must not stop the copy).

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::io::Errno;

/// A close-on-exec duplicate of inherited descriptor `fd`; EBADF if it is
/// not open.
pub fn inherit(fd: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) takes a descriptor number and returns
    // a new descriptor or -1; it touches no memory of ours.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    // SAFETY: `new` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Write all of `bytes`, with SIGPIPE blocked in this thread: a closed
/// reader gives EPIPE, and the pending SIGPIPE is taken back before the
/// signal mask is restored.
pub fn write_all_without_sigpipe(fd: &impl AsFd, mut bytes: &[u8]) -> Result<(), Errno> {
    let fd: BorrowedFd<'_> = fd.as_fd();
    // SAFETY: the sigsets are initialised by sigemptyset before use;
    // pthread_sigmask only changes this thread's mask, and sigtimedwait
    // with a zero timeout only takes a SIGPIPE already pending here.
    unsafe {
        let mut pipe_set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_set);
        libc::sigaddset(&mut pipe_set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_set, &mut old);
        let mut result = Ok(());
        while !bytes.is_empty() {
            match rustix::io::write(fd, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::INTR) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result == Err(Errno::PIPE) {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&pipe_set, std::ptr::null_mut(), &zero);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_reader_is_an_error_not_a_signal() {
        let (read_end, write_end) = rustix::pipe::pipe().unwrap();
        drop(read_end);
        assert_eq!(
            write_all_without_sigpipe(&write_end, b"x"),
            Err(Errno::PIPE)
        );
    }

    #[test]
    fn closed_descriptors_are_refused() {
        assert_eq!(inherit(999_999).err(), Some(Errno::BADF));
        let (read_end, _write_end) = rustix::pipe::pipe().unwrap();
        use std::os::fd::AsRawFd;
        assert!(inherit(read_end.as_raw_fd()).is_ok());
    }
}
