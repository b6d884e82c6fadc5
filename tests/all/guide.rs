//! GUIDE.md, run: every shell command of the guide, and every common job
//! that `--help`, the man page and the README show
//! (`ddx::cli::reference::EXAMPLES`), on devices and servers this test
//! starts, with the guide's placeholders (`/dev/sdX`, `my-bucket`,
//! `server.example`, ...) mapped onto them; each result is held to GNU dd
//! (the same operands, onto a file), bmaptool, GNU ddrescue or the
//! compression tools.
//!
//! Each command has a row in [`ROWS`] saying how it must end, what it
//! must print and make, and what it is held to. A command the guide gains
//! without a row fails the test, and so does a row whose command the
//! guide lost: the guide cannot rot. Shell blocks (```sh) are run line by
//! line in one directory per section (`export` lines set the environment
//! of the commands after them, and must name a setting ddx reads); ```ini
//! blocks whose first line names `~/.aws/credentials` or `~/.aws/config`
//! are written there; ```text blocks show output and are not run. Any
//! other kind of block fails the test.
//!
//! Each section starts from the same files (`raspios.img` with its `.xz`,
//! `.zst` and bmap, `disk.img` holding what `/dev/sdX` holds) and fresh
//! disks: `/dev/sdX` and
//! `/dev/sdY` are loop devices over files, except in the rescue section,
//! where `/dev/sdX` is a disk with unreadable sectors (nbdkit's ddrescue
//! filter through nbdfuse). The servers live for the whole test: a
//! bucket of the shared SeaweedFS cluster for `s3://my-bucket`, nbdkit on TCP (read only) for
//! `nbd://server.example` and on a Unix socket for `/run/nbd.sock`, and
//! rclone serving the images over https for `downloads.example.org`.
//! `ddx bench` runs with a small working set and one run per figure
//! unless the guide says otherwise.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::Bucket;
use crate::rigs::fixture::statistics;
use crate::rigs::object::{free_port, HttpServer, TestCa, ACCESS_KEY, SECRET_KEY};

/// How a command must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Succeeds,
    Fails,
    /// As the rescue says: 0 with nothing unreadable, else 2.
    AsRescued,
}

/// What a command's result is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Oracle {
    /// GNU dd on the same operands onto a file: its bytes in every output
    /// (`of=` and each `--tee=`) and its records. Under `--decompress`
    /// GNU dd reads the input as the compression tool decompresses it;
    /// under `--compress` the output is decompressed by the tool first,
    /// and only the records read are compared.
    GnuDd,
    /// GNU dd's bytes, not its records: `bs=auto` and the copies by
    /// position count requests of their own.
    GnuDdBytes,
    /// `bmaptool copy` onto what the device held before; the first MiB,
    /// written last, as the image's.
    Bmaptool,
    /// GNU ddrescue reading the same disk: the same image, and the
    /// unreadable sectors as the map's bad ranges.
    Ddrescue,
    /// Refused: the output it names does not appear.
    Refused,
    /// A casync index's image, extracted: every output holds this file
    /// of the section's at its start.
    Blob(&'static str),
    /// Nothing to compare with (a benchmark, another tool's command):
    /// how it ends, what it prints and makes.
    Itself,
}

/// One command of the guide or of the common jobs.
struct Row {
    command: &'static str,
    status: Status,
    oracle: Oracle,
    /// Text its standard output or error must hold.
    says: &'static [&'static str],
    /// Files it must make in its directory, each with text it must hold.
    makes: &'static [(&'static str, &'static str)],
}

const fn row(command: &'static str, oracle: Oracle) -> Row {
    Row {
        command,
        status: Status::Succeeds,
        oracle,
        says: &[],
        makes: &[],
    }
}

const fn saying(command: &'static str, oracle: Oracle, says: &'static [&'static str]) -> Row {
    Row {
        command,
        status: Status::Succeeds,
        oracle,
        says,
        makes: &[],
    }
}

const fn making(
    command: &'static str,
    oracle: Oracle,
    makes: &'static [(&'static str, &'static str)],
) -> Row {
    Row {
        command,
        status: Status::Succeeds,
        oracle,
        says: &[],
        makes,
    }
}

use Oracle::*;

/// Every command of GUIDE.md and of the common jobs, as written there.
const ROWS: &[Row] = &[
    // Copying disks.
    row("ddx if=/dev/sdX of=disk.img bs=4M status=progress", GnuDd),
    row(
        "ddx if=disk.img of=/dev/sdY bs=4M conv=fsync status=progress",
        GnuDd,
    ),
    Row {
        command: "ddx if=disk.img of=/dev/sdz bs=4M",
        status: Status::Fails,
        oracle: Refused,
        says: &["refusing to create", "--force overrides"],
        makes: &[],
    },
    row("ddx if=/dev/sdX of=disk.img bs=4M --resume", GnuDdBytes),
    // Images and bmaps.
    row(
        "ddx if=raspios.img.xz of=/dev/sdX --decompress --bmap=raspios.img.bmap conv=fsync \
         status=progress",
        Bmaptool,
    ),
    saying(
        "ddx if=raspios.img.zst of=/dev/sdX --decompress bs=4M conv=fsync --verify",
        GnuDd,
        &["read back, identical to what was written"],
    ),
    row(
        "ddx if=raspios.img of=raspios.img.zst --compress=zstd --bmap-create=raspios.img.bmap",
        GnuDd,
    ),
    // Backups.
    making(
        "ddx if=/dev/sdX of=disk.img.zst --compress=zstd --bmap-create=disk.bmap bs=4M \
         --hash=sha256 --hash-file=disk.sha256",
        GnuDd,
        &[("disk.sha256", "  /dev/")],
    ),
    row(
        "ddx if=disk.img.zst of=/dev/sdY --decompress --bmap=disk.bmap bs=4M conv=fsync",
        Bmaptool,
    ),
    saying("sha256sum -c disk.sha256", Itself, &[": OK"]),
    row(
        "ddx if=/dev/sdX of=s3://my-bucket/disk.img.zst --compress=zstd bs=8M",
        GnuDd,
    ),
    row(
        "ddx if=s3://my-bucket/disk.img.zst of=/dev/sdY --decompress bs=8M conv=fsync",
        GnuDd,
    ),
    // The disk holds no file system, so its used set is all of it: the
    // image is GNU dd's, and the map's restore bmaptool's.
    saying(
        "ddx if=/dev/sdX of=card.img.zst --compress=zstd --bmap-create=card.bmap --used-only \
         --verbose",
        GnuDd,
        &[
            "--used-only: no partition table;",
            "copied whole: no file system recognised",
        ],
    ),
    row(
        "ddx if=card.img.zst of=/dev/sdY --decompress --bmap=card.bmap conv=fsync",
        Bmaptool,
    ),
    row(
        "bmaptool copy --bmap card.bmap card.img.zst /dev/sdY",
        Itself,
    ),
    // Several outputs.
    saying(
        "ddx if=raspios.img.xz of=/dev/sdX --tee=/dev/sdY --decompress bs=4M conv=fsync --verify",
        GnuDd,
        &["--tee: ", "read back, identical to what was written"],
    ),
    // Rescue and resume.
    Row {
        command: "ddx if=/dev/sdX of=rescued.img --rescue --map=rescued.map --resume",
        status: Status::AsRescued,
        oracle: Ddrescue,
        says: &[],
        makes: &[],
    },
    Row {
        command: "ddx if=/dev/sdX of=rescued.img --rescue --map=rescued.map --resume \
                  --retry-passes=3",
        status: Status::AsRescued,
        oracle: Ddrescue,
        says: &[],
        makes: &[],
    },
    row("ddrescue -r3 /dev/sdX rescued.img rescued.map", Itself),
    // NBD exports.
    row(
        "ddx if=nbd://server.example/disk of=disk.img bs=1M status=progress",
        GnuDd,
    ),
    row(
        "ddx if=disk.img 'of=nbd+unix:///disk?socket=/run/nbd.sock' bs=1M conv=fsync",
        GnuDd,
    ),
    row(
        "ddx if=nbd://server.example/disk 'of=nbd+unix:///disk?socket=/run/nbd.sock' bs=1M",
        GnuDd,
    ),
    saying(
        "ddx if=disk.img 'of=nbd+unix:///disk?socket=/run/nbd.sock' bs=1M --trim --verbose",
        GnuDd,
        &["trim: "],
    ),
    saying(
        "ddx bench 'nbd+unix:///disk?socket=/run/nbd.sock'",
        Itself,
        &["an NBD export", "seq-read"],
    ),
    // S3 and HTTP.
    row(
        "AWS_PROFILE=backup ddx if=/dev/sdX of=s3://my-bucket/disk.img.zst --compress=zstd bs=8M",
        GnuDd,
    ),
    saying(
        "ddx if=disk.img of=s3://my-bucket/disk.img bs=8M --verify",
        GnuDd,
        &[
            "not read back: the server's SHA-256 of its ",
            "is that of the bytes sent",
        ],
    ),
    row(
        "ddx if=s3://my-bucket/disk.img of=/dev/sdX bs=8M conv=fsync",
        GnuDd,
    ),
    row(
        "ddx if=https://downloads.example.org/raspios.img.xz of=/dev/sdX --decompress bs=4M \
         conv=fsync status=progress",
        GnuDd,
    ),
    // Versions and fleets: chunk stores. The disk holds no partition
    // table, so its used set is all of it: the image is disk.img.
    saying(
        "ddx if=/dev/sdX of=s3://my-bucket/fleet/web1.caibx --store=s3://my-bucket/fleet/store \
         --used-only bs=4M",
        Itself,
        &[
            "were new to the store",
            "'s3://my-bucket/fleet/store' holds",
        ],
    ),
    saying(
        "ddx if=/dev/sdX of=s3://my-bucket/fleet/web2.caibx --store=s3://my-bucket/fleet/store \
         --used-only bs=4M",
        Itself,
        &["; 0 were new to the store"],
    ),
    saying(
        "ddx if=/dev/sdX of=s3://my-bucket/fleet/web3.caibx --store=s3://my-bucket/fleet/store \
         --used-only bs=4M",
        Itself,
        &["; 0 were new to the store"],
    ),
    saying(
        "ddx if=s3://my-bucket/fleet/web2.caibx of=/dev/sdY --store=s3://my-bucket/fleet/store \
         bs=4M conv=fsync --verify",
        Blob("disk.img"),
        &["each of the index's"],
    ),
    saying(
        "ddx gc --store=s3://my-bucket/fleet/store s3://my-bucket/fleet/web1.caibx \
         s3://my-bucket/fleet/web2.caibx",
        Itself,
        &["named by 2 indexes"],
    ),
    saying(
        "ddx if=raspios.img of=raspios.caibx --store",
        Itself,
        &["were new to the store 'default.castr'"],
    ),
    saying(
        "ddx if=https://downloads.example.org/raspios.caibx of=/dev/sdX --store --seed=/dev/sdX \
         bs=4M conv=fsync --verify",
        Blob("raspios.img"),
        &["fetched from", "each of the index's"],
    ),
    // The page cache.
    saying(
        "ddx if=/dev/sdX of=disk.img bs=4M --verbose",
        GnuDd,
        &["cache: "],
    ),
    row("ddx if=/dev/sdX of=disk.img bs=4M --drop-cache", GnuDd),
    row("ddx if=disk.img of=disk-copy.img bs=4M --keep-cache", GnuDd),
    // bs=auto.
    saying(
        "ddx if=/dev/sdX of=disk.img bs=auto --verbose",
        GnuDdBytes,
        &["bs=auto chose"],
    ),
    row(
        "ddx if=/dev/sdX of=part.img bs=auto count=16MiB",
        GnuDdBytes,
    ),
    // Progress and scripts.
    making(
        "ddx if=/dev/sdX of=disk.img bs=4M --progress-fd=3 3>progress.jsonl",
        GnuDd,
        &[("progress.jsonl", "\"done\":true")],
    ),
    // ddx bench.
    saying(
        "ddx bench /dev/sdX",
        Itself,
        &[
            "recommended block size",
            "a block device is only written with --destructive",
        ],
    ),
    saying("ddx bench /var/tmp", Itself, &["recommended block size"]),
    saying(
        "ddx bench /dev/sdY --destructive --tests=seq-write,bs-sweep",
        Itself,
        &["seq-write", "recommended block size: read"],
    ),
    making(
        "ddx bench /var/tmp --json > disk.json",
        Itself,
        &[("disk.json", "\"schema_version\": 3")],
    ),
    making(
        "ddx bench /var/tmp --html=report.html",
        Itself,
        &[("report.html", "<svg")],
    ),
    // The common jobs not in the guide.
    row(
        "ddx if=/dev/sdX of=/dev/sdY bs=4M conv=fsync status=progress",
        GnuDd,
    ),
    row(
        "ddx if=/dev/sdX of=disk.img.zst --compress=zstd bs=4M status=progress",
        GnuDd,
    ),
];

/// The guide's section whose `/dev/sdX` has unreadable sectors.
const RESCUE_SECTION: &str = "Rescue and resume";

/// The guide's section that sets the S3 settings itself (the others
/// run with them set).
const S3_SECTION: &str = "S3 and HTTP";

/// The failing disk's unreadable byte ranges (offset, length).
const BAD: [(u64, u64); 2] = [(0x4_0000, 0x400), (0x12_3400, 0x200)];

/// A device name the guide may use to show the guard's refusal: mapped
/// onto one that does not exist.
const NO_SUCH_DISK: &str = "/dev/ddx-guide-no-such-disk";

const MIB: usize = 1 << 20;
/// Each disk's size, and the image's.
const DISK_SIZE: usize = 24 * MIB;
const IMAGE_SIZE: u64 = 16 << 20;
/// The failing disk's size (a copy by position reads it 512 bytes at a time).
const FAILING_SIZE: usize = 4 * MIB;

/// `ddx bench`'s options for a short run, each added unless the command
/// gives it.
const SHORT_BENCH: [&str; 5] = [
    "--size=4M",
    "--runs=1",
    "--time-per-run=0.02",
    "--latency-count=20",
    "--zones=4",
];

/// The guide's placeholders for S3 settings.
const EXAMPLE_KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const EXAMPLE_ENDPOINT: &str = "https://minio.example:9000";

/// One block of GUIDE.md, under its section.
#[derive(Debug)]
struct Block {
    section: String,
    kind: String,
    lines: Vec<String>,
}

/// GUIDE.md's fenced blocks, each with the `## ` section it is in.
fn blocks(guide: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for line in guide.lines() {
        let fence = line.trim_start();
        if let Some(kind) = fence.strip_prefix("```") {
            match open.take() {
                Some(block) => blocks.push(block),
                None => {
                    open = Some(Block {
                        section: section.clone(),
                        kind: kind.trim().to_owned(),
                        lines: Vec::new(),
                    })
                }
            }
        } else if let Some(block) = open.as_mut() {
            block.lines.push(line.trim_start().to_owned());
        } else if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim().to_owned();
        }
    }
    assert!(open.is_none(), "GUIDE.md ends inside a block");
    blocks
}

/// A shell block's commands: continuation lines joined, comments and
/// blank lines left out.
fn commands(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in lines {
        let line = line.trim();
        if line.starts_with('#') && pending.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => pending.push_str(&format!("{} ", part.trim())),
            None => {
                pending.push_str(line);
                let command = without_comment(&pending);
                if !command.is_empty() {
                    out.push(command);
                }
                pending.clear();
            }
        }
    }
    out
}

/// `command` without a trailing `  # comment`, its words single-spaced.
fn without_comment(command: &str) -> String {
    let code = match command.find(" #") {
        Some(at) => &command[..at],
        None => command,
    };
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The words of a command as the shell would pass them (single quotes
/// removed), without redirections and leading `NAME=VALUE` settings.
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    let mut kept = Vec::new();
    let mut skip_next = false;
    for word in words {
        if skip_next {
            skip_next = false;
        } else if word == ">" {
            skip_next = true;
        } else if !word.contains('>') {
            kept.push(word);
        }
    }
    let settings = kept
        .iter()
        .take_while(|w| {
            w.split_once('=')
                .is_some_and(|(name, _)| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        })
        .count();
    kept.split_off(settings)
}

/// A ddx copy's operands and options, by name.
struct Invocation {
    operands: Vec<(String, String)>,
    options: Vec<(String, Option<String>)>,
}

impl Invocation {
    fn of(words: &[String]) -> Invocation {
        let mut operands = Vec::new();
        let mut options = Vec::new();
        for word in &words[1..] {
            if let Some(option) = word.strip_prefix("--") {
                let (name, value) = match option.split_once('=') {
                    Some((name, value)) => (name, Some(value.to_owned())),
                    None => (option, None),
                };
                options.push((name.to_owned(), value));
            } else if let Some((key, value)) = word.split_once('=') {
                operands.push((key.to_owned(), value.to_owned()));
            }
        }
        Invocation { operands, options }
    }

    fn operand(&self, key: &str) -> Option<&str> {
        self.operands
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn has(&self, option: &str) -> bool {
        self.options.iter().any(|(name, _)| name == option)
    }

    fn option(&self, option: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(name, _)| name == option)
            .and_then(|(_, v)| v.as_deref())
    }

    /// `of=` and every `--tee=`.
    fn outputs(&self) -> Vec<&str> {
        self.operand("of")
            .into_iter()
            .chain(
                self.options
                    .iter()
                    .filter(|(name, _)| name == "tee")
                    .filter_map(|(_, v)| v.as_deref()),
            )
            .collect()
    }
}

/// nbdkit serving a file read only on a loopback TCP port, killed when
/// dropped.
struct TcpExport {
    port: u16,
    child: Child,
}

impl TcpExport {
    fn start(file: &Path) -> Result<TcpExport, String> {
        if !rigs::have("nbdkit") {
            return Err("nbdkit is not installed (package nbdkit)".into());
        }
        let port = free_port();
        let mut cmd = Command::new("nbdkit");
        cmd.args(["--foreground", "--exit-with-parent", "--readonly"])
            .args(["-i", "127.0.0.1", "-p", &port.to_string(), "file"])
            .arg(format!("file={}", file.display()));
        let mut child = rigs::spawn_server(&mut cmd, Stdio::null(), "nbdkit")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                return Err("nbdkit did not start on TCP".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(TcpExport { port, child })
    }
}

impl Drop for TcpExport {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `/dev/sdX` is in a section.
enum Disk {
    Loop(rigs::LoopDevice),
    Failing(rigs::NbdDevice),
}

impl Disk {
    fn path(&self) -> &Path {
        match self {
            Disk::Loop(device) => &device.path,
            Disk::Failing(device) => &device.path,
        }
    }
}

/// One section's directory and disks.
struct Section {
    name: String,
    dir: PathBuf,
    x: Disk,
    y: rigs::LoopDevice,
    /// The unreadable ranges of `x`.
    bad: &'static [(u64, u64)],
    /// Settings exported by the section's blocks so far.
    env: BTreeMap<String, String>,
}

/// The devices and servers every section uses, and the files each
/// starts from.
struct Rig {
    root: tempfile::TempDir,
    fixtures: PathBuf,
    home: PathBuf,
    bin: PathBuf,
    disk: Vec<u8>,
    spare: Vec<u8>,
    served: PathBuf,
    tcp: TcpExport,
    unix: rigs::nbd::Server,
    unix_file: PathBuf,
    s3: Bucket<'static>,
    https: HttpServer,
    ca: TestCa,
    sections: usize,
}

impl Rig {
    fn new() -> Result<Rig, String> {
        if let Some(why) = rigs::LoopDevice::unavailable() {
            return Err(why);
        }
        for tool in [
            "mkfs.ext4",
            "bmaptool",
            "xz",
            "zstd",
            "ddrescue",
            "sha256sum",
            "nbdfuse",
        ] {
            if !rigs::have(tool) {
                return Err(format!("{tool} is not installed"));
            }
        }
        let root = tempfile::Builder::new()
            .prefix("ddx-guide-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .map_err(|e| e.to_string())?;
        let fixtures = root.path().join("fixtures");
        let home = root.path().join("home");
        let bin = root.path().join("bin");
        for dir in [&fixtures, &home, &bin] {
            std::fs::create_dir(dir).map_err(|e| e.to_string())?;
        }
        std::os::unix::fs::symlink(rigs::cmd::DDX, bin.join("ddx")).map_err(|e| e.to_string())?;

        // An OS image: a small ext4 file system with files in it, its
        // bmap, and the image compressed as its publishers do.
        let files: Vec<(String, Vec<u8>)> = (0..3u64)
            .map(|n| (format!("file{n}"), pattern(n + 7, 2 * MIB)))
            .collect();
        let mkfs = root.path().join("mkfs");
        std::fs::create_dir(&mkfs).map_err(|e| e.to_string())?;
        let made = rigs::images::ext4_image(&mkfs, IMAGE_SIZE, &files);
        let image = fixtures.join("raspios.img");
        std::fs::rename(&made, &image).map_err(|e| e.to_string())?;
        rigs::images::bmaptool_create(&image, &fixtures.join("raspios.img.bmap"));
        rigs::images::packed(&image, "xz", "xz");
        rigs::images::packed(&image, "zstd", "zst");
        // Its casync index, in the store beside it (default.castr), as a
        // publisher serves them.
        let made = Command::new(rigs::cmd::DDX)
            .arg(format!("if={}", image.display()))
            .arg(format!("of={}", fixtures.join("raspios.caibx").display()))
            .args(["--store", "status=none"])
            .output()
            .map_err(|e| e.to_string())?;
        if !made.status.success() {
            return Err(format!(
                "making the image's index: {}",
                String::from_utf8_lossy(&made.stderr)
            ));
        }
        // A used disk: data everywhere but a stretch of zeros (which a
        // bmap leaves out), and other data on a spare disk. Neither holds
        // the image, so that writing only its mapped blocks shows.
        let mut disk = pattern(41, DISK_SIZE);
        disk[8 * MIB..12 * MIB].fill(0);
        let spare = pattern(43, DISK_SIZE);
        std::fs::write(fixtures.join("disk.img"), &disk).map_err(|e| e.to_string())?;

        let served = root.path().join("served.img");
        std::fs::write(&served, &disk).map_err(|e| e.to_string())?;
        let tcp = TcpExport::start(&served)?;
        let unix_dir = rigs::nbd::tempdir()?;
        let unix_file = unix_dir.path().join("export.img");
        std::fs::File::create(&unix_file)
            .and_then(|f| f.set_len(DISK_SIZE as u64))
            .map_err(|e| e.to_string())?;
        let file_arg = format!("file={}", unix_file.display());
        let unix = rigs::nbd::Server::nbdkit_in(unix_dir, &["file", &file_arg])?;
        let s3 = crate::rigs::cluster::shared()?.bucket("my-bucket")?;
        let ca = TestCa::new(root.path())?;
        let https = HttpServer::start(&fixtures, Some(&ca))?;
        Ok(Rig {
            root,
            fixtures,
            home,
            bin,
            disk,
            spare,
            served,
            tcp,
            unix,
            unix_file,
            s3,
            https,
            ca,
            sections: 0,
        })
    }

    /// A fresh directory holding the starting files, and fresh disks.
    fn section(&mut self, name: &str) -> Section {
        self.sections += 1;
        let dir = self.root.path().join(format!("section{}", self.sections));
        std::fs::create_dir(&dir).unwrap();
        // The files (a store beside them is only served).
        for entry in std::fs::read_dir(&self.fixtures).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
            }
        }
        let disk = |name: &str, bytes: &[u8]| {
            let backing = dir.join(name);
            std::fs::write(&backing, bytes).unwrap();
            rigs::LoopDevice::attach(&backing, Default::default()).unwrap()
        };
        let (x, bad): (Disk, &[(u64, u64)]) = if name == RESCUE_SECTION {
            let device = rigs::NbdDevice::with_bad_ranges(&self.disk[..FAILING_SIZE], &BAD)
                .unwrap_or_else(|e| panic!("the failing disk: {e}"));
            (Disk::Failing(device), &BAD)
        } else {
            (Disk::Loop(disk(".sdX", &self.disk)), &[])
        };
        let y = disk(".sdY", &self.spare);
        Section {
            name: name.to_owned(),
            dir,
            x,
            y,
            bad,
            env: BTreeMap::new(),
        }
    }

    /// `text` with the guide's placeholders mapped onto this rig.
    fn substitute(&self, section: &Section, text: &str) -> String {
        let tcp = format!("nbd://127.0.0.1:{}/", self.tcp.port);
        let https = self.https.url("");
        let pairs = [
            ("/dev/sdX", section.x.path().display().to_string()),
            ("/dev/sdY", section.y.name()),
            ("/dev/sdz", NO_SUCH_DISK.to_owned()),
            ("nbd://server.example/", tcp),
            ("/run/nbd.sock", self.unix.socket.display().to_string()),
            ("https://downloads.example.org/", https),
            (EXAMPLE_ENDPOINT, self.s3.endpoint()),
            (EXAMPLE_KEY, ACCESS_KEY.to_owned()),
            (EXAMPLE_SECRET, SECRET_KEY.to_owned()),
            ("/var/tmp", section.dir.display().to_string()),
        ];
        let mut text = text.to_owned();
        for (placeholder, value) in pairs {
            text = text.replace(placeholder, &value);
        }
        // Never a device the test did not make: a placeholder the test
        // does not know would name one of this machine's.
        let allowed = [
            section.x.path().display().to_string(),
            section.y.name(),
            NO_SUCH_DISK.to_owned(),
            "/dev/null".to_owned(),
            "/dev/zero".to_owned(),
            "/dev/urandom".to_owned(),
        ];
        for (at, _) in text.match_indices("/dev/") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '\'')
                .collect();
            assert!(
                allowed.contains(&name),
                "{name} in {text:?}: a device this test does not map (add it to Rig::substitute)"
            );
        }
        text
    }

    /// Where a value of the guide (a placeholder, a URI, a file name)
    /// can be read on this machine.
    fn local(&self, section: &Section, value: &str) -> PathBuf {
        match value {
            "/dev/sdX" => section.x.path().to_owned(),
            "/dev/sdY" => section.y.path.clone(),
            v if v.starts_with("s3://my-bucket/") => {
                // The object as the cluster holds it, in a file.
                let key = &v["s3://my-bucket/".len()..];
                let copy = section.dir.join(format!(".s3-{}", key.replace('/', "_")));
                let object = self.s3.object(key).unwrap_or_default();
                std::fs::write(&copy, object).unwrap();
                copy
            }
            v if v.starts_with("nbd://server.example/") => self.served.clone(),
            v if v.starts_with("nbd+unix://") => self.unix_file.clone(),
            v if v.starts_with("https://downloads.example.org/") => self
                .fixtures
                .join(&v["https://downloads.example.org/".len()..]),
            v => section.dir.join(v),
        }
    }

    /// The environment of every command: nothing of the test's own but
    /// the path, with ddx first on it.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "PATH".into(),
                format!(
                    "{}:{}",
                    self.bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
            ("HOME".into(), self.home.display().to_string()),
            ("LC_ALL".into(), "C".into()),
            // The web server's certificate is the test's own.
            ("SSL_CERT_FILE".into(), self.ca.ca.display().to_string()),
        ]
    }

    /// The settings that reach the S3 cluster, for the common jobs (the guide
    /// sets its own).
    fn s3_env(&self) -> BTreeMap<String, String> {
        self.s3.env().into_iter().collect()
    }

    /// Run `command` (as written in the guide) in `section`.
    fn run(&self, section: &Section, command: &str) -> Output {
        let mut text = self.substitute(section, command);
        if words(command).get(1).map(String::as_str) == Some("bench") {
            for option in SHORT_BENCH {
                let name = option.split('=').next().unwrap();
                if !command.contains(name) {
                    text = format!("{text} {option}");
                }
            }
        }
        Command::new("sh")
            .arg("-c")
            .arg(&text)
            .current_dir(&section.dir)
            .env_clear()
            .envs(self.env())
            .envs(&section.env)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// A file's or device's bytes.
fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `path` decompressed by the tool its magic bytes name, into `into`.
fn decompressed(path: &Path, into: &Path) -> PathBuf {
    let bytes = read(path);
    let tool = match bytes.get(..4) {
        Some([0xfd, b'7', b'z', b'X']) => "xz",
        Some([0x28, 0xb5, 0x2f, 0xfd]) => "zstd",
        Some([0x1f, 0x8b, _, _]) => "gzip",
        _ => panic!("{} is not compressed", path.display()),
    };
    let out = rigs::must_run(Command::new(tool).arg("-dc").arg(path));
    std::fs::write(into, out).unwrap();
    into.to_owned()
}

/// The records lines of GNU's statistics ("N+M records in", "... out").
fn records(stderr: &str) -> Vec<String> {
    statistics(stderr)
        .into_iter()
        .filter(|line| line.contains(" records "))
        .collect()
}

/// The bad ranges of a GNU ddrescue mapfile.
fn bad_ranges(map: &str) -> Vec<(u64, u64)> {
    let number = |text: &str| u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap();
    map.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() == 3 && fields[2] == "-").then(|| (number(fields[0]), number(fields[1])))
        })
        .collect()
}

/// What a command did, for the checks and their messages.
struct Ran<'a> {
    rig: &'a Rig,
    section: &'a Section,
    command: &'a str,
    out: Output,
    /// What each output device held before the command.
    before: BTreeMap<String, Vec<u8>>,
    /// Whether the command's map was there before it ran.
    map_before: bool,
    scratch: tempfile::TempDir,
}

impl Ran<'_> {
    fn said(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }

    fn fail(&self, why: impl std::fmt::Display) -> ! {
        panic!(
            "GUIDE.md, section '{}': {}\n  as run: {}\n  {why}\n  exit status: {}\n  output:\n{}",
            self.section.name,
            self.command,
            self.rig.substitute(self.section, self.command),
            self.out.status,
            self.said()
        )
    }

    fn invocation(&self) -> Invocation {
        Invocation::of(&words(self.command))
    }

    /// The output `value` names, as it reads now (decompressed under
    /// `--compress`).
    fn output_bytes(&self, value: &str, compressed: bool) -> Vec<u8> {
        let path = self.rig.local(self.section, value);
        if compressed {
            let into = self.scratch.path().join("decompressed-output");
            read(&decompressed(&path, &into))
        } else {
            read(&path)
        }
    }

    /// Held to GNU dd on the same operands, onto a file.
    fn against_gnu_dd(&self, with_records: bool) {
        let call = self.invocation();
        let input_value = call.operand("if").unwrap_or_else(|| self.fail("no if="));
        let mut input = self.rig.local(self.section, input_value);
        if call.has("decompress") {
            input = decompressed(&input, &self.scratch.path().join("decompressed-input"));
        }
        let oracle = self.scratch.path().join("gnu-dd.out");
        let mut dd = rigs::cmd::gnu_dd();
        dd.current_dir(&self.section.dir);
        for (key, value) in &call.operands {
            match (key.as_str(), value.as_str()) {
                ("status", "progress") | ("bs", "auto") => {}
                ("if", _) => {
                    dd.arg(format!("if={}", input.display()));
                }
                ("of", _) => {
                    dd.arg(format!("of={}", oracle.display()));
                }
                _ => {
                    dd.arg(format!("{key}={value}"));
                }
            }
        }
        let gnu = dd.output().unwrap();
        let gnu_stderr = String::from_utf8_lossy(&gnu.stderr);
        if !gnu.status.success() {
            self.fail(format!("GNU dd failed on the same operands: {gnu_stderr}"));
        }
        let expected = read(&oracle);
        let compressed = call.has("compress");
        for output in call.outputs() {
            let actual = self.output_bytes(output, compressed);
            // A file ddx made is the copy; a disk or an export holds it
            // at its start.
            let whole = !output.starts_with("/dev/") && !output.starts_with("nbd");
            let same = if whole {
                actual == expected
            } else {
                actual.get(..expected.len()) == Some(&expected[..])
            };
            if !same {
                self.fail(format!(
                    "{output} holds {} bytes that differ from GNU dd's {}",
                    actual.len(),
                    expected.len()
                ));
            }
        }
        if with_records {
            let ours = records(&String::from_utf8_lossy(&self.out.stderr));
            let mut theirs = records(&gnu_stderr);
            if compressed {
                theirs.truncate(1);
            }
            if ours.get(..theirs.len()) != Some(&theirs[..]) {
                self.fail(format!("records {ours:?}, GNU dd's {theirs:?}"));
            }
        }
    }

    /// Held to `bmaptool copy` onto what the device held before.
    fn against_bmaptool(&self) {
        let call = self.invocation();
        let output = call.operand("of").unwrap();
        let map = self.section.dir.join(call.option("bmap").unwrap());
        let mut image_path = self.rig.local(self.section, call.operand("if").unwrap());
        if call.has("decompress") {
            image_path = decompressed(&image_path, &self.scratch.path().join("image"));
        }
        let image = read(&image_path);
        // bmaptool onto a device, as ddx wrote one: onto a regular file
        // it would leave holes where the device keeps what it held.
        let backing = self.scratch.path().join("bmaptool.img");
        std::fs::write(&backing, &self.before[output]).unwrap();
        let device = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();
        rigs::images::bmaptool_copy(&map, &image_path, &device.path);
        let theirs = read(&device.path);
        drop(device);
        let ours = self.output_bytes(output, false);
        let end = image.len();
        // Past the first MiB, what bmaptool leaves; the first MiB, written
        // last after being zeroed first, reads as the image does.
        if ours[MIB..end] != theirs[MIB..end] || ours[..MIB] != image[..MIB] {
            self.fail("the device differs from bmaptool's copy");
        }
        if ours[end..] != self.before[output][end..] {
            self.fail("bytes past the image changed");
        }
    }

    /// Held to GNU ddrescue reading the same disk.
    fn against_ddrescue(&self) {
        let call = self.invocation();
        let input = self.rig.local(self.section, call.operand("if").unwrap());
        let reference = self.scratch.path().join("ddrescue.img");
        let reference_map = self.scratch.path().join("ddrescue.map");
        rigs::must_run(
            Command::new("ddrescue")
                .args(["-q", "-d", "-b512"])
                .arg(&input)
                .arg(&reference)
                .arg(&reference_map),
        );
        let size = std::fs::metadata(&input).unwrap().len() as usize;
        let size = if size == 0 { read(&input).len() } else { size };
        let mut expected = read(&reference);
        expected.resize(size, 0);
        let ours = self.output_bytes(call.operand("of").unwrap(), false);
        if ours != expected {
            self.fail("the image differs from GNU ddrescue's");
        }
        let map = std::fs::read_to_string(self.section.dir.join(call.option("map").unwrap()))
            .unwrap_or_else(|e| self.fail(format!("the map: {e}")));
        if bad_ranges(&map) != self.section.bad {
            self.fail(format!("the map's bad ranges: {:?}", bad_ranges(&map)));
        }
        // 0 with everything recovered, 2 with bad areas left.
        let status = if self.section.bad.is_empty() { 0 } else { 2 };
        if self.out.status.code() != Some(status) {
            self.fail(format!("the exit status is not {status}"));
        }
        if self.map_before && !self.said().contains("resuming from") {
            self.fail("a second run does not say it resumes");
        }
    }
}

/// Run one command and hold it to its row.
fn check(rig: &Rig, section: &Section, command: &str, row: &Row) {
    let call = Invocation::of(&words(command));
    let mut before = BTreeMap::new();
    if call.has("bmap") {
        for output in call.outputs() {
            before.insert(output.to_owned(), read(&rig.local(section, output)));
        }
    }
    let map_before = call
        .option("map")
        .is_some_and(|map| section.dir.join(map).exists());
    let out = rig.run(section, command);
    let ran = Ran {
        rig,
        section,
        command,
        out,
        before,
        map_before,
        scratch: tempfile::tempdir_in(rig.root.path()).unwrap(),
    };
    match row.status {
        Status::Succeeds if !ran.out.status.success() => ran.fail("it failed"),
        Status::Fails if ran.out.status.success() => ran.fail("it succeeded"),
        _ => {}
    }
    let said = ran.said();
    for text in row.says {
        if !said.contains(text) {
            ran.fail(format!("it does not say {text:?}"));
        }
    }
    for (file, text) in row.makes {
        let made = std::fs::read_to_string(section.dir.join(file)).unwrap_or_default();
        if !made.contains(text) {
            ran.fail(format!("{file} does not hold {text:?}"));
        }
    }
    match row.oracle {
        GnuDd => ran.against_gnu_dd(true),
        GnuDdBytes => ran.against_gnu_dd(false),
        Bmaptool => ran.against_bmaptool(),
        Ddrescue => ran.against_ddrescue(),
        Refused => {
            let output = rig.substitute(section, call.operand("of").unwrap());
            if Path::new(&output).exists() {
                ran.fail(format!("{output} was made"));
            }
        }
        Blob(file) => {
            let blob = read(&section.dir.join(file));
            for output in call.outputs() {
                let held = read(&rig.local(section, output));
                if held.get(..blob.len()) != Some(&blob[..]) {
                    ran.fail(format!("{output} does not hold {file}"));
                }
            }
        }
        Itself => {}
    }
    if let Some(map) = call.option("bmap-create") {
        // The map a bmaptool copy takes, giving the input back.
        let mut input = rig.local(section, call.operand("if").unwrap());
        let wanted = read(&input);
        if call.has("decompress") {
            input = decompressed(&input, &ran.scratch.path().join("mapped-input"));
        }
        let copy = ran.scratch.path().join("from-map.img");
        rigs::images::bmaptool_copy(&section.dir.join(map), &input, &copy);
        if read(&copy) != wanted {
            ran.fail("bmaptool's copy with the map made is not the input");
        }
    }
}

/// The row of `command`, counting its use.
fn row_of(command: &str, used: &mut [usize]) -> &'static Row {
    let key = without_comment(command);
    let at = ROWS
        .iter()
        .position(|row| without_comment(row.command) == key)
        .unwrap_or_else(|| {
            panic!(
                "no row in tests/all/guide.rs for this command of GUIDE.md or the common jobs: \
                 {command}\n(add one saying how it must end and what it is held to)"
            )
        });
    used[at] += 1;
    &ROWS[at]
}

/// Every command of GUIDE.md, and every common job, run and checked.
#[test]
fn every_command_of_the_guide_and_every_common_job_does_what_it_says() {
    let guide = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("GUIDE.md"))
        .expect("GUIDE.md");
    let blocks = blocks(&guide);
    assert!(!Path::new(NO_SUCH_DISK).exists());
    let Some(mut rig) = rigs::or_skip(Rig::new()) else {
        return;
    };
    let mut used = vec![0; ROWS.len()];

    // The common jobs, with the settings that reach the S3 server.
    let mut section = rig.section("the common jobs");
    section.env = rig.s3_env();
    for example in ddx::cli::reference::EXAMPLES {
        let row = row_of(example.command, &mut used);
        check(&rig, &section, example.command, row);
    }

    let mut current: Option<Section> = None;
    for block in &blocks {
        if current.as_ref().is_none_or(|s| s.name != block.section) {
            // The last section's disks go before the next one's come.
            drop(current.take());
            let mut section = rig.section(&block.section);
            // The S3 settings, as a reader who followed the S3 section
            // has them; that section sets its own.
            if block.section != S3_SECTION {
                section.env = rig.s3_env();
            }
            current = Some(section);
        }
        let section = current.as_mut().unwrap();
        match block.kind.as_str() {
            "sh" => {
                for command in commands(&block.lines) {
                    if let Some(setting) = command.strip_prefix("export ") {
                        let (name, value) = setting.split_once('=').expect("export NAME=VALUE");
                        let read_by_ddx = ddx::cli::reference::ENVIRONMENT
                            .iter()
                            .any(|v| v.names.contains(&name));
                        assert!(
                            read_by_ddx,
                            "GUIDE.md exports {name}, which ddx does not read"
                        );
                        let value = rig.substitute(section, value);
                        section.env.insert(name.to_owned(), value);
                        continue;
                    }
                    let row = row_of(&command, &mut used);
                    check(&rig, section, &command, row);
                }
            }
            "ini" => {
                let file = block.lines.first().and_then(|l| l.strip_prefix("# ~/"));
                let Some(file) = file else {
                    panic!("an ini block of GUIDE.md must begin with '# ~/FILE', where it goes");
                };
                let path = rig.home.join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                let text = rig.substitute(section, &block.lines.join("\n"));
                std::fs::write(path, text + "\n").unwrap();
            }
            "text" => {}
            other => panic!(
                "GUIDE.md has a block of kind {other:?} in '{}': the test runs sh, writes ini \
                 and leaves text",
                block.section
            ),
        }
    }
    drop(current);

    let unused: Vec<&str> = ROWS
        .iter()
        .zip(&used)
        .filter(|(_, n)| **n == 0)
        .map(|(row, _)| row.command)
        .collect();
    assert!(
        unused.is_empty(),
        "rows of tests/all/guide.rs whose command is neither in GUIDE.md nor a common job: \
         {unused:?}"
    );
}

#[test]
fn the_guides_blocks_are_read_as_the_shell_reads_them() {
    let guide = "intro\n## One\n```sh\nddx if=a \\\n  of=b # copy\n# a comment\n\nls\n```\n\
                 ```text\nout\n```\n## Two\n```ini\n# ~/.aws/config\n[x]\n```\n";
    let blocks = blocks(guide);
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0].section, "One");
    assert_eq!(commands(&blocks[0].lines), ["ddx if=a of=b", "ls"]);
    assert_eq!(blocks[1].kind, "text");
    assert_eq!(blocks[2].section, "Two");
    assert_eq!(
        words("AWS_PROFILE=x ddx 'of=nbd+unix:///d?socket=/s' --json > out.json 3>p"),
        ["ddx", "of=nbd+unix:///d?socket=/s", "--json"]
    );
    let map = "# Mapfile\n0x0 + 1\n#  pos size status\n0x0 0x400 +\n0x400 0x200 -\n";
    assert_eq!(bad_ranges(map), [(0x400, 0x200)]);
}
