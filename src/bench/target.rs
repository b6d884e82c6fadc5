//! What is being measured and what may be done to it.
//!
//! A TARGET is a file, a directory or a block device. In a directory (or
//! at a path that does not exist yet) ddx creates its own file, and removes
//! it when the bench ends, also on SIGINT or SIGTERM: the path is kept in a
//! process-wide slot that the signal watcher empties before dying. Writes go
//! only through [`Target::open_write`], which refuses unless writing was
//! allowed: a block device or an existing file is only read without
//! `--destructive`, and with it a device the copy's wrong-device guard
//! would refuse (mounted, swap, held) is refused; the device is also opened
//! with O_EXCL, which the kernel refuses while it is mounted.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::OFlags;

use super::BenchError;
use crate::guard;
use crate::sys::device::{device_info, DeviceInfo};
use crate::sys::file;

/// The smallest working set worth measuring.
pub const MIN_SIZE: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    BlockDevice,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::BlockDevice => "block device",
        }
    }
}

#[derive(Debug)]
pub struct Target {
    /// The TARGET as given.
    pub given: PathBuf,
    /// The file or device the tests open.
    pub path: PathBuf,
    pub kind: Kind,
    /// Bytes the tests work in, from offset 0.
    pub len: u64,
    /// The whole file or device, which the zones test spans.
    pub full_len: u64,
    /// Why write tests are skipped, when they are.
    pub read_only: Option<String>,
    /// ddx made the file and must fill it before reading.
    pub created: bool,
    pub device: DeviceInfo,
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
    /// Work out what `given` is, create ddx's file if needed (empty: the
    /// caller fills it), and check that writing is allowed where asked.
    pub fn open(given: &Path, size: u64, destructive: bool) -> Result<Target, BenchError> {
        let meta = match std::fs::metadata(given) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(BenchError::io(format!("{}", given.display()), e)),
        };
        use std::os::unix::fs::FileTypeExt;
        match meta {
            Some(m) if m.is_dir() => {
                let name = format!(".ddx-bench-{}-{}", std::process::id(), nanos());
                Self::create(given, given.join(name), Kind::Directory, size)
            }
            None => Self::create(given, given.to_owned(), Kind::File, size),
            Some(m) if m.is_file() => {
                let existing = m.len();
                if existing < MIN_SIZE {
                    return Err(BenchError::msg(format!(
                        "{}: too small to measure ({existing} bytes; at least 1 MiB)",
                        given.display()
                    )));
                }
                let fd = file::open_with(given, OFlags::RDONLY, 0)
                    .map_err(|e| BenchError::sys(format!("opening {}", given.display()), e))?;
                Ok(Target {
                    given: given.to_owned(),
                    path: given.to_owned(),
                    kind: Kind::File,
                    len: size.min(existing),
                    full_len: existing,
                    read_only: (!destructive)
                        .then(|| "an existing file is only read without --destructive".to_owned()),
                    created: false,
                    device: device_info(fd.as_fd()),
                    _temp: None,
                })
            }
            Some(m) if m.file_type().is_block_device() => {
                let fd = file::open_with(given, OFlags::RDONLY, 0)
                    .map_err(|e| BenchError::sys(format!("opening {}", given.display()), e))?;
                let device = device_info(fd.as_fd());
                let full_len = device.size_bytes.unwrap_or(0);
                if full_len < MIN_SIZE {
                    return Err(BenchError::msg(format!(
                        "{}: too small to measure ({full_len} bytes)",
                        given.display()
                    )));
                }
                // The copy's wrong-device guard decides, so a device a copy
                // would refuse to overwrite is refused here too.
                if let Some(why) = destructive.then(|| guard::in_use_at(given)).flatten() {
                    return Err(BenchError::msg(format!(
                        "refusing to write to {}: {why}",
                        given.display()
                    )));
                }
                Ok(Target {
                    given: given.to_owned(),
                    path: given.to_owned(),
                    kind: Kind::BlockDevice,
                    len: size.min(full_len),
                    full_len,
                    read_only: (!destructive)
                        .then(|| "a block device is only read without --destructive".to_owned()),
                    created: false,
                    device,
                    _temp: None,
                })
            }
            Some(_) => Err(BenchError::msg(format!(
                "{}: not a file, directory or block device",
                given.display()
            ))),
        }
    }

    fn create(given: &Path, path: PathBuf, kind: Kind, size: u64) -> Result<Target, BenchError> {
        let (temp, fd) = TempFile::create(&path)?;
        let device = device_info(fd.as_fd());
        Ok(Target {
            given: given.to_owned(),
            path,
            kind,
            len: size,
            full_len: size,
            read_only: None,
            created: true,
            device,
            _temp: Some(temp),
        })
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
        let exclusive = if self.kind == Kind::BlockDevice {
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
    pub fn direct_align(&self) -> u64 {
        let sector = self.device.logical_sector.unwrap_or(512) as u64;
        match self.device.dio_offset_align {
            Some(a) if a > 0 => (a as u64).max(512),
            _ => sector.max(512),
        }
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
