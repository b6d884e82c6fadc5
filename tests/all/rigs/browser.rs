//! A real browser for the pages ddx writes: headless Chromium (Debian's
//! `chromium`) loads a file and hands back what it laid out. Each run has
//! a new empty profile in a temp dir and every network feature off (the
//! machines the tests run on have no network, and a page of ddx's fetches
//! nothing).

use std::path::Path;
use std::process::Command;

/// The options every run gets: headless, no sandbox (CI runs as root),
/// nothing started that would reach for a network.
const QUIET: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
];

/// Chromium, or Err saying it is missing.
pub fn chromium() -> Result<Browser, String> {
    let found = Command::new("chromium")
        .arg("--version")
        .output()
        .map_err(|e| format!("chromium is missing ({e}): apt-get install chromium"))?;
    if !found.status.success() {
        return Err("chromium --version failed".into());
    }
    Ok(Browser)
}

/// Headless Chromium, found.
pub struct Browser;

impl Browser {
    fn command(&self, profile: &Path, width: u32, height: u32) -> Command {
        let mut cmd = Command::new("chromium");
        cmd.args(QUIET)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--window-size={width},{height}"));
        cmd
    }

    /// The DOM of `page` once loaded (its scripts run) in a window of
    /// `width` by `height` pixels.
    pub fn dump_dom(&self, page: &Path, width: u32, height: u32) -> String {
        let profile = tempfile::tempdir().unwrap();
        let out = self
            .command(profile.path(), width, height)
            .arg("--dump-dom")
            .arg(format!("file://{}", page.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "chromium --dump-dom: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}
