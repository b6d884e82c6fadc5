//! How a copy runs, decided once both ends are open: the backend (GNU's
//! loop, threads, io_uring, sequential within one disk), its queue depth,
//! and the shaping (bulk requests, kernel offload, splice, drop-behind).
//! Whatever is chosen, the bytes and the statistics are GNU's; only the
//! requests and their overlap differ.

use std::os::fd::AsFd;

use crate::cli::options::{BackendChoice, Offload, Settings};
use crate::engine::{self, Backend, Input, Output, Shaping};
use crate::operands::CopyPlan;

/// The backend and the shaping for a copy; `tap` is the hasher's, if
/// hashing (the bytes must then pass through ddx).
pub fn choose(
    settings: &Settings,
    plan: &CopyPlan,
    input: &Input,
    output: &Output,
    tap: Option<crate::integrity::Tap>,
) -> (Backend, Shaping) {
    let bulk = engine::shape::bulk_shape(plan, input, output);
    let same_file = engine::shape::same_file(input, output);
    let storage_end = (engine::shape::is_storage(&input.handle)
        || engine::shape::is_storage(&output.handle))
        && !same_file;
    let queue_depth = settings.queue_depth.unwrap_or_else(|| {
        let request_bytes = match (&bulk, settings.request_size) {
            (Some(_), Some(size)) => size,
            (Some(shape), None) => shape.chunk,
            (None, _) => plan.input_block_size,
        };
        let hints = [
            engine::depth::hint_of(input.handle.as_fd()),
            engine::depth::hint_of(output.handle.as_fd()),
        ];
        engine::depth::default_depth(request_bytes, &hints)
    });
    let backend = choose_backend(
        settings,
        queue_depth,
        bulk.is_some(),
        storage_end,
        plan.input_block_size,
        plan.input_nocache || plan.output_nocache,
    );
    // Reading ahead of the writer changes what a copy of a file onto itself
    // reads back, whatever backend was asked for; count=0 copies nothing
    // and needs no thread.
    let backend = if same_file || plan.copies_nothing() {
        Backend::Sync
    } else {
        backend
    };
    // Within one rotating disk, overlapping reads and writes makes the head
    // seek between the two places: copy in turn, in large requests (auto
    // only). A solid-state disk has no head to move, and gains from the
    // overlap like any other pair of ends (a disk that does not say which
    // it is is taken to rotate); an input already in the page cache will
    // not be read from the disk, so only the writes go to it.
    let same_disk = settings.backend.is_none()
        && bulk.is_some()
        && engine::shape::same_disk(input, output)
        && engine::depth::hint_of(input.handle.as_fd())
            .and_then(|hint| hint.rotational)
            .unwrap_or(true)
        && !engine::shape::input_cached(input);
    let backend = if same_disk {
        Backend::Sequential
    } else {
        backend
    };
    let request_size = match (settings.request_size, same_disk) {
        (Some(size), _) => Some(size),
        (None, true) => Some(engine::shape::SAME_DISK_REQUEST),
        (None, false) => None,
    };
    let bulk = match (bulk, request_size) {
        (Some(shape), Some(size)) => Some(engine::shape::with_request_size(
            shape,
            size,
            plan.input_block_size,
        )),
        (shape, _) => shape,
    };
    // The reference backend keeps GNU's requests too, not only its results;
    // chosen by auto (pipes), it may splice (not when hashing: the bytes
    // must pass through ddx).
    let splice = settings.backend.is_none()
        && settings.offload != Offload::Never
        && tap.is_none()
        && engine::shape::splice_fits(plan, input, output);
    // Splicing moves each record with one call and no copy into ddx: for
    // a pipe end it beats a reader thread, which copies every byte twice.
    let backend = if splice { Backend::Sync } else { backend };
    let mut shaping = match backend {
        Backend::Sync => engine::Shaping {
            splice,
            ..engine::Shaping::default()
        },
        Backend::Threads { .. } | Backend::Uring { .. } | Backend::Sequential => engine::Shaping {
            bulk,
            // In turn within one disk, the kernel's copy is the cheaper
            // one; overlapped, ddx's may be the faster (see `shape`).
            offload_unit: engine::shape::offload_unit(plan, input, output).filter(
                |_| match settings.offload {
                    Offload::Never => false,
                    Offload::Always => true,
                    Offload::Auto => {
                        backend == Backend::Sequential || engine::shape::kernel_copy_pays(output)
                    }
                },
            ),
            drop_behind: !settings.keep_cache && !engine::shape::both_in_memory(input, output),
            splice: false,
            ..engine::Shaping::default()
        },
    };
    if tap.is_some() {
        // Hashing needs the bytes: no kernel offload.
        shaping.offload_unit = None;
        shaping.tap = tap;
    }
    (backend, shaping)
}

/// `--backend=auto`: overlapped where a device may be slow, that is where
/// either end is a regular file or a block device: in bulk requests when
/// records can be decoupled (see `shape`), else record by record if records
/// are large enough for the hand-off between threads to be cheap. Pipes and
/// character devices keep the reference loop, and so does nocache, whose
/// cache advice GNU gives (and tools trace) from the one copying thread.
fn choose_backend(
    settings: &Settings,
    queue_depth: usize,
    bulk: bool,
    storage_end: bool,
    record_size: usize,
    nocache: bool,
) -> Backend {
    const OVERLAP_MIN_RECORD: usize = 16 * 1024;
    match settings.backend {
        Some(BackendChoice::Threads) => Backend::Threads { queue_depth },
        Some(BackendChoice::Uring) => Backend::Uring { queue_depth },
        Some(BackendChoice::Sync) => Backend::Sync,
        None if bulk || (storage_end && record_size >= OVERLAP_MIN_RECORD && !nocache) => {
            Backend::Threads { queue_depth }
        }
        None => Backend::Sync,
    }
}
