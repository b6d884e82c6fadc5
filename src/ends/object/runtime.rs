//! The async runtime an object end keeps to itself.
//!
//! object_store is async; the engine is not. Each end owns a tokio
//! runtime with a few worker threads, so that requests in flight (ranges
//! read ahead, parts uploading) go on while the copy thread is busy
//! elsewhere: on a current-thread runtime they would only move while the
//! end is inside `block_on`.
//!
//! Every request runs on those threads and nowhere else ([`run`]): the
//! copy thread only waits for the result. The workers block dd's signals
//! (SIGINT, SIGTERM, SIGUSR1), which belong to ddx's reporter thread, and
//! SIGPIPE, which a write to a connection the server closed would raise
//! (see `sys::signals::block_in_network_thread`); a request driven on the
//! calling thread would write its sockets there, where SIGPIPE keeps its
//! default action, and where a private descriptor table (see
//! `sys::threads`) would hide the connection from the workers.

use std::future::Future;

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
        .on_thread_start(crate::sys::signals::block_in_network_thread)
        .enable_all()
        .build()
        .map_err(|e| ObjectError {
            errno: Errno::from_io_error(&e).unwrap_or(Errno::IO),
            detail: format!("starting the object store's threads: {e}"),
        })
}

/// Run `work` (a request, or several) on `runtime`'s workers and wait for
/// its result here. A task that panicked or was cancelled is an error of
/// object_store's kind.
pub fn run<T: Send + 'static>(
    runtime: &Runtime,
    work: impl Future<Output = object_store::Result<T>> + Send + 'static,
) -> object_store::Result<T> {
    let task = runtime.spawn(work);
    match runtime.block_on(task) {
        Ok(result) => result,
        Err(join) => Err(object_store::Error::JoinError { source: join }),
    }
}
