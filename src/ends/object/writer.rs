//! Writing an object: a multipart upload with parts in flight in
//! parallel, or one PUT for a small object.
//!
//! Writes are gathered into a part ([`part_size`]: from the input's size
//! when the hint gives it, growing with the part number otherwise, within
//! S3's limits). When the first part is full the multipart upload is
//! created and the part handed to a tokio task; later parts follow, at
//! most [`MIN_UPLOADS`] or the hint's depth in flight, a write waiting
//! for the oldest when that many are. object_store retries a failed part
//! with exponential backoff; a part that still fails is the copy's error,
//! named in the detail, and every write after it fails too.
//!
//! Nothing is visible under the key before [`End::close`]: it sends the
//! last part and completes the upload, or PUTs the whole object when no
//! part was ever full. [`End::abandon`] lets the parts in flight end (for
//! a few seconds, then cancels them) and aborts the upload, so a failed
//! or interrupted copy leaves neither an object nor a pending upload
//! (whose parts a bucket would keep, and bill, until a lifecycle rule
//! removes them). A copy that failed ends with [`End::close_failed`],
//! which aborts too: an object is kept only from a copy that succeeded.
//!
//! Dying of SIGINT or SIGTERM skips every close, so the writer registers
//! the same abort with [`before_dying`]: the upload (shared with it
//! behind a mutex) is taken from the writer, no part starts after, the
//! parts in flight are given [`PARTS_WAIT`] to end, and the upload is
//! aborted by a thread of the writer's that the signal's thread wakes.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use object_store::{MultipartUpload, ObjectStoreExt, PutPayload};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinSet;

use super::config::{Config, Direction, Store};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};
use crate::ends::{End, Kind, Pipeline, Whence};
use crate::sys::signals::{before_dying, BeforeDying};
use crate::sys::Errno;

/// S3's limits: parts per upload, the smallest part (all but the last)
/// and the largest.
pub const MAX_PARTS: usize = 10_000;
pub const S3_MIN_PART: usize = 5 << 20;
pub const S3_MAX_PART: usize = 5 << 30;

/// The part size ddx starts from: larger parts cost fewer requests,
/// smaller ones less memory and an earlier start.
pub const BASE_PART: usize = 16 << 20;
const _: () = assert!(BASE_PART >= S3_MIN_PART && BASE_PART % (1 << 20) == 0);

/// Parts in flight at least, whatever the hint.
pub const MIN_UPLOADS: usize = 4;

/// The most bytes of parts in flight (one part at least): memory is the
/// parts in flight and the one being gathered. Parts grow large only for
/// inputs of unknown size past hundreds of GiB (S3 allows 10,000 parts),
/// and then fewer are in flight.
const MAX_IN_FLIGHT_BYTES: usize = 512 << 20;

/// How long the parts in flight may take to end when the copy is
/// abandoned, and how long the abort may take: an interrupted ddx should
/// end, even with the server gone.
const PARTS_WAIT: Duration = Duration::from_secs(10);
const ABORT_WAIT: Duration = Duration::from_secs(30);

/// Parts of the same size grow this many at a time (unknown sizes).
const PARTS_PER_STEP: usize = 1_000;

/// The size of part `index` (from 0) of an upload of `total` bytes (None:
/// unknown, as from a pipe). With the total known, the smallest size that
/// fits it in [`MAX_PARTS`], at least [`BASE_PART`]; either way the size
/// doubles every [`PARTS_PER_STEP`] parts, so that an unknown input (or
/// one larger than announced) still fits: from 16 MiB that reaches 16 TiB
/// in 10,000 parts. Whole MiB, never over [`S3_MAX_PART`].
pub fn part_size(total: Option<u64>, index: usize) -> usize {
    let fitting = total.map_or(0, |t| t.div_ceil(MAX_PARTS as u64)) as usize;
    let base = fitting.max(BASE_PART).next_multiple_of(1 << 20);
    let doublings = (index / PARTS_PER_STEP).min(20) as u32;
    base.saturating_mul(1 << doublings).min(S3_MAX_PART)
}

/// An object being written.
pub struct ObjectWriter {
    runtime: Runtime,
    store: Store,
    /// The part being gathered.
    part: Vec<u8>,
    total: Option<u64>,
    /// The multipart upload, once started; shared with the work to do
    /// before dying of a signal.
    shared: Arc<Shared>,
    _before_dying: BeforeDying,
    parts_sent: usize,
    in_flight: JoinSet<(usize, object_store::Result<()>)>,
    max_in_flight: usize,
    accepted: u64,
    failure: Option<ObjectError>,
    detail: Option<String>,
}

/// What the writer shares with its abort on a signal.
#[derive(Default)]
struct Shared {
    upload: Mutex<Upload>,
    /// Parts being sent.
    in_flight: AtomicUsize,
}

#[derive(Default)]
struct Upload {
    /// Dying: no part may start.
    stopping: bool,
    multipart: Option<Box<dyn MultipartUpload>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Upload> {
        self.upload.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Dying of a signal: take the upload, let the parts in flight end
    /// (for up to [`PARTS_WAIT`]) and abort it, twice if parts were cut
    /// off (one may still land after the first abort).
    fn abort_before_dying(&self, runtime: &Handle) {
        let multipart = {
            let mut upload = self.lock();
            upload.stopping = true;
            upload.multipart.take()
        };
        let Some(mut multipart) = multipart else {
            return;
        };
        runtime.block_on(async {
            let deadline = tokio::time::Instant::now() + PARTS_WAIT;
            while self.in_flight.load(Ordering::Acquire) > 0
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let cut_off = self.in_flight.load(Ordering::Acquire) > 0;
            let _ = tokio::time::timeout(ABORT_WAIT, multipart.abort()).await;
            if cut_off {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = tokio::time::timeout(ABORT_WAIT, multipart.abort()).await;
            }
        });
    }
}

/// Register the abort to run before dying of a signal. The thread that
/// catches the signal keeps a private descriptor table (see
/// `sys::threads`), where the runtime's sockets and wake-up descriptor
/// are not: it only wakes a thread of this writer's, made here with the
/// process's table, and waits for it to abort.
fn abort_on_signal(shared: &Arc<Shared>, runtime: &Handle) -> BeforeDying {
    let (wake, woken) = mpsc::channel::<mpsc::Sender<()>>();
    let aborter = {
        let shared = Arc::clone(shared);
        let runtime = runtime.clone();
        // Ends when the registration, which holds `wake`, is dropped.
        move || {
            crate::sys::signals::block_in_this_thread();
            while let Ok(done) = woken.recv() {
                shared.abort_before_dying(&runtime);
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

/// Counts a part in flight until the task sending it ends, however it
/// ends.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn new(shared: &Arc<Shared>) -> InFlight {
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(shared))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ObjectWriter {
    /// Prepare to write `url` (S3 only). No request is made: the first
    /// comes when a part is full, or at close.
    pub fn create(url: &ObjectUrl, config: &Config) -> Result<ObjectWriter, ObjectError> {
        if !url.writable() {
            return Err(ObjectError {
                errno: Errno::ROFS,
                detail: "only s3:// objects can be written".into(),
            });
        }
        let runtime = runtime::new()?;
        let store = config.store(url, Direction::Write, &runtime)?;
        let shared = Arc::new(Shared::default());
        let before_dying = abort_on_signal(&shared, runtime.handle());
        Ok(ObjectWriter {
            runtime,
            store,
            part: Vec::new(),
            total: None,
            shared,
            _before_dying: before_dying,
            parts_sent: 0,
            in_flight: JoinSet::new(),
            max_in_flight: MIN_UPLOADS,
            accepted: 0,
            failure: None,
            detail: None,
        })
    }

    fn next_part_size(&self) -> usize {
        part_size(self.total, self.parts_sent)
    }

    /// Record the first failure; its errno for the caller.
    fn failed(&mut self, error: ObjectError) -> Errno {
        let errno = error.errno;
        self.detail = Some(error.detail.clone());
        self.failure.get_or_insert(error);
        errno
    }

    fn error(&self, what: &str, e: &object_store::Error) -> ObjectError {
        self.store.error(what, e)
    }

    /// Wait until at most `limit` parts are in flight; the first failure.
    fn reap(&mut self, limit: usize) -> Result<(), Errno> {
        while self.in_flight.len() > limit {
            let joined = self
                .runtime
                .block_on(self.in_flight.join_next())
                .expect("a part in flight");
            let (index, result) = match joined {
                Ok(done) => done,
                Err(join) => (
                    usize::MAX,
                    Err(object_store::Error::JoinError { source: join }),
                ),
            };
            if let Err(e) = result {
                let what = if index == usize::MAX {
                    "uploading a part".to_owned()
                } else {
                    format!(
                        "uploading part {} (from byte {})",
                        index + 1,
                        self.offset_of(index)
                    )
                };
                let error = self.error(&what, &e);
                return Err(self.failed(error));
            }
        }
        Ok(())
    }

    /// Where part `index` starts in the object.
    fn offset_of(&self, index: usize) -> u64 {
        (0..index).map(|i| part_size(self.total, i) as u64).sum()
    }

    /// Hand the gathered part to a task, once fewer than the most allowed
    /// are in flight; the upload is created first if this is its first
    /// part.
    fn send_part(&mut self) -> Result<(), Errno> {
        if self.parts_sent >= MAX_PARTS {
            let error = ObjectError {
                errno: Errno::FBIG,
                detail: format!("more than {MAX_PARTS} parts, the most an upload may have"),
            };
            return Err(self.failed(error));
        }
        let parts = self
            .max_in_flight
            .min(MAX_IN_FLIGHT_BYTES / self.part.len().max(1))
            .max(1);
        self.reap(parts - 1)?;
        let shared = Arc::clone(&self.shared);
        let mut upload = shared.lock();
        if upload.stopping {
            return Err(Errno::INTR);
        }
        if upload.multipart.is_none() {
            let created = self
                .runtime
                .block_on(self.store.store.put_multipart(&self.store.path));
            match created {
                Ok(multipart) => upload.multipart = Some(multipart),
                Err(e) => {
                    let error = self.error("starting the upload", &e);
                    return Err(self.failed(error));
                }
            }
        }
        let data = Bytes::from(std::mem::take(&mut self.part));
        let multipart = upload.multipart.as_mut().expect("created above");
        let sending = multipart.put_part(PutPayload::from(data));
        let counted = InFlight::new(&self.shared);
        drop(upload);
        let index = self.parts_sent;
        self.in_flight.spawn_on(
            async move {
                let sent = sending.await;
                drop(counted);
                (index, sent)
            },
            self.runtime.handle(),
        );
        self.parts_sent += 1;
        Ok(())
    }

    /// Abort the upload, best effort: first let the parts in flight end
    /// (for up to [`PARTS_WAIT`]), since a part cancelled after its body
    /// was sent can still be stored by the server after the abort, and
    /// outlive it; parts still going then are cancelled, and the abort is
    /// sent again a moment later for them (S3 says to abort again when
    /// parts were in progress).
    fn abort(&mut self) {
        let runtime = &self.runtime;
        let in_flight = &mut self.in_flight;
        let ended = runtime.block_on(async {
            tokio::time::timeout(PARTS_WAIT, async {
                while in_flight.join_next().await.is_some() {}
            })
            .await
        });
        let cancelled = ended.is_err();
        in_flight.abort_all();
        runtime.block_on(async { while in_flight.join_next().await.is_some() {} });
        let Some(mut upload) = self.shared.lock().multipart.take() else {
            return;
        };
        runtime.block_on(async {
            let _ = tokio::time::timeout(ABORT_WAIT, upload.abort()).await;
            if cancelled {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = tokio::time::timeout(ABORT_WAIT, upload.abort()).await;
            }
        });
    }

    fn finish(&mut self) -> Result<(), Errno> {
        if let Some(failure) = &self.failure {
            return Err(failure.errno);
        }
        if !self.started() {
            let data = Bytes::from(std::mem::take(&mut self.part));
            let put = self.runtime.block_on(
                self.store
                    .store
                    .put(&self.store.path, PutPayload::from(data)),
            );
            return put.map(|_| ()).map_err(|e| {
                let error = self.error("writing the object", &e);
                self.failed(error)
            });
        }
        if !self.part.is_empty() {
            self.send_part()?;
        }
        self.reap(0)?;
        let Some(mut upload) = self.shared.lock().multipart.take() else {
            // Taken by the abort before dying of a signal.
            return Err(Errno::INTR);
        };
        let completed = self.runtime.block_on(upload.complete());
        match completed {
            Ok(_) => Ok(()),
            Err(e) => {
                // Put back for the abort that follows.
                self.shared.lock().multipart = Some(upload);
                let error = self.error("completing the upload", &e);
                Err(self.failed(error))
            }
        }
    }

    /// Whether the multipart upload was started.
    fn started(&self) -> bool {
        self.parts_sent > 0
    }
}

impl End for ObjectWriter {
    fn kind(&self) -> Kind {
        Kind::Object
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        if let Some(failure) = &self.failure {
            self.detail = Some(failure.detail.clone());
            return Err(failure.errno);
        }
        let mut rest = buf;
        while !rest.is_empty() {
            let size = self.next_part_size();
            if self.part.capacity() == 0 {
                self.part.reserve_exact(size);
            }
            let take = size.saturating_sub(self.part.len()).min(rest.len());
            self.part.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.part.len() >= size {
                self.send_part()?;
            }
        }
        self.accepted += buf.len() as u64;
        Ok(buf.len())
    }

    /// Only to where the object already ends (a no-op): an object is
    /// written from its start to its end, once.
    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        match to {
            Whence::Start(offset) if offset == self.accepted => Ok(offset),
            Whence::Current(0) => Ok(self.accepted),
            _ => Err(Errno::SPIPE),
        }
    }

    /// None: the object has no size until it is complete.
    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(None)
    }

    /// Only to the length written so far (a no-op): the object is whole
    /// once complete, and nothing lies beyond what was written.
    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        if len == self.accepted {
            Ok(())
        } else {
            Err(Errno::INVAL)
        }
    }

    /// Wait for the parts in flight (the part being gathered cannot be
    /// sent early: parts but the last have a minimum size).
    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        if let Some(failure) = &self.failure {
            return Err(failure.errno);
        }
        self.reap(0)
    }

    fn pipeline(&mut self, hint: Pipeline) {
        self.total = hint.total;
        self.max_in_flight = hint.depth.max(MIN_UPLOADS);
    }

    /// Nothing of an upload is kept unless it completes.
    fn written_until(&self) -> Option<u64> {
        Some(0)
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        let finished = self.finish();
        if finished.is_err() {
            self.abort();
        }
        finished
    }

    /// The copy failed: nothing is kept under the key.
    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        self.abort();
        Ok(())
    }

    fn abandon(mut self: Box<Self>) {
        self.abort();
    }
}

impl fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("url", &self.store.label)
            .field("accepted", &self.accepted)
            .field("parts_sent", &self.parts_sent)
            .field("in_flight", &self.in_flight.len())
            .field("multipart", &self.started())
            .field("failed", &self.failure.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn small_and_unknown_inputs_start_from_the_base_part() {
        assert_eq!(part_size(None, 0), BASE_PART);
        assert_eq!(part_size(Some(0), 0), BASE_PART);
        assert_eq!(part_size(Some(1 << 30), 2_500), BASE_PART * 4);
    }

    #[test]
    fn a_known_size_fits_in_ten_thousand_parts_of_whole_mebibytes() {
        for total in [200 << 30, 1 << 40, 3 * (1 << 40) + 12_345] {
            let size = part_size(Some(total), 0) as u64;
            assert_eq!(size % MIB, 0);
            assert!(size * MAX_PARTS as u64 >= total, "{total}: {size}");
            assert!(size >= S3_MIN_PART as u64);
        }
    }

    #[test]
    fn unknown_sizes_still_fit_five_tebibytes_and_parts_stay_within_limits() {
        let mut sum = 0u64;
        for index in 0..MAX_PARTS {
            let size = part_size(None, index);
            assert!(
                (S3_MIN_PART..=S3_MAX_PART).contains(&size),
                "{index}: {size}"
            );
            sum += size as u64;
        }
        assert!(sum >= 5 << 40, "{sum}");
        assert_eq!(part_size(Some(u64::MAX), 50_000), S3_MAX_PART);
    }
}
