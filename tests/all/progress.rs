//! Progress and interruption, end to end: the JSON stream of
//! `--progress-fd`, `--verbose`, SIGINT/SIGTERM at any moment leaving a
//! correct output prefix, and the live line in a real terminal (tmux).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx, shell, DDX};
use crate::rigs::fixture::Ddx;
use crate::rigs::signal::wait_for_handler;
use crate::rigs::{LoopDevice, LoopOptions};

/// A source that writes 1000 bytes every 300 ms, 8 times: a copy of
/// about 2.4 s, so that the once-a-second ticks happen during it.
const SLOW_SOURCE: &str = "for i in 1 2 3 4 5 6 7 8; do head -c 1000 /dev/zero; sleep 0.3; done";

/// The number of bytes in GNU's transfer line ("8000 bytes (...) copied").
fn bytes_in_statistics(stderr: &str) -> Option<u64> {
    let line = stderr.lines().rev().find(|l| l.contains(" copied, "))?;
    line.split(' ').next()?.parse().ok()
}

#[test]
fn json_progress_parses_and_its_last_record_equals_the_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("progress.json");
    let script = format!(
        "{SLOW_SOURCE} | {DDX} of=/dev/null bs=1000 count=8 iflag=fullblock --progress-fd=3 3>{}",
        json.display()
    );
    let out = shell(&script).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&json).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(records.len() >= 3, "ticks during a 2.4 s copy: {text}");
    let mut last_bytes = 0;
    for (n, record) in records.iter().enumerate() {
        let bytes = record["bytes"].as_u64().unwrap();
        assert!(bytes >= last_bytes, "bytes never go back: {text}");
        last_bytes = bytes;
        assert_eq!(record["total"], 8000, "count= gives the total");
        assert_eq!(record["done"], n + 1 == records.len(), "{text}");
        for field in ["elapsed", "rate", "recent_rate"] {
            assert!(record[field].as_f64().is_some(), "{field}: {text}");
        }
    }
    let last = records.last().unwrap();
    // The statistics printed from the same snapshot and clock reading.
    let expected_records = format!(
        "{}+{} records in\n{}+{} records out\n",
        last["records_in_full"],
        last["records_in_partial"],
        last["records_out_full"],
        last["records_out_partial"]
    );
    assert!(
        stderr.starts_with(&expected_records),
        "{stderr} vs {expected_records}"
    );
    assert_eq!(bytes_in_statistics(&stderr), last["bytes"].as_u64());
    let seconds = ddx::text::human::format_g(last["elapsed"].as_f64().unwrap());
    assert!(
        stderr.contains(&format!(" copied, {seconds} s, ")),
        "{stderr} vs {seconds}"
    );
    assert_eq!(stderr.lines().count(), 3, "GNU's statistics only: {stderr}");
}

/// A copy resumed from a map that says `done` of `size` bytes are
/// finished (and the output holds them): the input a slow device, so
/// that the run takes a few seconds. Returns the device, a directory
/// holding `out` and its map `out.map`, and the input's bytes.
fn resumable(size: usize, done: usize) -> Option<(rigs::NbdDevice, tempfile::TempDir, Vec<u8>)> {
    let contents = pattern(11, size);
    // About 21 ms per 16 KiB request.
    let device = rigs::or_skip(rigs::NbdDevice::slow(&contents, 20))?;
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("out"), &contents[..done]).unwrap();
    std::fs::write(
        scratch.path().join("out.map"),
        format!(
            "# Mapfile\n0x{done:08X}     ?               1\n\
             0x00000000  0x{done:08X}  +\n\
             0x{done:08X}  0x{:08X}  ?\n",
            size - done
        ),
    )
    .unwrap();
    Some((device, scratch, contents))
}

/// `--resume` counts what earlier runs did: the JSON records start where
/// the map stands (as its "(N% done)" line says), never go back, and the
/// last one's bytes are the total; the statistics stay this run's.
#[test]
fn a_resumed_copy_counts_its_earlier_runs_in_the_json_records() {
    let size = 4 << 20;
    let done = 1200 << 10;
    let Some((device, scratch, contents)) = resumable(size, done) else {
        return;
    };
    let json = scratch.path().join("progress.json");
    let out = shell(&format!(
        "{DDX} --resume --map={map} if={input} of={output} bs=16k iflag=direct \
         --progress-fd=3 3>{json}",
        map = scratch.path().join("out.map").display(),
        input = device.path.display(),
        output = scratch.path().join("out").display(),
        json = json.display(),
    ))
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(std::fs::read(scratch.path().join("out")).unwrap() == contents);
    let percent = done * 100 / size;
    assert!(stderr.contains(&format!("({percent}% done)")), "{stderr}");
    let text = std::fs::read_to_string(&json).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.len() >= 2, "ticks during the copy: {text}");
    let mut last = 0;
    for record in &records {
        let bytes = record["bytes"].as_u64().unwrap();
        assert_eq!(record["total"], size, "{text}");
        assert!(bytes >= done as u64 && bytes >= last, "never back: {text}");
        assert_eq!(record["resumed_bytes"], done, "{text}");
        last = bytes;
    }
    let final_record = records.last().unwrap();
    assert_eq!(final_record["done"], true);
    assert_eq!(final_record["bytes"], size, "the bar ends at 100%: {text}");
    // GNU's statistics say what this run copied.
    assert_eq!(bytes_in_statistics(&stderr), Some((size - done) as u64));
}

/// The live line of a resumed copy starts at the percentage its "(N%
/// done)" line says, and goes on from there.
#[test]
fn a_resumed_copy_s_live_line_goes_on_from_where_the_map_stands() {
    let size = 4 << 20;
    let done = 1300 << 10;
    let Some((device, scratch, _)) = resumable(size, done) else {
        return;
    };
    let command = format!(
        "ddx --resume --map={} if={} of={} bs=16k iflag=direct status=progress",
        scratch.path().join("out.map").display(),
        device.path.display(),
        scratch.path().join("out").display(),
    );
    let Some(tmux) = rigs::or_skip(Tmux::start("resume", 200, 8, &command)) else {
        return;
    };
    let first = tmux.wait_for("ETA", Duration::from_secs(10));
    let after = tmux.wait_for("EXIT=", Duration::from_secs(20));
    save_capture("resume-live", &first);
    let percent = done * 100 / size;
    assert!(first.contains(&format!("({percent}% done)")), "{first}");
    let live = first
        .lines()
        .find(|l| l.contains("ETA"))
        .unwrap_or_else(|| panic!("no live line: {first}"));
    let shown: usize = live
        .split('%')
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a percentage: {live}"));
    assert!(
        (percent..100).contains(&shown),
        "from {percent}% on: {live}"
    );
    assert!(after.contains("EXIT=0"), "{after}");
}

/// SIGUSR1 prints GNU's statistics and writes a record; the copy goes on.
#[test]
fn sigusr1_writes_a_json_record_too() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("progress.json");
    let mut child = shell(&format!(
        "exec {DDX} of=/dev/null bs=1000 --progress-fd=3 3>{}",
        json.display()
    ))
    .stdin(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&[0u8; 3000]).unwrap();
    wait_for_handler(child.id(), libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(200));
    rigs::signal::send(child.id(), libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(200));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("records in").count(), 2, "{stderr}");
    let text = std::fs::read_to_string(&json).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{text}");
    assert_eq!(records[0]["done"], false);
    assert_eq!(records[0]["bytes"], 3000);
    assert_eq!(
        records[0]["total"],
        serde_json::Value::Null,
        "a pipe has no size"
    );
    assert_eq!(records[1]["done"], true);
}

#[test]
fn progress_fd_errors_are_one_line_before_anything_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let ran = Ddx::new()
        .args([
            "if=/dev/zero",
            &format!("of={}", out.display()),
            "count=1",
            "--progress-fd=77",
        ])
        .fails();
    assert_eq!(ran.stderr, "ddx: --progress-fd=77: Bad file descriptor\n");
    assert!(!out.exists(), "nothing is opened before the check");
    Ddx::new().args(["--progress-fd=x"]).fails();
}

#[test]
fn a_vanished_progress_reader_does_not_stop_the_copy() {
    let script =
        format!("{SLOW_SOURCE} | {DDX} of=/dev/null --progress-fd=3 3>&1 | head -c 1 >/dev/null");
    let out = shell(&script).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ddx: --progress-fd=3: Broken pipe; the copy goes on\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("8000 bytes (8.0 kB, 7.8 KiB) copied"),
        "{stderr}"
    );
}

#[test]
fn verbose_adds_lines_after_gnu_statistics() {
    let stderr = Ddx::new()
        .args([
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64k",
            "count=100",
            "--verbose",
        ])
        .succeeds()
        .stderr;
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines[0], "100+0 records in");
    assert_eq!(lines[1], "100+0 records out");
    assert!(lines[2].starts_with("6553600 bytes (6.6 MB, 6.2 MiB) copied, "));
    for (line, start) in lines[3..].iter().zip([
        "ddx: backend: sync",
        "ddx: requests: 64 KiB per read and write",
        "ddx: cache: ",
        "ddx: offload: not used",
        "ddx: CPU: ",
    ]) {
        assert!(line.starts_with(start), "{line:?} vs {start:?}");
    }
    assert_eq!(lines.len(), 8, "{stderr}");
    // Without --verbose, GNU's three lines only.
    let out = Ddx::new()
        .args(["if=/dev/zero", "of=/dev/null", "bs=64k", "count=100"])
        .run();
    assert_eq!(out.stderr.lines().count(), 3, "{}", out.stderr);
}

/// The output's first N bytes, N as the statistics report, are the
/// input's; returns N.
#[track_caller]
fn assert_reported_prefix_copied(stderr: &str, output: &Path, input: &[u8], what: &str) -> usize {
    let reported = bytes_in_statistics(stderr).expect("statistics") as usize;
    let output = std::fs::read(output).unwrap();
    assert!(output.len() >= reported, "{} < {reported}", output.len());
    assert!(
        output[..reported] == input[..reported],
        "{what}: the first {reported} bytes differ"
    );
    reported
}

/// Interrupt a copy at several moments: the statistics are printed, ddx
/// dies of the signal, and the output's first N bytes, N as reported,
/// are the input's.
#[test]
fn interruption_leaves_a_correct_prefix_of_the_reported_length() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(1, 16 << 20);
    for (n, (signal, delay_ms)) in [
        (libc::SIGINT, 30),
        (libc::SIGTERM, 30),
        (libc::SIGINT, 200),
        (libc::SIGTERM, 200),
        (libc::SIGINT, 600),
        (libc::SIGTERM, 600),
    ]
    .into_iter()
    .enumerate()
    {
        let out_path = dir.path().join(format!("out{n}"));
        let mut child = ddx()
            .args([
                "--backend=threads",
                "bs=64k",
                &format!("of={}", out_path.display()),
            ])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_handler(child.id(), signal);
        let mut stdin = child.stdin.take().unwrap();
        let feed = data.clone();
        // A steady source: 16 KiB every millisecond or so.
        let feeder = std::thread::spawn(move || {
            for chunk in feed.chunks(16 << 10) {
                if stdin.write_all(chunk).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        std::thread::sleep(Duration::from_millis(delay_ms));
        rigs::signal::send(child.id(), signal);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        feeder.join().unwrap();
        assert_eq!(status.signal(), Some(signal), "{stderr}");
        assert_reported_prefix_copied(
            &stderr,
            &out_path,
            &data,
            &format!("signal {signal} after {delay_ms} ms"),
        );
    }
}

/// The same from a file, where ddx copies in bulk requests or lets the
/// kernel copy (copy_file_range): what is reported is on the output,
/// whatever the moment. A copy that ends before the signal must be whole.
#[test]
fn interruption_of_a_bulk_file_copy_leaves_a_correct_prefix() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(2, 96 << 20);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).unwrap();
    for (n, (backend, signal, delay_ms)) in [
        ("threads", libc::SIGTERM, 40),
        ("threads", libc::SIGINT, 150),
        ("auto", libc::SIGTERM, 60),
    ]
    .into_iter()
    .enumerate()
    {
        let out_path = dir.path().join(format!("out{n}"));
        let child = ddx()
            .args([
                &format!("--backend={backend}"),
                "bs=64k",
                &format!("if={}", input.display()),
                &format!("of={}", out_path.display()),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_handler(child.id(), signal);
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on our own child's pid has no memory effects; a
        // child that already exited is a zombie until waited for.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reported = assert_reported_prefix_copied(
            &stderr,
            &out_path,
            &data,
            &format!("{backend}, signal {signal} after {delay_ms} ms"),
        );
        match out.status.signal() {
            Some(s) => assert_eq!(s, signal, "{stderr}"),
            None => {
                assert!(out.status.success(), "{stderr}");
                assert_eq!(reported, data.len(), "a finished copy is whole");
            }
        }
    }
}

/// The live line in a real terminal: tmux runs ddx in a pane, the test
/// reads the screen during and after the copy.
#[test]
fn live_line_in_a_terminal() {
    // 40 kB over about 4 s, in 2.5 kB steps.
    let command = "for i in $(seq 16); do head -c 2500 /dev/zero; sleep 0.25; done \
                   | ddx of=/dev/null bs=2500 count=16 iflag=fullblock status=progress";
    let Some(tmux) = rigs::or_skip(Tmux::start("live", 100, 8, command)) else {
        return;
    };
    let first = tmux.wait_for("ETA", Duration::from_secs(10));
    // A second frame further on, for the screenshot, if still running.
    std::thread::sleep(Duration::from_millis(1500));
    let later = tmux.capture();
    let during = if later.contains("ETA") { later } else { first };
    let after = tmux.wait_for("EXIT=", Duration::from_secs(15));
    save_capture("live-during", &during);
    save_capture("live-after", &after);
    let live = during
        .lines()
        .find(|l| l.contains("ETA"))
        .unwrap_or_else(|| panic!("no live line: {during:?}"));
    assert!(live.contains(" kB/s (avg "), "{live}");
    assert!(
        live.contains('[') && live.contains(']') && live.contains('%'),
        "{live}"
    );
    assert!(!during.contains("records"), "{during}");
    assert!(after.contains("EXIT=0"), "{after}");
    let lines: Vec<&str> = after.lines().filter(|l| !l.trim().is_empty()).collect();
    let at = lines
        .iter()
        .position(|l| *l == "16+0 records in")
        .unwrap_or_else(|| panic!("statistics at the start of a line: {after:?}"));
    assert_eq!(lines[at + 1], "16+0 records out");
    assert!(lines[at + 2].starts_with("40000 bytes (40 kB, 39 KiB) copied, "));
    assert!(
        !after.contains("ETA"),
        "the live line is cleared: {after:?}"
    );
}

/// Ctrl-C typed at the terminal during a copy: the terminal echoes "^C"
/// where the cursor is, and the live line is cleared before the final
/// statistics all the same (it once stayed above them: the echo wrapped
/// past a line that filled the width, out of reach of the clear).
#[test]
fn ctrl_c_clears_the_live_line() {
    // The shell survives the Ctrl-C (a handler, which ddx does not
    // inherit, unlike an ignored signal) to show ddx's status.
    let command = "trap 'true' INT\n\
                   ddx if=/dev/zero of=/dev/null bs=10 count=100000000 status=progress";
    let Some(tmux) = rigs::or_skip(Tmux::start("ctrl-c", 100, 8, command)) else {
        return;
    };
    let during = tmux.wait_for("ETA", Duration::from_secs(10));
    assert!(during.contains("ETA"), "no live line: {during}");
    // Past the first tick, so a frame has been drawn at full length.
    std::thread::sleep(Duration::from_millis(1200));
    tmux.press("C-c");
    let after = tmux.wait_for("EXIT=", Duration::from_secs(10));
    save_capture("ctrl-c-after", &after);
    assert!(after.contains("EXIT=130"), "{after}");
    assert!(!after.contains("ETA"), "the live line is cleared: {after}");
    let lines: Vec<&str> = after.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines[0].ends_with("+0 records in"), "{after}");
    assert!(lines[1].ends_with("+0 records out"), "{after}");
    assert!(lines[2].contains(" copied, "), "{after}");
}

/// A terminal session of its own (its own tmux server socket) running
/// `script` with `ddx` on PATH (so messages say "ddx:"), then showing
/// "EXIT=status"; killed when dropped. Err says why not (tmux missing or
/// failing to start).
struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start(name: &str, width: u32, height: u32, script: &str) -> Result<Tmux, String> {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(DDX, dir.path().join("ddx")).unwrap();
        let script_path = dir.path().join("script.sh");
        std::fs::write(
            &script_path,
            format!(
                "PATH={}:$PATH\nexport LC_ALL=C\n{script}\necho EXIT=$?\nsleep 600\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let socket = format!("ddx-test-{name}-{}", std::process::id());
        let started = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "t",
            ])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(format!("sh {}", script_path.display()))
            .env("TERM", "xterm")
            .stdin(Stdio::null())
            .output();
        match started {
            Ok(out) if out.status.success() => Ok(Tmux { socket, _dir: dir }),
            Ok(out) => Err(format!(
                "tmux cannot start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!(
                "tmux not available ({e}); CI installs it (.ci/run)"
            )),
        }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn send(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "t", keys, "Enter"]);
    }

    /// Keys as typed, no Enter after them ("C-c" is Ctrl-C).
    fn press(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "t", keys]);
    }

    fn capture(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    fn wait_for(&self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.capture();
            if screen.contains(text) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Keep what the pane showed (the README's screenshot comes from it).
fn save_capture(name: &str, text: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("terminal");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(format!("{name}.txt")), text);
}

/// A whole disk written from a terminal: ddx says what it is and asks;
/// anything but yes leaves it alone. Needs root and losetup.
#[test]
fn whole_disk_from_a_terminal_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    std::fs::write(&image, vec![7u8; 4 << 20]).unwrap();
    let Some(attached) = rigs::or_skip(LoopDevice::attach(&image, LoopOptions::default())) else {
        return;
    };
    let device = attached.name();
    let command = format!("ddx if=/dev/zero of={device} count=1");
    let Some(tmux) = rigs::or_skip(Tmux::start("disk", 160, 8, &command)) else {
        return;
    };
    let asked = tmux.wait_for("[y/N]", Duration::from_secs(10));
    save_capture("whole-disk", &asked);
    assert!(
        asked.contains(&format!(
            "ddx: about to overwrite '{device}' (loop device over "
        )),
        "{asked}"
    );
    assert!(
        asked.contains("4.0 MiB), which holds no file system or partition table that blkid knows"),
        "{asked}"
    );
    tmux.send("n");
    let after = tmux.wait_for("EXIT=", Duration::from_secs(10));
    assert!(
        after.contains(&format!("ddx: not overwriting '{device}'")),
        "{after}"
    );
    assert!(after.contains("EXIT=1"), "{after}");
    assert!(std::fs::read(&image).unwrap().iter().all(|&b| b == 7));
}

/// The naive flash from a terminal: a compressed image written as it is
/// onto a whole disk. One notice says what the disk holds, another that
/// the input is compressed, and one question asks for both; "n" leaves
/// the disk alone, exit 1. Onto a file named as the image without its
/// suffix, "y" writes the compressed bytes as GNU dd would.
#[test]
fn a_compressed_image_onto_a_disk_from_a_terminal_asks_once() {
    if !rigs::tools_or_skip(&["xz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("img.raw");
    std::fs::write(&raw, pattern(5, 200_000)).unwrap();
    let packed = rigs::images::packed(&raw, "xz", "xz");
    std::fs::remove_file(&raw).unwrap();
    let image = dir.path().join("disk.img");
    std::fs::write(&image, vec![7u8; 4 << 20]).unwrap();
    let Some(attached) = rigs::or_skip(LoopDevice::attach(&image, LoopOptions::default())) else {
        return;
    };
    let device = attached.name();
    let command = format!("ddx if={} of={device} bs=4M", packed.display());
    let Some(tmux) = rigs::or_skip(Tmux::start("flash", 400, 12, &command)) else {
        return;
    };
    // What the disk holds is read first (blkid): slow on a busy machine.
    let asked = tmux.wait_for("[y/N]", Duration::from_secs(30));
    save_capture("compressed-onto-disk", &asked);
    let lines: Vec<&str> = asked.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "the notices and the question: {asked:?}");
    assert!(
        lines[0].starts_with(&format!(
            "ddx: about to overwrite '{device}' (loop device over "
        )),
        "{asked}"
    );
    assert_eq!(
        lines[1],
        format!(
            "ddx: if='{}' is xz-compressed: this copy writes its compressed bytes as they are \
             onto of='{device}', which is a block device (--decompress writes the image it \
             holds)",
            packed.display()
        ),
        "{asked}"
    );
    assert_eq!(
        lines[2].trim_end(),
        "ddx: overwrite it with the compressed bytes? [y/N]"
    );
    assert_eq!(asked.matches("[y/N]").count(), 1, "one question: {asked}");
    tmux.send("n");
    let after = tmux.wait_for("EXIT=", Duration::from_secs(10));
    assert!(
        after.contains(&format!(
            "ddx: not writing xz-compressed bytes onto of='{device}': --decompress writes \
             the image, --no-decompress the bytes as they are"
        )),
        "{after}"
    );
    assert!(after.contains("EXIT=1"), "{after}");
    assert!(std::fs::read(&image).unwrap().iter().all(|&b| b == 7));

    // A file named as the image: asked, and "y" writes the bytes.
    let named = dir.path().join("img.raw");
    let command = format!("ddx if={} of={}", packed.display(), named.display());
    let Some(tmux) = rigs::or_skip(Tmux::start("flash-file", 400, 12, &command)) else {
        return;
    };
    let asked = tmux.wait_for("[y/N]", Duration::from_secs(30));
    assert!(
        asked.contains("ddx: write the compressed bytes? [y/N]"),
        "{asked}"
    );
    assert!(!named.exists(), "nothing before the answer");
    tmux.send("y");
    let after = tmux.wait_for("EXIT=", Duration::from_secs(10));
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(std::fs::read(&named).unwrap() == std::fs::read(&packed).unwrap());
}

/// What the whole-disk notice says of a loop device (attached without
/// partition scanning) over an image `prepare` made: ddx is asked in a
/// terminal, answered "n", and the image must be as it was.
fn notice_for(name: &str, prepare: impl FnOnce(&Path) -> Result<(), String>) -> Option<String> {
    for tool in [
        "blkid",
        "partx",
        "sfdisk",
        "mkfs.ext4",
        "dumpe2fs",
        "sha256sum",
    ] {
        if !rigs::have(tool) {
            rigs::skip(&format!("{tool} is not installed (CI installs it)"));
            return None;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    if let Err(why) = prepare(&image) {
        panic!("preparing the image: {why}");
    }
    let before = std::fs::read(&image).unwrap();
    let attached = match LoopDevice::attach(&image, LoopOptions::default()) {
        Ok(attached) => attached,
        Err(why) => {
            rigs::skip(&why);
            return None;
        }
    };
    let device = attached.name();
    assert!(
        !Path::new(&format!("{device}p1")).exists(),
        "the kernel was not to scan the table"
    );
    let command = format!("ddx if=/dev/zero of={device} count=1");
    // Wide enough that the notice stays on one line.
    let tmux = rigs::or_skip(Tmux::start(name, 400, 8, &command))?;
    let asked = tmux.wait_for("[y/N]", Duration::from_secs(10));
    save_capture(name, &asked);
    tmux.send("n");
    let after = tmux.wait_for("EXIT=", Duration::from_secs(10));
    assert!(after.contains("EXIT=1"), "{after}");
    assert!(
        std::fs::read(&image).unwrap() == before,
        "the image was written"
    );
    let notice = asked
        .lines()
        .find(|l| l.starts_with("ddx: about to overwrite"))
        .unwrap_or_else(|| panic!("no notice: {asked}"));
    assert!(
        notice.starts_with(&format!(
            "ddx: about to overwrite '{device}' (loop device over "
        )),
        "{notice}"
    );
    Some(notice.to_owned())
}

fn tool(program: &str, args: &[&str], input: &str) -> Result<(), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// ext4 with `label` at byte `offset` of `image`, `size` long, holding a
/// file; returns the bytes in use as the superblock counts them.
fn ext4_at(image: &Path, offset: u64, size: u64, label: &str) -> Result<u64, String> {
    let image = image.to_str().unwrap();
    tool(
        "mkfs.ext4",
        &[
            "-q",
            "-F",
            "-L",
            label,
            "-E",
            &format!("offset={offset}"),
            image,
            &format!("{}k", size / 1024),
        ],
        "",
    )?;
    let out = Command::new("dumpe2fs")
        .args(["-h", &format!("{image}?offset={offset}")])
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    Ok((field("Block count") - field("Free blocks")) * field("Block size"))
}

/// ddx's size wording ("9.0 MiB"), for the expected notices.
fn mib(bytes: u64) -> String {
    let value = bytes as f64 / (1 << 20) as f64;
    if value < 10.0 {
        format!("{:.1} MiB", (value * 10.0).ceil() / 10.0)
    } else {
        format!("{} MiB", value.ceil())
    }
}

/// The notice for a disk that sfdisk partitions from `script`, then ext4
/// labelled `label` at `offset`, `size` long, must end with `ending`,
/// where `{used}` stands for what ext4 uses.
fn partitioned_notice_ends(
    name: &str,
    script: &str,
    (offset, size, label): (u64, u64, &str),
    ending: &str,
) {
    let mut used = 0;
    let Some(notice) = notice_for(name, |image| {
        tool("sfdisk", &["-q", image.to_str().unwrap()], script)?;
        used = ext4_at(image, offset, size, label)?;
        Ok(())
    }) else {
        return;
    };
    assert_ends_with(&notice, &ending.replace("{used}", &mib(used)));
}

#[track_caller]
fn assert_ends_with(notice: &str, ending: &str) {
    assert!(notice.ends_with(ending), "{notice}");
}

#[test]
fn the_whole_disk_notice_names_a_file_system_on_the_device() {
    let mut used = 0;
    let Some(notice) = notice_for("disk-ext4", |image| {
        used = ext4_at(image, 0, 64 << 20, "ddx-test")?;
        Ok(())
    }) else {
        return;
    };
    assert_ends_with(
        &notice,
        &format!(
            "64 MiB), which holds a file system (ext4, labelled 'ddx-test', {} used)",
            mib(used)
        ),
    );
}

#[test]
fn the_whole_disk_notice_reads_a_gpt_table_the_kernel_has_not_scanned() {
    // sfdisk ends the last partition on a MiB boundary before GPT's backup.
    partitioned_notice_ends(
        "disk-gpt",
        "label: gpt\n,16M,L\n,,L\n",
        (17 << 20, 20 << 20, "second"),
        "64 MiB), which holds a GPT partition table with 2 partitions: 1 (16 MiB): no file \
         system; 2 (46 MiB): a file system (ext4, labelled 'second', {used} used)",
    );
}

#[test]
fn the_whole_disk_notice_reads_an_mbr_table_the_kernel_has_not_scanned() {
    partitioned_notice_ends(
        "disk-mbr",
        "label: dos\n,16M,83\n,,83\n",
        (1 << 20, 16 << 20, "first"),
        "64 MiB), which holds a DOS (MBR) partition table with 2 partitions: 1 (16 MiB): a \
         file system (ext4, labelled 'first', {used} used); 2 (47 MiB): no file system",
    );
}

#[test]
fn the_whole_disk_notice_says_when_nothing_is_recognised() {
    let Some(notice) = notice_for("disk-blank", |_| Ok(())) else {
        return;
    };
    assert_ends_with(
        &notice,
        "64 MiB), which holds no file system or partition table that blkid knows",
    );
}
