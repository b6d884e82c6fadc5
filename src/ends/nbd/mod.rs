//! NBD exports as ends of a copy, through libnbd.
//!
//! An operand like `nbd+unix:///?socket=/run/disk.sock` names a disk on
//! another machine (or in another process: qemu-nbd, nbdkit). ddx speaks
//! NBD through libnbd (Debian's `libnbd0`, opened when the first NBD
//! operand is), the library nbdcopy is built on, never through a protocol
//! client of its own: `ffi` declares
//! the C calls, `handle` makes one connection safe (and owns the rule for
//! buffers in flight), `extents` keeps what block status said, and `end`
//! puts them together as [`NbdEnd`], an [`crate::ends::End`]: a
//! transport whose requests the engine's window keeps in flight.
//!
//! `uri` is always built: recognising an NBD URI needs no libnbd, and a
//! ddx built without the `nbd` feature says so for such an operand
//! instead of taking it for a file name.

pub mod uri;

pub use uri::{recognise, NbdUri, Transport, UriError};

#[cfg(feature = "nbd")]
mod end;
#[cfg(feature = "nbd")]
pub(crate) mod extents;
#[cfg(feature = "nbd")]
mod ffi;
#[cfg(feature = "nbd")]
mod handle;

#[cfg(feature = "nbd")]
pub use end::{Access, NbdEnd, MAX_CONNECTIONS};
#[cfg(feature = "nbd")]
pub use handle::{ExportInfo, NbdError};
