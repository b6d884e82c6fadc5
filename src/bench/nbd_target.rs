//! An NBD export as the bench's TARGET: measured like a block device on
//! another machine, through the copy's own NBD end (`ends::nbd`, libnbd),
//! never through a client of the bench's own. An export has no page cache
//! of ours and no O_DIRECT, O_DSYNC or O_SYNC: those variants are skipped
//! with the reason rather than measured under a name that would not mean
//! what it says. Each scenario opens its own connection, one connection
//! each (no multi-conn), so a figure is one connection's, as fio's `nbd`
//! engine measures a job.
//!
//! Without the `nbd` feature an export cannot be reached: [`NbdTarget::probe`]
//! says so, and [`Connection`] has no value.

use super::BenchError;
use crate::ends::nbd::NbdUri;
use crate::ends::End;

/// What the bench knows of an export before measuring it.
#[derive(Debug, Clone)]
pub struct NbdTarget {
    pub uri: NbdUri,
    pub size: u64,
    /// The server exports it read-only.
    pub read_only: bool,
}

/// Why a test or mode is not run on an export, for the report.
pub const NO_CACHE: &str =
    "an NBD export has no page cache of ddx's: its reads all go to the server";
pub const NO_DIRECT: &str = "O_DIRECT has no meaning over NBD (every request goes to the server)";
pub const NO_SYNC_FLAGS: &str =
    "the page cache, O_DSYNC, O_SYNC and O_DIRECT have no meaning over NBD; the 'flush' mode \
     times an NBD flush after the writes";

#[cfg(feature = "nbd")]
mod imp {
    use super::{BenchError, End, NbdTarget, NbdUri};
    use crate::ends::nbd::{Access, NbdEnd, NbdError};
    use crate::ends::transport::{Fault, Op, Request, Submitted};
    use crate::sys::buffer::AlignedBuf;

    fn failed(uri: &NbdUri, e: NbdError) -> BenchError {
        BenchError::msg(format!(
            "{}: {} ({})",
            uri.text,
            crate::sys::errno_text(e.errno),
            e.message
        ))
    }

    impl NbdTarget {
        /// Connect once to learn the export's size and whether it may be
        /// written.
        pub fn probe(uri: &NbdUri) -> Result<NbdTarget, BenchError> {
            let end = NbdEnd::open_with(uri, Access::Read, 1).map_err(|e| failed(uri, e))?;
            let info = end.info();
            Ok(NbdTarget {
                uri: uri.clone(),
                size: info.size,
                read_only: info.read_only,
            })
        }

        /// A connection of its own for one scenario.
        pub fn connect(&self, writing: bool) -> Result<Connection, BenchError> {
            let access = if writing { Access::Write } else { Access::Read };
            NbdEnd::open_with(&self.uri, access, 1)
                .map(|end| Connection(end, 0, Vec::new()))
                .map_err(|e| failed(&self.uri, e))
        }
    }

    /// One connection to the export.
    #[derive(Debug)]
    pub struct Connection(NbdEnd, u64, Vec<AlignedBuf>);

    /// A read sent and not yet completed.
    pub type Ticket = u64;

    impl Connection {
        pub fn end(&mut self) -> &mut dyn End {
            &mut self.0
        }

        /// Send a read without waiting for it (the queue-depth sweep).
        pub fn start_read(&mut self, len: usize, offset: u64) -> Result<Ticket, BenchError> {
            self.1 += 1;
            let mut buf = match self.2.pop() {
                Some(buf) if buf.capacity() >= len => buf,
                _ => AlignedBuf::new(len).map_err(|e| BenchError::sys("a buffer", e))?,
            };
            buf.set_len(len);
            let request = Request {
                id: self.1,
                op: Op::Read,
                offset,
                len: len as u64,
                buf: Some(buf),
            };
            match self.0.submit(request) {
                Submitted::InFlight => Ok(self.1),
                Submitted::Done(done) => {
                    self.2.extend(done.buf);
                    match done.result {
                        Ok(_) => Ok(self.1),
                        Err(fault) => Err(self.error(fault)),
                    }
                }
                Submitted::Copied(buf) | Submitted::Busy(Request { buf: Some(buf), .. }) => {
                    self.2.push(buf);
                    Ok(self.1)
                }
                Submitted::Busy(_) => Ok(self.1),
            }
        }

        /// Wait for the next read sent by [`Connection::start_read`] to
        /// complete, and its result.
        pub fn next_read(&mut self) -> Result<Ticket, BenchError> {
            let Some(done) = self.0.complete(true) else {
                return Err(BenchError::msg("reading the export: nothing in flight"));
            };
            self.2.extend(done.buf);
            match done.result {
                Ok(_) => Ok(done.id),
                Err(fault) => Err(self.error(fault)),
            }
        }

        fn error(&mut self, fault: Fault) -> BenchError {
            let detail = fault.words.unwrap_or_default();
            BenchError::sys(format!("reading the export ({detail})"), fault.errno)
        }
    }
}

#[cfg(not(feature = "nbd"))]
mod imp {
    use super::{BenchError, End, NbdTarget, NbdUri};

    impl NbdTarget {
        pub fn probe(uri: &NbdUri) -> Result<NbdTarget, BenchError> {
            Err(BenchError::msg(format!(
                "{}: this ddx was built without NBD support (the `nbd` feature, libnbd)",
                uri.text
            )))
        }

        pub fn connect(&self, _writing: bool) -> Result<Connection, BenchError> {
            unreachable!("no export is probed without the nbd feature")
        }
    }

    /// No connection can be made without the `nbd` feature.
    #[derive(Debug)]
    pub enum Connection {}

    pub type Ticket = u64;

    impl Connection {
        pub fn end(&mut self) -> &mut dyn End {
            match *self {}
        }

        pub fn start_read(&mut self, _len: usize, _offset: u64) -> Result<Ticket, BenchError> {
            match *self {}
        }

        pub fn next_read(&mut self) -> Result<Ticket, BenchError> {
            match *self {}
        }
    }
}

pub use imp::{Connection, Ticket};
