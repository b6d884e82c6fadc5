//! `tcp://HOST:PORT` ends on loopback: a disk image sent to a listener
//! the test runs and received from a sender it runs, two ddx processes
//! cloning through one connection (what `dd | nc` and `nc -l | dd` do),
//! GNU dd's statistics for the same records, and the refusals and
//! failures a user meets, each one line.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::rigs::bytes::{file_with, pattern};
use crate::rigs::cmd::{ddx, gnu_dd, operand};

/// A port nothing listens on now (bound and let go: another test may
/// take it in between, which only makes a test fail loudly).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a loopback port")
        .port()
}

/// Connect to `port` once something listens there.
fn connect_when_listening(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => return stream,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("nothing listened on {port}: {e}"),
        }
    }
}

fn finish(child: Child) -> Output {
    child.wait_with_output().expect("ddx ran")
}

/// GNU's statistics lines, the time's line left out.
fn counts(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|line| line.contains("records"))
        .map(str::to_owned)
        .collect()
}

fn gnu_counts(args: &[String]) -> Vec<String> {
    let out = gnu_dd().args(args).output().expect("GNU dd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    counts(&out.stderr)
}

#[test]
fn an_image_sent_to_a_listener_arrives_whole_with_gnu_dds_counts() {
    let data = pattern(0x7c9, 3 * (1 << 20) + 4321);
    let (dir, input) = file_with("disk.img", &data);
    let listener = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = listener.local_addr().unwrap().port();
    let sender = ddx()
        .arg(operand("if", &input))
        .arg(format!("of=tcp://127.0.0.1:{port}"))
        .arg("bs=64K")
        .stderr(Stdio::piped())
        .spawn()
        .expect("ddx");
    let (mut connection, _) = listener.accept().expect("ddx connects");
    let mut got = Vec::new();
    connection.read_to_end(&mut got).expect("the image");
    let out = finish(sender);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(got == data, "{} bytes arrived of {}", got.len(), data.len());
    let gnu = gnu_counts(&[
        operand("if", &input),
        operand("of", &dir.path().join("gnu")),
        "bs=64K".into(),
    ]);
    assert_eq!(counts(&out.stderr), gnu);
}

#[test]
fn a_listening_ddx_takes_the_first_connection_and_reads_it_as_a_pipe() {
    let data = pattern(0x51, 1 << 20);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let receiver = ddx()
        .current_dir(dir.path())
        .arg(format!("if=tcp://127.0.0.1:{port}?listen"))
        .args(["of=received.img", "bs=64K", "iflag=fullblock"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("ddx");
    let mut connection = connect_when_listening(port);
    // In small pieces, as a network delivers them: fullblock gathers
    // whole records, as GNU dd's does from a pipe.
    for piece in data.chunks(10_000) {
        connection.write_all(piece).expect("send");
    }
    drop(connection);
    let out = finish(receiver);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(dir.path().join("received.img")).unwrap() == data);
    assert_eq!(counts(&out.stderr), ["16+0 records in", "16+0 records out"]);
}

#[test]
fn two_ddx_clone_a_disk_through_one_connection() {
    let data = pattern(0x2dd, 5 * (1 << 20));
    let (dir, input) = file_with("disk.img", &data);
    let port = free_port();
    let sender = ddx()
        .arg(operand("if", &input))
        .arg(format!("of=tcp://127.0.0.1:{port}?listen"))
        .arg("bs=1M")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sender");
    // The receiver connects once the sender listens: a try before that
    // is refused, and connects to nothing.
    let clone = dir.path().join("clone.img");
    let receiver = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let run = ddx()
                .arg(format!("if=tcp://127.0.0.1:{port}"))
                .arg(operand("of", &clone))
                .args(["bs=1M", "iflag=fullblock"])
                .output()
                .expect("the receiver");
            if run.status.success() || Instant::now() > deadline {
                break run;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let sent = finish(sender);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(
        receiver.status.success(),
        "{}",
        String::from_utf8_lossy(&receiver.stderr)
    );
    assert!(std::fs::read(&clone).unwrap() == data);
}

#[test]
fn what_a_connection_cannot_do_is_refused_and_failures_name_the_address() {
    let (dir, input) = file_with("disk.img", pattern(9, 100_000));
    let listener = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let run = |args: &[String]| {
        ddx()
            .current_dir(dir.path())
            .args(args)
            .output()
            .expect("run")
    };
    let one_line = |out: &Output| {
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
        text
    };

    // A copy by position onto a connection: refused before connecting.
    let out = run(&[
        "--rescue".into(),
        operand("if", &input),
        format!("of=tcp://127.0.0.1:{port}"),
    ]);
    let text = one_line(&out);
    assert!(text.contains("a socket"), "{text}");
    assert!(
        listener.accept().is_err(),
        "a refused copy connected to the listener"
    );

    // Nothing listening: the address and the system's words.
    let closed = free_port();
    let out = run(&[
        operand("if", &input),
        format!("of=tcp://127.0.0.1:{closed}"),
    ]);
    let text = one_line(&out);
    assert!(
        text.contains(&format!("127.0.0.1:{closed}")) && text.contains("refused"),
        "{text}"
    );

    // A URI that cannot be right: why, in one line, nothing created.
    for bad in ["tcp://127.0.0.1", "tcp://127.0.0.1:9000?wait"] {
        let out = run(&[operand("if", &input), format!("of={bad}")]);
        let text = one_line(&out);
        assert!(text.contains("tcp://"), "{text}");
    }
    assert!(!Path::new(&dir.path().join("tcp:")).exists());
}
