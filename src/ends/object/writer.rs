//! Writing an object: a multipart upload with parts in flight in
//! parallel, or one PUT for a small object.
//!
//! Writes are gathered into a part ([`part_size`]: from the input's size
//! when the hint gives it, growing with the part number otherwise, within
//! S3's limits). When the first part is full the multipart upload is
//! created and the part handed to a tokio task; later parts follow, at
//! most [`MIN_UPLOADS`] or the hint's depth in flight, a write waiting
//! for the oldest when that many are. object_store retries a failed part
//! (a 5xx answer such as 503 SlowDown, a connection reset) with
//! exponential backoff; a part that still fails is the copy's error,
//! named in the detail with the server's answer, and every write after it
//! fails too. Every request runs on the end's runtime (see `runtime`).
//!
//! Nothing is visible under the key before [`End::finalise`] (or a close
//! without it): it sends the last part and completes the upload, or PUTs
//! the whole object when no part was ever full. A copy that failed or was
//! abandoned aborts the upload, so that it leaves neither an object nor a
//! pending upload (whose parts a bucket would keep, and bill, until a
//! lifecycle rule removes them): the parts in flight are given a few
//! seconds to end (a part cancelled after its body was sent can still be
//! stored after the abort), then the abort is tried until the server
//! takes it or [`ABORT_WAIT`] has passed, so that an upload cut off by a
//! server that went away is still aborted once it is back.
//!
//! With a journal ([`End::keep_journal`], the map of `--map`/`--resume`)
//! the upload is kept instead: every part stored is recorded (the prefix
//! of parts stored without a gap, see `ends::upload`), a failed or
//! interrupted copy leaves the upload for the next run, and `--resume`
//! goes on with it once ListParts shows the server still holds the parts
//! recorded. Under `--compress` parts end only at the compressor's frame
//! boundaries ([`End::resume_point`]), so that where a recorded part ends
//! a new run can start a new frame.
//!
//! Dying of SIGINT or SIGTERM skips every close, so the writer registers
//! the same abort with [`before_dying`]: the upload (shared with it
//! behind a mutex) is taken from the writer, no part starts after, and
//! it is aborted (or, journaled, left) by a thread of the writer's that
//! the signal's thread wakes. A signal that comes once the completing
//! request is sent does not interrupt the copy (see
//! `sys::signals::begin_commit`): the upload cannot be taken back.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinSet;

use super::checksum::{self, Confirmation, PartAnswer};
use super::config::{Config, Direction, Store};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};
use crate::ends::upload::{Journal, StoredPart, UploadRecord};
use crate::ends::{End, Kind, Pipeline, Whence};
use crate::sys::signals::{before_dying, begin_commit, BeforeDying};
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
/// abandoned, and how long the abort may be tried for: an interrupted
/// ddx should end, even with the server gone.
const PARTS_WAIT: Duration = Duration::from_secs(10);
pub const ABORT_WAIT: Duration = Duration::from_secs(30);

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
    multipart: Arc<dyn MultipartStore>,
    /// The part being gathered.
    part: Vec<u8>,
    total: Option<u64>,
    /// The multipart upload, once started; shared with the work to do
    /// before dying of a signal.
    shared: Arc<Shared>,
    _before_dying: BeforeDying,
    /// Every part of the upload by index (part number - 1): those of an
    /// earlier run, then those sent by this one.
    parts: Vec<Part>,
    in_flight: JoinSet<(usize, object_store::Result<PartId>)>,
    max_in_flight: usize,
    /// Bytes written by this run.
    accepted: u64,
    /// Bytes of the copy's input before this run's (a resumed upload).
    source_base: u64,
    /// Parts end only at resume points (`--compress`); the input offset
    /// of the last one, from this run's start.
    marked: bool,
    source: u64,
    journal: Option<Box<dyn Journal>>,
    /// Parts recorded in the journal (a prefix of `parts`).
    recorded: usize,
    /// The multipart upload was created (by this run or an earlier one).
    started: bool,
    state: State,
    failure: Option<ObjectError>,
    detail: Option<String>,
    /// What the server's checksum says of the object once it is whole.
    confirmation: Option<Confirmation>,
}

/// One part of the upload.
#[derive(Debug, Clone)]
struct Part {
    size: u64,
    /// The input offset where its bytes end (see `ends::upload`).
    source_end: u64,
    /// Its id once the server stored it: object_store's, the ETag and
    /// the checksum the server checked (see `checksum::PartAnswer`).
    etag: Option<String>,
}

/// Where the writer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Writing,
    /// The object is whole under its key.
    Committed,
    /// Aborted, or left to a journal: nothing more to do.
    Ended,
}

/// What the writer shares with its abort on a signal.
#[derive(Default)]
struct Shared {
    upload: Mutex<Upload>,
    /// Parts being sent.
    in_flight: AtomicUsize,
    /// Held by the abort on a signal while it runs: the copy thread,
    /// which goes on meanwhile and may end with the error of a part
    /// refused, must not drop the runtime under it (its requests would
    /// be cancelled, and the upload left on the server).
    dying_abort: Mutex<()>,
}

#[derive(Default)]
struct Upload {
    /// Dying: no part may start.
    stopping: bool,
    id: Option<MultipartId>,
    /// Journaled: a signal leaves the upload for `--resume`.
    keep: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Upload> {
        self.upload.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait for the abort on a signal to end, if one is running (taking
    /// the lock whatever `stopping` says closes the window between the
    /// abort taking it and setting `stopping`).
    fn wait_for_dying_abort(&self) {
        drop(
            self.dying_abort
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }
}

/// The request that aborts `id`, tried until the server takes it (or says
/// the upload is gone) or `deadline`: Err is the last answer.
async fn abort_until(
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

/// Dying of a signal: take the upload, let the parts in flight end (for
/// up to [`PARTS_WAIT`]) and abort it, twice if parts were cut off (one
/// may still land after the first abort); a journaled upload is left.
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
    let (multipart, path) = (Arc::clone(multipart), path.clone());
    let in_flight = |shared: &Shared| shared.in_flight.load(Ordering::Acquire) > 0;
    let deadline = Instant::now() + PARTS_WAIT;
    while in_flight(shared) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let cut_off = in_flight(shared);
    let aborted = runtime.spawn(async move {
        let _ = abort_until(
            Arc::clone(&multipart),
            path.clone(),
            id.clone(),
            Instant::now() + ABORT_WAIT,
        )
        .await;
        if cut_off {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = abort_until(multipart, path, id, Instant::now() + ABORT_WAIT).await;
        }
    });
    let _ = runtime.block_on(aborted);
}

/// Register the abort to run before dying of a signal. The thread that
/// catches the signal keeps a private descriptor table (see
/// `sys::threads`), where the runtime's sockets and wake-up descriptor
/// are not: it only wakes a thread of this writer's, made here with the
/// process's table, and waits for it to abort.
fn abort_on_signal(
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
        let Some(multipart) = store.multipart.clone() else {
            return Err(ObjectError {
                errno: Errno::ROFS,
                detail: "only s3:// objects can be written".into(),
            });
        };
        let shared = Arc::new(Shared::default());
        let before_dying = abort_on_signal(&shared, runtime.handle(), &multipart, &store.path);
        Ok(ObjectWriter {
            runtime,
            store,
            multipart,
            part: Vec::new(),
            total: None,
            shared,
            _before_dying: before_dying,
            parts: Vec::new(),
            in_flight: JoinSet::new(),
            max_in_flight: MIN_UPLOADS,
            accepted: 0,
            source_base: 0,
            marked: false,
            source: 0,
            journal: None,
            recorded: 0,
            started: false,
            state: State::Writing,
            failure: None,
            detail: None,
            confirmation: None,
        })
    }

    fn next_part_size(&self) -> usize {
        part_size(self.total, self.parts.len())
    }

    /// Record the first failure; its errno for the caller. A journaled
    /// upload is kept for `--resume`, and the detail says so.
    fn failed(&mut self, mut error: ObjectError) -> Errno {
        if self.journal.is_some() && self.started {
            error.detail = format!(
                "{}; the upload stays on the server, for --resume",
                error.detail
            );
        }
        let errno = error.errno;
        self.detail = Some(error.detail.clone());
        self.failure.get_or_insert(error);
        errno
    }

    fn error(&self, what: &str, e: &object_store::Error) -> ObjectError {
        self.store.error(what, e)
    }

    /// Where part `index` starts in the object.
    fn offset_of(&self, index: usize) -> u64 {
        self.parts[..index].iter().map(|p| p.size).sum()
    }

    /// Wait until at most `limit` parts are in flight; the first failure.
    /// Parts that ended meanwhile are taken first, without waiting: a
    /// failure shows at the next write, and the journal hears of every
    /// part stored as soon as it can.
    fn reap(&mut self, limit: usize) -> Result<(), Errno> {
        while let Some(joined) = self.in_flight.try_join_next() {
            self.reaped(joined)?;
        }
        while self.in_flight.len() > limit {
            let joined = self
                .runtime
                .block_on(self.in_flight.join_next())
                .expect("a part in flight");
            self.reaped(joined)?;
        }
        Ok(())
    }

    /// A part's task ended: its ETag recorded, or its failure returned.
    fn reaped(
        &mut self,
        joined: Result<(usize, object_store::Result<PartId>), tokio::task::JoinError>,
    ) -> Result<(), Errno> {
        let (index, result) = match joined {
            Ok(done) => done,
            Err(join) => (
                usize::MAX,
                Err(object_store::Error::JoinError { source: join }),
            ),
        };
        match result {
            Ok(part) => {
                self.parts[index].etag = Some(part.content_id);
                self.record()
            }
            Err(e) => {
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
                Err(self.failed(error))
            }
        }
    }

    /// The upload as a journal records it: its id and the parts stored
    /// without a gap from the first.
    fn upload_record(&self) -> Option<UploadRecord> {
        let id = self.shared.lock().id.clone()?;
        let parts = self
            .parts
            .iter()
            .enumerate()
            .map_while(|(index, part)| {
                let answer = PartAnswer::of_part_id(part.etag.as_ref()?);
                Some(StoredPart {
                    number: index + 1,
                    size: part.size,
                    source_end: part.source_end,
                    etag: answer.etag,
                    sha256: answer.sha256,
                })
            })
            .collect();
        Some(UploadRecord { id, parts })
    }

    /// Bring the journal up to date when the stored prefix grew (or the
    /// upload was just created).
    fn record(&mut self) -> Result<(), Errno> {
        let Some(record) = self.upload_record() else {
            return Ok(());
        };
        let first = self.recorded == 0 && record.parts.is_empty();
        if !first && record.parts.len() <= self.recorded {
            return Ok(());
        }
        let Some(journal) = self.journal.as_mut() else {
            return Ok(());
        };
        if let Err(why) = journal.record(&record) {
            let error = ObjectError {
                errno: Errno::IO,
                detail: format!("saving the upload's progress in the map: {why}"),
            };
            return Err(self.failed(error));
        }
        self.recorded = record.parts.len().max(1);
        Ok(())
    }

    /// Create the multipart upload if it is not yet.
    fn ensure_started(&mut self) -> Result<(), Errno> {
        if self.started {
            return Ok(());
        }
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        match runtime::run(&self.runtime, async move {
            multipart.create_multipart(&path).await
        }) {
            Ok(id) => {
                self.shared.lock().id = Some(id);
                self.started = true;
                self.record()
            }
            Err(e) => {
                let error = self.error("starting the upload", &e);
                Err(self.failed(error))
            }
        }
    }

    /// Hand the gathered part to a task, once fewer than the most allowed
    /// are in flight; the upload is created first if this is its first
    /// part. `source_end`: the input offset where its bytes end.
    fn send_part(&mut self, source_end: u64) -> Result<(), Errno> {
        if self.parts.len() >= MAX_PARTS {
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
        if self.shared.lock().stopping {
            return Err(Errno::INTR);
        }
        self.ensure_started()?;
        let shared = Arc::clone(&self.shared);
        let upload = shared.lock();
        if upload.stopping {
            return Err(Errno::INTR);
        }
        let id = upload.id.clone().expect("started above");
        let counted = InFlight::new(&self.shared);
        drop(upload);
        let data = Bytes::from(std::mem::take(&mut self.part));
        let index = self.parts.len();
        self.parts.push(Part {
            size: data.len() as u64,
            source_end,
            etag: None,
        });
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        self.in_flight.spawn_on(
            async move {
                let sent = multipart
                    .put_part(&path, &id, index, PutPayload::from(data))
                    .await;
                drop(counted);
                (index, sent)
            },
            self.runtime.handle(),
        );
        Ok(())
    }

    /// The copy will not complete: a journaled upload is left for the
    /// next run (what the parts in flight store by the deadline still
    /// recorded); any other is aborted, once the parts in flight ended (a
    /// part cancelled after its body was sent can still be stored by the
    /// server after the abort, and outlive it), tried until the server
    /// takes it, and sent again a moment later if parts were cut off (S3
    /// says to abort again when parts were in progress). Err: the upload
    /// could not be aborted, and why.
    fn abort(&mut self) -> Result<(), ObjectError> {
        if self.state != State::Writing {
            return Ok(());
        }
        self.state = State::Ended;
        let deadline = tokio::time::Instant::now() + PARTS_WAIT;
        let mut cancelled = false;
        while !self.in_flight.is_empty() {
            let joined = self.runtime.block_on(async {
                tokio::time::timeout_at(deadline, self.in_flight.join_next()).await
            });
            match joined {
                Ok(Some(Ok((index, Ok(part))))) => {
                    self.parts[index].etag = Some(part.content_id);
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    cancelled = true;
                    break;
                }
            }
        }
        self.in_flight.abort_all();
        let in_flight = &mut self.in_flight;
        self.runtime
            .block_on(async { while in_flight.join_next().await.is_some() {} });
        if self.journal.is_some() {
            let _ = self.record();
            return Ok(());
        }
        let Some(id) = self.shared.lock().id.take() else {
            return Ok(());
        };
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        let shown = id.clone();
        let aborted = runtime::run(&self.runtime, async move {
            let aborted = abort_until(
                Arc::clone(&multipart),
                path.clone(),
                id.clone(),
                Instant::now() + ABORT_WAIT,
            )
            .await;
            if cancelled && aborted.is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return abort_until(multipart, path, id, Instant::now() + ABORT_WAIT).await;
            }
            aborted
        });
        aborted.map_err(|e| {
            self.store.error(
                &format!("the unfinished upload {shown} could not be aborted, its parts stay on the server"),
                &e,
            )
        })
    }

    /// Make the object whole: the last part and the completing request,
    /// or one PUT. The commit is announced to the signal handling first
    /// (a signal after it waits for its outcome).
    fn finish(&mut self) -> Result<(), Errno> {
        match self.state {
            State::Committed => return Ok(()),
            State::Ended => return Err(self.failure.as_ref().map_or(Errno::IO, |f| f.errno)),
            State::Writing => {}
        }
        if let Some(failure) = &self.failure {
            return Err(failure.errno);
        }
        if !self.started {
            let sent = checksum::sha256(&self.part);
            let data = PutPayload::from(Bytes::from(std::mem::take(&mut self.part)));
            let Some(commit) = begin_commit() else {
                return Err(Errno::INTR);
            };
            let (store, path) = (self.store.store.clone(), self.store.path.clone());
            let put = runtime::run(&self.runtime, async move { store.put(&path, data).await });
            commit.done(put.is_ok());
            return match put {
                Ok(_) => {
                    self.committed()?;
                    self.confirm(Ok(sent))
                }
                Err(e) => {
                    let error = self.error("writing the object", &e);
                    Err(self.failed(error))
                }
            };
        }
        if !self.part.is_empty() {
            let source_end = self.source_base + self.source_now();
            self.send_part(source_end)?;
        }
        self.reap(0)?;
        if self.shared.lock().stopping {
            return Err(Errno::INTR);
        }
        let Some(commit) = begin_commit() else {
            return Err(Errno::INTR);
        };
        let id = self
            .shared
            .lock()
            .id
            .clone()
            .expect("the upload was started");
        let parts: Vec<PartId> = self
            .parts
            .iter()
            .map(|p| PartId {
                content_id: p.etag.clone().expect("every part stored"),
            })
            .collect();
        let sent = checksum::composite_of(&parts);
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        let completed = runtime::run(&self.runtime, async move {
            multipart.complete_multipart(&path, &id, parts).await
        });
        commit.done(completed.is_ok());
        match completed {
            Ok(_) => {
                self.shared.lock().id = None;
                self.committed()?;
                self.confirm(sent)
            }
            Err(e) => {
                let error = self.error("completing the upload", &e);
                Err(self.failed(error))
            }
        }
    }

    /// The object is whole under its key: its checksum, as the server
    /// gives it, compared with `sent`, computed from the bytes sent (see
    /// `checksum`). Err: they differ, or the server could not be asked.
    fn confirm(&mut self, sent: Result<String, String>) -> Result<(), Errno> {
        let checked = checksum::stored_sha256(&self.store, &self.runtime).and_then(|answered| {
            checksum::confirm(sent, answered.as_deref()).map_err(|why| ObjectError {
                errno: Errno::IO,
                detail: format!("the upload completed, but {why}"),
            })
        });
        match checked {
            Ok(confirmation) => {
                self.confirmation = Some(confirmation);
                Ok(())
            }
            Err(error) => {
                self.detail = Some(self.store.redactor.clean(&error.detail));
                Err(error.errno)
            }
        }
    }

    /// The object is whole: the journal is told.
    fn committed(&mut self) -> Result<(), Errno> {
        self.state = State::Committed;
        if let Some(journal) = self.journal.as_mut() {
            if let Err(why) = journal.completed() {
                self.detail = Some(format!(
                    "the object is complete, but the map could not say so: {why}"
                ));
                return Err(Errno::IO);
            }
        }
        Ok(())
    }

    /// The input offset (from this run's start) the bytes written so far
    /// end at: the last resume point when parts end only there.
    fn source_now(&self) -> u64 {
        if self.marked {
            self.source
        } else {
            self.accepted
        }
    }

    /// The parts the server holds of upload `id` (ListParts, page by
    /// page): number, size and ETag where it gives one.
    fn list_parts(&self, id: &str) -> Result<Vec<(usize, u64, Option<String>)>, ObjectError> {
        let failed = |detail: String| ObjectError {
            errno: Errno::IO,
            detail: self.store.redactor.clean(&detail),
        };
        let (Some(signer), Some(options)) = (&self.store.signer, &self.store.client_options) else {
            return Err(failed("listing the upload's parts: not an S3 store".into()));
        };
        use object_store::client::HttpConnector;
        let client = object_store::client::ReqwestConnector::default()
            .connect(options)
            .map_err(|e| self.error("listing the upload's parts", &e))?;
        let mut parts = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut query = vec![("uploadId".to_owned(), id.to_owned())];
            if let Some(marker) = &marker {
                query.push(("part-number-marker".to_owned(), marker.clone()));
            }
            let (signer, client, path) =
                (Arc::clone(signer), client.clone(), self.store.path.clone());
            let attempts = self.store.retry.max_retries + 1;
            let answer = runtime::run(&self.runtime, async move {
                list_parts_page(&*signer, &client, &path, query, attempts).await
            })
            .map_err(|e| self.error("listing the upload's parts", &e))?;
            let (status, body) = answer;
            if !(200..300).contains(&status) {
                let text = format!("Server returned non-2xx status code: {status}: {body}");
                let said = super::config::describe(&object_store::Error::Generic {
                    store: "S3",
                    source: text.into(),
                });
                return Err(failed(format!("listing the upload's parts: {said}")));
            }
            let page = parse_list_parts(&body)
                .map_err(|why| failed(format!("listing the upload's parts: {why}")))?;
            parts.extend(page.parts);
            match page.next {
                Some(next) => marker = Some(next),
                None => return Ok(parts),
            }
        }
    }

    /// Go on with the upload `record` describes: its parts are checked
    /// against ListParts (number, size, and ETag where the server gives
    /// one), and the next part follows its last.
    fn resume(&mut self, record: &UploadRecord) -> Result<(), ObjectError> {
        let listed = self.list_parts(&record.id)?;
        for part in &record.parts {
            let held = listed.iter().find(|(number, _, _)| *number == part.number);
            let matches = held.is_some_and(|(_, size, etag)| {
                *size == part.size
                    && etag
                        .as_deref()
                        .is_none_or(|etag| etag.trim_matches('"') == part.etag.trim_matches('"'))
            });
            if !matches {
                let why = match held {
                    None => "is not on the server".to_owned(),
                    Some((_, size, etag)) => format!(
                        "differs on the server ({size} bytes, ETag {}; the map says {} bytes, ETag {})",
                        etag.as_deref().unwrap_or("none"),
                        part.size,
                        part.etag
                    ),
                };
                return Err(ObjectError {
                    errno: Errno::STALE,
                    detail: format!(
                        "part {} of upload {} {why}: the upload was aborted, completed or \
                         changed since the map was saved",
                        part.number, record.id
                    ),
                });
            }
        }
        self.parts = record
            .parts
            .iter()
            .map(|p| Part {
                size: p.size,
                source_end: p.source_end,
                etag: Some(
                    PartAnswer {
                        etag: p.etag.clone(),
                        sha256: p.sha256.clone(),
                    }
                    .part_id(),
                ),
            })
            .collect();
        self.recorded = self.parts.len().max(1);
        self.source_base = record.source_end();
        self.shared.lock().id = Some(record.id.clone());
        self.started = true;
        Ok(())
    }
}

/// One ListParts page: the HTTP status and the body.
async fn list_parts_page(
    signer: &dyn object_store::signer::Signer,
    client: &object_store::client::HttpClient,
    path: &Path,
    query: Vec<(String, String)>,
    attempts: usize,
) -> object_store::Result<(u16, String)> {
    use object_store::signer::SignedUrlOptions;
    let mut pause = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let url = signer
            .signed_url_opts(
                http::Method::GET,
                path,
                Duration::from_secs(300),
                &SignedUrlOptions::new().with_query(query.clone()),
            )
            .await?;
        let request = http::Request::get(url.as_str())
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        let failed = |e: object_store::client::HttpError| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        };
        let answered = match client.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.into_body().bytes().await.map_err(failed);
                body.map(|b| (status, String::from_utf8_lossy(&b).into_owned()))
            }
            Err(e) => Err(failed(e)),
        };
        match answered {
            Ok((status, _)) if status >= 500 && tries < attempts => {}
            Err(_) if tries < attempts => {}
            other => return other,
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// A ListParts page's parts (number, size, ETag), and the marker of the
/// next page if it is cut.
#[derive(Debug)]
pub(crate) struct PartsPage {
    pub parts: Vec<(usize, u64, Option<String>)>,
    pub next: Option<String>,
}

/// A ListParts answer's page; Err says why it cannot be read (one line).
pub(crate) fn parse_list_parts(body: &str) -> Result<PartsPage, String> {
    let document = roxmltree::Document::parse(body).map_err(|e| {
        // The parser quotes the character it met, which may be any.
        let said = e.to_string();
        let said = crate::text::quote::printable(&said);
        format!("an answer that is not XML: {said}")
    })?;
    let root = document.root_element();
    let child_text = |node: roxmltree::Node<'_, '_>, name: &str| {
        node.children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
            .map(str::to_owned)
    };
    let mut parts = Vec::new();
    for part in root.children().filter(|n| n.has_tag_name("Part")) {
        let number = child_text(part, "PartNumber").and_then(|n| n.parse::<usize>().ok());
        let size = child_text(part, "Size").and_then(|n| n.parse::<u64>().ok());
        let (Some(number), Some(size)) = (number, size) else {
            return Err("a part without its number or size".into());
        };
        parts.push((number, size, child_text(part, "ETag")));
    }
    let truncated = child_text(root, "IsTruncated").is_some_and(|t| t == "true");
    let next = truncated
        .then(|| child_text(root, "NextPartNumberMarker"))
        .flatten();
    if truncated && next.is_none() {
        return Err("a cut list without the marker of its next page".into());
    }
    Ok(PartsPage { parts, next })
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
        if self.state != State::Writing {
            return Err(Errno::IO);
        }
        if self.marked {
            // Parts end at resume points only (see `resume_point`).
            self.part.extend_from_slice(buf);
            self.accepted += buf.len() as u64;
            return Ok(buf.len());
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
            self.accepted += take as u64;
            if self.part.len() >= size {
                let source_end = self.source_base + self.accepted;
                // On failure, what was taken of this buffer is not written.
                self.send_part(source_end)?;
            }
        }
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

    /// Nothing of an upload is kept unless it completes, but for a
    /// journaled one (`--map`): the parts its map records stay on the
    /// server for `--resume`, and what they hold of this run's input is
    /// what the statistics count as written.
    fn written_until(&self) -> Option<u64> {
        if self.journal.is_none() {
            return Some(0);
        }
        let stored = self.upload_record().map_or(0, |r| r.source_end());
        Some(stored.saturating_sub(self.source_base))
    }

    /// Wait for the parts in flight; the first failure (the part being
    /// gathered is sent at close: parts but the last have a minimum size).
    fn settle(&mut self) -> Result<(), Errno> {
        if let Some(failure) = &self.failure {
            self.detail = Some(failure.detail.clone());
            return Err(failure.errno);
        }
        if self.state != State::Writing {
            return Ok(());
        }
        self.reap(0)
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        if copy_failed {
            return match self.abort() {
                Ok(()) => Ok(()),
                Err(error) => Err(self.failed(error)),
            };
        }
        let finished = self.finish();
        if finished.is_err() && self.state == State::Writing {
            if let Err(error) = self.abort() {
                self.detail = Some(match self.detail.take() {
                    Some(first) => format!("{first}; {}", error.detail),
                    None => error.detail,
                });
            }
        }
        finished
    }

    fn keep_journal(
        &mut self,
        journal: Box<dyn Journal>,
        resume: Option<&UploadRecord>,
    ) -> Result<(), Errno> {
        if let Some(record) = resume {
            if let Err(error) = self.resume(record) {
                return Err(self.failed(error));
            }
        }
        self.journal = Some(journal);
        self.shared.lock().keep = true;
        Ok(())
    }

    fn mark_resume_points(&mut self) -> bool {
        self.marked = true;
        !self.parts.is_empty()
    }

    fn resume_point(&mut self, source: u64) {
        if !self.marked || self.state != State::Writing || self.failure.is_some() {
            return;
        }
        self.source = source;
        if self.part.len() >= self.next_part_size() {
            // An error is kept for the next write, sync or close.
            let _ = self.send_part(self.source_base + source);
        }
    }

    fn stored_as_written(&self) -> Option<Result<String, String>> {
        Some(match self.confirmation.as_ref()? {
            Confirmation::Confirmed { sha256 } => Ok(checksum::described(sha256)),
            Confirmation::Unchecked(why) => Err(why.clone()),
        })
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        self.finalise(false)
    }

    /// The copy failed: nothing is kept under the key (a journaled upload
    /// is kept for `--resume`).
    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        self.finalise(true)
    }

    fn abandon(mut self: Box<Self>) {
        let _ = self.abort();
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        self.shared.wait_for_dying_abort();
    }
}

impl fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("url", &self.store.label)
            .field("accepted", &self.accepted)
            .field("parts", &self.parts.len())
            .field("in_flight", &self.in_flight.len())
            .field("multipart", &self.started)
            .field("journaled", &self.journal.is_some())
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

    #[test]
    fn list_parts_pages_are_read_with_their_marker() {
        let page = parse_list_parts(
            "<?xml version=\"1.0\"?><ListPartsResult><UploadId>u</UploadId>\
             <IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>\
             <Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag><Size>5</Size></Part>\
             <Part><PartNumber>2</PartNumber><Size>7</Size></Part></ListPartsResult>",
        )
        .expect("a page");
        assert_eq!(
            page.parts,
            vec![(1, 5, Some("\"a\"".to_owned())), (2, 7, None)]
        );
        assert_eq!(page.next.as_deref(), Some("2"));
        let last =
            parse_list_parts("<ListPartsResult><IsTruncated>false</IsTruncated></ListPartsResult>")
                .expect("a page");
        assert!(last.parts.is_empty() && last.next.is_none());
        assert!(parse_list_parts(
            "<ListPartsResult><IsTruncated>true</IsTruncated></ListPartsResult>"
        )
        .is_err());
        assert!(parse_list_parts("not xml").is_err());
    }
}
