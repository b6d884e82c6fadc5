//! Test rigs for devices, built from user-space tools over temp files so
//! that no real disk is ever touched: loop devices (every test that needs
//! a block device attaches it here), a source with unreadable
//! byte ranges (nbdkit's ddrescue filter over a file, exposed as a file by
//! nbdfuse), a slow source (nbdkit's delay filter), a small tmpfs for
//! ENOSPC, a qemu-storage-daemon FUSE export whose writes fail at a
//! chosen offset, an ext4 filesystem on a disk with slow writes, and a
//! memory cgroup with a limit (`cgroup`). Each rig tears itself down in
//! Drop, whatever the test did; a rig whose tools or privileges are
//! missing is an `Err` saying why, which the test hands to `or_skip` (see
//! `skips`: the one way a test skips, visible, and a failure where CI
//! requires every rig).
//!
//! The submodules hold the rest the tests share: how ddx and GNU dd are
//! started (`cmd`), running them side by side and asserting that they
//! agree (`fixture`), test data (`bytes`), the page cache as fincore sees
//! it (`pages`), object servers (`cluster`: a SeaweedFS cluster, the S3
//! store of the object tests; `object`: s3s-fs, rclone's and python's
//! HTTP servers, a TLS front), proxies that break (`fault`) or delay
//! (`delay`) a server's traffic, disk images made by the real tools
//! (`images`: mkfs.ext4, bmaptool), signalling a running ddx (`signal`),
//! headless Chromium for the pages ddx writes (`browser`) and skipping
//! (`skips`).

pub mod browser;
pub mod bytes;
pub mod cgroup;
#[cfg(feature = "object")]
pub mod cluster;
pub mod cmd;
pub mod delay;
#[cfg(feature = "object")]
pub mod fault;
pub mod fixture;
pub mod guest;
pub mod images;
pub mod nbd;
#[cfg(feature = "object")]
pub mod object;
pub mod pages;
pub mod signal;
mod skips;

pub use cgroup::MemoryCgroup;
pub use skips::{or_skip, skip, skip_if_no_device_mapper};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How to attach a loop device.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopOptions {
    /// Bytes per logical sector (None: losetup's default, 512).
    pub sector_size: Option<u32>,
    /// Read the backing file's partition table, making LOOPp1, LOOPp2...
    pub partscan: bool,
    /// Attach read-only (`losetup --read-only`).
    pub read_only: bool,
}

/// A loop device over a file, detached when dropped (also on panic). The
/// only place the tests attach and detach loop devices.
pub struct LoopDevice {
    pub path: PathBuf,
}

impl LoopDevice {
    /// Why loop devices cannot be attached here, if they cannot.
    pub fn unavailable() -> Option<String> {
        if !is_root() {
            return Some("loop devices need root".into());
        }
        if !have("losetup") {
            return Some("losetup is not installed".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Some("no /dev/loop-control".into());
        }
        None
    }

    /// Attach `backing`. Err says why not (no root, no losetup, losetup's
    /// own complaint).
    pub fn attach(backing: &Path, options: LoopOptions) -> Result<LoopDevice, String> {
        if let Some(why) = Self::unavailable() {
            return Err(why);
        }
        let mut losetup = Command::new("losetup");
        losetup.args(["--find", "--show"]);
        if let Some(size) = options.sector_size {
            losetup.arg("--sector-size").arg(size.to_string());
        }
        if options.partscan {
            losetup.arg("--partscan");
        }
        if options.read_only {
            losetup.arg("--read-only");
        }
        let out = run_tool(losetup.arg(backing), "losetup")?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(LoopDevice { path: path.into() })
    }

    /// The device as text, for operands ("of=/dev/loop3").
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// The node of partition `number` (attached with `partscan`), once udev
    /// or devtmpfs has made it; None if it does not appear within a second.
    /// A kernel built without partition-table parsers (a minimal VM's)
    /// scans and finds nothing: then `partx --add` reads the table itself
    /// and hands the partitions to the kernel (BLKPG), which works there.
    pub fn partition(&self, number: u32) -> Option<PathBuf> {
        let node = PathBuf::from(format!("{}p{number}", self.name()));
        let appears = || {
            wait_up_to(
                Duration::from_secs(1),
                || node.exists(),
                "the partition node",
            )
        };
        if appears().is_err() {
            let _ = Command::new("partx")
                .args(["--add", "--nr", &number.to_string()])
                .arg(&self.path)
                .stdin(Stdio::null())
                .output();
            appears().ok()?;
        }
        Some(node)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup")
            .arg("-d")
            .arg(&self.path)
            .stdin(Stdio::null())
            .output();
    }
}

/// A filesystem of one kind ("ext4", "xfs"...) made with `mkfs.KIND` on a
/// loop device over a file in a temporary directory, and mounted: a known
/// filesystem for tests whose result depends on it, whatever the temporary
/// directory's own. Unmounted, then detached, when dropped.
pub struct MountedFs {
    pub root: PathBuf,
    device: LoopDevice,
    // A slow device under the loop device, stopped once it is detached.
    _slow: Option<NbdDevice>,
    // Removed last, after the device over its image is detached.
    _dir: tempfile::TempDir,
}

impl MountedFs {
    /// Err says why not (no root, no mkfs for the kind, mount refused).
    pub fn new(kind: &str, size: u64) -> Result<MountedFs, String> {
        if let Some(why) = LoopDevice::unavailable() {
            return Err(why);
        }
        let mkfs = format!("mkfs.{kind}");
        if !have(&mkfs) {
            return Err(format!("{mkfs} is not installed"));
        }
        let dir = tempfile::Builder::new()
            .prefix("ddx-fs-")
            .tempdir_in(std::env::var_os("DDX_TEST_DIR").unwrap_or_else(|| "/var/tmp".into()))
            .map_err(|e| e.to_string())?;
        let backing = dir.path().join("image");
        std::fs::File::create(&backing)
            .and_then(|f| f.set_len(size))
            .map_err(|e| e.to_string())?;
        let device = LoopDevice::attach(&backing, LoopOptions::default())?;
        run_tool(Command::new(&mkfs).arg("-q").arg(&device.path), &mkfs)?;
        Self::mount(device, None, dir, &[])
    }

    /// A filesystem (`ext4` or `btrfs`) of `size` bytes on a disk whose
    /// every write takes `write_delay_ms`, one at a time (nbdkit's delay
    /// filter under nbdfuse under a loop device): writeback to it takes
    /// long enough to be measured.
    pub fn slow(kind: &str, size: u64, write_delay_ms: u32) -> Result<MountedFs, String> {
        if let Some(why) = LoopDevice::unavailable() {
            return Err(why);
        }
        let mkfs = format!("mkfs.{kind}");
        if !have(&mkfs) {
            return Err(format!("{mkfs} is not installed"));
        }
        // Everything written now, so that nothing is left for the slow disk
        // to do in the background (ext4's inode tables and journal).
        let (make_options, mount_options): (&[&str], &[&str]) = match kind {
            "ext4" => (
                &[
                    "-q",
                    "-F",
                    "-E",
                    "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
                ],
                &["-o", "noinit_itable"],
            ),
            "btrfs" => (&["-q", "-f", "--nodiscard"], &[]),
            _ => return Err(format!("no slow {kind} rig")),
        };
        let make_image = |image: &Path| {
            std::fs::File::create(image)
                .and_then(|f| f.set_len(size))
                .map_err(|e| e.to_string())?;
            run_tool(Command::new(&mkfs).args(make_options).arg(image), &mkfs).map(drop)
        };
        let slow = NbdDevice::slow_writes(make_image, write_delay_ms)?;
        let device = LoopDevice::attach(&slow.path, LoopOptions::default())?;
        let dir = rig_dir("ddx-slowfs-")?;
        Self::mount(device, Some(slow), dir, mount_options)
    }

    /// Mount `device` on a directory in `dir`.
    fn mount(
        device: LoopDevice,
        slow: Option<NbdDevice>,
        dir: tempfile::TempDir,
        options: &[&str],
    ) -> Result<MountedFs, String> {
        let root = dir.path().join("mnt");
        std::fs::create_dir(&root).map_err(|e| e.to_string())?;
        run_tool(
            Command::new("mount")
                .args(options)
                .arg(&device.path)
                .arg(&root),
            &format!("mounting {}", device.name()),
        )?;
        Ok(MountedFs {
            root,
            device,
            _slow: slow,
            _dir: dir,
        })
    }

    /// The loop device under the filesystem.
    pub fn device(&self) -> &LoopDevice {
        &self.device
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(&self.root)
            .stdin(Stdio::null())
            .output();
    }
}

/// Runs a set-up tool to the end, with no stdin to wait on. Err says
/// which step (`what`) failed, in the tool's own words.
pub fn run_tool(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// Starts a server or rig process in the background: no stdin, no
/// stdout, its stderr to `stderr` (a log file, a pipe, or nothing). Err
/// names `what`.
pub fn spawn_server(
    cmd: &mut Command,
    stderr: impl Into<Stdio>,
    what: &str,
) -> Result<std::process::Child, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("{what}: {e}"))
}

/// Runs a tool the test cannot go on without; panics with its stderr if
/// it fails. Its stdout.
pub fn must_run(cmd: &mut Command) -> Vec<u8> {
    let what = format!("{cmd:?}");
    run_tool(cmd, &what)
        .unwrap_or_else(|why| panic!("{why}"))
        .stdout
}

/// Whether every one of `tools` is on PATH; if not, skips naming the
/// first one missing (the caller returns).
pub fn tools_or_skip(tools: &[&str]) -> bool {
    match tools.iter().find(|tool| !have(tool)) {
        Some(missing) => {
            skip(&format!("{missing} is not installed"));
            false
        }
        None => true,
    }
}

/// Whether `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn wait_for(ready: impl FnMut() -> bool, what: &str) -> Result<(), String> {
    wait_up_to(Duration::from_secs(10), ready, what)
}

pub fn wait_up_to(
    limit: Duration,
    mut ready: impl FnMut() -> bool,
    what: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{what} did not come up"))
}

/// A temporary directory for a rig's files, named after the rig.
fn rig_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| e.to_string())
}

/// Wait until a FUSE export of `size` bytes is mounted on `path`: before,
/// the file there is the empty one it is mounted over.
fn wait_for_export(path: &Path, size: u64, what: &str) -> Result<(), String> {
    wait_for(
        || is_mountpoint(path) && std::fs::metadata(path).is_ok_and(|m| m.len() == size),
        what,
    )
}

/// `fusermount3 FLAGS path`, quietly: a rig's teardown reports nothing.
fn fuse_unmount(flags: &str, path: &Path) {
    let _ = Command::new("fusermount3")
        .arg(flags)
        .arg(path)
        .stderr(Stdio::null())
        .status();
}

fn is_mountpoint(path: &Path) -> bool {
    Command::new("findmnt")
        .args(["-rn", "--mountpoint"])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn stop_pid(pid: Option<i32>) {
    let Some(pid) = pid else { return };
    // SAFETY: kill(2) on a pid our rig started; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A GNU ddrescue mapfile for a `size`-byte device whose `bad` ranges
/// (offset, length) fail to read; everything else is finished ('+').
pub fn mapfile(size: u64, bad: &[(u64, u64)]) -> String {
    let mut text =
        String::from("# Mapfile. Created by hand\n# current_pos  current_status  current_pass\n");
    text.push_str("0x00000000     +               1\n#      pos        size  status\n");
    let mut at = 0;
    for &(offset, len) in bad {
        if offset > at {
            text.push_str(&format!("0x{at:08X}  0x{:08X}  +\n", offset - at));
        }
        text.push_str(&format!("0x{offset:08X}  0x{len:08X}  -\n"));
        at = offset + len;
    }
    if at < size {
        text.push_str(&format!("0x{at:08X}  0x{:08X}  +\n", size - at));
    }
    text
}

/// How the reads of an [`NbdDevice::weak`] fail.
#[derive(Debug, Clone, Default)]
pub struct Weakness {
    /// (first 512-byte sector, sectors, failures): every read touching
    /// one of these sectors fails until that sector has been read
    /// `failures` times (-1: always).
    pub sectors: Vec<(u64, u64, i64)>,
    /// Besides, each read fails with this probability ...
    pub rate: f64,
    /// ... drawn from a generator seeded with this.
    pub seed: u64,
    /// Milliseconds each read takes.
    pub delay_ms: u32,
}

/// An nbdkit chain exposed as a regular file through nbdfuse.
pub struct NbdDevice {
    pub dir: tempfile::TempDir,
    /// The device, as a file (read it like a disk).
    pub path: PathBuf,
    nbdkit_pid: Option<i32>,
}

impl NbdDevice {
    /// A device over `contents` whose `bad` byte ranges fail with EIO.
    pub fn with_bad_ranges(contents: &[u8], bad: &[(u64, u64)]) -> Result<Self, String> {
        let map = mapfile(contents.len() as u64, bad);
        Self::start(contents, |dir, image| {
            let map_path = dir.join("bad.map");
            std::fs::write(&map_path, &map).map_err(|e| e.to_string())?;
            Ok(vec![
                "--filter=ddrescue".into(),
                "file".into(),
                format!("file={}", image.display()),
                format!("ddrescue-mapfile={}", map_path.display()),
            ])
        })
    }

    /// A device over `contents` whose reads fail as `weakness` says
    /// (nbdkit's python plugin running `weak_disk.py`): sectors that fail
    /// until read so many times, and reads that fail at a seeded rate.
    pub fn weak(contents: &[u8], weakness: &Weakness) -> Result<Self, String> {
        if !nbd::nbdkit_has_plugin("python") {
            return Err("nbdkit has no python plugin (package nbdkit-plugin-python)".into());
        }
        let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/rigs/weak_disk.py");
        Self::start(contents, |dir, image| {
            let faults = dir.join("faults");
            let lines: String = weakness
                .sectors
                .iter()
                .map(|(first, count, failures)| format!("{first} {count} {failures}\n"))
                .collect();
            std::fs::write(&faults, lines).map_err(|e| e.to_string())?;
            Ok(vec![
                "python".into(),
                plugin.display().to_string(),
                format!("image={}", image.display()),
                format!("faults={}", faults.display()),
                format!("rate={}", weakness.rate),
                format!("seed={}", weakness.seed),
                format!("delay={}", weakness.delay_ms as f64 / 1000.0),
            ])
        })
    }

    /// A device over `contents` where every read request takes `delay_ms`.
    pub fn slow(contents: &[u8], delay_ms: u32) -> Result<Self, String> {
        Self::start(contents, |_, image| {
            Ok(vec![
                "--filter=delay".into(),
                "file".into(),
                format!("file={}", image.display()),
                format!("delay-read={delay_ms}ms"),
            ])
        })
    }

    /// A device of `size` zero bytes whose every read takes `delay_ms`,
    /// served one request at a time (`one_at_a_time`: nbdkit's noparallel
    /// filter, as the slow-device lab's serialised kind) or all at once
    /// (as a disk with many queues).
    pub fn latency(size: u64, delay_ms: u32, one_at_a_time: bool) -> Result<Self, String> {
        Self::start_over(
            |image| {
                std::fs::File::create(image)
                    .and_then(|f| f.set_len(size))
                    .map_err(|e| e.to_string())
            },
            |_, image| {
                let mut args: Vec<String> = Vec::new();
                if one_at_a_time {
                    args.push("--filter=noparallel".into());
                }
                args.push("--filter=delay".into());
                args.push("file".into());
                args.push(format!("file={}", image.display()));
                if one_at_a_time {
                    args.push("serialize=all-requests".into());
                }
                args.push(format!("delay-read={delay_ms}ms"));
                Ok(args)
            },
        )
    }

    /// A writable device over `contents` that stores every write but
    /// silently sets the byte at `flip_at` to 0x01 whenever a write covers
    /// it: a disk that corrupts data on its way down.
    pub fn flipping_writes(contents: &[u8], flip_at: u64) -> Result<Self, String> {
        Self::start(contents, |_, image| {
            let image = image.display();
            Ok(vec![
                "eval".into(),
                format!("get_size=stat -c %s {image}"),
                format!(
                    "pread=dd if={image} skip=$4 count=$3 iflag=skip_bytes,count_bytes status=none"
                ),
                format!(
                    "pwrite=dd of={image} seek=$4 oflag=seek_bytes conv=notrunc iflag=fullblock \
                     status=none; if [ $4 -le {flip_at} ] && [ $(($4 + $3)) -gt {flip_at} ]; \
                     then printf '\\001' | dd of={image} bs=1 seek={flip_at} conv=notrunc \
                     status=none; fi"
                ),
                "can_write=exit 0".into(),
            ])
        })
    }

    /// A device whose writes each take `delay_ms` (one at a time), over
    /// an image that `make_image` writes to the path it is given (a
    /// filesystem made with mkfs, say).
    pub fn slow_writes(
        make_image: impl FnOnce(&Path) -> Result<(), String>,
        delay_ms: u32,
    ) -> Result<Self, String> {
        Self::start_over(make_image, |_, image| {
            Ok(vec![
                "--filter=noparallel".into(),
                "--filter=delay".into(),
                "file".into(),
                format!("file={}", image.display()),
                "serialize=all-requests".into(),
                format!("delay-write={delay_ms}ms"),
            ])
        })
    }

    fn start(
        contents: &[u8],
        args: impl FnOnce(&Path, &Path) -> Result<Vec<String>, String>,
    ) -> Result<Self, String> {
        Self::start_over(
            |image| std::fs::write(image, contents).map_err(|e| e.to_string()),
            args,
        )
    }

    /// nbdkit with `args` over an image `make_image` writes, exposed as
    /// a file by nbdfuse.
    fn start_over(
        make_image: impl FnOnce(&Path) -> Result<(), String>,
        args: impl FnOnce(&Path, &Path) -> Result<Vec<String>, String>,
    ) -> Result<Self, String> {
        for tool in ["nbdkit", "nbdfuse", "fusermount3"] {
            if !have(tool) {
                return Err(format!(
                    "{tool} is not installed (packages nbdkit, libnbd-bin, fuse3)"
                ));
            }
        }
        if !Path::new("/dev/fuse").exists() {
            return Err("/dev/fuse is missing".into());
        }
        if !is_root() {
            return Err("FUSE mounts here need root".into());
        }
        let dir = rig_dir("ddx-rig-")?;
        let image = dir.path().join("image");
        make_image(&image)?;
        let size = std::fs::metadata(&image).map_err(|e| e.to_string())?.len();
        let socket = dir.path().join("sock");
        let nbd_pid_file = dir.path().join("nbdkit.pid");
        let status = Command::new("nbdkit")
            .arg("--unix")
            .arg(&socket)
            .arg("--pidfile")
            .arg(&nbd_pid_file)
            .args(args(dir.path(), &image)?)
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("nbdkit: {e}"))?;
        let mut device = NbdDevice {
            path: dir.path().join("dev"),
            nbdkit_pid: None,
            dir,
        };
        if !status.success() {
            return Err("nbdkit failed to start (ddrescue/delay filter missing?)".into());
        }
        wait_for(|| read_pid(&nbd_pid_file).is_some(), "nbdkit")?;
        device.nbdkit_pid = read_pid(&nbd_pid_file);
        std::fs::write(&device.path, b"").map_err(|e| e.to_string())?;
        let fuse_pid_file = device.dir.path().join("fuse.pid");
        let mut nbdfuse = Command::new("setsid");
        nbdfuse
            .arg("nbdfuse")
            .arg("--pidfile")
            .arg(&fuse_pid_file)
            .arg(&device.path)
            .arg("--unix")
            .arg(&socket);
        spawn_server(&mut nbdfuse, Stdio::null(), "nbdfuse")?;
        wait_for_export(&device.path, size, "nbdfuse")?;
        Ok(device)
    }
}

impl Drop for NbdDevice {
    fn drop(&mut self) {
        let fuse_pid = read_pid(&self.dir.path().join("fuse.pid"));
        if is_mountpoint(&self.path) {
            fuse_unmount("-u", &self.path);
            if is_mountpoint(&self.path) {
                fuse_unmount("-uz", &self.path);
            }
        }
        stop_pid(fuse_pid);
        stop_pid(self.nbdkit_pid.take());
    }
}

/// A small tmpfs (for ENOSPC), unmounted on Drop.
pub struct SmallTmpfs {
    pub dir: tempfile::TempDir,
}

impl SmallTmpfs {
    pub fn new(bytes: u64) -> Result<Self, String> {
        if !is_root() {
            return Err("mounting a tmpfs needs root".into());
        }
        let dir = rig_dir("ddx-tmpfs-")?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "ddx-test"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("mount -t tmpfs failed".into());
        }
        Ok(SmallTmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Give the filesystem more room (mount -o remount,size=).
    pub fn resize(&self, bytes: u64) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        if is_mountpoint(self.dir.path()) {
            let _ = Command::new("umount").arg(self.dir.path()).status();
        }
    }
}

/// A qemu-storage-daemon FUSE export of a raw image whose writes from
/// `offset` on fail with EIO (blkdebug inject-error), unmounted on Drop.
pub struct FailingWrites {
    _dir: tempfile::TempDir,
    /// The export, as a file (write to it with conv=notrunc).
    pub path: PathBuf,
    pub image: PathBuf,
    child: Option<std::process::Child>,
}

impl FailingWrites {
    pub fn new(size: u64, fail_sector: u64) -> Result<Self, String> {
        if !have("qemu-storage-daemon") {
            return Err("qemu-storage-daemon is not installed (package qemu-utils)".into());
        }
        if !is_root() || !Path::new("/dev/fuse").exists() {
            return Err("a FUSE export needs root and /dev/fuse".into());
        }
        let dir = rig_dir("ddx-qsd-")?;
        let image = dir.path().join("image.raw");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(size))
            .map_err(|e| e.to_string())?;
        let config = dir.path().join("blkdebug.conf");
        std::fs::write(
            &config,
            format!(
                "[inject-error]\nevent = \"pwritev\"\nerrno = \"5\"\nsector = \"{fail_sector}\"\nonce = \"off\"\nimmediately = \"on\"\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        let path = dir.path().join("export");
        std::fs::write(&path, b"").map_err(|e| e.to_string())?;
        let mut qsd = Command::new("qemu-storage-daemon");
        qsd.arg("--blockdev")
            .arg(format!(
                "driver=file,node-name=file0,filename={}",
                image.display()
            ))
            .arg("--blockdev")
            .arg(format!(
                "driver=blkdebug,node-name=dbg0,image=file0,config={}",
                config.display()
            ))
            .arg("--blockdev")
            .arg("driver=raw,node-name=raw0,file=dbg0")
            .arg("--export")
            .arg(format!(
                "type=fuse,id=exp0,node-name=raw0,mountpoint={},writable=on",
                path.display()
            ));
        let child = spawn_server(&mut qsd, Stdio::piped(), "qemu-storage-daemon")?;
        let mut rig = FailingWrites {
            _dir: dir,
            path,
            image,
            child: Some(child),
        };
        if let Err(e) = wait_for_export(&rig.path, size, "qemu-storage-daemon FUSE export") {
            let mut child = rig.child.take().expect("child");
            let _ = child.kill();
            let out = child
                .wait_with_output()
                .map(|o| o.stderr)
                .unwrap_or_default();
            return Err(format!("{e}: {}", String::from_utf8_lossy(&out).trim()));
        }
        Ok(rig)
    }
}

impl Drop for FailingWrites {
    fn drop(&mut self) {
        if is_mountpoint(&self.path) {
            fuse_unmount("-uz", &self.path);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
