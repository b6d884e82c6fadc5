//! Skips: the one way a test says it could not run for want of a facility
//! (root, a tool, a loop device, a sector size, tmux, a server...).
//!
//! A skip must be seen, and CI must not be green by skipping. So each
//! skip writes one line straight to the process's stderr (libtest captures
//! `eprintln!` of passing tests, not writes to the stream itself), is kept
//! in a list that an exit hook prints after libtest's result line, by test
//! name and reason; and with `DDX_REQUIRE_RIGS` set (CI sets it) a skip
//! is a failure instead. The test is named by its thread: libtest runs
//! each test on a thread named after it.
//!
//! One exception, named and narrow: a kernel without device-mapper (this
//! project's VM has none, and a test cannot load it) lets the one
//! device-mapper test skip even under `DDX_REQUIRE_RIGS`, and only while
//! the kernel really lacks it ([`skip_if_no_device_mapper`]).

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Mutex, Once, PoisonError};

/// The only test allowed to skip under `DDX_REQUIRE_RIGS`, and only for
/// want of the kernel's device-mapper.
const DEVICE_MAPPER_TEST: &str = "guard::a_device_held_by_device_mapper_is_refused";

struct Skipped {
    test: String,
    why: String,
    /// Allowed under `DDX_REQUIRE_RIGS` (the device-mapper exception).
    allowed: bool,
}

static SKIPPED: Mutex<Vec<Skipped>> = Mutex::new(Vec::new());
static SUMMARY_AT_EXIT: Once = Once::new();

/// This test (or, where the caller goes on without it, a part of it)
/// cannot run here: `why` names what is missing. Fails the test when
/// `DDX_REQUIRE_RIGS` is set; otherwise says so in a line that passes
/// libtest's capture and lists it in the summary at exit. The caller
/// returns right after (or leaves the part out).
pub fn skip(why: &str) {
    let test = current_test();
    if required() {
        panic!("{test} cannot run here ({why}), and DDX_REQUIRE_RIGS is set");
    }
    record(test, why, false);
}

/// `rig`, or None after skipping with its error: for a rig's constructor
/// that says why it cannot be built (`let Some(x) = or_skip(..) else
/// { return }`).
pub fn or_skip<T>(rig: Result<T, String>) -> Option<T> {
    rig.map_err(|why| skip(&why)).ok()
}

/// Whether the device-mapper test is to skip because this kernel has no
/// device-mapper driver (not in /proc/misc, and `dmsetup version` cannot
/// reach it, which also loads a modular one); if so, the skip is recorded
/// as allowed. Only the device-mapper test may ask; a kernel that has the
/// driver gets false, and the test must then run.
pub fn skip_if_no_device_mapper() -> bool {
    let test = current_test();
    assert_eq!(
        test, DEVICE_MAPPER_TEST,
        "the device-mapper allowance is for {DEVICE_MAPPER_TEST} alone"
    );
    let listed = std::fs::read_to_string("/proc/misc")
        .is_ok_and(|misc| misc.lines().any(|l| l.ends_with(" device-mapper")));
    let reachable = Command::new("dmsetup")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if listed || reachable {
        return false;
    }
    record(test, "this kernel has no device-mapper driver", true);
    true
}

fn required() -> bool {
    std::env::var_os("DDX_REQUIRE_RIGS").is_some_and(|v| !v.is_empty() && v != "0")
}

fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test's helper thread")
        .to_owned()
}

impl Skipped {
    fn line(&self) -> String {
        let allowed = if self.allowed { " [allowed]" } else { "" };
        format!("{}: {}{allowed}", self.test, self.why)
    }
}

fn record(test: String, why: &str, allowed: bool) {
    let skipped = Skipped {
        test,
        why: why.to_owned(),
        allowed,
    };
    let _ = writeln!(std::io::stderr(), "SKIPPED {}", skipped.line());
    SKIPPED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(skipped);
    SUMMARY_AT_EXIT.call_once(|| {
        // SAFETY: atexit only stores the pointer of a function that takes
        // nothing, returns nothing and does not unwind (see summary).
        let rc = unsafe { libc::atexit(summary) };
        assert_eq!(rc, 0, "atexit");
    });
}

/// Runs at exit, after libtest's result line (on success libtest returns
/// from main, on failure it calls exit: either way exit handlers run). It
/// must not unwind: nothing here panics, and errors writing are ignored.
extern "C" fn summary() {
    let skipped = SKIPPED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut text = format!(
        "\nskipped for want of a facility ({}; with DDX_REQUIRE_RIGS=1 each fails, \
         but for the one marked allowed):\n",
        skipped.len()
    );
    for skip in skipped.iter() {
        text += &format!("  {}\n", skip.line());
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}
