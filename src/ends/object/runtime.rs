//! The async runtime an object end keeps to itself.
//!
//! object_store is async; the engine is not. Each end owns a tokio
//! runtime with a few worker threads, so that requests in flight (ranges
//! read ahead, parts uploading) go on while the copy thread is busy
//! elsewhere: on a current-thread runtime they would only move while the
//! end is inside `block_on`. The workers block dd's signals (SIGINT,
//! SIGTERM, SIGUSR1), which belong to ddx's reporter thread, as the copy
//! threads do.

use tokio::runtime::{Builder, Runtime};

use super::ObjectError;
use crate::sys::Errno;

/// Worker threads per end: HTTP and TLS framing, request signing (a
/// SHA-256 of every part) and copying bodies; more than two brought
/// nothing on loopback.
const WORKERS: usize = 2;

/// A runtime for one end.
pub fn new() -> Result<Runtime, ObjectError> {
    Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("ddx-object")
        .on_thread_start(crate::sys::signals::block_in_this_thread)
        .enable_all()
        .build()
        .map_err(|e| ObjectError {
            errno: Errno::from_io_error(&e).unwrap_or(Errno::IO),
            detail: format!("starting the object store's threads: {e}"),
        })
}
