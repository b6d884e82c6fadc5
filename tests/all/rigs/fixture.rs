//! Fixtures for running the programs: [`Compare`] runs GNU dd and ddx side
//! by side on the same operands and asserts that they agree (output bytes,
//! stdout, stderr, exit status), [`Ddx`] runs ddx alone and asserts how it
//! ends. Written in the spirit of uutils' `new_ucmd!().args(..).succeeds()`:
//! a test says what it runs and what it expects, not how to spawn, collect
//! and normalise.
//!
//! Each run of a comparison works in a fresh directory of its own holding
//! the same starting files, with relative names (`if=in`, `of=out`) and both
//! programs named `dd`, so that messages naming a file or the program
//! compare byte for byte. Only the time and rate of the statistics line are
//! cut; where outputs must be different devices, their names become `OUT`.
//! The differential suite has its own table machinery; this is for the
//! hand-written comparisons around it.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use super::cmd::{ddx, ddx_as_dd, gnu_dd};

/// Every backend, as ddx options: a comparison with `.backends(BACKENDS)`
/// holds each to GNU dd.
pub const BACKENDS: &[&[&str]] = &[
    &[],
    &["--backend=sync"],
    &["--backend=threads", "--queue-depth=1"],
    &["--backend=threads"],
    &["--backend=threads", "--queue-depth=4"],
    &["--backend=uring", "--queue-depth=4"],
];

/// Which of stderr must be the same.
#[derive(Clone, Copy, PartialEq)]
enum Stderr {
    /// Every line (time and rate aside).
    Whole,
    /// GNU's statistics lines only: ddx's options may add lines of their
    /// own (`--verbose`).
    Statistics,
    /// The byte total only: from a pipe, how reads split into records
    /// depends on timing.
    Total,
}

/// Where the programs write.
enum Output {
    Stdout,
    /// `of=out` in each run's directory.
    File,
    /// `of=PATH`, GNU's and ddx's (the same path, used in turn, or two
    /// devices); `fresh`: removed before each run.
    Paths {
        gnu: PathBuf,
        ddx: PathBuf,
        fresh: bool,
    },
}

/// GNU dd and ddx on the same operands; `run` asserts that they agree.
pub struct Compare<'a> {
    operands: Vec<String>,
    ddx_options: Vec<String>,
    backends: Vec<Vec<String>>,
    files: Vec<(String, Vec<u8>)>,
    stdin: Option<Vec<u8>>,
    /// `if=` GNU's and ddx's, where they differ (a device and the export
    /// behind it), each named `IN` in the messages compared.
    inputs: Option<(String, String)>,
    /// ddx's stderr lines holding this are left out of the comparison
    /// (the line of detail ddx adds after GNU's message for a remote end).
    ddx_extra_lines: Option<String>,
    output: Output,
    read_output_from: Option<PathBuf>,
    base: Option<PathBuf>,
    stderr: Stderr,
    allocation: bool,
    before_each: Option<Box<dyn Fn() + 'a>>,
    context: String,
}

/// One program's run: what it printed, how it ended, what it wrote.
pub struct Run {
    /// Which program, with ddx's options ("ddx --backend=sync").
    pub name: String,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    /// The output's bytes afterwards (None: there is none).
    pub output: Option<Vec<u8>>,
    output_path: Option<PathBuf>,
    blocks: Option<u64>,
    /// Holds the run's files (an output a test looks at afterwards).
    _dir: tempfile::TempDir,
}

/// The runs of a comparison that held: GNU dd's, and ddx's (one per
/// backend asked for). Their directories live as long as this.
pub struct Compared {
    pub gnu: Run,
    pub ddx: Vec<Run>,
}

impl Default for Compare<'_> {
    fn default() -> Self {
        Compare {
            operands: Vec::new(),
            ddx_options: Vec::new(),
            backends: vec![Vec::new()],
            files: Vec::new(),
            stdin: None,
            inputs: None,
            ddx_extra_lines: None,
            output: Output::Stdout,
            read_output_from: None,
            base: None,
            stderr: Stderr::Whole,
            allocation: false,
            before_each: None,
            context: String::new(),
        }
    }
}

impl<'a> Compare<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Operands for both programs.
    pub fn args<S: AsRef<str>>(mut self, operands: impl IntoIterator<Item = S>) -> Self {
        let operands = operands.into_iter().map(|s| s.as_ref().to_owned());
        self.operands.extend(operands);
        self
    }

    /// Options of ddx's own, before the operands (GNU dd gets none).
    pub fn ddx_args<S: AsRef<str>>(mut self, options: impl IntoIterator<Item = S>) -> Self {
        let options = options.into_iter().map(|s| s.as_ref().to_owned());
        self.ddx_options.extend(options);
        self
    }

    /// One ddx run per entry (each a set of options, as [`BACKENDS`]),
    /// each held to the one GNU run.
    pub fn backends(mut self, backends: &[&[&str]]) -> Self {
        self.backends = backends
            .iter()
            .map(|b| b.iter().map(|s| s.to_string()).collect())
            .collect();
        self
    }

    /// A file placed in each run's directory before it runs.
    pub fn file(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.push((name.to_owned(), bytes.into()));
        self
    }

    /// `if=PATH` for both (a device, a file with holes...).
    pub fn input_path(self, path: &Path) -> Self {
        self.args([format!("if={}", path.display())])
    }

    /// GNU dd reads `gnu`, ddx reads `ddx` (a file and an NBD URI over
    /// the same server, say), each named `IN` in the messages compared.
    pub fn inputs(mut self, gnu: &Path, ddx: &str) -> Self {
        self.inputs = Some((gnu.display().to_string(), ddx.to_owned()));
        self
    }

    /// Leave out of ddx's stderr the detail holding `marker` that ddx
    /// adds to one of GNU's messages (a server's words), after "; " on
    /// the same line: what is left is GNU's message.
    pub fn ddx_extra_lines(mut self, marker: &str) -> Self {
        self.ddx_extra_lines = Some(marker.to_owned());
        self
    }

    /// `bytes` written into a pipe on standard input as fast as the
    /// program takes them.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// `of=out`, in each run's directory (created there, unless a
    /// [`file`](Self::file) of that name is).
    pub fn output_file(mut self) -> Self {
        self.output = Output::File;
        self
    }

    /// `of=PATH` for both in turn, removed before each run.
    pub fn output_at(mut self, path: &Path) -> Self {
        self.output = Output::Paths {
            gnu: path.to_owned(),
            ddx: path.to_owned(),
            fresh: true,
        };
        self
    }

    /// `of=PATH` for both in turn, kept as it is (a device, an export:
    /// [`before_each`](Self::before_each) resets it).
    pub fn output_onto(mut self, path: &Path) -> Self {
        self.output = Output::Paths {
            gnu: path.to_owned(),
            ddx: path.to_owned(),
            fresh: false,
        };
        self
    }

    /// GNU dd writes `gnu`, ddx writes `ddx` (two devices alike), each
    /// named `OUT` in the messages compared.
    pub fn outputs(mut self, gnu: &Path, ddx: &Path) -> Self {
        self.output = Output::Paths {
            gnu: gnu.to_owned(),
            ddx: ddx.to_owned(),
            fresh: false,
        };
        self
    }

    /// Read what was written from `path` (the image behind an export)
    /// rather than from the output named to the programs.
    pub fn read_output_from(mut self, path: &Path) -> Self {
        self.read_output_from = Some(path.to_owned());
        self
    }

    /// The runs' directories go under `base` (a filesystem of the test's
    /// choosing) rather than the temporary directory.
    pub fn dir(mut self, base: &Path) -> Self {
        self.base = Some(base.to_owned());
        self
    }

    /// Compare GNU's statistics lines only (ddx's options add lines).
    pub fn statistics_only(mut self) -> Self {
        self.stderr = Stderr::Statistics;
        self
    }

    /// Compare the byte total only (records from a pipe depend on timing).
    pub fn total_only(mut self) -> Self {
        self.stderr = Stderr::Total;
        self
    }

    /// Compare the output's allocated blocks too (holes, conv=sparse).
    pub fn allocation(mut self) -> Self {
        self.allocation = true;
        self
    }

    /// Run `reset` before every run (to put a shared device back).
    pub fn before_each(mut self, reset: impl Fn() + 'a) -> Self {
        self.before_each = Some(Box::new(reset));
        self
    }

    /// Said in every failure, beside the operands and options.
    pub fn context(mut self, what: impl Into<String>) -> Self {
        self.context = what.into();
        self
    }

    /// Run ddx (once per backend), then GNU dd, and assert that each ddx
    /// run agrees with GNU's. ddx goes first, so that it meets the files as
    /// the test left them (a source not in the page cache, say), not as
    /// GNU's run leaves them.
    #[track_caller]
    pub fn run(self) -> Compared {
        let ddx: Vec<Run> = self
            .backends
            .iter()
            .map(|backend| self.run_one(Some(backend)))
            .collect();
        let gnu = self.run_one(None);
        for ours in &ddx {
            self.assert_agree(&gnu, ours);
        }
        Compared { gnu, ddx }
    }

    /// [`run`](Self::run), and both succeeded.
    #[track_caller]
    pub fn succeeds(self) -> Compared {
        let compared = self.run();
        assert!(
            compared.gnu.status.success(),
            "GNU dd failed: {}",
            compared.gnu.stderr
        );
        compared
    }

    fn run_one(&self, backend: Option<&Vec<String>>) -> Run {
        let mut dir = tempfile::Builder::new();
        dir.prefix(if backend.is_some() { "ddx-" } else { "gnu-" });
        let dir = match &self.base {
            Some(base) => dir.tempdir_in(base),
            None => dir.tempdir(),
        }
        .expect("a run's directory");
        for (name, bytes) in &self.files {
            std::fs::write(dir.path().join(name), bytes).expect("a run's file");
        }
        let (mut cmd, name) = match backend {
            None => (gnu_dd(), "GNU dd".to_owned()),
            Some(backend) => {
                let mut cmd = ddx_as_dd();
                cmd.args(backend).args(&self.ddx_options);
                let options = [&backend[..], &self.ddx_options].concat();
                (cmd, format!("ddx {}", options.join(" ")))
            }
        };
        let output_path = match &self.output {
            Output::Stdout => None,
            Output::File => Some(dir.path().join("out")),
            Output::Paths { gnu, ddx, fresh } => {
                let path = if backend.is_some() { ddx } else { gnu };
                if *fresh {
                    let _ = std::fs::remove_file(path);
                }
                Some(path.clone())
            }
        };
        cmd.current_dir(dir.path()).args(&self.operands);
        let input = self
            .inputs
            .as_ref()
            .map(|(gnu, ddx)| if backend.is_some() { ddx } else { gnu });
        if let Some(input) = input {
            cmd.arg(format!("if={input}"));
        }
        match &self.output {
            Output::Stdout => {}
            Output::File => {
                cmd.arg("of=out");
            }
            Output::Paths { .. } => {
                let path = output_path.as_ref().expect("an output path");
                cmd.arg(format!("of={}", path.display()));
            }
        }
        if let Some(reset) = &self.before_each {
            reset();
        }
        let out = with_stdin(&mut cmd, self.stdin.as_deref());
        let read_from = self.read_output_from.as_ref().or(output_path.as_ref());
        let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if let (Output::Paths { .. }, Some(path)) = (&self.output, &output_path) {
            stderr = stderr.replace(&path.display().to_string(), "OUT");
        }
        if let Some(input) = input {
            stderr = stderr.replace(input.as_str(), "IN");
        }
        if let (Some(marker), Some(_)) = (&self.ddx_extra_lines, backend) {
            stderr = stderr
                .lines()
                .filter_map(|line| match line.find("; ") {
                    Some(end) if line[end..].contains(marker.as_str()) => Some(&line[..end]),
                    _ if line.contains(marker.as_str()) => None,
                    _ => Some(line),
                })
                .map(|line| format!("{line}\n"))
                .collect();
        }
        Run {
            name,
            status: out.status,
            stdout: out.stdout,
            stderr,
            output: read_from.and_then(|path| std::fs::read(path).ok()),
            blocks: read_from
                .and_then(|path| std::fs::metadata(path).ok())
                .map(|meta| meta.blocks()),
            output_path,
            _dir: dir,
        }
    }

    #[track_caller]
    fn assert_agree(&self, gnu: &Run, ours: &Run) {
        let what = format!(
            "{}{}{} {}",
            self.context,
            if self.context.is_empty() { "" } else { ": " },
            ours.name,
            self.operands.join(" ")
        );
        assert_eq!(
            (ours.status.code(), ours.status.signal()),
            (gnu.status.code(), gnu.status.signal()),
            "exit status, {what}\nddx said: {}\nGNU said: {}",
            ours.stderr,
            gnu.stderr
        );
        assert_eq!(
            self.comparable(&ours.stderr),
            self.comparable(&gnu.stderr),
            "stderr, {what}"
        );
        assert!(ours.stdout == gnu.stdout, "stdout differs, {what}");
        match (&ours.output, &gnu.output) {
            (Some(a), Some(b)) => assert!(
                a == b,
                "output differs, {what}: {} bytes, GNU {}, first difference at {:?}",
                a.len(),
                b.len(),
                a.iter().zip(b).position(|(x, y)| x != y)
            ),
            (a, b) => assert_eq!(a.is_some(), b.is_some(), "output exists, {what}"),
        }
        if self.allocation {
            assert_eq!(ours.blocks, gnu.blocks, "allocated blocks, {what}");
        }
    }

    /// The part of stderr that must be the same.
    fn comparable(&self, stderr: &str) -> Vec<String> {
        match self.stderr {
            Stderr::Whole => stderr.lines().map(untimed).collect(),
            Stderr::Statistics => statistics(stderr),
            Stderr::Total => statistics(stderr).pop().into_iter().collect(),
        }
    }
}

impl Compared {
    /// ddx's run, where there was one backend.
    pub fn ddx(&self) -> &Run {
        assert_eq!(self.ddx.len(), 1, "one backend, one run");
        &self.ddx[0]
    }
}

impl Run {
    /// Where it wrote (the file is kept as long as the run).
    pub fn output_path(&self) -> &Path {
        self.output_path.as_deref().expect("a run with an output")
    }
}

/// GNU's statistics lines in `stderr` (records in, records out, bytes),
/// without time and rate: what must agree whatever else a run printed.
pub fn statistics(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|line| line.starts_with(|c: char| c.is_ascii_digit()))
        .map(untimed)
        .collect()
}

/// `line` without the time and rate of a statistics line.
fn untimed(line: &str) -> String {
    match line.find(" copied, ") {
        Some(at) => line[..at].to_owned(),
        None => line.to_owned(),
    }
}

/// ddx alone, run to the end: `Ddx::new().args(..).fails_with("...")`.
pub struct Ddx {
    cmd: Command,
    stdin: Option<Vec<u8>>,
    /// The command line, for failures.
    shown: String,
}

/// How a run of ddx ended.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Ddx {
    /// ddx naming itself "ddx", in the C locale, with no terminal on stdin.
    pub fn new() -> Ddx {
        Ddx {
            cmd: ddx(),
            stdin: None,
            shown: "ddx".into(),
        }
    }

    /// ddx naming itself "dd", for messages that compare with GNU's.
    pub fn as_dd() -> Ddx {
        Ddx {
            cmd: ddx_as_dd(),
            stdin: None,
            shown: "ddx".into(),
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.shown += &format!(" {}", arg.as_ref().to_string_lossy());
        self.cmd.arg(arg);
        self
    }

    pub fn args<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Self {
        args.into_iter().fold(self, Ddx::arg)
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        vars.into_iter().fold(self, |ddx, (k, v)| ddx.env(k, v))
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// `bytes` on standard input, through a pipe.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Run to the end, whatever the outcome.
    pub fn run(mut self) -> Ran {
        let out = with_stdin(&mut self.cmd, self.stdin.as_deref());
        Ran {
            status: out.status,
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run, and it exited 0.
    #[track_caller]
    pub fn succeeds(self) -> Ran {
        let shown = self.shown.clone();
        let ran = self.run();
        assert!(ran.status.success(), "{shown} failed: {}", ran.stderr);
        ran
    }

    /// Run, and it exited 1.
    #[track_caller]
    pub fn fails(self) -> Ran {
        let shown = self.shown.clone();
        let ran = self.run();
        assert_eq!(ran.status.code(), Some(1), "{shown}: {}", ran.stderr);
        ran
    }

    /// Run, and it exited 2: a rescue that ran its course and left bad
    /// areas.
    #[track_caller]
    pub fn leaves_bad_areas(self) -> Ran {
        let shown = self.shown.clone();
        let ran = self.run();
        assert_eq!(ran.status.code(), Some(2), "{shown}: {}", ran.stderr);
        ran
    }

    /// Run, it exited 1, and stderr says `message`.
    #[track_caller]
    pub fn fails_with(self, message: &str) -> Ran {
        let shown = self.shown.clone();
        let ran = self.fails();
        assert!(
            ran.stderr.contains(message),
            "{shown}: wanted {message:?}, got {}",
            ran.stderr
        );
        ran
    }
}

impl Ran {
    /// Its stderr holds `text`; a failure shows the whole stderr.
    #[track_caller]
    pub fn says(&self, text: &str) -> &Ran {
        assert!(
            self.stderr.contains(text),
            "wanted {text:?} in stderr: {}",
            self.stderr
        );
        self
    }
}

/// `cmd` run to the end with `stdin` fed into a pipe by a thread (the
/// program may stop reading early), or no stdin at all.
fn with_stdin(cmd: &mut Command, stdin: Option<&[u8]>) -> std::process::Output {
    let Some(bytes) = stdin else {
        return cmd.stdin(Stdio::null()).output().expect("run");
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    let bytes = bytes.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&bytes);
    });
    let out = child.wait_with_output().expect("wait");
    feeder.join().expect("the stdin feeder");
    out
}
