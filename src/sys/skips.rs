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
    let required = required_by(std::env::var_os("DDX_REQUIRE_RIGS").as_deref());
    skip_unless(required, why, &mut std::io::stderr());
}

/// The skip's line to `out`, or, where rigs are `required`, a failure.
fn skip_unless(required: bool, why: &str, out: &mut dyn Write) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a unit test");
    assert!(
        !required,
        "{test} cannot run here ({why}), and DDX_REQUIRE_RIGS is set"
    );
    let _ = writeln!(out, "SKIPPED {test}: {why}");
}

/// Whether `DDX_REQUIRE_RIGS`, set to `value`, requires every rig: set
/// to anything but empty or "0".
fn required_by(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where rigs are not required, a skip says which test skipped and
    /// why, on one line of its own.
    #[test]
    fn a_skip_names_the_test_and_why_where_rigs_are_not_required() {
        let mut out = Vec::new();
        skip_unless(false, "no io_uring here", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED sys::skips::tests::\
             a_skip_names_the_test_and_why_where_rigs_are_not_required: no io_uring here\n"
        );
    }

    #[test]
    #[should_panic(expected = "DDX_REQUIRE_RIGS is set")]
    fn a_skip_fails_where_rigs_are_required() {
        skip_unless(true, "the facility a test needs", &mut Vec::new());
    }

    #[test]
    fn rigs_are_required_by_any_value_but_empty_or_zero() {
        use std::ffi::OsStr;
        assert!(required_by(Some(OsStr::new("1"))));
        assert!(required_by(Some(OsStr::new("yes"))));
        assert!(!required_by(Some(OsStr::new("0"))));
        assert!(!required_by(Some(OsStr::new(""))));
        assert!(!required_by(None));
    }
}
