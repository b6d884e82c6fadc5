//! The programs under test, started alike: ddx and GNU dd in the C locale
//! (messages compare word for word only untranslated), and the operands
//! that name files.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The ddx binary of this build, for scripts and symlinks that name it.
pub const DDX: &str = env!("CARGO_BIN_EXE_ddx");

/// `program` in the C locale with `arg0` as its argv[0]: ddx's messages
/// begin with the name it was invoked by, and a full path would make them
/// differ from run to run.
pub fn invoked_as(program: &str, arg0: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg0(arg0).env("LC_ALL", "C");
    cmd
}

/// ddx naming itself "ddx", for tests of its own messages.
pub fn ddx() -> Command {
    invoked_as(DDX, "ddx")
}

/// ddx naming itself "dd", so that its messages compare with GNU dd's.
pub fn ddx_as_dd() -> Command {
    invoked_as(DDX, "dd")
}

/// GNU dd, the reference.
pub fn gnu_dd() -> Command {
    invoked_as("dd", "dd")
}

/// `sh -c script` in the C locale: for pipelines around ddx.
pub fn shell(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).env("LC_ALL", "C");
    cmd
}

/// `key=PATH`, an operand naming a file ("if=/tmp/x").
pub fn operand(key: &str, path: &Path) -> String {
    format!("{key}={}", path.display())
}
