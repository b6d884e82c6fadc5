//! One libnbd handle (one connection to an export), made safe: the only
//! module that calls into [`super::ffi`].
//!
//! # Who owns a buffer in flight
//! A buffer handed to an `aio_*` call belongs to libnbd until that
//! command's completion is reaped: libnbd writes a read's reply into it,
//! or sends a write's payload from it, whenever the socket is ready, on
//! whatever later call drives the connection. So the buffer *moves into*
//! the [`Handle`] with the command ([`Handle::transfer`] takes a
//! `Vec<u8>` by value) and is kept in the handle's table of commands in
//! flight, where nothing else can reach it; it comes back only in the
//! [`Completion`] of that command, once `nbd_aio_command_completed` has
//! retired it. The same holds for the list a block-status command's
//! extents are collected into. A handle that is dropped with commands
//! in flight closes the connection first (`nbd_close`: after it, libnbd
//! touches nothing of ours) and only then frees the buffers. A buffer
//! of the caller's is lent to libnbd only for the length of one call
//! ([`Handle::transfer_now`]) that does not return before its command
//! is retired, whatever happens to the connection.
//!
//! # Threads
//! libnbd's calls on one handle are atomic (a lock per handle), so a
//! handle may move between threads; ddx uses each from one thread at a
//! time (`&mut self` on everything that submits or drives), which is also
//! what `nbd_get_error`'s thread-local message needs: it is read right
//! after the failing call, on the same thread.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::os::fd::{BorrowedFd, RawFd};
use std::ptr::NonNull;

use rustix::event::PollFlags;

use super::ffi;
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// A failed libnbd call: the errno it gave (EIO where it gave none) and
/// libnbd's own message, which names the call and, for a server's
/// error, what the server said. Messages carry no secrets: libnbd never
/// prints TLS keys, only the paths they were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdError {
    pub errno: Errno,
    pub message: String,
}

impl NbdError {
    pub(super) fn new(errno: Errno, message: impl Into<String>) -> NbdError {
        NbdError {
            errno,
            message: message.into(),
        }
    }
}

impl fmt::Display for NbdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NbdError {}

/// The error of the libnbd call that just failed on this thread.
fn last_error() -> NbdError {
    // SAFETY: nbd_get_errno and nbd_get_error only read this thread's
    // last error; the message is copied before any other libnbd call can
    // replace it, and may be NULL when there is none.
    let (errno, message) = unsafe {
        let message = ffi::nbd_get_error();
        let message = if message.is_null() {
            String::new()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        };
        (ffi::nbd_get_errno(), message)
    };
    let errno = if errno > 0 {
        Errno::from_raw_os_error(errno)
    } else {
        Errno::IO
    };
    NbdError { errno, message }
}

/// A command's cookie: libnbd's handle-unique number for it (≥ 1).
pub type Cookie = u64;

/// A run of the export with one allocation state, as block status gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub start: u64,
    pub len: u64,
    /// Reads return zeros (`LIBNBD_STATE_ZERO`), allocated or not.
    pub zero: bool,
}

/// Which way [`Handle::transfer`] moves a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the export into the buffer (`nbd_aio_pread`).
    Read,
    /// From the buffer to the export (`nbd_aio_pwrite`).
    Write,
}

/// The caller's memory for [`Handle::transfer_now`].
pub enum Lent<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

/// What a command in flight holds on to until it is retired.
enum Held {
    Nothing,
    Buffer(AlignedBuf),
    /// From `Box::into_raw`, so that libnbd's pointer to it is the only
    /// live one while the command is in flight; boxed again when retired
    /// or when the handle is closed.
    Extents(NonNull<Vec<Extent>>),
}

impl Held {
    fn release(self) -> (Option<AlignedBuf>, Option<Vec<Extent>>) {
        match self {
            Held::Nothing => (None, None),
            Held::Buffer(buf) => (Some(buf), None),
            // SAFETY: the pointer came from Box::into_raw in block_status
            // and the command that used it is retired (or the handle
            // closed), so libnbd no longer holds it.
            Held::Extents(list) => (None, Some(*unsafe { Box::from_raw(list.as_ptr()) })),
        }
    }
}

/// A retired command: its result and what it held (a read's data, a
/// write's buffer to reuse, block status's extents).
pub struct Completion {
    pub cookie: Cookie,
    pub result: Result<(), NbdError>,
    pub buffer: Option<AlignedBuf>,
    pub extents: Option<Vec<Extent>>,
}

/// What the server said about the export when the handle connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    pub size: u64,
    pub read_only: bool,
    pub can_flush: bool,
    pub can_trim: bool,
    pub can_zero: bool,
    pub can_fast_zero: bool,
    pub can_multi_conn: bool,
    /// The server answers block status for `base:allocation`.
    pub extents: bool,
    /// The largest read or write to send in one request.
    pub max_request: usize,
    /// The smallest block the server wants requests aligned to (1: none).
    pub min_block: u64,
}

/// The NBD protocol's safe largest payload when the server names none.
const DEFAULT_MAX_REQUEST: usize = 32 << 20;

/// One connection to an export.
pub struct Handle {
    raw: NonNull<ffi::nbd_handle>,
    held: HashMap<Cookie, Held>,
    /// The handshake asked for `base:allocation` extents.
    extents: bool,
}

// SAFETY: every libnbd call on a handle takes the handle's own lock (see
// libnbd(3), "You can also call APIs on a single handle from multiple
// threads"), and the buffers in `held` are plain owned memory. Handle is
// not Sync: all its methods that drive libnbd take &mut self.
unsafe impl Send for Handle {}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("in_flight", &self.held.len())
            .finish()
    }
}

/// A libnbd call's `-1` as our error, anything else as its value.
fn check(r: c_int) -> Result<c_int, NbdError> {
    if r == -1 {
        Err(last_error())
    } else {
        Ok(r)
    }
}

impl Handle {
    /// Connect to `uri` as libnbd parses it (nbd_connect_uri), asking for
    /// `base:allocation` extents when `extents` is true. Local files named
    /// in the URI (`tls-psk-file=`, `tls-certificates=`) are allowed: the
    /// URI is the user's own operand, not something received from
    /// elsewhere.
    ///
    /// Each option of the handshake is a round trip to the server.
    /// Without extents the handshake asks for neither structured replies
    /// nor a meta context, which only reads of extents and of sparse data
    /// use: it costs one and a half round trips instead of three and a
    /// half, which is what an export to write to needs.
    pub fn connect(uri: &str, extents: bool) -> Result<Handle, NbdError> {
        let (handle, text) = Handle::create(uri, extents)?;
        // SAFETY: h is a live handle we own; the URI is NUL-terminated and
        // outlives the call (libnbd copies what it keeps).
        check(unsafe { ffi::nbd_connect_uri(handle.raw.as_ptr(), text.as_ptr()) })?;
        Ok(handle)
    }

    /// Start connecting to `uri` as [`Handle::connect`] does, without
    /// waiting: the handshake goes on whenever the handle is driven
    /// ([`Handle::interest`], then [`Handle::notify`]), and the handle
    /// takes commands once it is no longer [`Handle::connecting`]. Over a
    /// link with latency a handshake costs several round trips; made
    /// this way, several connections pay them at once, while the ones
    /// already made carry the requests.
    pub fn connect_later(uri: &str, extents: bool) -> Result<Handle, NbdError> {
        let (handle, text) = Handle::create(uri, extents)?;
        // SAFETY: as in `connect`; the call returns once the connection
        // is under way.
        check(unsafe { ffi::nbd_aio_connect_uri(handle.raw.as_ptr(), text.as_ptr()) })?;
        Ok(handle)
    }

    /// A handle set up for `uri` (not connected yet), and the URI as C
    /// text.
    fn create(uri: &str, extents: bool) -> Result<(Handle, CString), NbdError> {
        let text = CString::new(uri)
            .map_err(|_| NbdError::new(Errno::INVAL, "an NBD URI cannot contain a NUL byte"))?;
        ffi::load().map_err(|message| NbdError::new(Errno::NOPKG, message))?;
        // SAFETY: libnbd is loaded; nbd_create has no preconditions; NULL
        // means failure.
        let raw = NonNull::new(unsafe { ffi::nbd_create() }).ok_or_else(last_error)?;
        let handle = Handle {
            raw,
            held: HashMap::new(),
            extents,
        };
        let h = handle.raw.as_ptr();
        // SAFETY: h is a live handle we own; the strings are NUL-terminated
        // and outlive the calls (libnbd copies what it keeps).
        unsafe {
            // ddx's buffers are always initialised memory, so libnbd's
            // zeroing of each read buffer would only cost time.
            check(ffi::nbd_set_pread_initialize(h, false))?;
            check(ffi::nbd_set_uri_allow_local_file(h, true))?;
            if extents {
                check(ffi::nbd_add_meta_context(
                    h,
                    ffi::LIBNBD_CONTEXT_BASE_ALLOCATION.as_ptr(),
                ))?;
            } else {
                check(ffi::nbd_set_request_structured_replies(h, false))?;
            }
        }
        Ok((handle, text))
    }

    /// Whether the handshake of [`Handle::connect_later`] is still going
    /// on.
    pub fn connecting(&self) -> bool {
        // SAFETY: h is live; this only reads the handle's state.
        unsafe { ffi::nbd_aio_is_connecting(self.raw.as_ptr()) == 1 }
    }

    /// Whether the connection is gone (it failed, or was closed).
    pub fn dead(&self) -> bool {
        let h = self.raw.as_ptr();
        // SAFETY: h is live; these only read the handle's state.
        unsafe { ffi::nbd_aio_is_dead(h) == 1 || ffi::nbd_aio_is_closed(h) == 1 }
    }

    /// The export's size and what the server can do.
    pub fn info(&self) -> Result<ExportInfo, NbdError> {
        let h = self.raw.as_ptr();
        let flag = |r: c_int| check(r).map(|r| r != 0);
        // SAFETY: h is a live, connected handle; these calls only read
        // what the handshake negotiated.
        unsafe {
            let size = ffi::nbd_get_size(h);
            if size < 0 {
                return Err(last_error());
            }
            let max = ffi::nbd_get_block_size(h, ffi::LIBNBD_SIZE_MAXIMUM);
            let min = ffi::nbd_get_block_size(h, ffi::LIBNBD_SIZE_MINIMUM);
            Ok(ExportInfo {
                size: size as u64,
                read_only: flag(ffi::nbd_is_read_only(h))?,
                can_flush: flag(ffi::nbd_can_flush(h))?,
                can_trim: flag(ffi::nbd_can_trim(h))?,
                can_zero: flag(ffi::nbd_can_zero(h))?,
                can_fast_zero: flag(ffi::nbd_can_fast_zero(h))?,
                can_multi_conn: flag(ffi::nbd_can_multi_conn(h))?,
                extents: self.extents
                    && flag(ffi::nbd_can_meta_context(
                        h,
                        ffi::LIBNBD_CONTEXT_BASE_ALLOCATION.as_ptr(),
                    ))?,
                max_request: if max > 0 {
                    (max as usize).min(DEFAULT_MAX_REQUEST)
                } else {
                    DEFAULT_MAX_REQUEST
                },
                min_block: if min > 0 { min as u64 } else { 1 },
            })
        }
    }

    /// A submission's result: its cookie, or why it was refused. A
    /// request refused because the connection is gone (dead, or closed by
    /// the server) says ENOTCONN, as the requests that were in flight on
    /// it do (libnbd says EINVAL, "invalid state: DEAD").
    fn cookie(&self, r: i64) -> Result<Cookie, NbdError> {
        if r >= 1 {
            return Ok(r as Cookie);
        }
        // The message is copied before `dead` could replace it.
        let mut error = last_error();
        if self.dead() {
            error.errno = Errno::NOTCONN;
        }
        Err(error)
    }

    fn hold(&mut self, cookie: Cookie, held: Held) -> Cookie {
        self.held.insert(cookie, held);
        cookie
    }

    /// Read `buf.len()` bytes at `offset` into `buf`, or write all of
    /// `buf` there; the handle keeps `buf` until the command completes.
    /// On a refusal the buffer comes straight back.
    pub fn transfer(
        &mut self,
        direction: Direction,
        mut buf: AlignedBuf,
        offset: u64,
    ) -> Result<Cookie, (NbdError, AlignedBuf)> {
        debug_assert!(!buf.is_empty());
        let (h, len, done) = (
            self.raw.as_ptr(),
            buf.len(),
            ffi::nbd_completion_callback::NULL,
        );
        // SAFETY: buf's mapping stays where it is while the AlignedBuf is
        // moved into `held`, and nothing touches it until the command is
        // retired or the handle closed (the module's ownership rule);
        // libnbd writes into it for a read and only reads it for a write.
        let r = unsafe {
            match direction {
                Direction::Read => {
                    let at = buf.as_mut_slice().as_mut_ptr().cast::<c_void>();
                    ffi::nbd_aio_pread(h, at, len, offset, done, 0)
                }
                Direction::Write => {
                    let at = buf.as_slice().as_ptr().cast::<c_void>();
                    ffi::nbd_aio_pwrite(h, at, len, offset, done, 0)
                }
            }
        };
        match self.cookie(r) {
            Ok(c) => Ok(self.hold(c, Held::Buffer(buf))),
            Err(e) => Err((e, buf)),
        }
    }

    /// A read into `lent` or a write of it at `offset`, from and into the
    /// caller's memory (no copy through a buffer of the handle's), waited
    /// for before returning. Other commands in flight stay in flight.
    pub fn transfer_now(&mut self, lent: Lent<'_>, offset: u64) -> Result<(), NbdError> {
        let (h, done) = (self.raw.as_ptr(), ffi::nbd_completion_callback::NULL);
        // SAFETY: the memory is borrowed for this whole call, and the call
        // returns only once the command is retired (the loop below), so
        // libnbd never reaches it after the borrow ends.
        let r = unsafe {
            match lent {
                Lent::Read(buf) => {
                    let at = buf.as_mut_ptr().cast::<c_void>();
                    ffi::nbd_aio_pread(h, at, buf.len(), offset, done, 0)
                }
                Lent::Write(buf) => {
                    let at = buf.as_ptr().cast::<c_void>();
                    ffi::nbd_aio_pwrite(h, at, buf.len(), offset, done, 0)
                }
            }
        };
        let cookie = self.cookie(r)?;
        loop {
            // SAFETY: h is live; this retires our command once done (a
            // connection that dies completes its commands with errors).
            match unsafe { ffi::nbd_aio_command_completed(h, cookie) } {
                1 => return Ok(()),
                -1 => return Err(last_error()),
                _ => {}
            }
            // libnbd's own wait: poll(2) on the socket and on to the state
            // machine. Its failure is not ours to return while the command
            // holds our memory: the loop asks again, and a dead connection
            // retires the command with an error above.
            // SAFETY: h is live; libnbd writes replies only into memory of
            // commands in flight, which is held or lent for this call.
            unsafe { ffi::nbd_poll(h, -1) };
        }
    }

    pub fn flush(&mut self) -> Result<Cookie, NbdError> {
        // SAFETY: no memory of ours is involved.
        let r =
            unsafe { ffi::nbd_aio_flush(self.raw.as_ptr(), ffi::nbd_completion_callback::NULL, 0) };
        self.cookie(r).map(|c| self.hold(c, Held::Nothing))
    }

    /// Make `len` bytes at `offset` zeros without sending them; `fast`
    /// asks the server to refuse (ENOTSUP) rather than zero slowly.
    pub fn zero(&mut self, len: u64, offset: u64, fast: bool) -> Result<Cookie, NbdError> {
        let flags = if fast {
            ffi::LIBNBD_CMD_FLAG_FAST_ZERO
        } else {
            0
        };
        let (h, done) = (self.raw.as_ptr(), ffi::nbd_completion_callback::NULL);
        // SAFETY: no memory of ours is involved.
        let r = unsafe { ffi::nbd_aio_zero(h, len, offset, done, flags) };
        self.cookie(r).map(|c| self.hold(c, Held::Nothing))
    }

    /// Ask for the `base:allocation` extents from `offset` on (`len` is a
    /// hint: the server may answer for less, or a little more).
    pub fn block_status(&mut self, len: u64, offset: u64) -> Result<Cookie, NbdError> {
        let list = NonNull::from(Box::leak(Box::new(Vec::<Extent>::new())));
        let callback = ffi::nbd_extent_callback {
            callback: Some(collect_extents),
            user_data: list.as_ptr().cast::<c_void>(),
            free: None,
        };
        // SAFETY: the list lives (from Box::into_raw) until the command is
        // retired or the handle closed, and the callback is only called
        // while libnbd is driven from our own &mut self calls.
        let r = unsafe {
            ffi::nbd_aio_block_status(
                self.raw.as_ptr(),
                len,
                offset,
                callback,
                ffi::nbd_completion_callback::NULL,
                0,
            )
        };
        match self.cookie(r) {
            Ok(c) => Ok(self.hold(c, Held::Extents(list))),
            Err(e) => {
                // SAFETY: libnbd refused the command, so it kept no
                // pointer to the list.
                drop(unsafe { Box::from_raw(list.as_ptr()) });
                Err(e)
            }
        }
    }

    /// Commands submitted and not yet retired.
    pub fn pending(&self) -> usize {
        self.held.len()
    }

    /// Retire one completed command, if any has completed.
    pub fn completed(&mut self) -> Option<Completion> {
        let h = self.raw.as_ptr();
        if self.held.is_empty() {
            return None;
        }
        // SAFETY: h is live; peek only reads the handle's queue.
        let peeked = unsafe { ffi::nbd_aio_peek_command_completed(h) };
        if peeked < 1 {
            return None;
        }
        let cookie = peeked as Cookie;
        // SAFETY: h is live; retiring a completed command ends libnbd's
        // use of what it held, which we release right after.
        let result = match unsafe { ffi::nbd_aio_command_completed(h, cookie) } {
            1 => Ok(()),
            -1 => Err(last_error()),
            _ => return None,
        };
        let (buffer, extents) = self
            .held
            .remove(&cookie)
            .map(Held::release)
            .unwrap_or((None, None));
        Some(Completion {
            cookie,
            result,
            buffer,
            extents,
        })
    }

    /// The socket and the events libnbd waits for, when it has commands
    /// in flight or a handshake going on (polling an idle connection
    /// would wait forever).
    pub fn interest(&self) -> Option<(RawFd, PollFlags)> {
        let h = self.raw.as_ptr();
        // SAFETY: h is live; these calls only read the handle's state.
        let (in_flight, dir, fd) = unsafe {
            (
                ffi::nbd_aio_in_flight(h),
                ffi::nbd_aio_get_direction(h),
                ffi::nbd_aio_get_fd(h),
            )
        };
        if (in_flight <= 0 && !self.connecting()) || fd < 0 {
            return None;
        }
        let mut events = PollFlags::empty();
        if dir & ffi::LIBNBD_AIO_DIRECTION_READ != 0 {
            events |= PollFlags::IN;
        }
        if dir & ffi::LIBNBD_AIO_DIRECTION_WRITE != 0 {
            events |= PollFlags::OUT;
        }
        (!events.is_empty()).then_some((fd, events))
    }

    /// Tell libnbd what poll(2) found on its socket: it reads replies
    /// (completing commands) or sends what it queued. An error means the
    /// connection died; its commands then complete with errors.
    pub fn notify(&mut self, revents: PollFlags) -> Result<(), NbdError> {
        let h = self.raw.as_ptr();
        // SAFETY: h is live; libnbd writes replies only into buffers held
        // in `self.held` (the ownership rule).
        let r = unsafe {
            if revents.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                ffi::nbd_aio_notify_read(h)
            } else if revents.contains(PollFlags::OUT) {
                ffi::nbd_aio_notify_write(h)
            } else {
                0
            }
        };
        check(r).map(drop)
    }

    /// Tell the server we are going (NBD_CMD_DISC), where the connection
    /// is up and nothing is in flight on it; errors are of no use then and
    /// are ignored. The command leaves once [`Handle::sending`] is false;
    /// the server answers it only by closing the connection, which is not
    /// waited for (nbd_shutdown would, a round trip per connection).
    pub fn disconnect(&mut self) {
        if self.connecting() || self.dead() || !self.held.is_empty() {
            return;
        }
        // SAFETY: h is live; NBD_CMD_DISC carries no memory of ours.
        unsafe { ffi::nbd_aio_disconnect(self.raw.as_ptr(), 0) };
    }

    /// Whether libnbd still has bytes to send on a live connection.
    pub fn sending(&self) -> bool {
        self.interest()
            .is_some_and(|(_, events)| events.contains(PollFlags::OUT))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and used no more; after nbd_close
        // libnbd holds no pointer into the buffers released below.
        unsafe { ffi::nbd_close(self.raw.as_ptr()) };
        for (_, held) in self.held.drain() {
            drop(held.release());
        }
    }
}

/// Poll `fds` (a socket per handle, with the events it waits for) until
/// one is ready, through EINTR; the returned events line up with `fds`.
pub fn poll(fds: &[(RawFd, PollFlags)]) -> Result<Vec<PollFlags>, NbdError> {
    // SAFETY: each fd is a live handle's socket, owned by libnbd, and the
    // handles outlive this call (the caller holds them borrowed).
    let borrowed: Vec<BorrowedFd<'_>> = fds
        .iter()
        .map(|&(fd, _)| unsafe { BorrowedFd::borrow_raw(fd) })
        .collect();
    let mut pollfds: Vec<rustix::event::PollFd<'_>> = borrowed
        .iter()
        .zip(fds)
        .map(|(fd, &(_, events))| rustix::event::PollFd::new(fd, events))
        .collect();
    loop {
        match rustix::event::poll(&mut pollfds, None) {
            Ok(_) => return Ok(pollfds.iter().map(|p| p.revents()).collect()),
            Err(Errno::INTR) => continue,
            Err(errno) => return Err(NbdError::new(errno, "poll on an NBD connection failed")),
        }
    }
}

/// libnbd's extent callback: append the `base:allocation` pairs
/// (length, flags) to the list block_status gave as `user_data`.
unsafe extern "C" fn collect_extents(
    user_data: *mut c_void,
    metacontext: *const c_char,
    offset: u64,
    entries: *mut u32,
    nr_entries: usize,
    _error: *mut c_int,
) -> c_int {
    // SAFETY: libnbd passes the metacontext as a C string and the entries
    // as nr_entries u32s, both valid for this call.
    let (context, entries) = unsafe {
        (
            CStr::from_ptr(metacontext),
            std::slice::from_raw_parts(entries, nr_entries),
        )
    };
    if context != ffi::LIBNBD_CONTEXT_BASE_ALLOCATION {
        return 0;
    }
    // SAFETY: user_data is the list block_status leaked for this command,
    // alive until the command is retired; no other reference to it exists
    // while libnbd runs the callback.
    let list = unsafe { &mut *user_data.cast::<Vec<Extent>>() };
    list.extend(super::extents::from_pairs(offset, entries));
    0
}
