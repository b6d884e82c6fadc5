//! Running one case with one program and recording everything observable.
//!
//! Both programs run in their own fresh directory holding identical files, with
//! the directory as cwd and relative names, so every message that names a file
//! is byte-comparable. What we record is exactly what a user could see: exit
//! status, stdout, stderr, and the final state of every file in the directory
//! (which covers "the output exists / was not created / kept its tail").

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::{kill_process_group, Pid};

use super::case::{Case, Entry, Signal, Stdin};

/// A hung program must not hang the suite; no case legitimately needs more
/// than a fraction of a second.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// The pause around a signal in `Stdin::Signalled` cases.
const SIGNAL_SETTLE: Duration = Duration::from_millis(300);

/// A program under comparison. `name` is what it is called as (argv[0] and
/// the name in the shim directory): GNU prints argv[0] verbatim in its
/// messages, so both programs are called by a bare name.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: &'static str,
    pub path: PathBuf,
    /// Passed before the operands (ddx's own options, such as a backend, so
    /// every code path can be held to GNU's behaviour).
    pub leading_args: Vec<String>,
}

/// Where runs happen and how shell-wrapped cases find the programs.
pub struct Place {
    /// Parent of the per-run temporary directories.
    pub base: PathBuf,
    /// PATH for `sh -c` cases: a directory with `dd` and `ddx` symlinks
    /// first, so `"$DD"` runs the program under its bare name.
    pub path_var: OsString,
}

#[derive(Debug, PartialEq)]
pub enum FileState {
    Regular {
        mode: u32,
        bytes: Vec<u8>,
        /// Allocated 512-byte blocks, recorded only for conv=sparse cases:
        /// that is where "holes, not written zeros" is the behaviour.
        blocks: Option<u64>,
    },
    Symlink(PathBuf),
    Dir,
    Other,
}

#[derive(Debug)]
pub struct Outcome {
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub files: BTreeMap<String, FileState>,
}

pub fn run(case: &Case, program: &Program, place: &Place) -> Outcome {
    let dir = tempfile::Builder::new()
        .prefix(program.name)
        .tempdir_in(&place.base)
        .expect("create run directory");
    populate(dir.path(), &case.entries);

    let mut command = command_for(case, program, place, dir.path());
    let stdin_writer = connect_stdin(&mut command, &case.stdin, dir.path());
    let mut child = command.spawn().expect("spawn program");
    // Our copies of the child's stdin (notably a pipe's read end) must go,
    // or a feeder could never see the reader leave.
    drop(command);

    let pid = child.id();
    let feeder = stdin_writer.map(|writer| start_feeder(writer, &case.stdin, pid));
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let status = wait_limited(child);
    if let Some(feeder) = feeder {
        feeder.join().expect("stdin feeder");
    }
    Outcome {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        files: snapshot(
            dir.path(),
            case.operands.iter().any(|op| op.contains("sparse")),
        ),
    }
}

/// The program itself, or `sh -c` around it, in `dir`, in the C locale.
fn command_for(case: &Case, program: &Program, place: &Place, dir: &Path) -> Command {
    let mut command = match &case.shell {
        Some(script) => {
            let mut command = Command::new("sh");
            command
                .arg("-c")
                .arg(script)
                .arg("sh")
                .args(&program.leading_args)
                .args(&case.operands)
                .env("DD", program.name)
                .env("PATH", &place.path_var);
            command
        }
        None => {
            let mut command = Command::new(&program.path);
            command
                .arg0(program.name)
                .args(&program.leading_args)
                .args(&case.operands);
            command
        }
    };
    command
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("POSIXLY_CORRECT")
        // Its own process group, so a timeout can kill a shell's children too.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Wire up stdin; for pipes fed while the program runs, return the write end.
fn connect_stdin(command: &mut Command, stdin: &Stdin, dir: &Path) -> Option<OwnedFd> {
    match stdin {
        Stdin::Null => {
            command.stdin(Stdio::null());
            None
        }
        Stdin::File(name) => {
            let file = File::open(dir.join(name)).expect("open stdin file");
            command.stdin(file);
            None
        }
        Stdin::Pipe(bytes) => {
            command.stdin(filled_pipe(bytes));
            None
        }
        Stdin::Chunks(_) | Stdin::Stream(_) | Stdin::Signalled { .. } => {
            let (reader, writer) = cloexec_pipe();
            command.stdin(reader);
            Some(writer)
        }
    }
}

fn start_feeder(writer: OwnedFd, stdin: &Stdin, pid: u32) -> thread::JoinHandle<()> {
    match stdin {
        Stdin::Chunks(chunks) => {
            let chunks = chunks.clone();
            thread::spawn(move || feed_chunks(writer, chunks))
        }
        Stdin::Stream(bytes) => {
            let bytes = bytes.clone();
            thread::spawn(move || {
                // An early exit of the reader is a legitimate end (EPIPE).
                let _ = File::from(writer).write_all(&bytes);
            })
        }
        Stdin::Signalled {
            before,
            signal,
            after,
        } => {
            let (before, after, signal) = (before.clone(), after.clone(), *signal);
            thread::spawn(move || {
                let mut pipe = File::from(writer);
                if pipe.write_all(&before).is_err() || !wait_drained(&pipe) {
                    return;
                }
                // Long enough for the program to have processed what it read
                // and be blocked in the next read when the signal comes.
                thread::sleep(SIGNAL_SETTLE);
                let signal = match signal {
                    Signal::Usr1 => rustix::process::Signal::USR1,
                    Signal::Int => rustix::process::Signal::INT,
                };
                if let Some(pid) = Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, signal);
                }
                thread::sleep(SIGNAL_SETTLE);
                let _ = pipe.write_all(&after);
            })
        }
        _ => unreachable!("only fed pipes have a writer"),
    }
}

/// Create the case's files in `dir` (also used to save a failing case's
/// starting state for its reproduction command).
pub fn populate(dir: &Path, entries: &[Entry]) {
    for entry in entries {
        match entry {
            Entry::File { name, bytes } => {
                fs::write(dir.join(name), bytes).expect("write case file")
            }
            Entry::Symlink { name, target } => {
                std::os::unix::fs::symlink(target, dir.join(name)).expect("create case symlink")
            }
            Entry::Dir { name } => fs::create_dir(dir.join(name)).expect("create case directory"),
        }
    }
}

/// Close-on-exec, because other workers fork concurrently: an inherited copy
/// of a write end in some unrelated child would delay our reader's EOF.
fn cloexec_pipe() -> (OwnedFd, OwnedFd) {
    pipe_with(PipeFlags::CLOEXEC).expect("create pipe")
}

fn filled_pipe(bytes: &[u8]) -> OwnedFd {
    // Below the 64 KiB pipe capacity the write completes without a reader.
    assert!(bytes.len() <= 60_000, "pipe payload too large to prefill");
    let (reader, writer) = cloexec_pipe();
    File::from(writer).write_all(bytes).expect("prefill pipe");
    reader
}

/// Write chunk after chunk, each only once the reader has taken everything
/// before it. A chunk arrives whole (one write into an empty pipe), so every
/// read returns min(request, bytes left in this chunk): short reads are
/// reproducible instead of depending on scheduling.
fn feed_chunks(writer: OwnedFd, chunks: Vec<Vec<u8>>) {
    let mut pipe = File::from(writer);
    for chunk in &chunks {
        assert!(chunk.len() <= 4096, "chunk larger than one pipe page");
        if pipe.write_all(chunk).is_err() || !wait_drained(&pipe) {
            return; // the reader has gone; what is left is never read
        }
    }
}

/// True once the pipe is empty; false when the reader closed its end or a
/// generous limit passed.
fn wait_drained(pipe: &File) -> bool {
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        match rustix::io::ioctl_fionread(pipe) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
        let mut fds = [PollFd::new(pipe, PollFlags::OUT)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if poll(&mut fds, Some(&zero)).is_err()
            || fds[0].revents().contains(PollFlags::ERR)
            || Instant::now() > deadline
        {
            return false;
        }
        thread::sleep(Duration::from_micros(100));
    }
}

fn drain(mut source: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = source.read_to_end(&mut bytes);
        bytes
    })
}

/// Wait for the exit without polling (a case takes about a millisecond, so
/// polling would dominate), killing the process group at the time limit.
fn wait_limited(mut child: Child) -> String {
    let group = Pid::from_raw(child.id() as i32);
    let (done, exited) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait().expect("wait for program");
        let _ = done.send(());
        status
    });
    let timed_out = exited.recv_timeout(RUN_LIMIT).is_err();
    if timed_out {
        // The child is not reaped yet (the waiter has not returned), so its
        // pid, and with it the group id, cannot have been reused.
        if let Some(group) = group {
            let _ = kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
    let status = waiter.join().expect("waiter thread");
    if timed_out {
        return format!("timed out after {} s", RUN_LIMIT.as_secs());
    }
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => format!("{status}"),
    }
}

fn snapshot(dir: &Path, with_blocks: bool) -> BTreeMap<String, FileState> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).expect("list run directory") {
        let entry = entry.expect("read run directory entry");
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).expect("stat run directory entry");
        let state = if meta.file_type().is_symlink() {
            FileState::Symlink(fs::read_link(&path).expect("read symlink"))
        } else if meta.is_dir() {
            FileState::Dir
        } else if meta.is_file() {
            FileState::Regular {
                mode: meta.permissions().mode() & 0o7777,
                bytes: fs::read(&path).expect("read output file"),
                blocks: with_blocks.then(|| meta.blocks()),
            }
        } else {
            FileState::Other
        };
        files.insert(entry.file_name().to_string_lossy().into_owned(), state);
    }
    files
}
