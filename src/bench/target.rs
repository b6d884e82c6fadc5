//! What is being measured and what may be done to it.
//!
//! A TARGET is a file, a directory, a block device or an NBD export (see
//! `nbd_target`: only read unless `--destructive`), which exists: a name
//! with nothing there is refused (most often a directory mistyped, or not
//! made yet). In a directory ddx creates its own file, and removes
//! it when the bench ends, also on SIGINT or SIGTERM: the path is kept in a
//! process-wide slot that the signal watcher empties before dying. Writes go
//! only through [`Target::open_write`], which refuses unless writing was
//! allowed: a block device or an existing file is only read without
//! `--destructive`; the device is also opened with O_EXCL, which the
//! kernel refuses while it is mounted.
//!
//! Before anything is created, the bench refuses what the copy refuses,
//! by asking the copy's wrong-device guard in its words
//! (`guard::check_output`): a path that does not exist in /dev (a mistyped
//! device name would become a file in memory), and with `--destructive` a
//! device or file in use (mounted, swap, held); `--force` overrides, as it
//! does for the copy. A target with no disk under it (tmpfs, ramfs,
//! devtmpfs, a RAM disk) would measure memory, not what the user meant to
//! measure: refused unless `--allow-memory`.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::OFlags;

use super::args::{BenchArgs, MIN_SIZE};
use super::nbd_target::{Connection, NbdTarget};
use super::BenchError;
use crate::ends::nbd::NbdUri;
use crate::ends::uri::UriEnd;
use crate::ends::{self, Capabilities};
use crate::guard;
use crate::sys::device::{device_info, DeviceInfo};
use crate::sys::file;
use crate::sys::filesystem::{storage_of, Storage};
use crate::text::quote::quote_file;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    File,
    Directory,
    BlockDevice,
    /// An NBD export, measured through the copy's NBD end.
    NbdExport,
}

impl Given {
    /// The end the target is measured as, whose capabilities the bench
    /// asks (a directory holds the file ddx makes).
    fn end(self) -> ends::Kind {
        match self {
            Given::File | Given::Directory => ends::Kind::RegularFile,
            Given::BlockDevice => ends::Kind::BlockDevice,
            Given::NbdExport => ends::Kind::NbdExport,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Given::File => "file",
            Given::Directory => "directory",
            Given::BlockDevice => "block device",
            Given::NbdExport => "NBD export",
        }
    }
}

#[derive(Debug)]
pub struct Target {
    /// The TARGET as given.
    pub given: PathBuf,
    /// The file or device the tests open.
    pub path: PathBuf,
    pub kind: Given,
    /// What the target can do, as the end it is measured as.
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
    /// The export, when the TARGET is one: the scenarios connect to it
    /// instead of opening `path`.
    pub nbd: Option<NbdTarget>,
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
            Some(Ok(UriEnd::Nbd(uri))) => return Self::nbd(args, &uri),
            Some(Ok(other)) => {
                return Err(BenchError::msg(format!(
                    "{}: {} is not something ddx bench measures (a file, a directory, a \
                     block device or an NBD export)",
                    String::from_utf8_lossy(&crate::ends::uri::shown(given)),
                    other.kind().described()
                )))
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
                Self::create(given, given.join(name), Given::Directory, args.size)
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
                     its own file there) or block device, or an NBD export",
                    quote_file(given.as_os_str().as_bytes())
                )))
            }
            Some(m) if m.is_file() => {
                big_enough(given.display(), m.len())?;
                not_in_memory(given, given, args.allowed.memory)?;
                guard(args.allowed.destructive)?;
                let device = device_info(open_path(given)?.as_fd());
                Ok(Self::existing(args, Given::File, m.len(), device))
            }
            Some(m) if m.file_type().is_block_device() => {
                let fd = open_path(given)?;
                let device = device_info(fd.as_fd());
                if let Some(disk) = device.disk_name.as_deref().filter(|d| ram_disk(d)) {
                    if !args.allowed.memory {
                        return Err(BenchError::msg(format!(
                            "refusing to measure {}: it is a RAM disk ({disk}), so the figures \
                             would be the memory's, not a disk's; --allow-memory overrides",
                            quote_file(given.as_os_str().as_bytes())
                        )));
                    }
                }
                let full_len = device.size_bytes.unwrap_or(0);
                big_enough(given.display(), full_len)?;
                guard(args.allowed.destructive)?;
                Ok(Self::existing(args, Given::BlockDevice, full_len, device))
            }
            Some(_) => Err(BenchError::msg(format!(
                "{}: not a file, directory or block device",
                given.display()
            ))),
        }
    }

    /// A file or block device that was there already: written only with
    /// --destructive.
    fn existing(args: &BenchArgs, kind: Given, full_len: u64, device: DeviceInfo) -> Target {
        let can = kind.end().capabilities();
        let what = if can.device {
            "a block device"
        } else {
            "an existing file"
        };
        Target {
            given: args.target.clone(),
            path: args.target.clone(),
            kind,
            can,
            len: align_down(args.size.min(full_len), direct_align(&device)),
            full_len,
            read_only: (!args.allowed.destructive)
                .then(|| format!("{what} is only written with --destructive")),
            created: false,
            device,
            nbd: None,
            _temp: None,
        }
    }

    fn create(given: &Path, path: PathBuf, kind: Given, size: u64) -> Result<Target, BenchError> {
        let (temp, fd) = TempFile::create(&path)?;
        let device = device_info(fd.as_fd());
        let len = align_down(size, direct_align(&device));
        Ok(Target {
            given: given.to_owned(),
            path,
            kind,
            can: kind.end().capabilities(),
            len,
            full_len: len,
            read_only: None,
            created: true,
            device,
            nbd: None,
            _temp: Some(temp),
        })
    }

    /// An NBD export: only read unless --destructive (it is a block
    /// device on another machine), never written where the server
    /// exports it read-only. The wrong-device guard and the memory check
    /// are the local machine's and do not apply.
    fn nbd(args: &BenchArgs, uri: &NbdUri) -> Result<Target, BenchError> {
        let nbd = NbdTarget::probe(uri)?;
        big_enough(&uri.text, nbd.size)?;
        let read_only = if nbd.read_only {
            Some("the server exports it read-only".to_owned())
        } else if !args.allowed.destructive {
            Some("an NBD export is only written with --destructive".to_owned())
        } else {
            None
        };
        let len = align_down(args.size.min(nbd.size), EXPORT_BLOCK);
        Ok(Target {
            given: PathBuf::from(&uri.text),
            path: PathBuf::from(&uri.text),
            kind: Given::NbdExport,
            can: Given::NbdExport.end().capabilities(),
            len,
            full_len: nbd.size,
            read_only,
            created: false,
            device: DeviceInfo::default(),
            nbd: Some(nbd),
            _temp: None,
        })
    }

    /// A connection of its own to the export, for reading or (refused
    /// unless writing is allowed) writing. None: the target is no export.
    pub fn connect(&self, writing: bool) -> Result<Option<Connection>, BenchError> {
        let Some(nbd) = &self.nbd else {
            return Ok(None);
        };
        if writing {
            if let Some(why) = &self.read_only {
                return Err(BenchError::msg(format!("not writing: {why}")));
            }
        }
        nbd.connect(writing).map(Some)
    }

    /// Open for reading, with extra flags (O_DIRECT).
    pub fn open_read(&self, extra: OFlags) -> Result<OwnedFd, BenchError> {
        file::open_with(&self.path, OFlags::RDONLY | extra, 0)
            .map_err(|e| BenchError::sys(format!("opening {}", self.path.display()), e))
    }

    /// Open for writing, with extra flags (O_DIRECT, O_DSYNC, O_SYNC); the
    /// one way the bench writes, refused when writing is not allowed. A
    /// block device is claimed with O_EXCL, which fails while it is mounted.
    pub fn open_write(&self, extra: OFlags) -> Result<OwnedFd, BenchError> {
        if let Some(why) = &self.read_only {
            return Err(BenchError::msg(format!("not writing: {why}")));
        }
        let exclusive = if self.can.device {
            OFlags::EXCL
        } else {
            OFlags::empty()
        };
        file::open_with(&self.path, OFlags::WRONLY | exclusive | extra, 0)
            .map_err(|e| BenchError::sys(format!("opening {} for writing", self.path.display()), e))
    }

    pub fn writable(&self) -> bool {
        self.read_only.is_none()
    }

    /// The smallest O_DIRECT request and alignment: statx's DIO offset
    /// alignment where known, else the logical sector, else 512.
    /// On an export, which has no O_DIRECT, 4 KiB: the smallest request
    /// worth measuring there (servers work in pages; 512-byte requests
    /// would measure the round trip eight times over).
    pub fn direct_align(&self) -> u64 {
        if self.nbd.is_some() {
            return EXPORT_BLOCK;
        }
        direct_align(&self.device)
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
            kind: Given::File,
            can: Given::File.end().capabilities(),
            len,
            full_len: len,
            read_only: None,
            created: false,
            device: DeviceInfo::default(),
            nbd: None,
            _temp: None,
        }
    }
}

/// An export's smallest request and the unit of its working set: whole
/// 4 KiB blocks, what servers take without read-modify-write.
const EXPORT_BLOCK: u64 = 4096;

/// A target of `len` bytes holds the smallest run the bench measures.
fn big_enough(name: impl std::fmt::Display, len: u64) -> Result<(), BenchError> {
    if len < MIN_SIZE {
        return Err(BenchError::msg(format!(
            "{name}: too small to measure ({len} bytes; at least 1 MiB)"
        )));
    }
    Ok(())
}

fn direct_align(device: &DeviceInfo) -> u64 {
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
