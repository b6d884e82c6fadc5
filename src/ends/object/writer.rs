//! Writing an object: one multipart upload, each part a request the
//! engine's window keeps in flight, or one PUT for a small object.
//!
//! The window gathers what is written into requests of the next part's
//! size ([`Upload::part_len`], `parts`); each is handed to a tokio task
//! that uploads it as the next part, at most as many at once as memory
//! allows (the end is busy beyond), and its completion comes when the
//! server stored it. The multipart upload is created with the first
//! part; when the last (and only) part is the whole object, it is one
//! PUT instead. object_store retries a failed part (a 5xx answer such as
//! 503 SlowDown, a connection reset) with exponential backoff; a part
//! that still fails is the copy's error, named in the detail with the
//! server's answer, and every write after it fails too; so does a part
//! left unanswered once no part has been stored for a minute and what
//! the bytes in flight need (`stall`). Every request runs on the end's
//! runtime (see `runtime`).
//!
//! Nothing is visible under the key before [`End::finalise`] (or a close
//! without it), which completes the upload. A copy that failed or was
//! abandoned aborts it (`abort`), so that it leaves neither an object
//! nor a pending upload.
//!
//! With a journal ([`Upload::keep_journal`], the map of `--map`/`--resume`:
//! `journal`) the upload is kept instead: every part stored is recorded,
//! a failed or interrupted copy leaves the upload for the next run, and
//! `--resume` goes on with it once ListParts (`list_parts`) shows the
//! server still holds the parts recorded. Under `--compress` parts end
//! only at the compressor's frame boundaries ([`Upload::resume_point`]),
//! so that where a recorded part ends a new run can start a new frame.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::{ObjectStoreExt, PutPayload};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use super::abort::{self, InFlight, Shared, PARTS_WAIT};
use super::checksum::{self, Confirmation};
use super::config::{Config, Direction, Store};
use super::journal::{self, Kept, Part};
use super::list_parts;
use super::parts::{self, MAX_PARTS, MAX_UPLOADS, MIN_UPLOADS};
use super::stall::{self, Watch};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};
use crate::ends::transport::{Completion, Fault, Op, Request, Requests, Submitted};
use crate::ends::upload::{Journal, Upload, UploadRecord};
use crate::ends::{Capabilities, End, Kind, Whence};
use crate::sys::signals::{begin_commit, BeforeDying, Commit};
use crate::sys::Errno;

/// What a task sending bytes ends with: the window's request, the part
/// it was (None: the whole object in one PUT), and the server's answer.
type Sent = (u64, Option<usize>, object_store::Result<Option<PartId>>);

/// An object being written.
pub struct ObjectWriter {
    runtime: Runtime,
    store: Store,
    multipart: Arc<dyn MultipartStore>,
    total: Option<u64>,
    /// The multipart upload, once started; shared with the work to do
    /// before dying of a signal.
    shared: Arc<Shared>,
    _before_dying: BeforeDying,
    /// Every part of the upload by index (part number - 1): those of an
    /// earlier run, then those sent by this one.
    parts: Vec<Part>,
    sending: JoinSet<Sent>,
    /// Gives up on a part once no part has been stored for too long.
    watch: Watch,
    /// Bytes handed to the end by this run.
    accepted: u64,
    /// Bytes of the copy's input before this run's (a resumed upload).
    source_base: u64,
    /// Parts end only at resume points (`--compress`); the last one: the
    /// object offset of this run it is at, and the input offset.
    marked: bool,
    point: Option<(u64, u64)>,
    /// The next part is the last: the whole object, if it is the first.
    ending: bool,
    journal: Option<Kept>,
    /// The multipart upload was created (by this run or an earlier one).
    started: bool,
    /// The completing request (or the one PUT) is sent: a signal waits
    /// for its outcome.
    commit: Option<Commit>,
    state: State,
    failure: Option<ObjectError>,
    detail: Option<String>,
    /// The SHA-256 of a one-PUT object's bytes, for its confirmation.
    whole_sha256: Option<String>,
    /// What the server's checksum says of the object once it is whole.
    confirmation: Option<Confirmation>,
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

impl ObjectWriter {
    /// Prepare to write `url` (S3 only). No request is made: the first
    /// comes with the first part, or at close.
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
        let before_dying =
            abort::abort_on_signal(&shared, runtime.handle(), &multipart, &store.path);
        Ok(ObjectWriter {
            runtime,
            store,
            multipart,
            total: None,
            shared,
            _before_dying: before_dying,
            parts: Vec::new(),
            sending: JoinSet::new(),
            watch: Watch::new(stall::SILENCE),
            accepted: 0,
            source_base: 0,
            marked: false,
            point: None,
            ending: false,
            journal: None,
            started: false,
            commit: None,
            state: State::Writing,
            failure: None,
            detail: None,
            whole_sha256: None,
            confirmation: None,
        })
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

    /// Bring the journal up to date.
    fn record(&mut self) -> Result<(), Errno> {
        let Some(id) = self.shared.lock().id.clone() else {
            return Ok(());
        };
        let Some(kept) = self.journal.as_mut() else {
            return Ok(());
        };
        match kept.record(&id, &self.parts) {
            Ok(()) => Ok(()),
            Err(error) => Err(self.failed(error)),
        }
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

    /// A task that sent bytes ended: the window's completion of it, the
    /// part's ETag recorded (and the journal told), or its failure.
    fn sent(&mut self, joined: Result<Sent, tokio::task::JoinError>) -> Completion {
        let (id, index, result) = match joined {
            Ok(done) => done,
            Err(join) => (
                0,
                None,
                Err(object_store::Error::JoinError { source: join }),
            ),
        };
        let outcome = match (index, result) {
            (Some(index), Ok(Some(part))) => {
                self.parts[index].etag = Some(part.content_id);
                self.record().map(|()| self.parts[index].size)
            }
            (None, Ok(_)) => {
                if let Some(commit) = self.commit.take() {
                    commit.done(true);
                }
                let size = self.accepted;
                self.committed().map(|()| size)
            }
            (index, Err(e)) => {
                if index.is_none() {
                    if let Some(commit) = self.commit.take() {
                        commit.done(false);
                    }
                }
                let what = match index {
                    Some(index) => format!(
                        "uploading part {} (from byte {})",
                        index + 1,
                        self.offset_of(index)
                    ),
                    None => "writing the object".to_owned(),
                };
                let error = self.error(&what, &e);
                Err(self.failed(error))
            }
            (Some(_), Ok(None)) => Err(Errno::IO),
        };
        Completion {
            id,
            result: outcome.map_err(|errno| Fault {
                errno,
                words: self.detail.clone(),
                at: None,
            }),
            buf: None,
        }
    }

    /// The input offset where the object's bytes up to `end` (of this
    /// run) come from: the resume point there, where parts end at them.
    fn source_at(&self, end: u64) -> u64 {
        match self.point {
            Some((at, source)) if self.marked && at == end => self.source_base + source,
            Some((_, source)) if self.marked => self.source_base + source,
            _ => self.source_base + end,
        }
    }

    /// Send the part `index`, its bytes `data`, in a task of its own.
    fn send_part(&mut self, id: u64, data: Bytes) -> Result<(), Errno> {
        if self.parts.len() >= MAX_PARTS {
            let error = ObjectError {
                errno: Errno::FBIG,
                detail: format!("more than {MAX_PARTS} parts, the most an upload may have"),
            };
            return Err(self.failed(error));
        }
        if self.shared.lock().stopping {
            return Err(Errno::INTR);
        }
        self.ensure_started()?;
        let shared = Arc::clone(&self.shared);
        let upload = shared.lock();
        if upload.stopping {
            return Err(Errno::INTR);
        }
        let upload_id = upload.id.clone().expect("started above");
        let counted = InFlight::new(&self.shared);
        drop(upload);
        let index = self.parts.len();
        let end = self.accepted + data.len() as u64;
        self.parts.push(Part {
            size: data.len() as u64,
            source_end: self.source_at(end),
            etag: None,
        });
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        let (watch, len) = (self.watch.clone(), data.len() as u64);
        self.sending.spawn_on(
            async move {
                let put = multipart.put_part(&path, &upload_id, index, PutPayload::from(data));
                let sent = watch.guard(len, put).await;
                drop(counted);
                (id, Some(index), sent.map(Some))
            },
            self.runtime.handle(),
        );
        Ok(())
    }

    /// The whole object in one PUT, the commit announced first.
    fn send_whole(&mut self, id: u64, data: Bytes) -> Result<(), Errno> {
        let Some(commit) = begin_commit() else {
            return Err(Errno::INTR);
        };
        self.whole_sha256 = Some(checksum::sha256(&data));
        self.commit = Some(commit);
        let (store, path) = (self.store.store.clone(), self.store.path.clone());
        let (watch, len) = (self.watch.clone(), data.len() as u64);
        self.sending.spawn_on(
            async move {
                let put = watch
                    .guard(len, store.put(&path, PutPayload::from(data)))
                    .await;
                (id, None, put.map(|_| None))
            },
            self.runtime.handle(),
        );
        Ok(())
    }

    /// Wait for every task sending bytes; the first failure.
    fn wait_for_all(&mut self) -> Result<(), Errno> {
        let mut first = Ok(());
        while let Some(joined) = self.runtime.block_on(self.sending.join_next()) {
            let done = self.sent(joined);
            if let (Ok(()), Err(fault)) = (&first, done.result) {
                first = Err(fault.errno);
            }
        }
        first
    }

    /// The copy will not complete: a journaled upload is left for the
    /// next run (what the parts in flight store by the deadline still
    /// recorded); any other is aborted (see `abort`). Err: the upload
    /// could not be aborted, and why.
    fn abort(&mut self) -> Result<(), ObjectError> {
        if self.state != State::Writing {
            return Ok(());
        }
        self.state = State::Ended;
        let deadline = tokio::time::Instant::now() + PARTS_WAIT;
        let mut cut_off = false;
        while !self.sending.is_empty() {
            let joined = self.runtime.block_on(async {
                tokio::time::timeout_at(deadline, self.sending.join_next()).await
            });
            match joined {
                Ok(Some(Ok((_, Some(index), Ok(Some(part)))))) => {
                    self.parts[index].etag = Some(part.content_id);
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    cut_off = true;
                    break;
                }
            }
        }
        self.sending.abort_all();
        let sending = &mut self.sending;
        self.runtime
            .block_on(async { while sending.join_next().await.is_some() {} });
        if self.journal.is_some() {
            let _ = self.record();
            return Ok(());
        }
        let Some(id) = self.shared.lock().id.take() else {
            return Ok(());
        };
        let shown = id.clone();
        let (multipart, path) = (Arc::clone(&self.multipart), self.store.path.clone());
        let aborted = runtime::run(
            &self.runtime,
            abort::abort_twice(multipart, path, id, cut_off),
        );
        aborted.map_err(|e| {
            self.store.error(
                &format!(
                    "the unfinished upload {shown} could not be aborted, its parts stay on the \
                     server"
                ),
                &e,
            )
        })
    }

    /// Make the object whole: every part stored, then the completing
    /// request (or, for an object never written, one empty PUT). The
    /// commit is announced to the signal handling first (a signal after
    /// it waits for its outcome).
    fn finish(&mut self) -> Result<(), Errno> {
        match self.state {
            // A one-PUT object whose answer came before the close: its
            // checksum is still to be confirmed (once).
            State::Committed => {
                return match self.whole_sha256.take() {
                    Some(sent) => self.confirm(Ok(sent)),
                    None => Ok(()),
                }
            }
            State::Ended => return Err(self.failure.as_ref().map_or(Errno::IO, |f| f.errno)),
            State::Writing => {}
        }
        if let Some(failure) = &self.failure {
            return Err(failure.errno);
        }
        self.wait_for_all()?;
        if self.state == State::Committed {
            let sent = self.whole_sha256.take().ok_or_else(String::new);
            return self.confirm(sent);
        }
        if !self.started {
            let Some(commit) = begin_commit() else {
                return Err(Errno::INTR);
            };
            let (store, path) = (self.store.store.clone(), self.store.path.clone());
            let put = runtime::run(&self.runtime, async move {
                store.put(&path, PutPayload::from(Bytes::new())).await
            });
            commit.done(put.is_ok());
            return match put {
                Ok(_) => {
                    self.committed()?;
                    self.confirm(Ok(checksum::sha256(b"")))
                }
                Err(e) => {
                    let error = self.error("writing the object", &e);
                    Err(self.failed(error))
                }
            };
        }
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
        if let Some(kept) = self.journal.as_mut() {
            if let Err(why) = kept.completed() {
                self.detail = Some(format!(
                    "the object is complete, but the map could not say so: {why}"
                ));
                return Err(Errno::IO);
            }
        }
        Ok(())
    }

    /// How many parts of `len` bytes may be in flight: as memory allows,
    /// or where the upload is kept resumable, as few as keep the store
    /// busy (see [`parts::JOURNALED_IN_FLIGHT_BYTES`]): a kill loses them.
    fn most_in_flight(&self, len: usize) -> usize {
        if self.journal.is_some() {
            parts::in_flight_within(parts::JOURNALED_IN_FLIGHT_BYTES, len)
        } else {
            parts::in_flight(len)
        }
    }

    /// Go on with the upload `record` describes: its parts are checked
    /// against ListParts, and the next part follows its last.
    fn resume(&mut self, record: &UploadRecord) -> Result<(), ObjectError> {
        let listed = list_parts::list_parts(&self.store, &self.runtime, &record.id)?;
        self.parts = journal::resumed_parts(record, &listed)?;
        self.source_base = record.source_end();
        self.shared.lock().id = Some(record.id.clone());
        self.started = true;
        Ok(())
    }
}

impl End for ObjectWriter {
    fn kind(&self) -> Kind {
        Kind::Object
    }

    /// Its kind's, with parts in flight: at least [`MIN_UPLOADS`] whenever
    /// it is written, as many as memory allows.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            requests: Requests {
                most: MAX_UPLOADS,
                least: MIN_UPLOADS,
                via: "HTTP",
                ..Requests::ONE_AT_A_TIME
            },
            ..Capabilities::of(Kind::Object)
        }
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

    /// Nothing to do: the parts in flight are the window's requests,
    /// and the part being gathered cannot be sent early (parts but the
    /// last have a minimum size).
    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        match &self.failure {
            Some(failure) => Err(failure.errno),
            None => Ok(()),
        }
    }

    /// The next part, from where the object's bytes end: sent in a task
    /// of its own (busy while as many parts as memory allows are in
    /// flight); the last part of an object of one part is one PUT.
    fn submit(&mut self, mut request: Request) -> Submitted {
        let (id, offset) = (request.id, request.offset);
        let refuse = |errno, words: Option<String>, buf| {
            Submitted::Done(Completion {
                id,
                result: Err(Fault {
                    errno,
                    words,
                    at: None,
                }),
                buf,
            })
        };
        let Some(mut buf) = request.buf.take().filter(|_| request.op == Op::Write) else {
            return refuse(Errno::BADF, None, None);
        };
        if let Some(failure) = &self.failure {
            return refuse(failure.errno, Some(failure.detail.clone()), Some(buf));
        }
        if self.state != State::Writing || offset != self.accepted {
            return refuse(Errno::SPIPE, None, Some(buf));
        }
        let len = (request.len as usize).min(buf.len());
        if self.sending.len() >= self.most_in_flight(len) {
            request.buf = Some(buf);
            return Submitted::Busy(request);
        }
        buf.set_len(len);
        let whole = self.ending && !self.started && self.parts.is_empty();
        let data = Bytes::from_owner(buf);
        let sent = if whole {
            self.send_whole(id, data)
        } else {
            self.send_part(id, data)
        };
        match sent {
            Ok(()) => {
                self.accepted += len as u64;
                Submitted::InFlight
            }
            Err(errno) => refuse(errno, self.detail.clone(), None),
        }
    }

    fn complete(&mut self, wait: bool) -> Option<Completion> {
        let joined = if wait {
            self.runtime.block_on(self.sending.join_next())?
        } else {
            self.sending.try_join_next()?
        };
        Some(self.sent(joined))
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn upload(&mut self) -> Option<&mut dyn Upload> {
        Some(self)
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

impl Upload for ObjectWriter {
    fn stored_as_written(&self) -> Option<Result<String, String>> {
        Some(match self.confirmation.as_ref()? {
            Confirmation::Confirmed { sha256 } => Ok(checksum::described(sha256)),
            Confirmation::Unchecked(why) => Err(why.clone()),
        })
    }

    fn expect(&mut self, total: Option<u64>) {
        self.total = total;
    }

    /// Parts of [`parts::JOURNALED_PART`] where the upload is kept
    /// resumable, else of [`parts::BASE_PART`], as large as the total
    /// needs.
    fn part_len(&self) -> usize {
        let base = if self.journal.is_some() {
            parts::JOURNALED_PART
        } else {
            parts::BASE_PART
        };
        parts::part_size_from(base, self.total, self.parts.len())
    }

    fn ending(&mut self) {
        self.ending = true;
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
        let recorded = if self.parts.is_empty() {
            0
        } else {
            self.parts.len()
        };
        self.journal = Some(Kept::new(journal, recorded));
        self.shared.lock().keep = true;
        Ok(())
    }

    fn mark_resume_points(&mut self) -> bool {
        self.marked = true;
        !self.parts.is_empty()
    }

    fn resume_point(&mut self, at: u64, source: u64) {
        self.point = Some((at, source));
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
            .field("sending", &self.sending.len())
            .field("multipart", &self.started)
            .field("journaled", &self.journal.is_some())
            .field("failed", &self.failure.is_some())
            .finish()
    }
}
