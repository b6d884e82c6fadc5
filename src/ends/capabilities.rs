//! What an end can do, as one value that the end answers: the planner,
//! the option table (`planner::needs`), the image writers, `--tee`, the
//! bench and `--verbose` ask it, and none of them decides by which kind
//! of end it holds.
//!
//! The idea is nbdcopy's `rw_ops`, whose `can_trim`, `can_zero`,
//! `can_extents` ... each end answers, a false answer meaning "do
//! without": a new kind of end answers these questions once, here or in
//! its own `End::capabilities`, and every decision that depends on them
//! follows. [`Capabilities::of`] answers for a kind of end before the end
//! is opened (the output is examined before it is opened for writing);
//! an opened end may answer for itself where it knows more (an object
//! behind an `http://` URL is read only).

use super::transport::Requests;
use super::Kind;

/// What one end can do. Every field is a question a decision somewhere
/// asks; `false` (or `None`) means the caller does without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Reads return everything asked for until the end of the data, so
    /// that a short read means end of input: records can be coalesced
    /// into large requests without changing GNU's counts.
    pub reads_whole: bool,
    /// Read at any offset: every byte has one place it is read from
    /// (`--rescue` reads by position, a failed read is retried there, a
    /// read-ahead can be given back, a recording can ask for extents).
    pub reads_at: bool,
    /// Written at any offset, in place, and written again there: what a
    /// copy by position, a lent `--tee` write, the safe order for
    /// bootable media and `--trim` need of an output.
    pub writes_at: bool,
    /// What was written can be read back from the same place, through a
    /// handle of its own (`--verify`).
    pub reads_back: bool,
    /// Gives the same bytes when read again by its name (a checker of
    /// `--hash-file` reads the input again).
    pub reads_again: bool,
    /// How a range is made to read as zeros without writing them
    /// (`--trim`); None: it cannot.
    pub discards: Option<Discard>,
    /// Says where its data and its holes are (SEEK_DATA/SEEK_HOLE, NBD
    /// block status), so that holes are neither read nor mapped.
    pub extents: bool,
    /// A file or block device on this machine, reached through its
    /// descriptor: O_DIRECT, io_uring and cache advice reach its storage.
    pub local_storage: bool,
    /// Storage on another machine, reached over a connection (an NBD
    /// export, an object store): it serves many requests at once, and
    /// what is measured of it is the server's and the connection's.
    pub served: bool,
    /// A whole device's own blocks: its offsets are the disk's, it is
    /// claimed with O_EXCL when written, an image goes onto it in the
    /// safe order and with direct writes.
    pub device: bool,
    /// A pipe: splice(2) moves its bytes without copying them into ddx,
    /// and, like a read, returns what the pipe holds.
    pub splices: bool,
    /// copy_file_range(2) can copy between two such ends on one
    /// filesystem (regular files).
    pub kernel_copy: bool,
    /// Written whole, from its first byte to its last, in one upload that
    /// appears only when complete: no offset to write at, nothing kept
    /// of what was there before, no hole to leave, no place to come back
    /// to but the end of its stored parts.
    pub written_whole: bool,
    /// An upload the server keeps in parts until it completes, which a
    /// map can record and `--resume` continue after the parts stored.
    pub resumable_upload: bool,
    /// Why it cannot be written at all, where it cannot (an object
    /// behind an `http://` URL).
    pub read_only: Option<&'static str>,
    /// How many requests it keeps in flight, of which sizes, and whether
    /// their bytes pass through buffers of its own (see
    /// `ends::transport`): what the engine's window sizes itself by.
    pub requests: Requests,
    /// Addressed by block number (a disk through its generic node): the
    /// logical block, the unit of its commands and what a bad block's
    /// number counts in. None for ends addressed by byte.
    pub block_addressed: Option<u32>,
    /// Each write can be sent with force unit access (`--fua`): the
    /// disk's own commands carry the flag, so a write is durable when it
    /// completes, without a cache flush.
    pub fua: bool,
}

/// How an end makes a range read as zeros without writing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// fallocate(PUNCH_HOLE) on a file, a discard on a block device.
    PunchHoles,
    /// NBD zero requests, which let the server deallocate.
    ZeroRequests,
}

impl Capabilities {
    /// What an end of this kind can do, as far as its kind says.
    pub const fn of(kind: Kind) -> Capabilities {
        const NONE: Capabilities = Capabilities {
            reads_whole: false,
            reads_at: false,
            writes_at: false,
            reads_back: false,
            reads_again: true,
            discards: None,
            extents: false,
            local_storage: false,
            served: false,
            device: false,
            splices: false,
            kernel_copy: false,
            written_whole: false,
            resumable_upload: false,
            read_only: None,
            requests: Requests::ONE_AT_A_TIME,
            block_addressed: None,
            fua: false,
        };
        // Storage: whole reads at any offset, read back and again.
        const STORAGE: Capabilities = Capabilities {
            reads_whole: true,
            reads_at: true,
            reads_back: true,
            ..NONE
        };
        match kind {
            Kind::RegularFile => Capabilities {
                writes_at: true,
                discards: Some(Discard::PunchHoles),
                extents: true,
                local_storage: true,
                kernel_copy: true,
                ..STORAGE
            },
            Kind::BlockDevice => Capabilities {
                writes_at: true,
                discards: Some(Discard::PunchHoles),
                local_storage: true,
                device: true,
                ..STORAGE
            },
            // A device's next read need not give the last one's bytes.
            Kind::CharDevice | Kind::Socket => Capabilities {
                reads_again: false,
                ..NONE
            },
            Kind::Pipe => Capabilities {
                reads_again: false,
                splices: true,
                ..NONE
            },
            Kind::Directory | Kind::Other => NONE,
            Kind::NbdExport => Capabilities {
                writes_at: true,
                discards: Some(Discard::ZeroRequests),
                extents: true,
                served: true,
                ..STORAGE
            },
            Kind::Object => Capabilities {
                served: true,
                written_whole: true,
                resumable_upload: true,
                ..STORAGE
            },
            Kind::Stream => Capabilities {
                reads_whole: true,
                ..NONE
            },
            // Storage without a descriptor or a server; a checker of
            // `--hash-file` would not know its name.
            Kind::Memory => Capabilities {
                writes_at: true,
                reads_again: false,
                ..STORAGE
            },
            // A disk's own blocks through its commands: no descriptor for
            // O_DIRECT or io_uring's reads, and no discard; read back
            // with the same commands, which no page cache stands before.
            Kind::Passthrough => Capabilities {
                writes_at: true,
                device: true,
                fua: true,
                ..STORAGE
            },
        }
    }

    /// What a wrapper that passes this end's bytes on in order only (a
    /// replayed head, a recording, a filter) can do: whole reads where
    /// this end reads whole, a pipe's splicing where it is one, nothing
    /// that needs a position.
    pub const fn in_order(self) -> Capabilities {
        if self.reads_at {
            Capabilities::of(Kind::Stream)
        } else {
            self
        }
    }

    /// Storage that may be slow, on this machine or another: where
    /// overlapping reads and writes pays.
    pub const fn storage(self) -> bool {
        self.local_storage || self.served
    }
}
