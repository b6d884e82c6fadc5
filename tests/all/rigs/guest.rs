//! An emulated machine with SCSI and NVMe disks, for the passthrough
//! ends: this machine has no such device and loads no kernel modules,
//! but QEMU (TCG) boots Debian's own kernel in a few seconds.
//!
//! The kit (`.ci/guest-kit`: the emulator and the kernel, fetched with
//! apt) sits in `DDX_GUEST_KIT`, else /opt/ddx-guest. The rig builds the
//! initramfs itself, once per kernel version, under the target
//! directory: busybox-static, the modules the disks need (with what
//! they depend on, from depmod's index) and an /init that mounts the
//! host's root read-only over 9p and chroots into it, so that the guest
//! runs this build's ddx and the host's GNU dd, sg3-utils, ddpt and fio.
//! A second, writable 9p share carries the script in and the results
//! out; the disks are image files here that the test can read after.
//!
//! A boot costs seconds, so a test group boots once and runs all its
//! cases in one script ([`Guest::run`]), which writes what the test
//! asserts on into the share.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the guest boots with.
pub struct Kit {
    qemu: PathBuf,
    firmware: Vec<PathBuf>,
    vmlinux: PathBuf,
    modules: PathBuf,
    version: String,
}

/// The modules the guest loads at boot (their dependencies come along):
/// virtio's PCI transport, virtio-scsi and the SCSI disk and generic
/// drivers, NVMe, and 9p over virtio for the shares. scsi_debug is in the
/// initramfs too, for a test to load with its own parameters.
const MODULES: &[&str] = &[
    "kernel/drivers/virtio/virtio_pci.ko",
    "kernel/drivers/scsi/virtio_scsi.ko",
    "kernel/drivers/scsi/sd_mod.ko",
    "kernel/drivers/scsi/sg.ko",
    "kernel/drivers/nvme/host/nvme.ko",
    "kernel/net/9p/9pnet_virtio.ko",
    "kernel/fs/9p/9p.ko",
];
const ON_DEMAND: &[&str] = &["kernel/drivers/scsi/scsi_debug.ko"];

impl Kit {
    /// The kit, or why there is none.
    pub fn find() -> Result<Kit, String> {
        let root = std::env::var_os("DDX_GUEST_KIT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/opt/ddx-guest"));
        let version = std::fs::read_to_string(root.join("ready"))
            .map_err(|_| {
                format!(
                    "no guest kit in {} (run .ci/guest-kit: QEMU and Debian's kernel)",
                    root.display()
                )
            })?
            .trim()
            .to_owned();
        let qemu = root.join("qemu/usr/bin/qemu-system-x86_64");
        if !qemu.exists() {
            return Err(format!("{} is missing", qemu.display()));
        }
        if !Path::new("/bin/busybox").exists() {
            return Err("busybox is not installed (package busybox-static)".into());
        }
        Ok(Kit {
            qemu,
            firmware: vec![
                root.join("qemu/usr/share/qemu"),
                root.join("qemu/usr/share/seabios"),
            ],
            vmlinux: root.join("vmlinux"),
            modules: root.join("kernel/lib/modules").join(&version),
            version,
        })
    }

    /// The initramfs for this kit's kernel, built once (by whichever test
    /// comes first; the others wait on the lock).
    fn initramfs(&self) -> Result<PathBuf, String> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ddx-guest");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let image = dir.join(format!("initramfs-{}.cpio", self.version));
        let lock = std::fs::File::create(dir.join("lock")).map_err(|e| e.to_string())?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("locking {}: {e}", dir.display()))?;
        if image.exists() {
            return Ok(image);
        }
        let staging = tempfile::Builder::new()
            .prefix("initramfs-")
            .tempdir_in(&dir)
            .map_err(|e| e.to_string())?;
        let root = staging.path();
        for sub in ["bin", "lib/modules", "proc", "sys", "dev", "host"] {
            std::fs::create_dir_all(root.join(sub)).map_err(|e| e.to_string())?;
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).map_err(|e| e.to_string())?;
        let index = std::fs::read_to_string(self.modules.join("modules.dep"))
            .map_err(|e| format!("the kit's modules.dep: {e}"))?;
        let order = load_order(&index, MODULES)?;
        for module in order.iter().chain(load_order(&index, ON_DEMAND)?.iter()) {
            let name = Path::new(module).file_name().expect("a file name");
            std::fs::copy(
                self.modules.join(module),
                root.join("lib/modules").join(name),
            )
            .map_err(|e| format!("{module}: {e}"))?;
        }
        let loads: String = order
            .iter()
            .map(|m| {
                let name = Path::new(m).file_name().unwrap().to_string_lossy();
                format!("insmod /lib/modules/{name}\n")
            })
            .collect();
        std::fs::write(root.join("init"), init_script(&loads)).map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join("init"), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let partial = dir.join(format!("initramfs-{}.partial", self.version));
        let out = std::fs::File::create(&partial).map_err(|e| e.to_string())?;
        let mut cpio = Command::new("/bin/busybox")
            .args(["cpio", "-o", "-H", "newc"])
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("busybox cpio: {e}"))?;
        let mut names = String::new();
        for entry in walk(root) {
            names.push_str(&entry);
            names.push('\n');
        }
        use std::io::Write;
        cpio.stdin
            .take()
            .expect("stdin")
            .write_all(names.as_bytes())
            .map_err(|e| e.to_string())?;
        if !cpio.wait().map_err(|e| e.to_string())?.success() {
            return Err("busybox cpio failed".into());
        }
        std::fs::rename(&partial, &image).map_err(|e| e.to_string())?;
        Ok(image)
    }
}

/// Every path under `root`, relative ("./bin/busybox"), parents first.
fn walk(root: &Path) -> Vec<String> {
    let mut out = vec![".".to_owned()];
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap();
            out.push(format!("./{}", rel.display()));
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out
}

/// `wanted` with everything each depends on, in an order insmod takes
/// (modules.dep lists a module's whole closure, the last to load first).
fn load_order(index: &str, wanted: &[&str]) -> Result<Vec<String>, String> {
    let mut order: Vec<String> = Vec::new();
    for module in wanted {
        let line = index
            .lines()
            .find(|l| l.split(':').next() == Some(*module))
            .ok_or_else(|| format!("{module} is not in the kit's kernel"))?;
        let deps = line.split_once(':').map(|(_, d)| d).unwrap_or("");
        for m in deps.split_whitespace().rev().chain([*module]) {
            if !order.iter().any(|o| o == m) {
                order.push(m.to_owned());
            }
        }
    }
    Ok(order)
}

/// The guest's /init: its own proc, sys and dev; the modules; the host's
/// root read-only with the guest's own proc, sys and dev over it and a
/// tmpfs on /tmp; the share on /tmp/out and the modules on /tmp/modules;
/// then the script, chrooted, and its status into the share.
fn init_script(loads: &str) -> String {
    format!(
        "#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
{loads}
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 host /host || poweroff -f
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp
mkdir /host/tmp/out /host/tmp/modules
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /host/tmp/out
mount --bind /lib/modules /host/tmp/modules
chroot /host /bin/sh -c 'cd /tmp && exec /bin/sh /tmp/out/run.sh >/tmp/out/run.log 2>&1'
echo $? > /host/tmp/out/status
umount /host/tmp/out
poweroff -f
"
    )
}

/// A disk of the guest: an image file here.
pub struct Disk {
    pub image: PathBuf,
}

/// What the guest has.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    /// A virtio-scsi disk of this many bytes: /dev/sda and /dev/sg0.
    pub scsi_disk: Option<u64>,
    /// An NVMe namespace of this many bytes: /dev/nvme0n1, /dev/ng0n1.
    pub nvme_disk: Option<u64>,
    pub memory_mib: u32,
    pub cpus: u32,
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            scsi_disk: None,
            nvme_disk: None,
            memory_mib: 512,
            cpus: 1,
        }
    }
}

/// A guest's disks and share, kept until dropped.
pub struct Guest {
    kit: Kit,
    initramfs: PathBuf,
    machine: Machine,
    dir: tempfile::TempDir,
    pub scsi: Option<Disk>,
    pub nvme: Option<Disk>,
}

/// What a run left: the script's status and output, the share's files.
pub struct Run {
    pub status: i32,
    pub log: String,
    pub share: PathBuf,
}

impl Run {
    /// A file the script wrote into /tmp/out.
    pub fn file(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.share.join(name))
            .unwrap_or_else(|e| panic!("the guest wrote no {name} ({e}); its log:\n{}", self.log))
    }

    pub fn text(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.file(name)).into_owned()
    }
}

impl Guest {
    /// A guest with `machine`'s disks, each filled by `fill` (its bytes,
    /// by which disk: "scsi" or "nvme"). Err says why it cannot be built.
    pub fn new(machine: Machine, fill: impl Fn(&str, u64) -> Vec<u8>) -> Result<Guest, String> {
        let kit = Kit::find()?;
        let initramfs = kit.initramfs()?;
        let dir = tempfile::Builder::new()
            .prefix("ddx-guest-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        std::fs::create_dir(dir.path().join("share")).map_err(|e| e.to_string())?;
        let disk = |which: &str, size: Option<u64>| -> Result<Option<Disk>, String> {
            let Some(size) = size else { return Ok(None) };
            let image = dir.path().join(format!("{which}.img"));
            let bytes = fill(which, size);
            assert_eq!(bytes.len() as u64, size, "the {which} disk's bytes");
            std::fs::write(&image, bytes).map_err(|e| e.to_string())?;
            Ok(Some(Disk { image }))
        };
        let scsi = disk("scsi", machine.scsi_disk)?;
        let nvme = disk("nvme", machine.nvme_disk)?;
        Ok(Guest {
            kit,
            initramfs,
            machine,
            dir,
            scsi,
            nvme,
        })
    }

    /// Put a file into the share, for the script (/tmp/out/NAME).
    pub fn share_file(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.dir.path().join("share").join(name), bytes).unwrap();
    }

    /// Boot, run `script` (sh, as root, in the host's root with the
    /// share at /tmp/out) and power off. Err when the guest did not
    /// come back within `limit` or never ran the script.
    pub fn run(&self, script: &str, limit: Duration) -> Result<Run, String> {
        let share = self.dir.path().join("share");
        std::fs::write(share.join("run.sh"), script).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(share.join("status"));
        let console = self.dir.path().join("console.log");
        let mut qemu = Command::new(&self.kit.qemu);
        for dir in &self.kit.firmware {
            qemu.arg("-L").arg(dir);
        }
        qemu.args([
            "-M",
            "q35",
            "-nic",
            "none",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args(["-m", &self.machine.memory_mib.to_string()])
        .args(["-smp", &self.machine.cpus.to_string()])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-kernel")
        .arg(&self.kit.vmlinux)
        .arg("-initrd")
        .arg(&self.initramfs)
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .arg("-virtfs")
        .arg("local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap")
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=out,security_model=none",
            share.display()
        ))
        .args(["-device", "isa-debug-exit"]);
        if let Some(disk) = &self.scsi {
            qemu.args(["-device", "virtio-scsi-pci,id=scsi"])
                .arg("-drive")
                .arg(format!(
                    "if=none,id=scsidisk,file={},format=raw,cache=writeback",
                    disk.image.display()
                ))
                .args(["-device", "scsi-hd,drive=scsidisk,serial=ddxscsi"]);
        }
        if let Some(disk) = &self.nvme {
            qemu.arg("-drive")
                .arg(format!(
                    "if=none,id=nvmedisk,file={},format=raw,cache=writeback",
                    disk.image.display()
                ))
                .args(["-device", "nvme,serial=ddxnvme,drive=nvmedisk"]);
        }
        let mut child = qemu
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.kit.qemu.display()))?;
        let deadline = Instant::now() + limit;
        let exited = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let console_text = std::fs::read_to_string(&console).unwrap_or_default();
        let log = std::fs::read_to_string(share.join("run.log")).unwrap_or_default();
        let tail = |text: &str| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        let Some(_) = exited else {
            return Err(format!(
                "the guest did not finish within {limit:?}; console:\n{}\nscript log:\n{}",
                tail(&console_text),
                tail(&log)
            ));
        };
        let status = std::fs::read_to_string(share.join("status"))
            .map_err(|_| {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    use std::io::Read;
                    let _ = pipe.read_to_string(&mut stderr);
                }
                format!(
                    "the guest did not run the script; qemu: {}\nconsole:\n{}",
                    stderr.trim(),
                    tail(&console_text)
                )
            })?
            .trim()
            .parse()
            .unwrap_or(-1);
        Ok(Run { status, log, share })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_load_after_what_they_depend_on() {
        // modules.dep lists what a module needs, each before what it
        // needs in turn: a needs b, which needs c.
        let index = "a.ko: b.ko c.ko\nb.ko: c.ko\nc.ko:\nd.ko: c.ko\n";
        assert_eq!(
            load_order(index, &["a.ko", "d.ko"]).unwrap(),
            ["c.ko", "b.ko", "a.ko", "d.ko"].map(String::from)
        );
        assert!(load_order(index, &["e.ko"]).is_err());
    }
}
