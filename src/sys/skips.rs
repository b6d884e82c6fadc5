//! The unit tests' one way to skip, for want of a facility (io_uring, a
//! shell): the twin of the integration tests' `rigs::skip`, which unit
//! tests cannot see. A skip writes one line past libtest's capture (to the
//! stream itself, not through `eprintln!`), and with `DDX_REQUIRE_RIGS`
//! set, as CI sets it, it is a failure instead: CI must not be green by
//! skipping. Built only for the unit tests.

use std::io::Write;

/// This test (or the part of it the caller leaves out) cannot run here:
/// `why` names what is missing. Fails the test under `DDX_REQUIRE_RIGS`.
pub fn skip(why: &str) {
    skip_unless(required(), why);
}

fn skip_unless(required: bool, why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a unit test");
    assert!(
        !required,
        "{test} cannot run here ({why}), and DDX_REQUIRE_RIGS is set"
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

fn required() -> bool {
    std::env::var_os("DDX_REQUIRE_RIGS").is_some_and(|v| !v.is_empty() && v != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_passes_where_rigs_are_not_required() {
        skip_unless(false, "nothing is missing: this only shows the line");
    }

    #[test]
    #[should_panic(expected = "DDX_REQUIRE_RIGS is set")]
    fn a_skip_fails_where_rigs_are_required() {
        skip_unless(true, "the facility a test needs");
    }
}
