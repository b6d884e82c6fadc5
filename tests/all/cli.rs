//! Integration tests of the ddx binary's behaviour that the differential
//! suite cannot see: signals, stdin left for the next reader, validation
//! before any file is touched, help and version.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::rigs;
use crate::rigs::cmd::{ddx, invoked_as, operand, shell, DDX};
use crate::rigs::fixture::{Compare, Ddx};
use crate::rigs::signal::{send, wait_for_handler};

#[test]
fn sigusr1_prints_statistics_and_the_copy_goes_on() {
    let child = ddx()
        .args(["if=/dev/zero", "of=/dev/null", "bs=64k", "count=200000"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_handler(child.id(), libc::SIGUSR1);
    send(child.id(), libc::SIGUSR1);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("records in").count(), 2, "{err}");
    assert!(
        err.contains("200000+0 records in\n200000+0 records out\n"),
        "{err}"
    );
}

#[test]
fn sigint_prints_statistics_and_dies_of_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let child = ddx()
        .args(["if=/dev/zero", "of=/dev/null", "bs=1k"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_handler(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    send(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].ends_with("+0 records in"), "{err}");
    assert!(lines[2].contains(" copied, "), "{err}");
}

#[test]
fn stdin_after_count_is_left_for_the_next_reader() {
    let (_dir, input) = rigs::bytes::file_with("in", b"abcdefghij");
    let script = format!("{DDX} bs=3 count=1 status=none; cat");
    for feed in ["file", "pipe"] {
        let fed = if feed == "file" {
            format!("({script}) < {}", input.display())
        } else {
            format!("cat {} | ({script})", input.display())
        };
        let out = shell(&fed).output().unwrap();
        assert_eq!(out.stdout, b"abcdefghij", "stdin from a {feed}");
    }
}

#[test]
fn stdin_after_a_failed_write_is_where_gnu_dd_leaves_it() {
    // GNU reads a record, writes it, and stops at the write that fails;
    // ddx's reader runs ahead. What a script reads next from the same
    // standard input must not depend on which dd it ran.
    let (_dir, input) = rigs::bytes::file_with("in", rigs::bytes::pattern(7, 8 << 20));
    // /dev/full fails the first write; a full 1 MiB tmpfs fails one part
    // way, after writes that went through.
    let small = rigs::SmallTmpfs::new(1 << 20);
    let mut outputs = vec![("/dev/full".to_owned(), false)];
    match &small {
        Ok(fs) => outputs.push((fs.path().join("out").display().to_string(), true)),
        Err(reason) => rigs::skip(&format!("ENOSPC part way (only /dev/full): {reason}")),
    }
    let left = |dd: &str, operands: &str, (output, scratch): &(String, bool)| {
        if *scratch {
            let _ = std::fs::remove_file(output);
        }
        let script = format!(
            "{{ {dd} {operands} of={output} 2>/dev/null; cat | wc -c; }} < {}",
            input.display()
        );
        let out = shell(&script).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for output in &outputs {
        for operands in [
            "bs=64k",
            "bs=1M",
            "bs=512",
            "ibs=64k obs=4k",
            "ibs=4k obs=64k",
            "bs=64k skip=3",
            "bs=100k conv=sync",
            "bs=1M iflag=direct",
        ] {
            let gnu = left("dd", operands, output);
            for backend in ["", "--backend=sync", "--backend=threads", "--backend=uring"] {
                let ours = left(&format!("{DDX} {backend}"), operands, output);
                assert_eq!(ours, gnu, "{operands} {backend} of={}", output.0);
            }
        }
    }
}

#[test]
fn stdin_after_read_errors_passed_over_is_where_gnu_dd_leaves_it() {
    // With conv=noerror the copy goes on past a bad block to the end of
    // the input: nothing to give back, whatever the records counted.
    let contents = rigs::bytes::pattern(11, 1 << 20);
    let Some(device) = rigs::or_skip(rigs::NbdDevice::with_bad_ranges(
        &contents,
        &[(0x40000, 0x200)],
    )) else {
        return;
    };
    for operands in ["bs=4k conv=noerror", "bs=4k conv=noerror,sync", "bs=64k"] {
        let left = |dd: &str| {
            let script = format!(
                "{{ {dd} {operands} of=/dev/null 2>/dev/null; cat | wc -c; }} < {}",
                device.path.display()
            );
            let out = shell(&script).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let gnu = left("dd");
        for backend in ["", "--backend=sync", "--backend=threads"] {
            assert_eq!(
                left(&format!("{DDX} {backend}")),
                gnu,
                "{operands} {backend}"
            );
        }
    }
}

#[test]
fn bad_operands_touch_no_file() {
    let (dir, out) = rigs::bytes::file_with("out", b"precious");
    let of = format!("of={}", out.display());
    for bad in [
        vec![of.as_str(), "bs=0"],
        vec![of.as_str(), "conv=nosuch"],
        vec![of.as_str(), "conv=ascii,ebcdic"],
        vec![of.as_str(), "oflag=fullblock"],
        vec![of.as_str(), "if=/nonexistent/input"],
        vec![of.as_str(), "count=1", "junk"],
    ] {
        let ran = Ddx::new().args(&bad).fails();
        assert!(ran.stderr.starts_with("ddx: "), "{}", ran.stderr);
        assert_eq!(std::fs::read(&out).unwrap(), b"precious", "{bad:?}");
    }
    let missing = dir.path().join("missing");
    Ddx::new()
        .args([operand("of", &missing), "bs=0".into()])
        .fails();
    assert!(
        !missing.exists(),
        "an invalid operand must not create the output"
    );
}

/// `--option VALUE` is never read as `--option=VALUE`: every option that
/// takes a value, followed by an operand, by a plain word or by nothing,
/// is getopt's "requires an argument" (exit 1, nothing created), and the
/// word after it is left as an operand.
#[test]
fn an_option_never_takes_the_next_word_as_its_value() {
    let (dir, input) = rigs::bytes::file_with("in", b"data");
    let output = dir.path().join("out");
    let if_ = format!("if={}", input.display());
    let of = format!("of={}", output.display());
    // An option whose value may be left out (--decompress) is a switch
    // when given alone: the next word is then an operand, as wanted.
    let valued: Vec<&str> = ddx::cli::options::OPTIONS
        .iter()
        .filter(|o| {
            o.value.is_some() && !matches!(o.values, ddx::cli::options::Values::Optional(_))
        })
        .map(|o| o.name)
        .collect();
    for name in [
        "map",
        "hash",
        "hash-file",
        "sector-size",
        "backend",
        "queue-depth",
    ] {
        assert!(valued.contains(&name), "--{name} takes a value");
    }
    for spec in ddx::cli::options::OPTIONS
        .iter()
        .filter(|o| valued.contains(&o.name))
    {
        let name = spec.name;
        let option = format!("--{name}");
        let value = spec.value.unwrap();
        let followers: [&[&str]; 4] = [&[&if_, &of], &[], &["FILE", &if_, &of], &[&of, "4"]];
        for after in followers {
            let out = ddx()
                .arg(&option)
                .args(after)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{option} {after:?}: {err}");
            assert_eq!(
                err,
                format!(
                    "ddx: option '{option}' requires an argument: give it in the same \
                     word, as {option}={value}\n\
                     Try 'ddx --help' for more information.\n"
                ),
                "{option} {after:?}"
            );
            assert!(out.stdout.is_empty());
            assert!(!output.exists(), "{option} {after:?} created the output");
        }
    }
    // With its value in the same word, the next word is an operand, and
    // one without '=' fails as GNU dd's does.
    let gnu = rigs::cmd::gnu_dd()
        .args(["FILE", &if_, &of])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ours = rigs::cmd::ddx_as_dd()
        .args(["--queue-depth=4", "FILE", &if_, &of])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        (ours.status.code(), String::from_utf8_lossy(&ours.stderr)),
        (gnu.status.code(), String::from_utf8_lossy(&gnu.stderr))
    );
    assert!(!output.exists());
}

#[test]
fn errors_name_the_operand_in_one_line() {
    let ran = Ddx::new().arg("bs=12q").fails();
    assert_eq!(ran.stderr, "ddx: invalid number: '12q'\n");
    let ran = Ddx::new().arg("conv=lcase,nope").fails();
    assert_eq!(
        ran.stderr,
        "ddx: invalid conversion: 'nope'\nTry 'ddx --help' for more information.\n"
    );
}

#[test]
fn messages_name_the_program_as_invoked() {
    let out = invoked_as(DDX, DDX).arg("foo=1").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("{DDX}: unrecognized operand 'foo=1'\n")),
        "{err}"
    );
}

#[test]
fn help_lists_every_operand_and_version_names_ddx() {
    let help = String::from_utf8(Ddx::new().arg("--help").succeeds().stdout).unwrap();
    for operand in [
        "bs=",
        "cbs=",
        "conv=",
        "count=",
        "ibs=",
        "if=",
        "iflag=",
        "obs=",
        "of=",
        "oflag=",
        "seek=",
        "skip=",
        "status=",
        "--help",
        "--version",
    ] {
        assert!(help.contains(operand), "--help lacks {operand}");
    }
    let version = Ddx::new().arg("--version").succeeds().stdout;
    assert!(String::from_utf8(version).unwrap().starts_with("ddx "));
}

/// `ddx --help` begins with GNU dd's own help, word for word up to its
/// options (GNU's closing lines point at GNU coreutils' project and are
/// left out), so a script that reads `dd --help` finds what it expects;
/// ddx's additions come after it.
#[test]
fn help_begins_with_gnu_dds_help_word_for_word() {
    let gnu = rigs::cmd::gnu_dd().arg("--help").output().unwrap();
    let gnu = String::from_utf8(gnu.stdout).unwrap();
    let end = gnu
        .find("--version")
        .and_then(|at| gnu[at..].find('\n').map(|n| at + n + 1))
        .expect("GNU's help lists --version");
    let ours = rigs::cmd::ddx_as_dd().arg("--help").output().unwrap();
    assert!(ours.status.success());
    let ours = String::from_utf8(ours.stdout).unwrap();
    assert_eq!(&ours[..end.min(ours.len())], &gnu[..end]);
    let additions = &ours[end..];
    for end in [
        "nbd://",
        "nbds://",
        "nbd+unix://",
        "nbds+unix://",
        "nbd+vsock://",
        "s3://",
        "http://",
        "https://",
        "mem:",
    ] {
        assert!(additions.contains(end), "{end}");
    }
    assert!(additions.contains("AWS_ENDPOINT_URL") && additions.contains("Exit status"));
}

#[test]
fn progress_line_appears_about_once_a_second() {
    // A slow source: a shell that writes a block every 300 ms.
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do head -c 1000 /dev/zero; sleep 0.3; done | {DDX} of=/dev/null status=progress"
    );
    let out = shell(&script).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let progress_lines = err.matches('\r').count();
    assert!((1..=3).contains(&progress_lines), "{err:?}");
    let last_progress = err.rsplit('\r').next().unwrap();
    assert!(
        last_progress.contains("bytes") && last_progress.contains(" copied, "),
        "{err:?}"
    );
    let final_stats = err.rsplit('\r').next().unwrap().split_once('\n').unwrap().1;
    assert!(
        final_stats.contains(" records out\n8000 bytes (8.0 kB, 7.8 KiB) copied, "),
        "{err:?}"
    );
}

#[test]
fn conversion_tables_match_gnu_dd() {
    let all: Vec<u8> = (0..=255).collect();
    for conv in [
        "ascii",
        "ebcdic",
        "ibm",
        "ucase",
        "lcase",
        "ebcdic,ucase",
        "ascii,lcase",
    ] {
        Compare::new()
            .args([format!("conv={conv}"), "status=none".into()])
            .stdin(all.clone())
            .succeeds();
    }
}

/// Inputs with real holes (the differential suite's inputs are written
/// out, so have none): ddx skips holes with SEEK_DATA and must still give
/// GNU dd's bytes, statistics, size and, under conv=sparse, allocation.
#[test]
fn holes_in_the_input_give_gnu_results() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("holey");
    let f = std::fs::File::create(&input).unwrap();
    f.set_len(40 << 20).unwrap();
    let data = rigs::bytes::pattern(5, 300_000);
    for at in [0u64, 5 << 20, (17 << 20) + 12_345, (40 << 20) - 1000] {
        let end = (40u64 << 20).min(at + data.len() as u64);
        f.write_all_at(&data[..(end - at) as usize], at).unwrap();
    }
    drop(f);
    let cases: &[&[&str]] = &[
        &["conv=sparse"],
        &["bs=1M", "conv=sparse"],
        &["ibs=4k", "obs=6000", "conv=sparse"],
        &["bs=64k"],
        &[
            "ibs=1000",
            "obs=4096",
            "skip=7",
            "count=30000",
            "conv=sparse",
        ],
        &["bs=512", "skip=3B", "conv=sparse,notrunc"],
    ];
    for operands in cases {
        let compare = Compare::new()
            .input_path(&input)
            .args(*operands)
            .output_file();
        if operands.contains(&"conv=sparse") {
            compare.allocation().run();
        } else {
            compare.run();
        }
    }
}

/// The package's one-line description is the Debian package's summary
/// (cargo-deb puts it in the control file's Description line): dpkg and
/// apt show it on one line of at most 80 columns, and split a longer one.
#[test]
fn the_package_summary_fits_one_line() {
    let summary = env!("CARGO_PKG_DESCRIPTION");
    assert!(
        !summary.is_empty() && !summary.contains('\n'),
        "one line: {summary:?}"
    );
    assert!(
        summary.chars().count() <= 80,
        "{} characters: {summary:?}",
        summary.chars().count()
    );
}

/// `if=` a directory: GNU dd opens (creates, truncates) of= and then
/// fails its first read with EISDIR. ddx refuses before the output is
/// opened, with GNU's first line and exit status; `count=0`, which reads
/// nothing, succeeds as GNU's does.
#[test]
fn a_directory_input_is_refused_before_the_output_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a directory");
    std::fs::create_dir(&input).unwrap();
    let existing = dir.path().join("existing");
    let created = dir.path().join("created");
    for iflag in [&[][..], &["iflag=directory"], &["bs=1M", "skip=1"]] {
        for output in [&existing, &created] {
            std::fs::write(&existing, b"keep me").unwrap();
            let operands = || {
                let mut words = vec![operand("if", &input), operand("of", output)];
                words.extend(iflag.iter().map(|w| w.to_string()));
                words
            };
            let gnu = rigs::cmd::gnu_dd().args(operands()).output().unwrap();
            let gnu_first = String::from_utf8_lossy(&gnu.stderr)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            std::fs::write(&existing, b"keep me").unwrap();
            let _ = std::fs::remove_file(&created);
            let ran = Ddx::as_dd().args(operands()).run();
            assert_eq!(std::fs::read(&existing).unwrap(), b"keep me", "{iflag:?}");
            assert!(!created.exists(), "{iflag:?}: of= was created");
            assert_eq!(ran.status.code(), gnu.status.code(), "{iflag:?}");
            assert_eq!(ran.stderr, format!("{gnu_first}\n"), "{iflag:?}");
        }
    }
    Compare::new()
        .input_path(&input)
        .args(["count=0"])
        .output_file()
        .succeeds();
}

/// A value of `if=` or `of=` with a scheme ddx does not speak is a URI
/// all the same (no file of that name exists): the one line says that
/// the scheme is not one ddx reads or writes and lists those it does,
/// and nothing is created; an s3:// URL says which part is missing.
#[test]
fn an_unknown_scheme_or_a_part_missing_is_said_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, b"data").unwrap();
    for uri in [
        "ftp://host/disk.img",
        "sftp://user@host/disk.img",
        "gs://bucket/disk.img",
        "file:///tmp/disk.img",
        "webdav://host/x",
    ] {
        let scheme = uri.split_once("://").unwrap().0;
        for (operands, quoted) in [
            (vec![format!("if={uri}"), "of=out".to_owned()], uri),
            (vec![operand("if", &input), format!("of={uri}")], uri),
        ] {
            let ran = Ddx::new().current_dir(dir.path()).args(&operands).fails();
            assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
            assert!(
                ran.stderr
                    .starts_with(&format!("ddx: failed to open '{quoted}': ")),
                "{}",
                ran.stderr
            );
            assert!(
                ran.stderr
                    .contains(&format!("{scheme}:// is not a scheme ddx reads or writes"))
                    && ran.stderr.contains("nbd://")
                    && ran.stderr.contains("s3://")
                    && ran.stderr.contains("https://"),
                "{}",
                ran.stderr
            );
            assert!(!dir.path().join("out").exists());
            assert!(!dir.path().join(format!("{scheme}:")).exists());
        }
    }
    for (uri, says) in [
        ("s3://", "no bucket and no key given"),
        (
            "s3:///disk.img",
            "no bucket given before the key 'disk.img'",
        ),
        ("s3://bucket", "no key given after the bucket 'bucket'"),
        ("s3://bucket/", "no key given after the bucket 'bucket'"),
    ] {
        for operands in [
            vec![format!("if={uri}"), "of=out".to_owned()],
            vec![operand("if", &input), format!("of={uri}")],
        ] {
            Ddx::new()
                .current_dir(dir.path())
                .args(&operands)
                .fails_with(says);
            assert!(!dir.path().join("out").exists());
        }
    }
}

/// Writing a device that is read-only (a loop device attached read-only,
/// one set read-only with blockdev) fails saying so, not only with the
/// open's errno, and writes nothing.
#[test]
fn a_read_only_device_is_named_as_such() {
    if let Some(why) = rigs::LoopDevice::unavailable() {
        return rigs::skip(&why);
    }
    if !rigs::tools_or_skip(&["blockdev"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk");
    let before = rigs::bytes::pattern(3, 1 << 20);
    std::fs::write(&backing, &before).unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, rigs::bytes::pattern(4, 1 << 20)).unwrap();
    let attached = rigs::LoopDevice::attach(
        &backing,
        rigs::LoopOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let writable = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();
    /// Set read-only with blockdev, and writable again when dropped
    /// (before the device is detached: the flag stays with the node).
    struct SetReadOnly<'a>(&'a Path);
    impl Drop for SetReadOnly<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("blockdev")
                .arg("--setrw")
                .arg(self.0)
                .status();
        }
    }
    rigs::must_run(
        std::process::Command::new("blockdev")
            .arg("--setro")
            .arg(&writable.path),
    );
    let _set = SetReadOnly(&writable.path);
    for device in [&attached, &writable] {
        for extra in [&[][..], &["--decompress=auto"]] {
            let ran = Ddx::new()
                .arg(operand("if", &input))
                .arg(operand("of", &device.path))
                .args(["bs=64k", "--force"])
                .args(extra)
                .fails();
            assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
            assert!(
                ran.stderr.contains(&device.name())
                    && ran.stderr.contains("the device is read-only"),
                "{}",
                ran.stderr
            );
        }
        // As a further output too.
        let file = dir.path().join("copy");
        let ran = Ddx::new()
            .arg(operand("if", &input))
            .arg(operand("of", &file))
            .arg(operand("--tee", &device.path))
            .args(["bs=64k", "--force"])
            .fails();
        assert!(
            ran.stderr.contains("the device is read-only") && !file.exists(),
            "{}",
            ran.stderr
        );
    }
    assert!(std::fs::read(&backing).unwrap() == before);
}
