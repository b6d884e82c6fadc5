//! Aborting an upload that will not complete: after a failed copy, and
//! before dying of a signal.
//!
//! An upload left pending keeps its parts on the server, billed, until
//! a lifecycle rule removes them, so a copy that fails aborts it (a
//! journaled one, kept for `--resume`, is left instead). The parts in
//! flight are given a few seconds to end first (a part cancelled after
//! its body was sent can still be stored by the server after the abort),
//! then the abort is tried until the server takes it or [`ABORT_WAIT`]
//! has passed, so that an upload cut off by a server that went away is
//! still aborted once it is back; S3 says to abort again when parts were
//! in progress, which [`abort_twice`] does.
//!
//! Dying of SIGINT or SIGTERM skips every close, so the writer registers
//! the same abort with [`before_dying`]: the upload (shared with it
//! behind a mutex) is taken from the writer, no part starts after, and
//! it is aborted (or, journaled, left) by a thread of the writer's that
//! the signal's thread wakes. A signal that comes once the completing
//! request is sent does not interrupt the copy (see
//! `sys::signals::begin_commit`): the upload cannot be taken back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::MultipartId;
use tokio::runtime::Handle;

use crate::sys::signals::{before_dying, BeforeDying};

/// How long the parts in flight may take to end when the copy is
/// abandoned, and how long the abort may be tried for: an interrupted
/// ddx should end, even with the server gone.
pub const PARTS_WAIT: Duration = Duration::from_secs(10);
pub const ABORT_WAIT: Duration = Duration::from_secs(30);

/// What the writer shares with its abort on a signal.
#[derive(Default)]
pub struct Shared {
    upload: Mutex<Pending>,
    /// Parts being sent.
    in_flight: AtomicUsize,
    /// Held by the abort on a signal while it runs: the copy thread,
    /// which goes on meanwhile and may end with the error of a part
    /// refused, must not drop the runtime under it (its requests would
    /// be cancelled, and the upload left on the server).
    dying_abort: Mutex<()>,
}

/// The multipart upload, as the abort on a signal sees it.
#[derive(Default)]
pub struct Pending {
    /// Dying: no part may start.
    pub stopping: bool,
    pub id: Option<MultipartId>,
    /// Journaled: a signal leaves the upload for `--resume`.
    pub keep: bool,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Pending> {
        self.upload.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait for the abort on a signal to end, if one is running (taking
    /// the lock whatever `stopping` says closes the window between the
    /// abort taking it and setting `stopping`).
    pub fn wait_for_dying_abort(&self) {
        drop(
            self.dying_abort
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// Parts being sent now.
    pub fn parts_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// Counts a part in flight until the task sending it ends, however it
/// ends.
pub struct InFlight(Arc<Shared>);

impl InFlight {
    pub fn new(shared: &Arc<Shared>) -> InFlight {
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(shared))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The request that aborts `id`, tried until the server takes it (or says
/// the upload is gone) or `deadline`: Err is the last answer.
pub async fn abort_until(
    multipart: Arc<dyn MultipartStore>,
    path: Path,
    id: MultipartId,
    deadline: Instant,
) -> object_store::Result<()> {
    let mut pause = Duration::from_millis(200);
    loop {
        let tried = tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            multipart.abort_multipart(&path, &id),
        )
        .await;
        match tried {
            Ok(Ok(())) | Ok(Err(object_store::Error::NotFound { .. })) => return Ok(()),
            Ok(Err(e)) if Instant::now() + pause >= deadline => return Err(e),
            Err(_) => {
                return Err(object_store::Error::Generic {
                    store: "S3",
                    source: format!("no answer within {} s", ABORT_WAIT.as_secs()).into(),
                })
            }
            Ok(Err(_)) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The abort, and once more a moment later when parts were cut off in
/// flight (one may still land after the first).
pub async fn abort_twice(
    multipart: Arc<dyn MultipartStore>,
    path: Path,
    id: MultipartId,
    cut_off: bool,
) -> object_store::Result<()> {
    let aborted = abort_until(
        Arc::clone(&multipart),
        path.clone(),
        id.clone(),
        Instant::now() + ABORT_WAIT,
    )
    .await;
    if cut_off && aborted.is_ok() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        return abort_until(multipart, path, id, Instant::now() + ABORT_WAIT).await;
    }
    aborted
}

/// Dying of a signal: take the upload, let the parts in flight end (for
/// up to [`PARTS_WAIT`]) and abort it; a journaled upload is left.
fn abort_before_dying(
    shared: &Shared,
    runtime: &Handle,
    multipart: &Arc<dyn MultipartStore>,
    path: &Path,
) {
    // Held for the whole abort: dropping the writer waits for it.
    let _running = shared
        .dying_abort
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let id = {
        let mut upload = shared.lock();
        upload.stopping = true;
        if upload.keep {
            None
        } else {
            upload.id.take()
        }
    };
    let Some(id) = id else {
        return;
    };
    let deadline = Instant::now() + PARTS_WAIT;
    while shared.parts_in_flight() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let cut_off = shared.parts_in_flight() > 0;
    let aborted = runtime.spawn(abort_twice(
        Arc::clone(multipart),
        path.clone(),
        id,
        cut_off,
    ));
    let _ = runtime.block_on(aborted);
}

/// Register the abort to run before dying of a signal. The thread that
/// catches the signal keeps a private descriptor table (see
/// `sys::threads`), where the runtime's sockets and wake-up descriptor
/// are not: it only wakes a thread of this writer's, made here with the
/// process's table, and waits for it to abort.
pub fn abort_on_signal(
    shared: &Arc<Shared>,
    runtime: &Handle,
    multipart: &Arc<dyn MultipartStore>,
    path: &Path,
) -> BeforeDying {
    let (wake, woken) = mpsc::channel::<mpsc::Sender<()>>();
    let aborter = {
        let shared = Arc::clone(shared);
        let runtime = runtime.clone();
        let multipart = Arc::clone(multipart);
        let path = path.clone();
        // Ends when the registration, which holds `wake`, is dropped.
        move || {
            crate::sys::signals::block_in_network_thread();
            while let Ok(done) = woken.recv() {
                abort_before_dying(&shared, &runtime, &multipart, &path);
                let _ = done.send(());
            }
        }
    };
    let spawned = std::thread::Builder::new()
        .name("ddx-object-abort".into())
        .spawn(aborter)
        .is_ok();
    before_dying(move || {
        let (done, finished) = mpsc::channel();
        if spawned && wake.send(done).is_ok() {
            let _ = finished.recv_timeout(PARTS_WAIT + 2 * ABORT_WAIT + Duration::from_secs(2));
        }
    })
}
