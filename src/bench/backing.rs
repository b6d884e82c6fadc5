//! What answers the bench's requests where it is not the target's own
//! storage, and what the report says of it. A loop device over a file
//! (the target, or the disk under the target's filesystem) takes
//! O_DIRECT and the cache drops for itself and, unless its own direct
//! I/O is on (`/sys/block/loopN/loop/dio`), reads and writes its backing
//! file through the host's page cache: its reads are memory's speed
//! where the host holds the file's pages, its writes land in them. A
//! file on tmpfs or a RAM disk is memory. Either way no figure is a
//! disk's own, and the report says so beside the figures.
//!
//! `target` gathers the facts (sysfs, statfs); this module only says
//! what they mean, so its words are tested without a device.

use serde::Serialize;

use crate::sys::device::LoopBacking;

/// What stands between the bench's requests and a disk of the target's
/// own, as far as the system tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backing {
    /// Nothing known: a disk, a file on one, a server, a disk's commands.
    Own,
    /// A loop device over a file.
    LoopFile {
        /// The target is the loop device (else a file on a filesystem
        /// on it).
        target_is_device: bool,
        /// Its kernel name ("loop3").
        device: String,
        /// The backing file.
        file: String,
        /// The loop device's own direct I/O (`loop/dio`).
        direct_io: bool,
        /// The backing file's filesystem ("ext4").
        filesystem: Option<String>,
        /// That filesystem keeps its files in memory (tmpfs, ramfs).
        in_memory: bool,
    },
    /// Storage that is memory: a file on tmpfs or ramfs, a RAM disk.
    Memory {
        /// What it is, in a reader's words ("tmpfs", "the RAM disk ram0").
        what: String,
    },
}

impl Backing {
    /// The backing of a target over the loop device `device`.
    pub fn loop_file(
        backing: LoopBacking,
        target_is_device: bool,
        filesystem: Option<String>,
        in_memory: bool,
    ) -> Backing {
        Backing::LoopFile {
            target_is_device,
            device: backing.device,
            file: backing.file,
            direct_io: backing.direct_io,
            filesystem,
            in_memory,
        }
    }

    /// Whether the figures may be a disk's own: nothing but the page
    /// cache ddx bypasses or names stands in between.
    pub fn own(&self) -> bool {
        matches!(
            self,
            Backing::Own
                | Backing::LoopFile {
                    direct_io: true,
                    in_memory: false,
                    ..
                }
        )
    }

    /// Whether the loop device's writes land in the host's page cache.
    fn cached_loop(&self) -> bool {
        matches!(
            self,
            Backing::LoopFile {
                direct_io: false,
                ..
            } | Backing::LoopFile {
                in_memory: true,
                ..
            }
        )
    }

    /// How an O_DIRECT request reaches storage, for the summary's method.
    pub fn direct_words(&self) -> String {
        let to = |target_is_device: bool, device: &str| match target_is_device {
            true => format!("O_DIRECT to the loop device {device}"),
            false => format!("O_DIRECT through the filesystem to the loop device {device}"),
        };
        match self {
            Backing::Own => "O_DIRECT (no page cache)".to_owned(),
            Backing::LoopFile {
                target_is_device,
                device,
                file,
                direct_io: false,
                ..
            } => format!(
                "{}, which stops it there: {device} reads and writes its backing file {file} \
                 through the host's page cache (its direct I/O is off), so the figures are \
                 memory's where the host holds the file's pages, not a disk's",
                to(*target_is_device, device)
            ),
            Backing::LoopFile {
                target_is_device,
                device,
                file,
                in_memory: true,
                ..
            } => format!(
                "{}, whose backing file {file} is in memory: the figures are memory's, not a \
                 disk's",
                to(*target_is_device, device)
            ),
            Backing::LoopFile { device, file, .. } => format!(
                "O_DIRECT, which the loop device {device} passes on to its backing file \
                 {file} (its direct I/O is on): no page cache"
            ),
            Backing::Memory { what } => {
                format!("O_DIRECT on {what}, which is memory: the figures are not a disk's")
            }
        }
    }

    /// What backs the figures, where it is not a disk of the target's
    /// own: the report's note.
    pub fn note(&self) -> Option<String> {
        match self {
            Backing::Own => None,
            Backing::LoopFile {
                target_is_device,
                device,
                file,
                direct_io,
                filesystem,
                in_memory,
            } => {
                let over = match filesystem {
                    Some(fs) => format!("the file {file} (on {fs})"),
                    None => format!("the file {file}"),
                };
                let lead = match target_is_device {
                    true => format!("{device} is a loop device over {over}"),
                    false => {
                        format!("the target's filesystem is on {device}, a loop device over {over}")
                    }
                };
                let dio = format!("/sys/block/{device}/loop/dio");
                Some(if *in_memory {
                    format!(
                        "{lead}, which its filesystem keeps in memory: every figure is \
                         memory's, none is a disk's own"
                    )
                } else if !direct_io {
                    format!(
                        "{lead}, which it reads and writes through the host's page cache \
                         (its direct I/O is off: {dio} is 0); O_DIRECT and the cache drops \
                         stop at {device}, so its reads come from memory where the host \
                         holds the file's pages, its writes land in them and reach a disk \
                         later, and no figure is a disk's own"
                    )
                } else {
                    format!(
                        "{lead}, with direct I/O ({dio} is 1): the requests reach that \
                         file's filesystem and disk through the loop driver, so the figures \
                         are theirs, not a disk's of {device}'s own"
                    )
                })
            }
            Backing::Memory { what } => Some(format!(
                "{what} keeps its data in memory: the figures are memory's, none is a \
                 disk's own"
            )),
        }
    }

    /// Why a write may complete faster than a read of the same requests
    /// on this target: what acknowledges it before the medium holds it.
    /// `served`: the requests go to a server; `commands`: they are a
    /// disk's own commands, past the block layer.
    pub fn writes_outrun_reads(&self, served: bool, commands: bool) -> String {
        if self.cached_loop() {
            return "the loop device's writes land in its backing file's pages in the host's \
                    page cache, written back later; its reads wait for those pages, which \
                    come from a disk where the host does not hold them"
                .to_owned();
        }
        if let Backing::Memory { .. } = self {
            return "both are memory's, not a disk's: they differ by the kernel's work on its \
                    pages, which no disk speeds or slows"
                .to_owned();
        }
        if served {
            return "the server acknowledges a write once it holds it (in its cache or its \
                    storage's), while a read waits for the data; the 'flush' figure waits \
                    for the writes to be made durable"
                .to_owned();
        }
        if commands {
            return "the device acknowledges a write once its volatile cache holds it, while \
                    a read waits for the medium; the 'passthrough+flush' and \
                    'passthrough+fua' figures wait for the medium"
                .to_owned();
        }
        "an O_DIRECT write is done when the device acknowledges it, which a volatile write \
         cache does before the medium holds it, while a read waits for the medium; the \
         fdatasync, dsync, sync and direct+dsync figures wait for the medium"
            .to_owned()
    }

    /// How the cache drops reach the storage, where a loop device keeps
    /// them from it.
    pub fn cache_words(&self) -> Option<&'static str> {
        self.cached_loop().then_some(
            "fdatasync + posix_fadvise(DONTNEED) on the target before every run (no root \
             needed): they reach the loop device's own pages, not its backing file's in the \
             host's page cache, and O_DIRECT stops at the loop device too",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looped(direct_io: bool, in_memory: bool, target_is_device: bool) -> Backing {
        Backing::loop_file(
            LoopBacking {
                device: "loop7".into(),
                file: "/var/disk.img".into(),
                direct_io,
            },
            target_is_device,
            Some(if in_memory { "tmpfs" } else { "ext4" }.into()),
            in_memory,
        )
    }

    /// A loop device that reads its file through the page cache is named
    /// with its backing file and said not to be a disk; one with direct
    /// I/O passes O_DIRECT on; memory is memory.
    #[test]
    fn each_backing_says_what_answers_the_requests() {
        let cached = looped(false, false, true);
        assert!(!cached.own());
        let note = cached.note().unwrap();
        assert!(
            note.starts_with("loop7 is a loop device over the file /var/disk.img (on ext4)"),
            "{note}"
        );
        assert!(note.contains("/sys/block/loop7/loop/dio is 0"), "{note}");
        assert!(note.contains("no figure is a disk's own"), "{note}");
        let words = cached.direct_words();
        assert!(words.contains("through the host's page cache"), "{words}");
        assert!(!words.contains("no page cache"), "{words}");
        assert!(cached.cache_words().is_some());
        assert!(cached
            .writes_outrun_reads(false, false)
            .contains("backing file's pages in the host's page cache"));

        let under = looped(false, false, false).note().unwrap();
        assert!(
            under.starts_with("the target's filesystem is on loop7, a loop device over"),
            "{under}"
        );

        let direct = looped(true, false, true);
        assert!(direct.own());
        assert!(direct.note().unwrap().contains("with direct I/O"));
        assert!(direct
            .direct_words()
            .contains("passes on to its backing file"));
        assert!(direct.cache_words().is_none());
        assert!(direct
            .writes_outrun_reads(false, false)
            .contains("volatile write cache"));

        let in_memory = looped(true, true, true);
        assert!(!in_memory.own());
        assert!(in_memory.note().unwrap().contains("in memory"));

        let tmpfs = Backing::Memory {
            what: "tmpfs".into(),
        };
        assert!(!tmpfs.own());
        assert!(tmpfs
            .note()
            .unwrap()
            .starts_with("tmpfs keeps its data in memory"));
        assert_eq!(Backing::Own.note(), None);
        assert_eq!(Backing::Own.direct_words(), "O_DIRECT (no page cache)");
        assert!(Backing::Own
            .writes_outrun_reads(true, false)
            .starts_with("the server"));
    }

    #[test]
    fn the_json_names_the_kind_and_the_file() {
        let json = serde_json::to_string(&looped(false, false, true)).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"loop_file","target_is_device":true,"device":"loop7","#.to_owned()
                + r#""file":"/var/disk.img","direct_io":false,"filesystem":"ext4","#
                + r#""in_memory":false}"#
        );
        assert_eq!(
            serde_json::to_string(&Backing::Own).unwrap(),
            r#"{"kind":"own"}"#
        );
    }
}
