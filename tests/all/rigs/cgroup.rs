//! A memory cgroup with a limit, made for one test and removed when
//! dropped: what "a copy in a 1.5 GiB cgroup" runs in. Made where the
//! machine's hierarchy allows: cgroup v2 where it has the memory
//! controller, else cgroup v1's memory hierarchy. Commands run in it
//! through `sh`, which moves itself into the cgroup and then execs the
//! program, so that everything the program reads or writes is charged to
//! the cgroup.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One memory cgroup.
pub struct MemoryCgroup {
    pub dir: PathBuf,
}

impl MemoryCgroup {
    /// A cgroup whose memory is limited to `limit` bytes; Err says why
    /// none can be made here.
    pub fn new(limit: u64) -> Result<MemoryCgroup, String> {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        if !super::is_root() {
            return Err("making a memory cgroup needs root".into());
        }
        let (parent, limit_file) = hierarchy()?;
        let dir = parent.join(format!(
            "ddx-test-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("creating {dir:?}: {e}"))?;
        let cgroup = MemoryCgroup { dir };
        std::fs::write(cgroup.dir.join(limit_file), limit.to_string())
            .map_err(|e| format!("setting {limit_file}: {e}"))?;
        Ok(cgroup)
    }

    /// `program` with the C locale, to run inside the cgroup (add its
    /// arguments to the command).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program)
            .env("LC_ALL", "C");
        cmd
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The processes that ran in it have exited; the kernel may take a
        // moment to see it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The directory to make a memory cgroup in, and its limit file.
fn hierarchy() -> Result<(PathBuf, &'static str), String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    // Fields: ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SOURCE SUPEROPTS
    let mounts: Vec<(PathBuf, String, String)> = mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some((
                PathBuf::from(fields.get(4)?),
                fields.get(dash + 1)?.to_string(),
                fields.get(dash + 3).unwrap_or(&"").to_string(),
            ))
        })
        .collect();
    for (point, fstype, _) in &mounts {
        if fstype == "cgroup2" && has_memory_v2(point) {
            return Ok((point.clone(), "memory.max"));
        }
    }
    for (point, fstype, options) in &mounts {
        if fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
            return Ok((point.clone(), "memory.limit_in_bytes"));
        }
    }
    Err("no cgroup hierarchy with the memory controller is mounted".into())
}

/// Whether a v2 hierarchy's root hands the memory controller to the
/// cgroups made in it (enabling it if it can).
fn has_memory_v2(root: &Path) -> bool {
    let listed = |file: &str| {
        std::fs::read_to_string(root.join(file))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == "memory"))
    };
    if !listed("cgroup.controllers") {
        return false;
    }
    listed("cgroup.subtree_control")
        || (std::fs::write(root.join("cgroup.subtree_control"), "+memory").is_ok()
            && listed("cgroup.subtree_control"))
}
