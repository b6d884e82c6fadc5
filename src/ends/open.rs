//! Opening the two ends of a copy, in GNU dd's order and with its flags.
//!
//! Input first (so a missing input never truncates the output), then the
//! output: O_CREAT unless nocreat, O_EXCL with excl, O_TRUNC unless notrunc
//! or a whole-record seek, read access when a seek may need to read, and an
//! ftruncate to the seek offset.

use std::os::fd::AsFd;
use std::path::Path;

use super::file::{open_flags, FileEnd};
use super::generic_node::{self, Options as GenericNodeOptions};
use super::{uri, End, Whence};
use crate::diagnostic::Diagnostic;
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::sys::file::{self, Handle, OutputOpen};
use crate::sys::Errno;

/// How the ends that are no descriptor are opened, beyond GNU's flags:
/// a disk's generic node (its commands in flight, FUA) and an NBD export
/// (its connections). A copy gives its generic-node options and lets an
/// export have what connections the end makes (`Options::from`); the
/// bench measures one connection, as fio's `nbd` engine does per job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub node: GenericNodeOptions,
    /// At most this many connections to an export; None: as many as the
    /// end makes where the server allows multi-conn.
    pub connections: Option<usize>,
}

impl From<GenericNodeOptions> for Options {
    fn from(node: GenericNodeOptions) -> Options {
        Options {
            node,
            connections: None,
        }
    }
}

/// An input, with the name messages give it and GNU's notion of its
/// offset. `S` reads it: the end as opened ([`OpenedInput`]), then the
/// engine's stream over that end (`engine::stream::Input`), so the two
/// share one record of where the input stands.
#[derive(Debug)]
pub struct InputOf<S> {
    /// What moves its bytes.
    pub stream: S,
    /// The name used in messages ("standard input" or the path).
    pub name: Vec<u8>,
    /// Standard input, inherited: others may read it after ddx.
    pub inherited: bool,
    pub seekable: bool,
    /// The error of the initial lseek when not seekable.
    pub seek_errno: Option<Errno>,
    /// Bytes consumed from the start of the file; negative after overflow.
    pub offset: i64,
}

/// The input as opened: its end.
pub type OpenedInput = InputOf<Box<dyn End>>;

impl<S> InputOf<S> {
    /// The same input, read through `wrap(stream)`.
    pub fn map<T>(self, wrap: impl FnOnce(S) -> T) -> InputOf<T> {
        InputOf {
            stream: wrap(self.stream),
            name: self.name,
            inherited: self.inherited,
            seekable: self.seekable,
            seek_errno: self.seek_errno,
            offset: self.offset,
        }
    }
}

/// An output and the name messages give it; `S` writes it, as for
/// [`InputOf`].
#[derive(Debug)]
pub struct OutputOf<S> {
    /// What moves its bytes.
    pub stream: S,
    pub name: Vec<u8>,
}

/// The output as opened: its end.
pub type OpenedOutput = OutputOf<Box<dyn End>>;

impl<S> OutputOf<S> {
    /// The same output, written through `wrap(stream)`.
    pub fn map<T>(self, wrap: impl FnOnce(S) -> T) -> OutputOf<T> {
        OutputOf {
            stream: wrap(self.stream),
            name: self.name,
        }
    }
}

/// The name messages give `path`: as given, an object URL without its
/// secrets.
fn path_name(path: &Path) -> Vec<u8> {
    uri::shown(path)
}

/// Why an end could not be opened: GNU's message, with what a remote end
/// said beyond it.
#[derive(Debug)]
pub struct OpenError {
    pub diagnostic: Diagnostic,
}

impl OpenError {
    /// The errno of the failed open.
    pub fn errno(&self) -> Errno {
        fn of(diagnostic: &Diagnostic) -> Errno {
            match diagnostic {
                Diagnostic::OpenFailed { errno, .. } | Diagnostic::SettingFlags { errno, .. } => {
                    *errno
                }
                Diagnostic::Explained { diagnostic, .. } => of(diagnostic),
                _ => Errno::IO,
            }
        }
        of(&self.diagnostic)
    }
}

impl From<Diagnostic> for OpenError {
    fn from(diagnostic: Diagnostic) -> Self {
        OpenError { diagnostic }
    }
}

/// Open a remote end; its failures read as GNU's "failed to open".
fn open_by_uri(
    path: &Path,
    opening: uri::Opening,
    connections: Option<usize>,
) -> Option<Result<Box<dyn End>, OpenError>> {
    let failed = |errno, text: String| OpenError {
        diagnostic: Diagnostic::OpenFailed {
            file: path_name(path),
            errno,
        }
        .explained(Some(text)),
    };
    let named = match uri::recognise(path)? {
        Ok(remote) => remote,
        Err(why) => {
            let errno = match path.to_str().is_some_and(uri::of_unknown_scheme) {
                true => Errno::PROTONOSUPPORT,
                false => Errno::INVAL,
            };
            return Some(Err(failed(errno, why)));
        }
    };
    Some(uri::open(&named, opening, connections).map_err(|e| failed(e.errno, e.detail)))
}

/// What stands in the way of opening `path` for writing, where the
/// errno alone does not say it: a block device that is read-only (EPERM,
/// EACCES or EROFS from open(2), which read as a matter of permissions).
pub fn why_not_writable(path: &Path, errno: Errno) -> Option<String> {
    if !matches!(errno, Errno::PERM | Errno::ACCESS | Errno::ROFS) {
        return None;
    }
    let st = rustix::fs::stat(path).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::BlockDevice {
        return None;
    }
    let number = crate::sys::block::DeviceNumber::from_raw(st.st_rdev);
    crate::sys::block::read_only(number).then(|| {
        "the device is read-only (a loop device attached with --read-only, a card's \
         write-protect switch, or blockdev --setro)"
            .to_owned()
    })
}

/// Open the generic node at `path` (an sg, bsg or ng device) as an
/// end that sends the disk's own commands; None for any other file.
/// GNU's open flags do not apply: the commands bypass the page cache
/// already (iflag=direct changes nothing), and oflag=sync or dsync asks
/// for what FUA gives, each write durable when it completes.
fn open_generic_node(
    path: &Path,
    writing: bool,
    flags: IoFlags,
    options: GenericNodeOptions,
) -> Option<Result<Box<dyn End>, OpenError>> {
    let interface = crate::sys::passthrough::interface_at(path)?;
    let failed = |errno, detail: Option<String>| OpenError {
        diagnostic: Diagnostic::OpenFailed {
            file: path_name(path),
            errno,
        }
        .explained(detail),
    };
    let access = generic_node::access(interface, writing);
    let fd = match rustix::fs::open(
        path,
        access | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(errno) => return Some(Err(failed(errno, None))),
    };
    let options = GenericNodeOptions {
        fua: options.fua || (writing && flags.intersects(IoFlags::SYNC | IoFlags::DSYNC)),
        ..options
    };
    Some(
        generic_node::open(fd, interface, path, options)
            .map(|end| Box::new(end) as Box<dyn End>)
            .map_err(|error| failed(error.errno, Some(error.cause))),
    )
}

/// A standard descriptor taken as an end, as GNU does: iflag= or oflag=
/// (`flags`, of the input when `reading`) are added to its flags (fcntl).
/// Returns the name messages give it.
fn inherit(
    fd: std::os::fd::BorrowedFd<'_>,
    name: &str,
    flags: IoFlags,
    reading: bool,
) -> Result<Vec<u8>, Diagnostic> {
    file::add_fd_flags(fd, open_flags(flags, reading)).map_err(|errno| {
        Diagnostic::SettingFlags {
            file: name.into(),
            errno,
        }
    })?;
    Ok(name.into())
}

/// Open the input (`if=`, else standard input with iflag= added); a
/// generic node or an export with `options`.
pub fn open_input(plan: &CopyPlan, options: Options) -> Result<OpenedInput, OpenError> {
    let special = plan.input.as_deref().and_then(|p| {
        open_generic_node(p, false, plan.input_flags, options.node)
            .or_else(|| open_by_uri(p, uri::Opening::Read, options.connections))
    });
    if let Some(opened) = special {
        return Ok(OpenedInput {
            stream: opened?,
            name: plan.input.as_deref().map(path_name).unwrap_or_default(),
            inherited: false,
            seekable: true,
            seek_errno: None,
            offset: 0,
        });
    }
    let (handle, name) = match &plan.input {
        None => {
            let stdin = std::io::stdin();
            let name = inherit(stdin.as_fd(), "standard input", plan.input_flags, true)?;
            (Handle::Stdin(stdin), name)
        }
        Some(path) => {
            let fd =
                file::open_input(path, open_flags(plan.input_flags, true)).map_err(|errno| {
                    Diagnostic::OpenFailed {
                        file: path_name(path),
                        errno,
                    }
                })?;
            (Handle::Owned(fd), path_name(path))
        }
    };
    let inherited = matches!(handle, Handle::Stdin(_));
    let mut end: Box<dyn End> = Box::new(FileEnd::new(handle));
    let (seekable, seek_errno, offset) = match end.seek(Whence::Current(0)) {
        Ok(offset) => (true, None, offset.min(i64::MAX as u64) as i64),
        Err(errno) => (false, Some(errno), 0),
    };
    Ok(OpenedInput {
        stream: end,
        name,
        inherited,
        seekable,
        seek_errno,
        offset,
    })
}

/// Open the output (`of=`, else standard output with oflag= added); a
/// generic node or an export with `options`. `warnings` gets the
/// errors GNU reports without stopping (a failed ftruncate for seek=).
pub fn open_output(
    plan: &CopyPlan,
    options: Options,
    warnings: &mut Vec<Diagnostic>,
) -> Result<OpenedOutput, OpenError> {
    if let Some(path) = plan.output.as_deref() {
        let opening = if plan.output_flags.intersects(IoFlags::SYNC | IoFlags::DSYNC) {
            uri::Opening::WriteDurable
        } else {
            uri::Opening::Write
        };
        if let Some(opened) = open_generic_node(path, true, plan.output_flags, options.node) {
            // A device exists already: excl fails as open(2) with
            // O_CREAT|O_EXCL does.
            if plan.conv.contains(Conv::EXCL) {
                return Err(Diagnostic::OpenFailed {
                    file: path_name(path),
                    errno: Errno::EXIST,
                }
                .into());
            }
            return Ok(OpenedOutput {
                stream: opened?,
                name: path_name(path),
            });
        }
        if let Some(opened) = open_by_uri(path, opening, options.connections) {
            let end = opened?;
            // The export is there already, as a device is: excl fails as
            // open(2) with O_CREAT|O_EXCL does; it is never truncated.
            if plan.conv.contains(Conv::EXCL) && end.kind() == super::Kind::NbdExport {
                return Err(Diagnostic::OpenFailed {
                    file: path_name(path),
                    errno: Errno::EXIST,
                }
                .into());
            }
            return Ok(OpenedOutput {
                stream: end,
                name: path_name(path),
            });
        }
    }
    let Some(path) = &plan.output else {
        let stdout = std::io::stdout();
        let name = inherit(stdout.as_fd(), "standard output", plan.output_flags, false)?;
        return Ok(OpenedOutput {
            stream: Box::new(FileEnd::new(Handle::Stdout(stdout))),
            name,
        });
    };
    let name = path_name(path);
    let mut how = OutputOpen {
        flags: open_flags(plan.output_flags, false),
        create: !plan.conv.contains(Conv::NOCREAT),
        exclusive: plan.conv.contains(Conv::EXCL),
        truncate: plan.truncates_output_on_open(),
        read_write: plan.seek.records != 0,
    };
    // Read access only helps an unseekable seek; go on without it.
    let fd = match file::open_output(path, how) {
        Err(_) if how.read_write => {
            how.read_write = false;
            file::open_output(path, how)
        }
        other => other,
    }
    .map_err(|errno| {
        Diagnostic::OpenFailed {
            file: name.clone(),
            errno,
        }
        .explained(why_not_writable(path, errno))
    })?;

    if plan.seek.records != 0 && !plan.conv.contains(Conv::NOTRUNC) {
        let length = plan
            .seek
            .total_bytes(plan.output_block_size)
            .expect("the operand check bounds seek without notrunc");
        if let Err(errno) = file::truncate(fd.as_fd(), length) {
            // POSIX defines ftruncate only for regular files (and a few
            // others): a device refusing it is not an error.
            match file::file_type(fd.as_fd()) {
                Err(fstat_errno) => warnings.push(Diagnostic::CannotFstat {
                    file: name.clone(),
                    errno: fstat_errno,
                }),
                Ok(t)
                    if t == rustix::fs::FileType::RegularFile
                        || t == rustix::fs::FileType::Directory =>
                {
                    warnings.push(Diagnostic::TruncateFailed {
                        length: length as i64,
                        file: name.clone(),
                        errno,
                    })
                }
                Ok(_) => {}
            }
        }
    }
    Ok(OpenedOutput {
        stream: Box::new(FileEnd::new(Handle::Owned(fd))),
        name,
    })
}
