//! Keeping helper threads off the copy's fast path.
//!
//! While two threads share a descriptor table, Linux takes a reference on
//! the file in every read(2) and write(2) (`fdget` skips it only for
//! single-user tables). That costs ~10% at small block sizes, so a helper
//! that needs no new descriptors gives up its share of the table.

/// Give the calling thread a private copy of the descriptor table.
///
/// Call it first thing in a helper thread that only uses descriptors that
/// existed when it was spawned. Failure only costs speed, so it is ignored.
/// The copy holds every descriptor open at the moment of the call, also
/// those another thread opened since the spawn: a spawner that goes on
/// opening descriptors it will close (a child's pipes) waits until the
/// helper has called this, or the helper keeps them open.
pub fn detach_fd_table() {
    // SAFETY: the helper threads that call this (the reporter) use only
    // descriptors created before they were spawned (their pipes and fd 2),
    // which the private copy keeps under the same numbers; they never
    // receive a descriptor opened later by another thread.
    let _ = unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FILES) };
}
