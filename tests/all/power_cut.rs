//! Power cuts of an NBD export in the middle of a copy: what ddx said was
//! durable must be on the export's disk afterwards, `--resume` must then
//! complete the exact image, and an image written in the safe order must
//! never look bootable over a half-written disk.
//!
//! The export is nbdkit running `rigs/powercut.py`: every write stays
//! volatile in the server until a flush (or the write's FUA) makes it
//! durable, and at the chosen request the power goes, with the volatile
//! writes and the server itself. The cut points are drawn from a fixed
//! seed (`DDX_POWERCUT_SEED` gives another) among the requests a whole
//! copy makes, which a first, uncut copy of each kind counts.
//!
//! What each kind of copy promises, and the check:
//! - conv=fsync, conv=fdatasync: exit status 0 only with every byte
//!   durable;
//! - oflag=dsync, oflag=sync: every byte the statistics count as copied
//!   is durable, whatever the exit status;
//! - `--map`: every range the saved map marks finished is durable, and
//!   `--resume` then completes the exact image;
//! - `--decompress --bmap`, onto a blank disk: the boot signature is on
//!   the disk only once everything the map names is.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::differential::prng::Rng;
use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::ddx;
use crate::rigs::nbd::{nbdkit_has_plugin, Server};

const PLUGIN: &str = include_str!("rigs/powercut.py");

/// Cuts in all, spread over the kinds of copy.
const CUTS: u64 = 20;
const SEED: u64 = 0x2720_0c00;

const SIZE: usize = 3 << 20;

/// How a copy is made, and what it promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Promise {
    /// Exit status 0 means everything is durable.
    AtTheEnd,
    /// Every byte counted as copied is durable.
    EveryWrite,
    /// What the map marks finished is durable; `--resume` completes.
    Map,
    /// Bootable-looking only when whole.
    SafeOrder,
}

struct Kind {
    name: &'static str,
    operands: &'static [&'static str],
    promise: Promise,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "conv=fsync",
        operands: &["bs=64k", "conv=fsync"],
        promise: Promise::AtTheEnd,
    },
    Kind {
        name: "conv=fdatasync",
        operands: &["bs=128k", "conv=fdatasync"],
        promise: Promise::AtTheEnd,
    },
    Kind {
        name: "oflag=dsync",
        operands: &["bs=64k", "oflag=dsync"],
        promise: Promise::EveryWrite,
    },
    Kind {
        name: "oflag=sync",
        operands: &["bs=96k", "oflag=sync"],
        promise: Promise::EveryWrite,
    },
    Kind {
        name: "--map",
        operands: &["bs=64k"],
        promise: Promise::Map,
    },
    Kind {
        name: "--map oflag=dsync",
        operands: &["bs=64k", "oflag=dsync"],
        promise: Promise::Map,
    },
    Kind {
        name: "--decompress --bmap",
        operands: &["bs=64k"],
        promise: Promise::SafeOrder,
    },
];

/// The files of one copy: the source, the export's disk, the map.
struct Scene {
    dir: tempfile::TempDir,
    source: Vec<u8>,
    /// For the safe order: the compressed image and its bmap.
    image: Option<(PathBuf, PathBuf)>,
}

impl Scene {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn disk(&self) -> PathBuf {
        self.path("disk")
    }

    fn map(&self) -> PathBuf {
        self.path("copy.map")
    }

    /// The export over the disk, its power cut at request `cut` (0:
    /// never), counting its requests into `count`.
    fn export(&self, cut: u64) -> Result<Server, String> {
        let dir = rigs::nbd::tempdir()?;
        let args = self.export_args(dir.path(), cut)?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::nbdkit_in(dir, &args)
    }

    /// nbdkit's arguments for the export, its plugin written into `dir`.
    fn export_args(&self, dir: &Path, cut: u64) -> Result<Vec<String>, String> {
        let plugin = dir.join("powercut.py");
        std::fs::write(&plugin, PLUGIN).map_err(|e| e.to_string())?;
        Ok(vec![
            "python".into(),
            plugin.display().to_string(),
            format!("durable={}", self.disk().display()),
            format!("cut={cut}"),
            format!("count={}", self.path("count").display()),
        ])
    }

    /// Requests the last export served (writes, zeros, flushes).
    fn served(&self) -> u64 {
        std::fs::read_to_string(self.path("count"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Run `kind`'s copy onto `uri` (`resume`: continue from the map).
    fn copy(&self, kind: &Kind, uri: &str, resume: bool) -> std::process::Output {
        let mut cmd = ddx();
        match &self.image {
            Some((compressed, bmap)) => {
                cmd.arg(format!("if={}", compressed.display()))
                    .arg("--decompress")
                    .arg(format!("--bmap={}", bmap.display()));
            }
            None => {
                cmd.arg(format!("if={}", self.path("source").display()));
            }
        }
        cmd.arg(format!("of={uri}")).args(kind.operands);
        if kind.promise == Promise::Map {
            cmd.arg(format!("--map={}", self.map().display()));
            if resume {
                cmd.args(["--resume", "conv=fdatasync"]);
            }
        }
        cmd.output().expect("ddx runs")
    }
}

/// A fresh scene for `kind`: the source, and a blank disk.
fn scene(kind: &Kind, seed: u64) -> Scene {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut source = pattern(seed, SIZE);
    let mut image = None;
    if kind.promise == Promise::SafeOrder {
        // A disk image that boots: a signature in its first sector, and
        // holes (left unwritten in a sparse file) the bmap leaves out.
        source[510] = 0x55;
        source[511] = 0xAA;
        let holes = [
            (1 << 20) + (64 << 10)..(1 << 20) + (512 << 10),
            (2 << 20)..(2 << 20) + (384 << 10),
        ];
        for hole in holes.clone() {
            source[hole].fill(0);
        }
        let raw = dir.path().join("image.raw");
        let file = std::fs::File::create(&raw).expect("image");
        file.set_len(SIZE as u64).expect("image size");
        let mut at = 0;
        for hole in holes {
            file.write_all_at(&source[at..hole.start], at as u64)
                .expect("image data");
            at = hole.end;
        }
        file.write_all_at(&source[at..], at as u64)
            .expect("image data");
        drop(file);
        let bmap = dir.path().join("image.bmap");
        rigs::images::bmaptool_create(&raw, &bmap);
        let compressed = rigs::images::packed(&raw, "zstd", "zst");
        image = Some((compressed, bmap));
    }
    std::fs::write(dir.path().join("source"), &source).expect("source");
    std::fs::write(dir.path().join("disk"), vec![0u8; SIZE]).expect("disk");
    Scene { dir, source, image }
}

/// The bytes GNU's statistics say were copied.
fn bytes_copied(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|line| {
        let (n, rest) = line.split_once(' ')?;
        rest.starts_with("bytes").then(|| n.parse().ok()).flatten()
    })
}

/// The finished ranges of a ddrescue map.
fn finished(map: &str) -> Vec<(usize, usize)> {
    let number = |t: &str| usize::from_str_radix(t.trim_start_matches("0x"), 16).ok();
    map.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words[..] {
                [pos, size, "+"] => Some((number(pos)?, number(size)?)),
                _ => None,
            }
        })
        .collect()
}

/// The mapped ranges of a bmap (bytes), from its block ranges.
fn mapped(bmap: &Path) -> Vec<(usize, usize)> {
    let text = std::fs::read_to_string(bmap).expect("bmap");
    let block: usize = text
        .split("<BlockSize>")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .and_then(|t| t.trim().parse().ok())
        .expect("a block size");
    text.split("<Range")
        .skip(1)
        .filter_map(|r| {
            let body = r.split('>').nth(1)?.split('<').next()?.trim();
            let (first, last) = match body.split_once('-') {
                Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse().ok()?),
                None => {
                    let n = body.parse().ok()?;
                    (n, n)
                }
            };
            Some((first * block, (last + 1 - first) * block))
        })
        .collect()
}

/// What the disk must hold after `kind`'s copy was cut at `cut`.
fn check(kind: &Kind, scene: &Scene, cut: u64, out: &std::process::Output) {
    let disk = std::fs::read(scene.disk()).expect("disk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = format!("{} cut at request {cut}: {stderr}", kind.name);
    let same = |from: usize, len: usize| {
        let end = (from + len).min(SIZE);
        disk[from..end] == scene.source[from..end]
    };
    match kind.promise {
        Promise::AtTheEnd => {
            if out.status.success() {
                assert!(same(0, SIZE), "exit 0 but not all durable: {said}");
            }
        }
        Promise::EveryWrite => {
            let copied = bytes_copied(&stderr).expect("statistics") as usize;
            assert!(
                same(0, copied),
                "{copied} bytes said copied, not all durable: {said}"
            );
        }
        Promise::Map => {
            let map = std::fs::read_to_string(scene.map()).unwrap_or_default();
            for (from, len) in finished(&map) {
                assert!(
                    same(from, len),
                    "map says {from}+{len} finished, not durable: {said}"
                );
            }
            if kind.operands.contains(&"oflag=dsync") {
                let copied = bytes_copied(&stderr).unwrap_or(0) as usize;
                assert!(same(0, copied), "{copied} bytes said copied: {said}");
            }
        }
        Promise::SafeOrder => {
            if disk[510..512] == [0x55, 0xAA] {
                let (_, bmap) = scene.image.as_ref().expect("an image");
                for (from, len) in mapped(bmap) {
                    assert!(
                        same(from, len),
                        "bootable over {from}+{len} not written: {said}"
                    );
                }
            }
        }
    }
}

/// After the cut: the export back at the same URI (the map's output),
/// and the copy made again (resumed, for a map) completes to the exact
/// image.
fn complete(kind: &Kind, scene: &Scene, server: &mut Server) {
    let args = scene
        .export_args(server.dir.path(), 0)
        .expect("the export's plugin");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    server.restart_nbdkit(&args).expect("the export again");
    let out = scene.copy(kind, &server.uri(), true);
    assert!(
        out.status.success(),
        "{} again: {}",
        kind.name,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each kind's own flushes (conv=fdatasync for a resume, the safe
    // order's at its end) make the image durable.
    server.kill();
    let disk = std::fs::read(scene.disk()).expect("disk");
    assert!(
        disk == scene.source,
        "{}: not the exact image after it",
        kind.name
    );
}

#[test]
fn what_a_copy_said_was_durable_survives_a_power_cut_of_the_export() {
    if !rigs::tools_or_skip(&["nbdkit", "bmaptool", "zstd"]) {
        return;
    }
    if !nbdkit_has_plugin("python") {
        return rigs::skip("nbdkit's python plugin is not installed (nbdkit-plugin-python)");
    }
    let seed = std::env::var("DDX_POWERCUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    // How many requests a whole copy of each kind makes, from an uncut
    // copy (which must itself give the image).
    let requests: Vec<u64> = KINDS
        .iter()
        .enumerate()
        .map(|(n, kind)| {
            let scene = scene(kind, n as u64 + 1);
            let server = scene.export(0).expect("an export");
            let out = scene.copy(kind, &server.uri(), false);
            assert!(out.status.success(), "{}: {out:?}", kind.name);
            drop(server);
            check(kind, &scene, 0, &out);
            scene.served().max(1)
        })
        .collect();
    for n in 0..CUTS {
        let which = (n as usize) % KINDS.len();
        let kind = &KINDS[which];
        let mut rng = Rng::for_case(seed, n);
        let cut = 1 + rng.next_u64() % requests[which];
        let scene = scene(kind, n + 100);
        let mut server = scene.export(cut).expect("an export");
        let out = scene.copy(kind, &server.uri(), false);
        server.kill();
        check(kind, &scene, cut, &out);
        complete(kind, &scene, &mut server);
    }
}

/// The counts the test relies on are the plugin's: a copy onto an export
/// with no cut serves at least one flush per `oflag=dsync` write.
#[test]
fn oflag_dsync_onto_an_export_flushes_every_write() {
    if !rigs::tools_or_skip(&["nbdkit"]) {
        return;
    }
    if !nbdkit_has_plugin("python") {
        return rigs::skip("nbdkit's python plugin is not installed (nbdkit-plugin-python)");
    }
    let kind = &KINDS[2];
    let scene = scene(kind, 7);
    let server = scene.export(0).expect("an export");
    let out = scene.copy(kind, &server.uri(), false);
    assert!(out.status.success(), "{out:?}");
    drop(server);
    // 48 writes of 64 KiB, each flushed: at least twice as many requests.
    assert!(
        scene.served() >= 2 * (SIZE as u64 >> 16),
        "{}",
        scene.served()
    );
}
