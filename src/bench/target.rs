//! What is being measured and what may be done to it.
//!
//! A TARGET is a file, a directory, a block device, an NBD export or a
//! disk's SCSI or NVMe generic node, which exists: a name with nothing
//! there is refused (most often a directory mistyped, or not made yet).
//! It is opened as the copy opens an operand (`ends::open`), and what the
//! bench may do with it is asked of that end's capabilities, never of
//! what kind of end it is: whether it is a descriptor's storage (O_DIRECT,
//! the page cache, fdatasync), served over a connection, a device's own
//! blocks, read only; how many requests it keeps in flight and of which
//! unit. Each scenario opens it again with its own flags ([`Target::end`]).
//!
//! In a directory ddx creates its own file, and removes it when the bench
//! ends, also on SIGINT or SIGTERM: the path is kept in a process-wide
//! slot that the signal watcher empties before dying. Writes go only
//! through [`Target::end`], which refuses unless writing was allowed: a
//! block device, a generic node, an export or an existing file is only
//! read without `--destructive`. While the bench may write a device, the
//! device (for a generic node, the disk behind it) is held open with
//! O_EXCL, which the kernel refuses while it is mounted and which keeps
//! anyone from mounting it until the bench ends.
//!
//! Before anything is created, the bench refuses what the copy refuses,
//! by asking the copy's wrong-device guard in its words
//! (`guard::check_output`): a path that does not exist in /dev (a mistyped
//! device name would become a file in memory), and with `--destructive` a
//! device or file in use (mounted, swap, held; behind a generic node, its
//! disk); `--force` overrides, as it does for the copy. A target with no
//! disk under it (tmpfs, ramfs, devtmpfs, a RAM disk) would measure
//! memory, not what the user meant to measure: refused unless
//! `--allow-memory`. A character device that is not a generic node is
//! refused before it is opened: opening one may do anything (a watchdog
//! starts counting).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::OFlags;

use super::args::{BenchArgs, MIN_SIZE};
use super::backing::Backing;
use super::scenario::Op;
use super::BenchError;
use crate::ends::open::{open_input, open_output, Options};
use crate::ends::{generic_node, Capabilities, End, Whence};
use crate::guard;
use crate::operands::{Conv, IoFlags};
use crate::sys::device::{device_info, DeviceInfo};
use crate::sys::file;
use crate::sys::filesystem::{storage_of, Storage};
use crate::sys::passthrough::Interface;
use crate::text::quote::quote_file;

#[derive(Debug)]
pub struct Target {
    /// The TARGET as given.
    pub given: PathBuf,
    /// The file, device or URI the scenarios open.
    pub path: PathBuf,
    /// What the report calls it: "file", "directory", "block device",
    /// "NBD export", "SCSI generic node"...
    pub name: &'static str,
    /// What the target can do, as its end says.
    pub can: Capabilities,
    /// Bytes the tests work in, from offset 0.
    pub len: u64,
    /// The whole file or device, which the zones test spans.
    pub full_len: u64,
    /// Why write tests are skipped, when they are.
    pub read_only: Option<String>,
    /// ddx made the file and must fill it before reading.
    pub created: bool,
    pub device: DeviceInfo,
    /// What answers the requests where it is not the target's own disk.
    pub backing: Backing,
    /// The command set of a generic node, for the report's words and
    /// fio's options (never to decide what is measured).
    pub interface: Option<Interface>,
    /// The device written (for a generic node, its disk), held with
    /// O_EXCL while the bench may write it.
    _claim: Option<OwnedFd>,
    _temp: Option<TempFile>,
}

/// The file ddx created, if any; the signal watcher removes it.
static TEMP_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Remove ddx's temporary file now.
pub fn remove_temp_now() {
    let mut slot = TEMP_PATH.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = slot.take() {
        let _ = std::fs::remove_file(path);
    }
}

/// Remove ddx's temporary file and run `then` (dying of a signal) while
/// still holding the slot, so the main thread cannot create the file
/// again in between.
pub fn remove_temp_then(then: impl FnOnce() -> std::convert::Infallible) -> ! {
    let mut slot = TEMP_PATH.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = slot.take() {
        let _ = std::fs::remove_file(path);
    }
    // `slot` stays locked: `then` never returns.
    match then() {}
}

/// ddx's own file: removed when dropped, or by [`remove_temp_now`].
#[derive(Debug)]
struct TempFile;

impl TempFile {
    fn create(path: &Path) -> Result<(TempFile, OwnedFd), BenchError> {
        // Registered before it exists, so a signal arriving between the
        // two leaves nothing behind either.
        *TEMP_PATH.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.to_owned());
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
        match file::open_with(path, flags, 0o600) {
            Ok(fd) => Ok((TempFile, fd)),
            Err(errno) => {
                *TEMP_PATH.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Err(BenchError::sys(
                    format!("creating {}", path.display()),
                    errno,
                ))
            }
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        remove_temp_now();
    }
}

impl Target {
    /// Work out what the TARGET is, refuse what may not be measured, create
    /// ddx's file if needed (empty: the caller fills it), and check that
    /// writing is allowed where asked. Nothing is created before every
    /// check has passed.
    pub fn open(args: &BenchArgs) -> Result<Target, BenchError> {
        let given = args.target.as_path();
        match crate::ends::uri::recognise(given) {
            None => {}
            Some(Ok(named)) => {
                if !measurable(&named.capabilities()) {
                    return Err(BenchError::msg(format!(
                        "{}: {} is not something ddx bench measures (a file, a directory, a \
                         block device, a SCSI or NVMe generic node or an NBD export)",
                        String::from_utf8_lossy(&crate::ends::uri::shown(given)),
                        named.kind().described()
                    )));
                }
                return Self::existing(args, given, None);
            }
            Some(Err(why)) => return Err(BenchError::msg(format!("{}: {why}", given.display()))),
        }
        let meta = match std::fs::metadata(given) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(BenchError::io(format!("{}", given.display()), e)),
        };
        let guard = |writing: bool| match args.allowed.force {
            true => Ok(()),
            false => guard::check_output(given, writing).map_err(BenchError::Refused),
        };
        use std::os::unix::fs::FileTypeExt;
        match meta {
            Some(m) if m.is_dir() => {
                not_in_memory(given, given, args.allowed.memory)?;
                let name = format!(".ddx-bench-{}-{}", std::process::id(), nanos());
                Self::create(given, given.join(name), args.size)
            }
            // Nothing there: a mistyped name, and most often a directory
            // meant to hold the bench's file. Measuring a new file made
            // at the name would measure what the user did not mean.
            None => {
                guard(true)?;
                let what = if given.as_os_str().as_bytes().ends_with(b"/") {
                    "directory"
                } else {
                    "file or directory"
                };
                Err(BenchError::msg(format!(
                    "{}: no such {what}: TARGET is an existing file, directory (ddx makes \
                     its own file there), block device or SCSI or NVMe generic node, or an \
                     NBD export",
                    quote_file(given.as_os_str().as_bytes())
                )))
            }
            Some(m) if m.is_file() || m.file_type().is_block_device() => {
                if m.is_file() {
                    not_in_memory(given, given, args.allowed.memory)?;
                }
                guard(args.allowed.destructive)?;
                Self::existing(args, given, None)
            }
            Some(m) if m.file_type().is_char_device() => {
                match crate::sys::passthrough::interface_at(given) {
                    Some(interface) => {
                        guard(args.allowed.destructive)?;
                        Self::existing(args, given, Some(interface))
                    }
                    None => Err(BenchError::msg(format!(
                        "{}: a character device that is not a SCSI or NVMe generic node \
                         (ddx bench measures files, directories, block devices, generic \
                         nodes and NBD exports)",
                        given.display()
                    ))),
                }
            }
            Some(_) => Err(BenchError::msg(format!(
                "{}: not a file, directory, block device or SCSI or NVMe generic node",
                given.display()
            ))),
        }
    }

    /// A target that was there already (a file, a device, a generic node
    /// of the command set `interface`, an export), opened for reading to
    /// learn what it can do and how large it is: written only with
    /// --destructive, and never where its end is read only.
    fn existing(
        args: &BenchArgs,
        given: &Path,
        interface: Option<Interface>,
    ) -> Result<Target, BenchError> {
        let mut probe = open_end(given, Op::Read, IoFlags::empty(), 1, true)?
            .expect("no O_DIRECT asked for, none refused");
        let can = probe.capabilities();
        let shown = String::from_utf8_lossy(&crate::ends::uri::shown(given)).into_owned();
        let full_len = probe
            .seek(Whence::End(0))
            .map_err(|e| BenchError::sys(format!("the size of {shown}"), e))?;
        let described = probe.kind().described();
        let name = name_of(described, interface);
        let mut device = match probe.fd() {
            Some(fd) => device_info(fd),
            None => DeviceInfo::default(),
        };
        let _ = probe.close();
        // A device reached by commands: what the system knows of it is
        // its disk's, behind the node; its size and block, the end's.
        let behind = (can.device && !can.local_storage)
            .then(|| crate::sys::passthrough::block_device_at(given))
            .flatten()
            .map(|name| Path::new("/dev").join(name));
        if let Some(disk) = &behind {
            if let Ok(fd) = file::open_with(disk, OFlags::RDONLY, 0) {
                device = device_info(fd.as_fd());
            }
        }
        if can.device {
            device.size_bytes = Some(full_len);
        }
        if let Some(block) = can.block_addressed {
            device.logical_sector = Some(block);
        }
        if can.device && can.local_storage {
            if let Some(disk) = device.disk_name.as_deref().filter(|d| ram_disk(d)) {
                if !args.allowed.memory {
                    return Err(BenchError::msg(format!(
                        "refusing to measure {}: it is a RAM disk ({disk}), so the figures \
                         would be the memory's, not a disk's; --allow-memory overrides",
                        quote_file(given.as_os_str().as_bytes())
                    )));
                }
            }
        }
        big_enough(&shown, full_len)?;
        let read_only = match (can.read_only, args.allowed.destructive) {
            (Some(why), _) => Some(why.to_owned()),
            (None, false) => Some(format!(
                "{} is only written with --destructive",
                if name == "file" {
                    "an existing file"
                } else {
                    described
                }
            )),
            (None, true) => None,
        };
        let claim = match (&read_only, can.device) {
            (None, true) => claim(given, behind.as_deref().unwrap_or(given))?,
            _ => None,
        };
        let align = direct_align(&can, &device);
        let backing = match can.local_storage {
            true => backing_of(given, &device, can.device),
            false => Backing::Own,
        };
        Ok(Target {
            given: given.to_owned(),
            path: given.to_owned(),
            name,
            can,
            len: align_down(args.size.min(full_len), align),
            full_len,
            read_only,
            created: false,
            device,
            backing,
            interface,
            _claim: claim,
            _temp: None,
        })
    }

    /// ddx's own file in the directory `given`, created empty at `path`.
    fn create(given: &Path, path: PathBuf, size: u64) -> Result<Target, BenchError> {
        let (temp, fd) = TempFile::create(&path)?;
        let device = device_info(fd.as_fd());
        let can = crate::ends::file::FileEnd::new(file::Handle::Owned(fd)).capabilities();
        let len = align_down(size, direct_align(&can, &device));
        let backing = backing_of(given, &device, false);
        Ok(Target {
            given: given.to_owned(),
            path,
            name: "directory",
            can,
            len,
            full_len: len,
            read_only: None,
            created: true,
            device,
            backing,
            interface: None,
            _claim: None,
            _temp: Some(temp),
        })
    }

    /// The target opened as the copy opens an operand, for one scenario:
    /// for `op`, with GNU's `flags` (O_DIRECT, O_DSYNC, O_SYNC; a
    /// generic node takes O_DSYNC and O_SYNC as force unit access and
    /// ignores O_DIRECT, an export ignores them all), a generic node with
    /// up to `depth` commands in flight, an export over one connection.
    /// Writing is refused unless allowed. Ok(None): the filesystem
    /// refuses O_DIRECT.
    pub fn end(
        &self,
        op: Op,
        flags: IoFlags,
        depth: usize,
    ) -> Result<Option<Box<dyn End>>, BenchError> {
        self.end_with(op, flags, depth, true)
    }

    /// [`Target::end`], with the end's requests in the caller's buffers
    /// where the copy's end would move them through buffers of its own
    /// (an sg node's reserve buffers, mapped: `Requests::owns_buffers`):
    /// the driver copies each buffer instead, as fio's `sg` engine has
    /// it do. Elsewhere the same end as [`Target::end`].
    pub fn end_copied(
        &self,
        op: Op,
        flags: IoFlags,
        depth: usize,
    ) -> Result<Option<Box<dyn End>>, BenchError> {
        self.end_with(op, flags, depth, false)
    }

    fn end_with(
        &self,
        op: Op,
        flags: IoFlags,
        depth: usize,
        mapped: bool,
    ) -> Result<Option<Box<dyn End>>, BenchError> {
        if op == Op::Write {
            if let Some(why) = &self.read_only {
                return Err(BenchError::msg(format!("not writing: {why}")));
            }
        }
        open_end(&self.path, op, flags, depth, mapped)
    }

    pub fn writable(&self) -> bool {
        self.read_only.is_none()
    }

    /// The smallest request and the unit of the working set (see
    /// [`direct_align`]).
    pub fn direct_align(&self) -> u64 {
        direct_align(&self.can, &self.device)
    }
}

/// What the bench measures: storage read and written in place at any
/// offset, on this machine, on a server or a device's own blocks (not
/// an object, which is written whole, nor a file held in memory).
fn measurable(can: &Capabilities) -> bool {
    can.reads_at && can.writes_at && (can.storage() || can.device)
}

/// What the report calls a target whose end is `described` ("a block
/// device"), a generic node by its command set.
fn name_of(described: &'static str, interface: Option<Interface>) -> &'static str {
    match interface {
        Some(Interface::ScsiGeneric) => "SCSI generic node",
        Some(Interface::Bsg) => "SCSI generic node (bsg)",
        Some(Interface::NvmeGeneric) => "NVMe generic node",
        None => {
            let noun = described
                .split_once(' ')
                .map_or(described, |(_, noun)| noun);
            noun.strip_prefix("regular ").unwrap_or(noun)
        }
    }
}

/// `path` opened through the copy's opening (see [`Target::end`]).
fn open_end(
    path: &Path,
    op: Op,
    flags: IoFlags,
    depth: usize,
    mapped: bool,
) -> Result<Option<Box<dyn End>>, BenchError> {
    let mut plan = crate::operands::parse::<&str>(&[])
        .plan
        .expect("no operands are GNU's defaults");
    let options = Options {
        node: generic_node::Options {
            depth: depth.max(1),
            fua: false,
            mapped,
        },
        connections: Some(1),
    };
    let opened = match op {
        Op::Read => {
            plan.input = Some(path.to_owned());
            plan.input_flags = flags;
            open_input(&plan, options).map(|opened| opened.stream)
        }
        Op::Write => {
            // The target is there, and is never created or truncated.
            plan.output = Some(path.to_owned());
            plan.output_flags = flags;
            plan.conv = Conv::NOTRUNC | Conv::NOCREAT;
            open_output(&plan, options, &mut Vec::new()).map(|opened| opened.stream)
        }
    };
    match opened {
        Ok(end) => Ok(Some(end)),
        Err(e) if e.errno() == crate::sys::Errno::INVAL && flags.contains(IoFlags::DIRECT) => {
            Ok(None)
        }
        Err(e) => Err(BenchError::msg(e.diagnostic.to_string())),
    }
}

/// Hold `device` (the target, or the disk behind a generic node) with
/// O_EXCL while the bench may write it; refused while it is in use. None
/// where it cannot be opened at all (no such node in /dev): the guard
/// has judged it already.
fn claim(target: &Path, device: &Path) -> Result<Option<OwnedFd>, BenchError> {
    match file::open_with(device, OFlags::RDONLY | OFlags::EXCL, 0) {
        Ok(fd) => Ok(Some(fd)),
        Err(errno) if errno == crate::sys::Errno::BUSY => {
            let whose = if device == target {
                "it".to_owned()
            } else {
                format!("its disk {}", device.display())
            };
            Err(BenchError::msg(format!(
                "refusing to write {}: {whose} is in use (mounted, or held by another \
                 program)",
                target.display(),
            )))
        }
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
impl Target {
    /// A file target that is never opened, for unit tests of what the
    /// runner and the reports make of samples (the passes and the cache
    /// drops are a fake device's).
    pub fn unopened(len: u64) -> Target {
        Target {
            given: PathBuf::from("unopened"),
            path: PathBuf::from("unopened"),
            name: "file",
            can: crate::ends::Kind::RegularFile.capabilities(),
            len,
            full_len: len,
            read_only: None,
            created: false,
            device: DeviceInfo::default(),
            backing: Backing::Own,
            interface: None,
            _claim: None,
            _temp: None,
        }
    }
}

/// The smallest request worth measuring on an end reached through
/// neither a descriptor nor a disk's commands (an export): whole 4 KiB
/// blocks, what servers take without read-modify-write (512-byte requests
/// would measure the round trip eight times over).
const SERVED_BLOCK: u64 = 4096;

/// A target of `len` bytes holds the smallest run the bench measures.
fn big_enough(name: impl std::fmt::Display, len: u64) -> Result<(), BenchError> {
    if len < MIN_SIZE {
        return Err(BenchError::msg(format!(
            "{name}: too small to measure ({len} bytes; at least 1 MiB)"
        )));
    }
    Ok(())
}

/// The smallest request and the unit of the working set: a disk
/// addressed by block, its block (the unit of its commands); a
/// descriptor's storage, O_DIRECT's alignment (statx's DIO offset
/// alignment where known, else the logical sector, at least 512); an end
/// on a server, [`SERVED_BLOCK`].
fn direct_align(can: &Capabilities, device: &DeviceInfo) -> u64 {
    if let Some(block) = can.block_addressed {
        return u64::from(block);
    }
    if !can.local_storage {
        return SERVED_BLOCK;
    }
    let sector = device.logical_sector.unwrap_or(512) as u64;
    match device.dio_offset_align {
        Some(a) if a > 0 => (a as u64).max(512),
        _ => sector.max(512),
    }
}

/// `value` rounded down to a multiple of `unit`: a working set O_DIRECT
/// can read whole.
fn align_down(value: u64, unit: u64) -> u64 {
    value - value % unit.max(1)
}

fn open_path(path: &Path) -> Result<OwnedFd, BenchError> {
    file::open_with(path, OFlags::RDONLY, 0)
        .map_err(|e| BenchError::sys(format!("opening {}", path.display()), e))
}

/// What answers the requests to the descriptor's storage at `path` (a
/// file, or a directory that holds the bench's file; a block device
/// where `is_device`) whose disk is `device`'s: the backing file of a
/// loop device (the target, or the disk under its filesystem), memory
/// (tmpfs, ramfs, a RAM disk), or the target's own storage.
fn backing_of(path: &Path, device: &DeviceInfo, is_device: bool) -> Backing {
    if let Some(backing) = device.disk.and_then(crate::sys::device::loop_backing) {
        let (filesystem, in_memory) = match open_path(Path::new(&backing.file)) {
            Ok(fd) => (
                device_info(fd.as_fd()).filesystem,
                storage_of(fd.as_fd()) == Storage::Memory,
            ),
            Err(_) => (None, false),
        };
        return Backing::loop_file(backing, is_device, filesystem, in_memory);
    }
    if is_device {
        return match device.disk_name.as_deref().filter(|d| ram_disk(d)) {
            Some(disk) => Backing::Memory {
                what: format!("the RAM disk {disk}"),
            },
            None => Backing::Own,
        };
    }
    match open_path(path) {
        Ok(fd) if storage_of(fd.as_fd()) == Storage::Memory => Backing::Memory {
            what: device
                .filesystem
                .clone()
                .unwrap_or_else(|| "a memory filesystem".to_owned()),
        },
        _ => Backing::Own,
    }
}

/// Refuse a target whose data would live in memory (`place`: the file,
/// or the directory it is or will be made in), unless `allowed`. What
/// cannot be opened is left to fail where it is used, with its own error.
fn not_in_memory(given: &Path, place: &Path, allowed: bool) -> Result<(), BenchError> {
    let Ok(fd) = open_path(place) else {
        return Ok(());
    };
    if allowed || storage_of(fd.as_fd()) != Storage::Memory {
        return Ok(());
    }
    let filesystem = device_info(fd.as_fd())
        .filesystem
        .unwrap_or_else(|| "a memory filesystem".to_owned());
    Err(BenchError::msg(format!(
        "refusing to measure {}: it is on {filesystem}, which keeps files in memory, so \
         the figures would be the memory's, not a disk's; --allow-memory overrides",
        quote_file(given.as_os_str().as_bytes())
    )))
}

/// A block device that is memory: zram, or a brd RAM disk ("ram0").
fn ram_disk(name: &str) -> bool {
    let numbered = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    numbered("zram") || numbered("ram")
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_disks_are_told_by_name() {
        for name in ["zram0", "ram0", "ram15"] {
            assert!(ram_disk(name), "{name}");
        }
        for name in ["sda", "ramdisk", "zram", "nvme0n1", "loop0", "dm-0"] {
            assert!(!ram_disk(name), "{name}");
        }
    }

    #[test]
    fn working_sets_are_whole_sectors() {
        assert_eq!(align_down(1_000_001, 4096), 999_424);
        assert_eq!(align_down(1 << 20, 512), 1 << 20);
    }
}
