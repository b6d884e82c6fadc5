//! splice(2) for pipe ends: with auto, records move inside the kernel
//! (ddx says so under --verbose), and the bytes, the statistics and what
//! is left in the input pipe are GNU dd's.

use std::io::Write;
use std::process::Stdio;

use crate::rigs;
use crate::rigs::cmd::{invoked_as, DDX};

fn pattern(len: usize) -> Vec<u8> {
    rigs::bytes::ramp(len, 13, 1000)
}

/// GNU's statistics lines without timing; ddx's --verbose lines apart.
fn split_stderr(stderr: &[u8]) -> (Vec<String>, String) {
    let text = String::from_utf8_lossy(stderr).into_owned();
    let statistics = text
        .lines()
        .filter(|l| !l.starts_with("dd: "))
        .map(|l| l.split(" copied, ").next().unwrap_or(l).to_owned())
        .collect();
    (statistics, text)
}

/// Run `program` with `input` written into its stdin pipe, all at once.
fn with_stdin_pipe(program: &str, args: &[String], input: &[u8]) -> std::process::Output {
    let mut child = invoked_as(program, "dd")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

#[test]
fn a_pipe_into_a_file_is_spliced_and_equals_gnu_dd() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3_000_000 + 17);
    for operands in [
        vec!["bs=64k"],
        vec!["bs=1M", "count=2"],
        vec!["bs=4096", "seek=3"],
    ] {
        let run = |program: &str, name: &str, extra: &[&str]| {
            let mut args: Vec<String> = vec![format!("of={}", dir.path().join(name).display())];
            args.extend(operands.iter().map(|s| s.to_string()));
            args.extend(extra.iter().map(|s| s.to_string()));
            with_stdin_pipe(program, &args, &data)
        };
        let ours = run(DDX, "ours", &["--verbose"]);
        let theirs = run("dd", "theirs", &[]);
        let (ours_statistics, ours_text) = split_stderr(&ours.stderr);
        assert!(ours_text.contains("splice"), "not spliced: {ours_text}");
        // Read sizes from a pipe depend on timing: compare totals, which do not.
        let bytes = |s: &[String]| s.last().cloned().unwrap_or_default();
        assert_eq!(
            bytes(&ours_statistics),
            bytes(&split_stderr(&theirs.stderr).0),
            "{operands:?}"
        );
        assert_eq!(ours.status.code(), theirs.status.code());
        let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
        assert!(
            read("ours") == read("theirs"),
            "{operands:?}: outputs differ"
        );
    }
}

#[test]
fn a_file_into_a_pipe_is_spliced_and_equals_gnu_dd() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(5_000_000 + 3)).unwrap();
    for operands in [
        vec!["bs=1M"],
        vec!["bs=100000", "skip=3", "count=20"],
        vec!["bs=512"],
    ] {
        let run = |program: &str, extra: &[&str]| {
            invoked_as(program, "dd")
                .arg(format!("if={}", input.display()))
                .args(&operands)
                .args(extra)
                .stdout(Stdio::piped())
                .output()
                .unwrap()
        };
        let ours = run(DDX, &["--verbose"]);
        let theirs = run("dd", &[]);
        let (ours_statistics, ours_text) = split_stderr(&ours.stderr);
        assert!(ours_text.contains("splice"), "not spliced: {ours_text}");
        // A file reads whole records: the statistics are exact.
        assert_eq!(
            ours_statistics,
            split_stderr(&theirs.stderr).0,
            "{operands:?}"
        );
        assert!(ours.stdout == theirs.stdout, "{operands:?}: outputs differ");
    }
}

#[test]
fn conversions_and_explicit_sync_do_not_splice() {
    for extra in [
        &["conv=ucase"][..],
        &["--backend=sync"],
        &["--no-offload"],
        &["iflag=fullblock"],
    ] {
        let out = with_stdin_pipe(
            DDX,
            &[&["of=/dev/null", "bs=64k", "--verbose"][..], extra]
                .concat()
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
            &pattern(100_000),
        );
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("splice"), "{extra:?} spliced: {text}");
    }
}
