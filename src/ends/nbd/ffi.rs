//! The libnbd C functions ddx calls, declared by hand from libnbd 1.14's
//! `<libnbd.h>`: no Rust binding is published, and these few dozen lines
//! are all that a generated one would give us. libnbd is opened at run
//! time (libloading), not linked: ddx builds and runs where libnbd is not
//! installed, and only an NBD operand needs it. Only [`super::handle`]
//! calls them; everything here is raw and unchecked, and every rule of
//! use (which thread, which buffer lives how long) is kept there.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::marker::{PhantomData, PhantomPinned};
use std::sync::OnceLock;

use libloading::Library;

/// `struct nbd_handle`: opaque, only ever behind a pointer libnbd gave us.
#[repr(C)]
pub struct nbd_handle {
    _private: [u8; 0],
    _not_send_sync_or_unpin: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `nbd_completion_callback`, passed by value; ddx passes the null one
/// and retires commands itself with `nbd_aio_command_completed`.
#[repr(C)]
pub struct nbd_completion_callback {
    pub callback: Option<unsafe extern "C" fn(user_data: *mut c_void, error: *mut c_int) -> c_int>,
    pub user_data: *mut c_void,
    pub free: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
}

impl nbd_completion_callback {
    /// `NBD_NULL_COMPLETION`.
    pub const NULL: nbd_completion_callback = nbd_completion_callback {
        callback: None,
        user_data: std::ptr::null_mut(),
        free: None,
    };
}

/// `nbd_extent_callback`, passed by value to `nbd_aio_block_status`.
#[repr(C)]
pub struct nbd_extent_callback {
    pub callback: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            metacontext: *const c_char,
            offset: u64,
            entries: *mut u32,
            nr_entries: usize,
            error: *mut c_int,
        ) -> c_int,
    >,
    pub user_data: *mut c_void,
    pub free: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
}

pub const LIBNBD_CMD_FLAG_FAST_ZERO: u32 = 0x10;
pub const LIBNBD_AIO_DIRECTION_READ: c_uint = 1;
pub const LIBNBD_AIO_DIRECTION_WRITE: c_uint = 2;
pub const LIBNBD_SIZE_MINIMUM: c_int = 0;
pub const LIBNBD_SIZE_MAXIMUM: c_int = 2;
pub const LIBNBD_STATE_ZERO: u32 = 2;
pub const LIBNBD_CONTEXT_BASE_ALLOCATION: &CStr = c"base:allocation";

/// Declares the libnbd functions ddx calls: a table of pointers resolved
/// from the shared library, and a function of the same name and signature
/// for each, so callers read as if the library were linked.
macro_rules! libnbd_functions {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {
        struct Functions {
            $($name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        impl Functions {
            fn resolve(library: &Library) -> Result<Functions, libloading::Error> {
                // SAFETY: each symbol is given the type `<libnbd.h>` declares
                // for it (libnbd's ABI is stable within soname libnbd.so.0),
                // and the pointers are kept beside the library, which is
                // never unloaded (see `LIBNBD`).
                unsafe {
                    Ok(Functions {
                        $($name: *library.get::<unsafe extern "C" fn($($ty),*) -> $ret>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )?,)*
                    })
                }
            }
        }

        $(
            /// # Safety
            /// As libnbd's function of this name; [`load`] must have succeeded.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller keeps libnbd's contract for this call.
                unsafe { (functions().$name)($($arg),*) }
            }
        )*
    };
}

libnbd_functions! {
    fn nbd_create() -> *mut nbd_handle;
    fn nbd_close(h: *mut nbd_handle) -> ();
    fn nbd_get_error() -> *const c_char;
    fn nbd_get_errno() -> c_int;
    fn nbd_set_pread_initialize(h: *mut nbd_handle, request: bool) -> c_int;
    fn nbd_set_uri_allow_local_file(h: *mut nbd_handle, allow: bool) -> c_int;
    fn nbd_set_request_structured_replies(h: *mut nbd_handle, request: bool) -> c_int;
    fn nbd_add_meta_context(h: *mut nbd_handle, name: *const c_char) -> c_int;
    fn nbd_connect_uri(h: *mut nbd_handle, uri: *const c_char) -> c_int;
    fn nbd_aio_connect_uri(h: *mut nbd_handle, uri: *const c_char) -> c_int;
    fn nbd_aio_is_connecting(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_disconnect(h: *mut nbd_handle, flags: u32) -> c_int;
    fn nbd_get_size(h: *mut nbd_handle) -> i64;
    fn nbd_get_block_size(h: *mut nbd_handle, size_type: c_int) -> i64;
    fn nbd_is_read_only(h: *mut nbd_handle) -> c_int;
    fn nbd_can_flush(h: *mut nbd_handle) -> c_int;
    fn nbd_can_trim(h: *mut nbd_handle) -> c_int;
    fn nbd_can_zero(h: *mut nbd_handle) -> c_int;
    fn nbd_can_fast_zero(h: *mut nbd_handle) -> c_int;
    fn nbd_can_multi_conn(h: *mut nbd_handle) -> c_int;
    fn nbd_can_meta_context(h: *mut nbd_handle, metacontext: *const c_char) -> c_int;
    fn nbd_aio_pread(h: *mut nbd_handle, buf: *mut c_void, count: usize, offset: u64, completion: nbd_completion_callback, flags: u32) -> i64;
    fn nbd_aio_pwrite(h: *mut nbd_handle, buf: *const c_void, count: usize, offset: u64, completion: nbd_completion_callback, flags: u32) -> i64;
    fn nbd_aio_flush(h: *mut nbd_handle, completion: nbd_completion_callback, flags: u32) -> i64;
    fn nbd_aio_zero(h: *mut nbd_handle, count: u64, offset: u64, completion: nbd_completion_callback, flags: u32) -> i64;
    fn nbd_aio_block_status(h: *mut nbd_handle, count: u64, offset: u64, extent: nbd_extent_callback, completion: nbd_completion_callback, flags: u32) -> i64;
    fn nbd_aio_get_fd(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_get_direction(h: *mut nbd_handle) -> c_uint;
    fn nbd_aio_notify_read(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_notify_write(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_in_flight(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_is_dead(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_is_closed(h: *mut nbd_handle) -> c_int;
    fn nbd_aio_peek_command_completed(h: *mut nbd_handle) -> i64;
    fn nbd_aio_command_completed(h: *mut nbd_handle, cookie: u64) -> c_int;
    fn nbd_poll(h: *mut nbd_handle, timeout: c_int) -> c_int;
}

/// The shared library every NBD end goes through: libnbd's run-time name,
/// the one its Debian package (libnbd0) and Fedora's install.
const LIBRARY_NAME: &str = "libnbd.so.0";

/// libnbd, opened on the first NBD operand and kept for the life of the
/// process (unloading it under live handles would be unsound).
static LIBNBD: OnceLock<Result<(Library, Functions), String>> = OnceLock::new();

/// Opens libnbd and resolves every function, once; the error says what
/// to install. Loading at run time, not linking, keeps libnbd out of the
/// build and of every copy that names no NBD URI.
pub fn load() -> Result<(), String> {
    let loaded = LIBNBD.get_or_init(|| {
        // SAFETY: loading libnbd runs only its ELF constructors, which
        // set up its own thread-local error state and nothing else.
        let library = unsafe { Library::new(LIBRARY_NAME) }.map_err(|err| {
            format!("cannot load libnbd ({err}); install it (Debian: libnbd0) to use NBD URIs")
        })?;
        let functions = Functions::resolve(&library)
            .map_err(|err| format!("{LIBRARY_NAME} lacks a function ddx needs: {err}"))?;
        Ok((library, functions))
    });
    loaded.as_ref().map(|_| ()).map_err(Clone::clone)
}

fn functions() -> &'static Functions {
    match LIBNBD.get() {
        Some(Ok((_, functions))) => functions,
        _ => unreachable!("libnbd is called only after ffi::load succeeded"),
    }
}
