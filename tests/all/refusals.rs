//! Every ddx option against every kind of end, over real ends: a regular
//! file (new, existing, on tmpfs), a loop device, character devices
//! (/dev/zero, /dev/urandom, /dev/null), a pipe, a FIFO, a socket, a file
//! system mounted read-only, NBD exports served by nbdkit, and a file
//! held in memory (`mem:PATH`, an end without a descriptor or a server).
//!
//! Each combination either does what it says, and then writes what GNU dd
//! writes for the same operands, or is refused before anything is opened
//! for writing: exit status 1, one line on stderr, the output neither
//! created nor changed, nothing sent down a pipe or socket. Which
//! combinations are accepted is written here, independently of ddx's own
//! table (`planner::needs`), as the specification it must meet.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx, gnu_dd, operand};
use crate::rigs::nbd::Server;

/// Bytes every finite input holds, and every infinite input is cut to.
const SIZE: usize = 256 << 10;
/// Operands of every copy: four records.
const BS: &str = "bs=64K";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum In {
    File,
    Tmpfs,
    Block,
    Zero,
    Urandom,
    /// `if=/dev/stdin`, a pipe.
    Pipe,
    /// Standard input, a socket (no if=).
    Socket,
    Nbd,
    /// `if=mem:PATH`.
    Mem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    New,
    Existing,
    Tmpfs,
    Block,
    Null,
    /// `of=/dev/zero`: a character device that is not the null device.
    Zero,
    /// Standard output, a pipe (no of=).
    Pipe,
    /// `of=FIFO`.
    Fifo,
    /// Standard output, a socket (no of=).
    Socket,
    /// A new file on a file system mounted read-only.
    ReadOnly,
    Nbd,
    /// `of=mem:PATH`: written back to PATH when closed.
    Mem,
}

const INPUTS: [In; 9] = [
    In::File,
    In::Tmpfs,
    In::Block,
    In::Zero,
    In::Urandom,
    In::Pipe,
    In::Socket,
    In::Nbd,
    In::Mem,
];

const OUTPUTS: [Out; 12] = [
    Out::New,
    Out::Existing,
    Out::Tmpfs,
    Out::Block,
    Out::Null,
    Out::Zero,
    Out::Pipe,
    Out::Fifo,
    Out::Socket,
    Out::ReadOnly,
    Out::Nbd,
    Out::Mem,
];

/// One row of the matrix: ddx's own arguments (options, or operands that
/// replace GNU's), and which ends it accepts.
struct Row {
    args: &'static [&'static str],
    accepts: fn(In, Out) -> bool,
}

/// Ends whose bytes have positions.
fn positional_in(i: In) -> bool {
    matches!(i, In::File | In::Tmpfs | In::Block | In::Nbd | In::Mem)
}

fn positional_out(o: Out) -> bool {
    matches!(
        o,
        Out::New | Out::Existing | Out::Tmpfs | Out::Block | Out::Null | Out::Nbd | Out::Mem
    )
}

fn file_out(o: Out) -> bool {
    matches!(o, Out::New | Out::Existing | Out::Tmpfs)
}

fn anything(_: In, o: Out) -> bool {
    o != Out::ReadOnly
}

fn both_positional(i: In, o: Out) -> bool {
    positional_in(i) && positional_out(o)
}

/// Outputs with storage behind them: a file, a block device, an export.
fn storage_out(_: In, o: Out) -> bool {
    file_out(o) || o == Out::Block || o == Out::Nbd
}

/// Outputs that can be read back: storage, and a file held in memory
/// (opened again by its name).
fn readable_out(i: In, o: Out) -> bool {
    storage_out(i, o) || o == Out::Mem
}

const fn row(args: &'static [&'static str], accepts: fn(In, Out) -> bool) -> Row {
    Row { args, accepts }
}

const ROWS: &[Row] = &[
    row(&[], anything),
    row(&["--rescue"], both_positional),
    row(&["--map=MAP"], both_positional),
    row(&["--resume", "--map=MAP"], both_positional),
    // The checkpoint map is kept beside the output: a file's.
    row(&["--resume"], |i, o| positional_in(i) && file_out(o)),
    row(&["--rescue", "--sector-size=4096"], both_positional),
    // A rescue: ddrescue's retry passes over its bad sectors.
    row(&["--retry-passes=2"], both_positional),
    row(&["--verify"], readable_out),
    // Discards need storage: a file, a block device or an export.
    row(&["--trim"], storage_out),
    row(&["--hash=sha256"], anything),
    // Its checker reads the input again by name: not a character device
    // or a FIFO (standard input is named '-'), nor a name only ddx knows
    // (mem:), and never with count=, which the infinite inputs need.
    row(&["--hash=sha256", "--hash-file=SUMS"], |i, o| {
        (positional_in(i) || i == In::Socket) && i != In::Mem && o != Out::ReadOnly
    }),
    row(&["--offload"], anything),
    row(&["--no-offload"], anything),
    row(&["--keep-cache"], anything),
    row(&["--queue-depth=4"], anything),
    row(&["--request-size=128K"], anything),
    row(&["--backend=threads"], anything),
    row(&["--backend=uring"], anything),
    row(&["--backend=sync", "--queue-depth=4"], |_, _| false),
    row(&["--verbose"], anything),
    // A disk read by its partition table: by position. These inputs hold
    // no partitions, so all of them is copied, as GNU dd copies it.
    row(&["--used-only"], |i, o| {
        positional_in(i) && o != Out::ReadOnly
    }),
    row(
        &["bs=auto", "count=256K", "iflag=fullblock,count_bytes"],
        anything,
    ),
];

/// The ends, built once for the whole matrix.
struct Ends {
    dir: tempfile::TempDir,
    data: Vec<u8>,
    /// What outputs that exist are filled with before each run.
    seed: Vec<u8>,
    tmpfs: rigs::SmallTmpfs,
    read_only: rigs::SmallTmpfs,
    in_loop: rigs::LoopDevice,
    out_loop: rigs::LoopDevice,
    gnu_loop: rigs::LoopDevice,
    nbd_in: Server,
    nbd_out: Server,
}

fn build() -> Result<Ends, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let data = pattern(0x5eed_cafe, SIZE);
    let seed = pattern(0x0dd5_eed5, SIZE + SIZE / 4);
    let write = |path: &Path, bytes: &[u8]| std::fs::write(path, bytes).map_err(|e| e.to_string());
    write(&dir.path().join("in"), &data)?;
    for name in ["in.img", "out.img", "gnu.img"] {
        write(&dir.path().join(name), &seed[..SIZE])?;
    }
    write(&dir.path().join("in.img"), &data)?;
    let tmpfs = rigs::SmallTmpfs::new(8 << 20)?;
    write(&tmpfs.path().join("in"), &data)?;
    let read_only = rigs::SmallTmpfs::new(1 << 20)?;
    rigs::run_tool(
        Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(read_only.path()),
        "remounting a tmpfs read-only",
    )?;
    let attach =
        |name: &str| rigs::LoopDevice::attach(&dir.path().join(name), rigs::LoopOptions::default());
    let (in_loop, out_loop, gnu_loop) = (attach("in.img")?, attach("out.img")?, attach("gnu.img")?);
    let nbd_dir = rigs::nbd::tempdir()?;
    let served_in = nbd_dir.path().join("in");
    write(&served_in, &data)?;
    let nbd_in = Server::nbdkit_in(nbd_dir, &["-r", "file", &served_in.display().to_string()])?;
    let nbd_dir = rigs::nbd::tempdir()?;
    let served_out = nbd_dir.path().join("out");
    write(&served_out, &seed[..SIZE])?;
    let nbd_out = Server::nbdkit_in(nbd_dir, &["file", &served_out.display().to_string()])?;
    Ok(Ends {
        dir,
        data,
        seed,
        tmpfs,
        read_only,
        in_loop,
        out_loop,
        gnu_loop,
        nbd_in,
        nbd_out,
    })
}

/// How one run ended, and what it left.
#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    stderr: String,
    /// The output's bytes after the run (what a stream received); None
    /// when no file stands there.
    output: Option<Vec<u8>>,
}

/// Which program runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Ddx,
    Gnu,
}

impl Ends {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Where GNU dd reads what ddx reads from `i`, and how.
    fn input_operand(&self, i: In, who: Who) -> Option<String> {
        match (i, who) {
            (In::File, _) => Some(operand("if", &self.path("in"))),
            (In::Tmpfs, _) => Some(operand("if", &self.tmpfs.path().join("in"))),
            (In::Block, _) => Some(operand("if", &self.in_loop.path)),
            (In::Zero, _) => Some("if=/dev/zero".into()),
            (In::Urandom, _) => Some("if=/dev/urandom".into()),
            (In::Pipe, _) => Some("if=/dev/stdin".into()),
            (In::Socket, _) => None,
            (In::Nbd, Who::Ddx) => Some(format!("if={}", self.nbd_in.uri())),
            (In::Nbd, Who::Gnu) => Some(operand("if", &self.nbd_in.path("in"))),
            (In::Mem, Who::Ddx) => Some(format!("if=mem:{}", self.path("in").display())),
            (In::Mem, Who::Gnu) => Some(operand("if", &self.path("in"))),
        }
    }

    /// The path ddx's output is at (None: standard output), made ready.
    fn ddx_output(&self, o: Out) -> Option<PathBuf> {
        let path = match o {
            Out::New => self.path("out"),
            Out::Existing => self.path("existing"),
            Out::Tmpfs => self.tmpfs.path().join("out"),
            Out::Block => self.out_loop.path.clone(),
            Out::Null => "/dev/null".into(),
            Out::Zero => "/dev/zero".into(),
            Out::Pipe | Out::Socket => return None,
            Out::Fifo => self.path("fifo"),
            Out::ReadOnly => self.read_only.path().join("out"),
            Out::Nbd => self.nbd_out.path("out"),
            Out::Mem => self.path("memout"),
        };
        Some(path)
    }

    /// ddx's of= operand for `o`, if any.
    fn output_operand(&self, o: Out) -> Option<String> {
        match o {
            Out::Nbd => Some(format!("of={}", self.nbd_out.uri())),
            Out::Mem => Some(format!("of=mem:{}", self.path("memout").display())),
            _ => self.ddx_output(o).map(|path| operand("of", &path)),
        }
    }

    /// Put every output back as it was, and clear what the options leave
    /// beside the copy.
    fn reset(&self) {
        for name in [
            "out",
            "gnu",
            "MAP",
            "MAP.tmp",
            "SUMS",
            "out.ddx-map",
            "fifo",
        ] {
            let _ = std::fs::remove_file(self.path(name));
        }
        let _ = std::fs::remove_file(self.tmpfs.path().join("out"));
        let _ = std::fs::remove_file(self.path("existing.ddx-map"));
        std::fs::write(self.path("memout"), &self.seed[..SIZE]).expect("seed");
        let _ = std::fs::remove_file(self.tmpfs.path().join("out.ddx-map"));
        std::fs::write(self.path("existing"), &self.seed).expect("seed");
        std::fs::write(self.nbd_out.path("out"), &self.seed[..SIZE]).expect("seed");
        for device in [&self.out_loop.path, &self.gnu_loop.path] {
            let mut dev = std::fs::OpenOptions::new()
                .write(true)
                .open(device)
                .expect("loop device");
            dev.write_all(&self.seed[..SIZE]).expect("seed");
            dev.sync_all().expect("sync");
        }
        let fifo = std::ffi::CString::new(self.path("fifo").into_os_string().into_encoded_bytes())
            .expect("path");
        // SAFETY: a valid NUL-terminated path; mkfifo has no other
        // preconditions.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    /// What stands at an output now.
    fn observe(&self, o: Out) -> Option<Vec<u8>> {
        match o {
            Out::Null | Out::Zero | Out::Pipe | Out::Socket | Out::Fifo => None,
            Out::Block => std::fs::read(&self.out_loop.path)
                .ok()
                .map(|b| b[..SIZE].to_vec()),
            _ => std::fs::read(self.ddx_output(o)?).ok(),
        }
    }

    /// Run ddx with `args` from `i` to `o`.
    fn ddx(&self, args: &[&str], i: In, o: Out, infinite: bool) -> Outcome {
        let mut cmd = ddx();
        cmd.current_dir(self.dir.path());
        cmd.args(args.iter().filter(|a| a.starts_with("--")));
        let own_operands: Vec<&str> = args
            .iter()
            .filter(|a| !a.starts_with("--"))
            .copied()
            .collect();
        if own_operands.is_empty() {
            cmd.args(operands(infinite));
        } else {
            cmd.args(own_operands);
        }
        cmd.args(self.input_operand(i, Who::Ddx));
        cmd.args(self.output_operand(o));
        let output = self.ddx_output(o);
        let (code, stderr, received) = run(cmd, i, o, &self.data, output.as_deref());
        let after = match o {
            Out::Pipe | Out::Socket | Out::Fifo => Some(received),
            _ => self.observe(o),
        };
        Outcome {
            code,
            stderr,
            output: after,
        }
    }

    /// GNU dd's copy of the same input with the same operands, into a
    /// file (or the device or export's stand-in) that starts as ddx's
    /// output started.
    fn gnu(&self, i: In, o: Out, infinite: bool) -> Outcome {
        let mut cmd = gnu_dd();
        cmd.current_dir(self.dir.path());
        cmd.args(operands(infinite));
        cmd.args(self.input_operand(i, Who::Gnu));
        let target = match o {
            Out::Block => self.gnu_loop.path.clone(),
            Out::Existing => {
                std::fs::write(self.path("gnu"), &self.seed).expect("seed");
                self.path("gnu")
            }
            // An export and a file held in memory are never truncated.
            Out::Nbd | Out::Mem => {
                std::fs::write(self.path("gnu"), &self.seed[..SIZE]).expect("seed");
                cmd.arg("conv=notrunc");
                self.path("gnu")
            }
            Out::Null | Out::Zero => "/dev/null".into(),
            _ => self.path("gnu"),
        };
        cmd.arg(operand("of", &target));
        let (code, stderr, _) = run(cmd, i, Out::New, &self.data, None);
        let output = match o {
            Out::Null | Out::Zero => None,
            Out::Block => std::fs::read(&target).ok().map(|b| b[..SIZE].to_vec()),
            _ => std::fs::read(&target).ok(),
        };
        Outcome {
            code,
            stderr,
            output,
        }
    }
}

fn operands(infinite: bool) -> Vec<&'static str> {
    if infinite {
        vec![BS, "count=4"]
    } else {
        vec![BS]
    }
}

/// Run `cmd` with `i`'s standard input and `o`'s standard output (or FIFO
/// reader), killed if it takes longer than a refusal or a small copy
/// could; returns its exit code, stderr and what a stream output got.
fn run(
    mut cmd: Command,
    i: In,
    o: Out,
    data: &[u8],
    fifo: Option<&Path>,
) -> (Option<i32>, String, Vec<u8>) {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let (out_ours, out_theirs) = UnixStream::pair().expect("socketpair");
    match i {
        In::Pipe => cmd.stdin(Stdio::piped()),
        In::Socket => cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs))),
        _ => cmd.stdin(Stdio::null()),
    };
    match o {
        Out::Pipe => cmd.stdout(Stdio::piped()),
        Out::Socket => cmd.stdout(Stdio::from(std::os::fd::OwnedFd::from(out_theirs))),
        _ => cmd.stdout(Stdio::null()),
    };
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    // Only the child holds the other ends now: EOF comes when it exits.
    drop(cmd);
    let feeder = {
        let bytes = data.to_vec();
        let pipe = child.stdin.take();
        let mut socket = ours;
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let _ = pipe.write_all(&bytes);
            } else if i == In::Socket {
                let _ = socket.write_all(&bytes);
                let _ = socket.shutdown(std::net::Shutdown::Write);
            }
        })
    };
    let fifo_path = fifo.filter(|_| o == Out::Fifo).map(Path::to_path_buf);
    let reader = {
        let stdout = child.stdout.take();
        let mut socket = out_ours;
        let fifo_path = fifo_path.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            if let Some(mut stdout) = stdout {
                let _ = stdout.read_to_end(&mut got);
            } else if o == Out::Socket {
                let _ = socket.read_to_end(&mut got);
            } else if let Some(path) = fifo_path {
                if let Ok(mut fifo) = std::fs::File::open(path) {
                    let _ = fifo.read_to_end(&mut got);
                }
            }
            got
        })
    };
    let mut stderr = child.stderr.take().expect("stderr");
    let code = wait(&mut child);
    let mut text = String::new();
    let _ = stderr.read_to_string(&mut text);
    // A FIFO reader still waiting for a writer that never came: be it
    // (once the reader is in open(2), which a writer's O_NONBLOCK open
    // needs).
    if let Some(path) = &fifo_path {
        while !reader.is_finished() {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = feeder.join();
    let received = reader.join().expect("reader");
    (code, text, received)
}

use std::os::unix::fs::OpenOptionsExt;

fn wait(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a run took over a minute: it hung (on a FIFO, a pipe?)");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Check one cell; a description of what went wrong, if anything.
fn cell(ends: &Ends, row: &Row, i: In, o: Out) -> Option<String> {
    let infinite = matches!(i, In::Zero | In::Urandom);
    ends.reset();
    let before = ends.observe(o);
    let ddx_run = ends.ddx(row.args, i, o, infinite);
    let shown = format!("{:?} from {i:?} to {o:?}", row.args);
    if !(row.accepts)(i, o) {
        let lines: Vec<&str> = ddx_run.stderr.lines().collect();
        if ddx_run.code != Some(1) || lines.len() != 1 || !lines[0].starts_with("ddx: ") {
            return Some(format!(
                "{shown}: should be refused in one line, exit 1; got {:?}: {}",
                ddx_run.code, ddx_run.stderr
            ));
        }
        let untouched = match o {
            Out::Pipe | Out::Socket | Out::Fifo => {
                ddx_run.output.as_ref().is_none_or(Vec::is_empty)
            }
            _ => ddx_run.output == before,
        };
        if !untouched {
            return Some(format!("{shown}: refused ({}), but wrote", lines[0]));
        }
        return None;
    }
    if ddx_run.code != Some(0) {
        return Some(format!(
            "{shown}: should work; got {:?}: {}",
            ddx_run.code, ddx_run.stderr
        ));
    }
    ends.reset();
    let gnu_run = ends.gnu(i, o, infinite);
    if gnu_run.code != Some(0) {
        return Some(format!("{shown}: GNU dd failed: {}", gnu_run.stderr));
    }
    let (ours, gnus) = (&ddx_run.output, &gnu_run.output);
    let same = if i == In::Urandom {
        ours.as_ref().map(Vec::len) == gnus.as_ref().map(Vec::len)
    } else {
        ours == gnus
    };
    if !same {
        return Some(format!(
            "{shown}: output differs from GNU dd's ({:?} bytes, GNU {:?})",
            ours.as_ref().map(Vec::len),
            gnus.as_ref().map(Vec::len)
        ));
    }
    None
}

#[test]
fn every_option_on_every_end_works_as_gnu_dd_or_is_refused_before_writing() {
    let Some(ends) = rigs::or_skip(build()) else {
        return;
    };
    // Without the NBD end, an NBD URI is a file name like any other.
    let nbd = cfg!(feature = "nbd");
    let mut wrong = Vec::new();
    for row in ROWS {
        for i in INPUTS.into_iter().filter(|i| nbd || *i != In::Nbd) {
            for o in OUTPUTS.into_iter().filter(|o| nbd || *o != Out::Nbd) {
                wrong.extend(cell(&ends, row, i, o));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cells wrong:\n{}",
        wrong.len(),
        ROWS.len() * INPUTS.len() * OUTPUTS.len(),
        wrong.join("\n")
    );
}

/// The report's own example: GNU dd copies 4 MiB from /dev/zero; ddx
/// --rescue (and --map) used to "succeed" with nothing.
#[test]
fn rescue_from_a_character_device_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (option, input) in [
        ("--rescue", "/dev/zero"),
        ("--rescue", "/dev/urandom"),
        ("--map=m", "/dev/zero"),
    ] {
        let out = ddx()
            .current_dir(dir.path())
            .args([
                option,
                &format!("if={input}"),
                "of=r.img",
                "bs=1M",
                "count=4",
            ])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let option_name = option.split('=').next().unwrap();
        assert_eq!(
            stderr,
            format!(
                "ddx: {option_name} reads the input by position: if='{input}' is a character \
                 device, which has no positions\n"
            )
        );
        assert!(
            !dir.path().join("r.img").exists(),
            "{option}: r.img created"
        );
    }
}

/// A map that is an end of the copy would overwrite it: refused before
/// anything is opened for writing, the end unchanged.
#[test]
fn a_map_that_is_an_end_of_the_copy_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(0x0a11_5eed, 64 << 10);
    std::fs::write(dir.path().join("in"), &data).expect("input");
    std::fs::write(dir.path().join("out"), b"kept").expect("output");
    for map in ["in", "out"] {
        let out = ddx()
            .current_dir(dir.path())
            .args(["--resume", &format!("--map={map}"), "if=in", "of=out"])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("ddx: --map='{map}' is an end of the copy, which writing it would overwrite\n")
        );
        assert_eq!(std::fs::read(dir.path().join("in")).unwrap(), data);
        assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), b"kept");
    }
}

/// `--verify` onto what cannot be read back is refused before the copy,
/// not reported as a difference after it.
#[test]
fn verify_onto_what_cannot_be_read_back_is_refused_before_copying() {
    let out = ddx()
        .args([
            "--verify",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=1M",
            "count=4",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "ddx: --verify reads the output back: of='/dev/null' is the null device, which \
         keeps nothing\n"
    );
}

/// A `--tee` output is held to what `of=` is: under `--verify` one that
/// cannot be read back is refused before anything is created.
#[test]
fn verify_onto_a_tee_output_that_cannot_be_read_back_is_refused_before_copying() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, vec![7u8; 100_000]).unwrap();
    let output = dir.path().join("out");
    let readable = dir.path().join("tee");
    for tee in ["/dev/null", "/dev/zero"] {
        let run = ddx()
            .arg(operand("if", &input))
            .arg(operand("of", &output))
            .arg(format!("--tee={tee}"))
            .arg("--verify")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("--verify reads the output back: --tee='{tee}'")),
            "{stderr}"
        );
        assert!(!output.exists(), "nothing is created before the refusal");
    }
    // A tee output that can be read back is verified like of=.
    let run = ddx()
        .arg(operand("if", &input))
        .arg(operand("of", &output))
        .arg(format!("--tee={}", readable.display()))
        .args(["--verify", "bs=64k"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("identical to what was written").count(),
        2,
        "{stderr}"
    );
}
