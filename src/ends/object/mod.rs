//! Objects in a store as ends of a copy: `s3://BUCKET/KEY` read and
//! written, `http://` and `https://` read.
//!
//! The HTTP, signing and retry work is object_store's (Apache Arrow's
//! client for S3, GCS, Azure and plain HTTP); this module turns its async
//! API into the blocking [`End`](super::End) the engine drives. Each end
//! owns a small tokio runtime (see [`runtime`]): requests run on its
//! worker threads while the copy thread reads or writes, and nothing of
//! tokio leaks out of here.
//!
//! - [`ObjectReader`] learns the size with a HEAD, then reads by ranged
//!   GETs: one per read, or ranges fetched in flight as the engine's
//!   window asks. Seeks cost nothing; [`End::read_at`](super::End::read_at)
//!   is one ranged GET.
//! - [`Prefix`]: the objects under one prefix, each read, written, listed
//!   and removed whole, from many threads at once (a chunk store's, see
//!   `store`).
//! - [`ObjectWriter`] (S3 only) uploads the parts the window gathers in
//!   parallel as one multipart upload, so that a small object is a single
//!   PUT: part sizes (`parts`), the map's journal (`journal`), aborting
//!   an upload that will not complete (`abort`) and the ListParts reader
//!   (`list_parts`) each have a module of their own. The object appears
//!   at close and not before; abandoning the copy aborts the upload.
//!
//! Configuration is the standard AWS one (see `config`); secrets never
//! reach a text (see `secret`).
//!
//! `url` is always built: recognising an object URL needs none of this,
//! and a ddx built without the `object` feature says so for such an
//! operand instead of taking it for a file name.

mod url;

pub use url::{recognise, shown, ObjectUrl, UrlError};

#[cfg(feature = "object")]
mod abort;
#[cfg(feature = "object")]
pub(crate) mod checksum;
#[cfg(feature = "object")]
mod config;
#[cfg(feature = "object")]
mod journal;
#[cfg(feature = "object")]
pub(crate) mod list_parts;
#[cfg(feature = "object")]
pub mod parts;
#[cfg(feature = "object")]
mod prefix;
#[cfg(feature = "object")]
pub(crate) mod profile;
#[cfg(feature = "object")]
mod reader;
#[cfg(feature = "object")]
mod runtime;
#[cfg(feature = "object")]
pub(crate) mod secret;
#[cfg(feature = "object")]
mod stall;
#[cfg(feature = "object")]
mod writer;

#[cfg(feature = "object")]
pub use config::{Config, Credentials};
#[cfg(feature = "object")]
pub use prefix::Prefix;
#[cfg(feature = "object")]
pub use reader::ObjectReader;
#[cfg(feature = "object")]
pub use secret::Secret;
#[cfg(feature = "object")]
pub use writer::ObjectWriter;

#[cfg(feature = "object")]
use crate::sys::Errno;

/// Why an object end could not be opened or failed: the errno GNU's
/// message is made of, and a line saying more (the store's own words,
/// without secrets).
#[cfg(feature = "object")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ObjectError {
    pub errno: Errno,
    pub detail: String,
}

#[cfg(feature = "object")]
impl ObjectError {
    /// Settings that cannot work (EINVAL).
    fn config(detail: String) -> ObjectError {
        ObjectError {
            errno: Errno::INVAL,
            detail,
        }
    }
}

/// The errno closest to what the store said.
#[cfg(feature = "object")]
fn errno_of(e: &object_store::Error) -> Errno {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => Errno::NOENT,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Errno::ACCESS,
        E::AlreadyExists { .. } => Errno::EXIST,
        E::NotSupported { .. } | E::NotImplemented { .. } => Errno::NOTSUP,
        E::InvalidPath { .. } | E::UnknownConfigurationKey { .. } => Errno::INVAL,
        _ => Errno::IO,
    }
}
