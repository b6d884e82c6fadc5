//! ddx's `--options`, told apart from dd operands as GNU getopt would:
//! a word starting with '-' (other than "-" itself) before "--" is an
//! option; everything else is an operand, kept in order. An option's
//! value is only ever given as `--option=VALUE`, in the same word: a
//! separate word is always an operand (see [`VALUE_RULE`]).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

pub use super::getopt::{OptionSpec, Values};
pub use crate::request::{BackendChoice, CacheChoice, Offload, Settings};
use crate::text::quote::quote;
use crate::text::wrap::wrap;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// The settings boxed: they outgrew the other variants.
    Operands(Vec<OsString>, Box<Settings>),
    Help,
    Version,
    /// A getopt-style message ("unrecognized option '--x'").
    Error(String),
}

/// `--sector-size=` values: the powers of two from 512 to 65536.
const SECTOR_SIZES: &[&str] = &[
    "512", "1024", "2048", "4096", "8192", "16384", "32768", "65536",
];

/// The most passes `--retry-passes` takes: a pass reads every bad sector
/// once, and a disk that needs more than this will not be rescued by
/// reading.
const MAX_RETRY_PASSES: u32 = 1_000_000;

/// How an option takes its value, as `--help`, the man page and the
/// README say it.
pub const VALUE_RULE: &str = "An option that takes a value takes it in the same word, \
as --option=VALUE; a separate word is always an operand, so '--map FILE' is an \
error (option '--map' requires an argument: give it in the same word, as --map=FILE).";

/// Every long option ddx knows, in the order `--help` lists them. Unique
/// prefixes are accepted, as with getopt.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec::valued(
        "backend",
        "NAME",
        Values::OneOf(&["auto", "sync", "threads", "uring"]),
        "how reads and writes overlap: 'auto' (default), 'sync' (read, then write, \
         as GNU dd), 'threads' (a reader thread runs ahead of the writer), 'uring' \
         (io_uring, several requests in flight; threads where it cannot apply)",
    ),
    OptionSpec::valued(
        "queue-depth",
        "N",
        Values::Free,
        "records (or bulk requests) in flight with an overlapped backend (1-4096)",
    ),
    OptionSpec::valued(
        "request-size",
        "BYTES",
        Values::Free,
        "where records are decoupled from requests (files and block devices, no \
         per-request flags), read and write BYTES at a time, rounded to whole \
         input blocks (default: 1M; 8M within one disk)",
    ),
    OptionSpec::switch(
        "offload",
        "hand file-to-file copies to copy_file_range wherever the kernel takes \
         them, also on filesystems that can only copy the data (ext4, tmpfs), where \
         ddx's overlapped copy is faster on more than one CPU",
    ),
    OptionSpec::switch(
        "no-offload",
        "copy through ddx's own buffers, never with copy_file_range or splice (to \
         measure the engine, or where a filesystem's offload misbehaves)",
    ),
    OptionSpec::switch(
        "keep-cache",
        "leave the copy's data in the page cache, as cp and dd do (by default ddx \
         does so only where the copy fits comfortably in the memory it may use, \
         and otherwise drops what it streamed through so as not to evict the \
         machine's working set)",
    ),
    OptionSpec::switch(
        "drop-cache",
        "drop the pages the copy brings into the page cache behind it, from its \
         first byte, whatever the memory free (the opposite of --keep-cache; the \
         last one given wins)",
    ),
    OptionSpec::switch(
        "rescue",
        "read a failing input as GNU ddrescue does: the good areas first, in requests \
         of ibs, skipping ahead past each read error; then the edges of the failed \
         areas and the rest of them one logical sector at a time, so that only \
         unreadable sectors are lost (written as zeros); report every bad range. Exit \
         status 0 when every byte was recovered, 2 when the rescue ran its course and \
         bad areas remain (listed, and '-' in the map), 1 on any failure",
    ),
    OptionSpec::valued(
        "map",
        "FILE",
        Values::File,
        "keep a GNU ddrescue mapfile of what is copied and what is bad, saved twice a \
         second and at the end (implies copying by position, as --rescue); onto an \
         s3:// object, the map keeps the upload's id and the parts the server stored, \
         and a failed or interrupted upload is left for --resume instead of aborted",
    ),
    OptionSpec::switch(
        "resume",
        "continue an interrupted copy from its map (--map=FILE, else OF.ddx-map, \
         which ddx keeps and removes once the copy is complete); copy only what is \
         not done; an upload to s3:// (its map named by --map) goes on after the \
         parts the server still holds, checked with ListParts",
    ),
    OptionSpec::valued(
        "sector-size",
        "N",
        Values::OneOf(SECTOR_SIZES),
        "the retry unit of --rescue (default: the input's logical sector, else 512)",
    ),
    OptionSpec::valued(
        "retry-passes",
        "N",
        Values::Free,
        "a rescue (implies --rescue): once the failed areas are scraped, read every \
         bad sector again, up to N passes, each the other way round (as ddrescue's \
         -r N; default 0); with --resume, the bad sectors of the map are retried",
    ),
    OptionSpec::valued(
        "hash",
        "ALG[,ALG]",
        Values::ListOf(crate::integrity::Algorithm::NAMES),
        "digest what is copied, alongside the copy, and print it with the \
         statistics: sha256, blake3, xxh3",
    ),
    OptionSpec::valued(
        "hash-file",
        "FILE",
        Values::File,
        "also write the --hash digest (one algorithm) to FILE in its checker's \
         format, naming the input ('-' for standard input), so that 'sha256sum -c \
         FILE', 'b3sum -c FILE' or 'xxhsum -c FILE' checks it; written only when \
         the copy succeeds",
    ),
    OptionSpec::valued(
        "decompress",
        "auto",
        Values::Optional(&["auto"]),
        "the input is compressed (zstd, xz, gzip, bzip2 or lz4, told by its magic \
         bytes): copy its decompressed stream, decoded on threads of their own (skip=, \
         count=, bs= and the statistics are the decompressed stream's); an input that \
         is not compressed is refused, or copied as it is with =auto",
    ),
    OptionSpec::switch(
        "no-decompress",
        "copy a compressed input as the bytes it is, as GNU dd does, also onto a \
         block device, an NBD export or a file named as the input without its \
         compression suffix (img.raw.xz onto img.raw), where ddx otherwise asks \
         first on a terminal and refuses elsewhere (--force does not answer that); \
         the last of --decompress and --no-decompress given wins",
    ),
    OptionSpec::valued(
        "compress",
        "ALG[:LEVEL]",
        Values::OneOf(&["zstd", "xz", "gzip"]),
        "write the output compressed, on every core: zstd (default level 3), xz (6) \
         or gzip (6), in frames that decompress in parallel (the statistics count the \
         bytes read); not with seek=, conv=notrunc, oflag=append or --verify",
    ),
    OptionSpec::valued(
        "bmap",
        "FILE",
        Values::File,
        "bmaptool's block map of the input image (its decompressed stream with \
         --decompress): write only the mapped blocks, leaving the others as they were, \
         each range checked against its checksum as it passes (a mismatch stops the \
         copy, exit 1); a map for another size of image (than the file's, or what an xz, \
         zstd or lz4 input records it decompresses to), or bigger than the device it is \
         written onto, is refused before anything is written; after the statistics, a \
         line says how many of their bytes were mapped and written; not with skip=, \
         count=, seek=, conv= other than fsync/fdatasync/notrunc/nocreat/excl. With \
         --verify, only the mapped ranges are read back, several at once, each against \
         the map's digest (or, where the map has none, one taken as it was written). \
         With --bmap or --decompress onto a whole block device, its first MiB is zeroed \
         first and written last, so an interrupted write leaves a disk that looks blank",
    ),
    OptionSpec::valued(
        "bmap-create",
        "FILE",
        Values::File,
        "write a block map of the input, as bmaptool makes them, to FILE: its data \
         extents where it has them, else its blocks that are not all zeros",
    ),
    OptionSpec::switch(
        "used-only",
        "read only the blocks that the input disk's file systems use, from its \
         partition table (MBR, GPT) and each file system's own map (ext2/3/4, FAT, \
         XFS, NTFS, swap): the output keeps the disk's size, and the rest are holes (in a \
         file; nothing in a compressed stream; left as they were on a device, or \
         discarded with --trim), so that --bmap-create maps exactly the used \
         blocks. Partition tables, everything outside the partitions and any \
         partition whose file system is not known, or was not cleanly \
         unmounted, are copied whole; --verbose \
         says what each partition held. A source with a file system mounted \
         read-write is refused",
    ),
    OptionSpec::valued(
        "tee",
        "FILE",
        Values::File,
        "also write the output to FILE (repeatable), opened as of= is and in \
         parallel: each output is checked by the guard; the statistics are the first \
         output's, and a line per further output follows them; one that fails is named \
         and dropped while the others complete (exit status 1); --verify reads every \
         output still written back",
    ),
    OptionSpec::switch(
        "verify",
        "after the copy, read the output back (and each --tee output not dropped), \
         bypassing the cache, and report the first offset that differs from what was \
         written, naming the output (exit status 1); with --bmap, only the mapped \
         ranges, several at once, each against its digest, naming the blocks",
    ),
    OptionSpec::switch(
        "trim",
        "discard on the output, instead of writing them, the output blocks that are \
         all zeros and the input's holes, so that they still read back as zeros: an \
         NBD zero request that lets the server deallocate, a hole punched in a file or \
         block device (written as zeros where the output refuses); with or without \
         conv=sparse, which then no longer leaves old data under the zeros; the \
         statistics are GNU's; only onto a file, block device or NBD export",
    ),
    OptionSpec::switch(
        "fua",
        "onto a SCSI or NVMe generic device (/dev/sg*, /dev/bsg/*, /dev/ng*), send \
         every write with force unit access, so that each is on the medium when it \
         completes, without a cache flush at the end (oflag=sync and oflag=dsync ask \
         the same of such a device); refused for any other output",
    ),
    OptionSpec::valued(
        "store",
        "STORE",
        Values::Optional(&[]),
        "the chunk store of a casync blob index, the end named *.caibx: with \
         of=INDEX.caibx the input is cut into chunks as casync cuts them, on every core, \
         the chunks STORE lacks stored (zstd), and the index written once they all are; \
         with if=INDEX.caibx its blob is written to the output, each chunk fetched (many \
         at once) or found in a --seed, and checked against its id. STORE is a directory, \
         s3://BUCKET[/PREFIX] or http(s)://HOST/PATH (read only); alone, --store is \
         default.castr beside the index, as casync's. casync, desync and RAUC read what \
         ddx makes, and ddx what they make. After the statistics, a line says what the \
         store gained and holds, or where the blob's bytes came from",
    ),
    OptionSpec::valued(
        "seed",
        "FILE",
        Values::File,
        "extracting an index (repeatable): a device, image or other end that may hold the \
         blob's chunks already, each used where its bytes at a chunk's own offset are the \
         chunk (an earlier release of the image); or another index (FILE.caibx) with its \
         blob beside it (FILE), its chunks found wherever they are. Chunks found in a seed \
         are not fetched; with of= itself as a seed (an update in place), blocks that \
         already hold the right bytes are not written again",
    ),
    OptionSpec::valued(
        "chunk-size",
        "[MIN:]AVG[:MAX]",
        Values::Free,
        "making an index: the average chunk size (the minimum a quarter of it, the \
         maximum four times it), or all three; default 64K, as casync's. casync's index \
         of the same input is byte for byte ddx's with the same sizes",
    ),
    OptionSpec::valued(
        "progress-fd",
        "FD",
        Values::Free,
        "write progress as JSON, one object per line, to file descriptor FD \
         about once a second and on SIGUSR1: bytes, records, elapsed seconds, \
         rates and the total when known (with --decompress, compressed_bytes and \
         compressed_total too; with --used-only, used_bytes and used_total; with \
         --rescue, its phase and bad_bytes); the last, with \"done\": true, \
         equals the final statistics; a resumed copy (--resume) counts in bytes \
         what its earlier runs did too (resumed_bytes), so that bytes over total \
         is how far the whole copy is",
    ),
    OptionSpec::switch(
        "verbose",
        "after the statistics, say how the copy ran: backend, request size, \
         queue depth, cache policy, kernel offload, what --trim discarded, how \
         an image went onto a device (O_DIRECT or the page cache) and CPU use",
    ),
    OptionSpec::switch(
        "force",
        "write even where the guard refuses: a mounted, swap or held block \
         device, or a copy onto itself that overwrites input not yet read; \
         read a --used-only source with a file system mounted read-write; \
         and do not ask before overwriting a whole disk",
    ),
    OptionSpec::switch("help", "display this help and exit"),
    OptionSpec::switch("version", "output version information and exit"),
];

pub fn scan(words: &[OsString]) -> Scan {
    let mut operands = Vec::with_capacity(words.len());
    let mut settings = Settings::default();
    let mut options_ended = false;
    for word in words {
        let bytes = word.as_bytes();
        if options_ended || bytes.len() < 2 || bytes[0] != b'-' {
            operands.push(word.clone());
            continue;
        }
        if bytes == b"--" {
            options_ended = true;
            continue;
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let text = String::from_utf8_lossy(long);
            // The value's bytes as given: a file name need not be UTF-8.
            let inline_value = long
                .iter()
                .position(|&b| b == b'=')
                .map(|at| std::ffi::OsStr::from_bytes(&long[at + 1..]));
            let chosen = match super::getopt::find(OPTIONS, |o| o, &text) {
                Ok((chosen, _)) => chosen,
                Err(message) => return Scan::Error(message),
            };
            if let (Values::Optional(_), None) = (chosen.values, inline_value) {
                apply_switch(&mut settings, chosen.name);
                continue;
            }
            if chosen.value.is_none() {
                if inline_value.is_some() {
                    return Scan::Error(format!(
                        "option '--{}' doesn't allow an argument",
                        chosen.name
                    ));
                }
                match chosen.name {
                    "help" => return Scan::Help,
                    "version" => return Scan::Version,
                    switch => apply_switch(&mut settings, switch),
                }
                continue;
            }
            // A value only ever as `--opt=VALUE`: the next word is an
            // operand (dd's operands are words too, and `--map if=A`
            // must not take if=A for a file name), so `--opt` alone is
            // an option without its argument, whatever follows it.
            let Some(value) = inline_value else {
                return Scan::Error(super::getopt::missing_argument(chosen));
            };
            if let Err(message) = apply_value(&mut settings, chosen, value) {
                return Scan::Error(message);
            }
            continue;
        }
        let letter = String::from_utf8_lossy(&bytes[1..2]).into_owned();
        return Scan::Error(format!("invalid option -- '{letter}'"));
    }
    Scan::Operands(operands, Box::new(settings))
}

fn apply_switch(settings: &mut Settings, option: &str) {
    match option {
        "keep-cache" => settings.cache = CacheChoice::Keep,
        "drop-cache" => settings.cache = CacheChoice::Drop,
        "rescue" => settings.rescue = true,
        "resume" => settings.resume = true,
        "verify" => settings.verify = true,
        "trim" => settings.trim = true,
        "fua" => settings.fua = true,
        "offload" => settings.offload = Offload::Always,
        "no-offload" => settings.offload = Offload::Never,
        "force" => settings.force = true,
        "verbose" => settings.verbose = true,
        "used-only" => settings.used_only = true,
        "store" => settings.store = Some(crate::request::StoreChoice::Beside),
        "decompress" => {
            settings.decompress = Some(crate::image::Mode::Required);
            settings.no_decompress = false;
        }
        "no-decompress" => {
            settings.decompress = None;
            settings.no_decompress = true;
        }
        _ => unreachable!("every switch in OPTIONS is handled: --{option}"),
    }
}

/// getopt's wording for a value outside a closed set (`shown`: quoted).
fn invalid_choice(spec: &OptionSpec, shown: &str) -> String {
    let valid: Vec<String> = spec.choices().iter().map(|c| format!("'{c}'")).collect();
    format!(
        "invalid argument {shown} for '--{}'; valid arguments are {}",
        spec.name,
        valid.join(", ")
    )
}

fn apply_value(
    settings: &mut Settings,
    spec: &OptionSpec,
    raw: &std::ffi::OsStr,
) -> Result<(), String> {
    let lossy = raw.to_string_lossy();
    let value: &str = &lossy;
    // A value in a message is quoted as GNU's argmatch quotes it: control
    // characters escaped, so that the message stays one line.
    let shown = quote(raw.as_bytes());
    match spec.name {
        "backend" => {
            settings.backend = match value {
                "auto" => None,
                "sync" => Some(BackendChoice::Sync),
                "threads" => Some(BackendChoice::Threads),
                "uring" => Some(BackendChoice::Uring),
                _ => return Err(invalid_choice(spec, &shown)),
            }
        }
        "queue-depth" => match value.parse::<usize>() {
            Ok(n) if (1..=4096).contains(&n) => settings.queue_depth = Some(n),
            _ => {
                return Err(format!(
                    "invalid argument {shown} for '--queue-depth': a number from 1 to 4096"
                ))
            }
        },
        "map" => {
            if value.is_empty() {
                return Err("invalid argument '' for '--map': a file name".into());
            }
            settings.map = Some(raw.into());
        }
        "sector-size" => match value.parse::<usize>() {
            Ok(n) if (512..=65536).contains(&n) && n.is_power_of_two() => {
                settings.sector_size = Some(n)
            }
            _ => {
                return Err(format!(
                    "invalid argument {shown} for '--sector-size': a power of two \
                     from 512 to 65536"
                ))
            }
        },
        "retry-passes" => match value.parse::<u32>() {
            Ok(n) if n <= MAX_RETRY_PASSES => settings.retry_passes = Some(n),
            _ => {
                return Err(format!(
                    "invalid argument {shown} for '--retry-passes': a number of passes \
                     from 0 to {}",
                    MAX_RETRY_PASSES
                ))
            }
        },
        "hash" => settings.hash = crate::integrity::Algorithm::parse_list(value)?,
        "decompress" => match value {
            "auto" => {
                settings.decompress = Some(crate::image::Mode::Auto);
                settings.no_decompress = false;
            }
            _ => return Err(invalid_choice(spec, &shown)),
        },
        "compress" if value.is_empty() => {
            return Err(
                "invalid argument '' for '--compress': zstd, xz or gzip, optionally followed \
                 by :LEVEL"
                    .into(),
            )
        }
        "compress" => {
            settings.compress =
                Some(crate::image::Compression::parse(value).map_err(|e| e.to_string())?)
        }
        "bmap" | "bmap-create" | "tee" => {
            if value.is_empty() {
                return Err(format!(
                    "invalid argument '' for '--{}': a file name",
                    spec.name
                ));
            }
            let path = std::path::PathBuf::from(raw);
            match spec.name {
                "bmap" => settings.bmap = Some(path),
                "bmap-create" => settings.bmap_create = Some(path),
                _ => settings.tee.push(path),
            }
        }
        "store" => {
            if value.is_empty() {
                return Err(
                    "invalid argument '' for '--store': a directory or a URL (or --store \
                     alone for default.castr beside the index)"
                        .into(),
                );
            }
            settings.store = Some(crate::request::StoreChoice::At(raw.into()));
        }
        "seed" => {
            if value.is_empty() {
                return Err("invalid argument '' for '--seed': a file, device or index".into());
            }
            settings.seeds.push(raw.into());
        }
        "chunk-size" => settings.chunk_size = Some(chunk_sizes(value, &shown)?),
        "hash-file" => {
            if value.is_empty() {
                return Err("invalid argument '' for '--hash-file': a file name".into());
            }
            settings.hash_file = Some(raw.into());
        }
        "request-size" => {
            let parsed = crate::operands::number::parse(value.as_bytes());
            match parsed.result.map(|n| n.value) {
                Ok(n) if (1..=1 << 30).contains(&n) => settings.request_size = Some(n as usize),
                _ => {
                    return Err(format!(
                        "invalid argument {shown} for '--request-size': a size from 1 to 1G"
                    ))
                }
            }
        }
        "progress-fd" => match value.parse::<i32>() {
            Ok(n) if n >= 0 => settings.progress_fd = Some(n),
            _ => {
                return Err(format!(
                    "invalid argument {shown} for '--progress-fd': a file descriptor number"
                ))
            }
        },
        other => unreachable!("every option with a value in OPTIONS is handled: --{other}"),
    }
    Ok(())
}

/// `--chunk-size=`: an average alone, or minimum, average and maximum,
/// each in the number grammar of the operands (`64K`, `1MiB`), held to
/// casync's rules.
fn chunk_sizes(value: &str, shown: &str) -> Result<crate::casync::ChunkSizes, String> {
    let size = |word: &str| {
        crate::operands::number::parse(word.as_bytes())
            .result
            .ok()
            .map(|n| n.value)
            .filter(|_| !word.is_empty())
    };
    let words: Vec<&str> = value.split(':').collect();
    let parsed = match words.as_slice() {
        [avg] => size(avg).map(|avg| (None, Some(avg), None)),
        [min, avg, max] => match (size(min), size(avg), size(max)) {
            (Some(min), Some(avg), Some(max)) => Some((Some(min), Some(avg), Some(max))),
            _ => None,
        },
        _ => None,
    };
    let Some((min, avg, max)) = parsed else {
        return Err(format!(
            "invalid argument {shown} for '--chunk-size': an average size (64K), or \
             MIN:AVG:MAX (16K:64K:256K)"
        ));
    };
    crate::casync::ChunkSizes::resolve(min, avg, max)
        .map_err(|e| format!("invalid argument {shown} for '--chunk-size': {e}"))
}

/// The options part of `--help`, laid out as GNU does: the option in a
/// 24-column gutter, its help wrapped at 78 columns beside it.
pub fn options_help() -> String {
    layout(OPTIONS)
}

/// `options` laid out as [`options_help`] lays out ddx's own (`ddx bench
/// --help` uses it for its table).
pub fn layout<'a>(options: impl IntoIterator<Item = &'a OptionSpec>) -> String {
    const GUTTER: usize = 24;
    const WIDTH: usize = 78;
    let mut out = String::new();
    for option in options {
        let head = match (option.value, option.values) {
            (Some(value), Values::Optional(_)) => format!("      --{}[={value}]", option.name),
            (Some(value), _) => format!("      --{}={value}", option.name),
            (None, _) => format!("      --{}", option.name),
        };
        // At least two spaces between an option and its help, as GNU's
        // help leaves; a longer head takes a line of its own.
        if head.len() + 2 > GUTTER {
            out.push_str(&head);
            out.push('\n');
            out.push_str(&wrap("", option.help, GUTTER, WIDTH));
        } else {
            out.push_str(&wrap(&head, option.help, GUTTER, WIDTH));
        }
    }
    out
}

pub fn version_text() -> String {
    format!(
        "ddx {} (GNU coreutils dd 9.1 compatible)\n\
         dd rebuilt for today's disks: a byte-exact drop-in for GNU dd.\n",
        env!("CARGO_PKG_VERSION")
    )
}

pub use crate::cli::reference::help_text;

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn operands_pass_through_in_order() {
        assert_eq!(
            scan(&words(&["if=a", "-", "of=b"])),
            Scan::Operands(words(&["if=a", "-", "of=b"]), Box::default())
        );
        assert_eq!(
            scan(&words(&["if=a", "--", "--help"])),
            Scan::Operands(words(&["if=a", "--help"]), Box::default())
        );
    }

    #[test]
    fn help_and_version_anywhere_and_abbreviated() {
        assert_eq!(scan(&words(&["if=a", "--help"])), Scan::Help);
        assert_eq!(scan(&words(&["--he"])), Scan::Help);
        assert_eq!(scan(&words(&["--v"])), Scan::Version);
        assert_eq!(scan(&words(&["--ver"])), Scan::Version);
        assert_eq!(scan(&words(&["--h"])), Scan::Help);
        assert!(matches!(
            scan(&words(&["--veri"])),
            Scan::Operands(_, settings) if settings.verify
        ));
        assert!(matches!(
            scan(&words(&["--verb"])),
            Scan::Operands(_, settings) if settings.verbose
        ));
    }

    #[test]
    fn help_lists_every_option_within_78_columns() {
        let help = help_text("ddx");
        for option in OPTIONS {
            assert!(
                help.contains(&format!("--{}", option.name)),
                "--{} missing from --help",
                option.name
            );
        }
        for line in help.lines() {
            assert!(line.len() <= 78, "too wide: {line:?}");
        }
    }

    #[test]
    fn every_option_is_handled() {
        // A row in OPTIONS without a handler would panic here, not in use.
        for option in OPTIONS {
            let word = match option.value {
                None => format!("--{}", option.name),
                Some(_) => {
                    let value = option.choices().first().copied().unwrap_or("1");
                    format!("--{}={value}", option.name)
                }
            };
            let _ = scan(&words(&[&word]));
        }
    }

    /// Every option with a value, whatever follows it (an operand, a
    /// plain word, nothing), says it requires an argument rather than
    /// taking the next word; abbreviations alike.
    #[test]
    fn a_value_is_never_taken_from_the_next_word() {
        for option in OPTIONS
            .iter()
            .filter(|o| o.value.is_some() && !matches!(o.values, Values::Optional(_)))
        {
            let expected = Scan::Error(format!(
                "option '--{}' requires an argument: give it in the same word, as --{}={}",
                option.name,
                option.name,
                option.value.unwrap()
            ));
            let full = format!("--{}", option.name);
            let stem = &option.name[..option.name.len() - 1];
            let unique = OPTIONS.iter().filter(|o| o.name.starts_with(stem)).count() == 1;
            let prefix = format!("--{stem}");
            let forms = if unique {
                vec![&full, &prefix]
            } else {
                vec![&full]
            };
            for word in forms {
                for next in [&["if=a", "of=b"][..], &["FILE", "if=a"], &["4"], &[]] {
                    let mut list = vec![word.as_str()];
                    list.extend_from_slice(next);
                    assert_eq!(scan(&words(&list)), expected, "{list:?}");
                    // After operands too.
                    let mut list: Vec<&str> = next.to_vec();
                    list.push(word);
                    assert_eq!(scan(&words(&list)), expected, "{list:?}");
                }
            }
        }
    }

    /// `--opt=` gives an empty value, which no option accepts: each says
    /// so, naming itself.
    #[test]
    fn an_empty_value_is_refused_naming_the_option() {
        for option in OPTIONS.iter().filter(|o| o.value.is_some()) {
            let word = format!("--{}=", option.name);
            match scan(&words(&[&word, "if=a"])) {
                Scan::Error(message) => assert!(
                    message.contains(&format!("'--{}'", option.name)),
                    "{word}: {message}"
                ),
                other => panic!("{word}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_value_in_the_same_word_is_taken() {
        let Scan::Operands(operands, settings) =
            scan(&words(&["--ma=m", "if=a", "--sector-size=4096", "of=b"]))
        else {
            panic!("expected operands");
        };
        assert_eq!(operands, words(&["if=a", "of=b"]));
        assert_eq!(settings.map, Some("m".into()));
        assert_eq!(settings.sector_size, Some(4096));
    }

    #[test]
    fn getopt_style_errors() {
        assert_eq!(
            scan(&words(&["-x"])),
            Scan::Error("invalid option -- 'x'".into())
        );
        assert_eq!(
            scan(&words(&["--foo"])),
            Scan::Error("unrecognized option '--foo'".into())
        );
        assert_eq!(
            scan(&words(&["--help=1"])),
            Scan::Error("option '--help' doesn't allow an argument".into())
        );
    }
}

#[cfg(test)]
mod settings_tests {
    use super::*;

    #[test]
    fn backend_and_queue_depth() {
        let words: Vec<OsString> = ["if=a", "--backend=threads", "--queue-depth=4", "of=b"]
            .iter()
            .map(OsString::from)
            .collect();
        let Scan::Operands(operands, settings) = scan(&words) else {
            panic!("expected operands");
        };
        assert_eq!(
            operands,
            vec![OsString::from("if=a"), OsString::from("of=b")]
        );
        assert_eq!(settings.backend, Some(BackendChoice::Threads));
        assert_eq!(settings.queue_depth, Some(4));
        assert!(matches!(
            scan(&[OsString::from("--backend=fast")]),
            Scan::Error(_)
        ));
        assert!(matches!(
            scan(&[OsString::from("--queue-depth=0")]),
            Scan::Error(_)
        ));
    }

    /// Every option `--help` lists has a row in the planner's table of what
    /// options need of the ends (a new option must say what it needs), and
    /// every row is an option, an operand ddx adds, or GNU's copy itself
    /// (`if=`: what any copy needs of its input).
    #[test]
    fn the_table_has_a_row_for_every_option() {
        for option in OPTIONS {
            if matches!(option.name, "help" | "version") {
                continue;
            }
            let name = format!("--{}", option.name);
            assert!(
                crate::planner::needs::TABLE
                    .iter()
                    .any(|row| row.option == name),
                "{name} has no row in the needs table"
            );
        }
        for row in crate::planner::needs::TABLE {
            assert!(
                matches!(row.option, "bs=auto" | "if=")
                    || OPTIONS
                        .iter()
                        .any(|o| format!("--{}", o.name) == row.option),
                "{} is in the table but not an option",
                row.option
            );
        }
    }
}
