//! The one description of ddx's command line: GNU's operands and symbols
//! with their help, beside ddx's own `--options` (`options::OPTIONS`),
//! grouped by job, the ends `if=` and `of=` can name, the environment ddx
//! reads, its exit status and its examples. `--help`, the man page
//! (`doc/ddx.1`), the shell completions (`completions/`) and the README's
//! common jobs are all generated from here (see `docs`), so they cannot
//! drift apart; tests hold the symbol lists to the parser's, GNU's part of
//! `--help` to GNU dd's own, and the environment to what the code reads.
//!
//! `--help` begins with GNU dd's help, word for word (`gnu_help.txt`), so
//! that a script reading `dd --help` finds what it expects; ddx's additions
//! follow it.

use crate::cli::options::{layout, OptionSpec, OPTIONS, VALUE_RULE};
use crate::ends::Kind;
use crate::text::wrap::wrap;

/// One GNU `key=value` operand.
#[derive(Debug, Clone, Copy)]
pub struct OperandSpec {
    pub name: &'static str,
    pub value: &'static str,
    /// GNU's help for it, in GNU's words.
    pub help: &'static str,
    /// What ddx adds to it, for the man page ("" for nothing).
    pub more: &'static str,
    /// What completes its value.
    pub completes: Completes,
}

/// What a shell should offer after `key=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completes {
    Nothing,
    Files,
    Conversions,
    Flags,
    StatusLevels,
    /// The words of its own that a size operand also takes (bs=auto).
    Words(&'static [&'static str]),
}

/// What `bs=auto`, ddx's own value of `bs=`, does (a macro, so that the
/// operand's text can be made of it).
macro_rules! bs_auto {
    () => {
        "measure reading the input at 4 KiB to 4 MiB and take the smallest size that reaches \
         95% of the best sizes' throughput, less the noise between rounds, never below 85% \
         of the fastest size's (128 KiB where it cannot be measured: a pipe, a character \
         device); count=, skip= and seek= must then be given in bytes (a 'B' suffix, \
         or the *_bytes flags)"
    };
}

/// What `status=progress` does on a terminal.
macro_rules! status_progress {
    () => {
        "on a terminal, ddx draws one live line instead of GNU's: bytes, elapsed time, \
         the recent rate beside the average and, when the size is known, a bar, \
         percent and ETA"
    };
}

pub const OPERANDS: &[OperandSpec] = &[
    OperandSpec {
        name: "bs",
        value: "BYTES",
        help: "read and write up to BYTES bytes at a time (default: 512); overrides ibs \
               and obs",
        more: concat!("bs=auto (ddx's own): ", bs_auto!()),
        completes: Completes::Words(&["auto"]),
    },
    OperandSpec {
        name: "cbs",
        value: "BYTES",
        help: "convert BYTES bytes at a time",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "conv",
        value: "CONVS",
        help: "convert the file as per the comma separated symbol list",
        more: "",
        completes: Completes::Conversions,
    },
    OperandSpec {
        name: "count",
        value: "N",
        help: "copy only N input blocks",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "ibs",
        value: "BYTES",
        help: "read up to BYTES bytes at a time (default: 512)",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "if",
        value: "FILE",
        help: "read from FILE instead of stdin",
        more: "FILE may be a regular file, a block device, a pipe or a character device, \
               or a URI naming an NBD export, an S3 object or a web object (see ENDS)",
        completes: Completes::Files,
    },
    OperandSpec {
        name: "iflag",
        value: "FLAGS",
        help: "read as per the comma separated symbol list",
        more: "",
        completes: Completes::Flags,
    },
    OperandSpec {
        name: "obs",
        value: "BYTES",
        help: "write BYTES bytes at a time (default: 512)",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "of",
        value: "FILE",
        help: "write to FILE instead of stdout",
        more: "FILE may be a regular file, a block device, a pipe or a character device, \
               or a URI naming an NBD export or an S3 object (see ENDS)",
        completes: Completes::Files,
    },
    OperandSpec {
        name: "oflag",
        value: "FLAGS",
        help: "write as per the comma separated symbol list",
        more: "",
        completes: Completes::Flags,
    },
    OperandSpec {
        name: "seek",
        value: "N",
        help: "(or oseek=N) skip N obs-sized output blocks",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "skip",
        value: "N",
        help: "(or iseek=N) skip N ibs-sized input blocks",
        more: "",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "status",
        value: "LEVEL",
        help: "The LEVEL of information to print to stderr; 'none' suppresses everything \
               but error messages, 'noxfer' suppresses the final transfer statistics, \
               'progress' shows periodic transfer statistics",
        more: concat!("status=progress: ", status_progress!()),
        completes: Completes::StatusLevels,
    },
];

/// Aliases the parser accepts that `--help` mentions inside another's help.
pub const OPERAND_ALIASES: &[&str] = &["iseek", "oseek"];

/// conv= symbols, in the parser's order, with GNU's help.
pub const CONV_HELP: &[(&str, &str)] = &[
    ("ascii", "from EBCDIC to ASCII"),
    ("ebcdic", "from ASCII to EBCDIC"),
    ("ibm", "from ASCII to alternate EBCDIC"),
    (
        "block",
        "pad newline-terminated records with spaces to cbs-size",
    ),
    (
        "unblock",
        "replace trailing spaces in cbs-size records with newline",
    ),
    ("lcase", "change upper case to lower case"),
    ("ucase", "change lower case to upper case"),
    (
        "sparse",
        "try to seek rather than write all-NUL output blocks",
    ),
    ("swab", "swap every pair of input bytes"),
    ("noerror", "continue after read errors"),
    ("nocreat", "do not create the output file"),
    ("excl", "fail if the output file already exists"),
    ("notrunc", "do not truncate the output file"),
    (
        "sync",
        "pad every input block with NULs to ibs-size; when used with block or unblock, \
         pad with spaces rather than NULs",
    ),
    (
        "fdatasync",
        "physically write output file data before finishing",
    ),
    ("fsync", "likewise, but also write metadata"),
];

/// iflag=/oflag= symbols, in the parser's order, with GNU's help (the
/// last three GNU accepts without listing them: [`UNLISTED_FLAGS`]).
pub const FLAG_HELP: &[(&str, &str)] = &[
    (
        "append",
        "append mode (makes sense only for output; conv=notrunc suggested)",
    ),
    ("direct", "use direct I/O for data"),
    ("directory", "fail unless a directory"),
    ("dsync", "use synchronized I/O for data"),
    ("noatime", "do not update access time"),
    ("nocache", "Request to drop cache.  See also oflag=sync"),
    ("noctty", "do not assign controlling terminal from file"),
    ("nofollow", "do not follow symlinks"),
    ("nonblock", "use non-blocking I/O"),
    ("sync", "likewise, but also for metadata"),
    ("fullblock", "accumulate full blocks of input (iflag only)"),
    (
        "count_bytes",
        "treat 'count=N' as a byte count (iflag only)",
    ),
    ("skip_bytes", "treat 'skip=N' as a byte count (iflag only)"),
    ("seek_bytes", "treat 'seek=N' as a byte count (oflag only)"),
];

/// Flags GNU dd 9.1 accepts but no longer lists in its help (a 'B' suffix
/// says the same); ddx lists them after GNU's help.
pub const UNLISTED_FLAGS: &[&str] = &["count_bytes", "skip_bytes", "seek_bytes"];

/// GNU dd 9.1's `--help` (C locale) up to its options, word for word;
/// `{program}` stands where GNU prints the name it was invoked by. Its
/// closing lines, where to find GNU coreutils' help and report
/// translation bugs, are GNU's project's and left out.
const GNU_HELP: &str = include_str!("gnu_help.txt");

/// The `ddx bench` line of the usage (its options are its own help's).
pub fn bench_usage(program: &str) -> String {
    format!("bench TARGET [OPTION]...   measure a disk (see '{program} bench --help')")
}

pub const SUMMARY: &str = "Copy a file, converting and formatting according to the operands \
(a drop-in replacement for GNU dd).";

/// What ddx is beside GNU dd, for the man page's DESCRIPTION.
pub const DESCRIPTION: &str = "ddx takes GNU dd's operands and writes the same bytes, the same \
statistics and the same exit status; a script that uses only GNU operands cannot tell it \
from dd. Its own features are long options, which never collide with GNU's operands: \
overlapped I/O, a live progress line, a guard against writing the wrong device, NBD exports \
and S3 objects as ends, compressed images and bmaps, several outputs at once, rescue with \
GNU ddrescue mapfiles, digests and read-back verification, and a disk benchmark (ddx bench).";

pub const MULTIPLIERS: &str = "N and BYTES may be followed by a multiplier: c=1, w=2, b=512, \
kB=1000, K=1024, MB=1000*1000, M=1024*1024, xM=M, GB, G, and so on for T, P, E, Z, Y; \
KiB=K, MiB=M, and so on. AxB multiplies. If N ends in 'B', it counts bytes, not blocks.";

pub const SIGNALS: &str = "Sending SIGUSR1 prints I/O statistics to standard error and the \
copy goes on. SIGINT and SIGTERM print them and stop; the output then holds the input's \
bytes up to the count reported. An upload to s3:// is aborted (kept for --resume with \
--map); but once its completing request is sent it cannot be taken back, so a signal \
that comes after it waits for the server's answer: if the object is complete, the copy \
ends as completed (exit status 0, its last --progress-fd record done without a \
signal) with a line saying the signal came once the object was committed.";

pub const GUARD: &str = "Before opening the output, ddx refuses a block device that is \
mounted, holds a mounted partition, is active swap or is held by RAID, LVM or \
device-mapper, a copy of a file or disk onto itself that would overwrite input \
before reading it, and an output that does not exist in /dev (a mistyped device name, \
which GNU dd would create as a regular file); --force overrides. Writing a whole disk from a terminal, ddx first \
says what it is about to overwrite and asks.";

pub const PAGE_CACHE: &str = "A copy's pages go through the page cache, as with cp and dd, \
where the copy fits comfortably in the memory ddx may use: what it adds to the cache (the \
input's data it reads, unless cached already, and what it writes) is at most half of the \
least of MemAvailable and, for each memory cgroup with a limit from ddx's own up, the limit \
less the usage. A larger copy, or any copy while memory is under pressure (PSI: some task \
waited for memory in 5% of the last ten seconds), drops what it brings into the cache behind \
it and writes uncached where the kernel can (RWF_DONTCACHE). A copy of unknown size (from a \
pipe) goes through the cache until it has filled half of that budget, then drops. Pages \
cached before the copy stay. --keep-cache and --drop-cache force either way; --verbose says \
which figures decided.";

/// One form an `if=`/`of=` value can take.
#[derive(Debug, Clone, Copy)]
pub struct EndSpec {
    pub form: &'static str,
    pub help: &'static str,
    /// The kinds of end this form names (a test holds the table to every
    /// kind a user can name).
    pub kinds: &'static [Kind],
}

/// Every kind of end `if=` and `of=` can name.
pub const ENDS: &[EndSpec] = &[
    EndSpec {
        form: "FILE",
        help: "a regular file, a pipe or FIFO, or a character device (/dev/zero, \
               /dev/null), opened as GNU dd opens it",
        kinds: &[Kind::RegularFile, Kind::Pipe, Kind::CharDevice],
    },
    EndSpec {
        form: "/dev/sdX",
        help: "a block device: a disk, a partition, a card, checked by the guard before \
               it is written",
        kinds: &[Kind::BlockDevice],
    },
    EndSpec {
        form: "/dev/sg*, /dev/bsg/*, /dev/ngXnY",
        help: "a disk through its SCSI or NVMe generic node, read and written with the \
               disk's own commands (its block device's bytes, with force unit access by \
               --fua), checked by the guard as the disk behind it",
        kinds: &[Kind::GenericNode],
    },
    EndSpec {
        form: "nbd://HOST[:PORT]/EXPORT",
        help: "an NBD export over TCP (port 10809 unless given); nbds://HOST[:PORT]/EXPORT \
               over TLS",
        kinds: &[Kind::NbdExport],
    },
    EndSpec {
        form: "nbd+unix:///EXPORT?socket=PATH",
        help: "an NBD export on a Unix socket; nbds+unix:///EXPORT?socket=PATH over TLS, \
               with a pre-shared key as nbds+unix://USER@/EXPORT?socket=PATH&tls-psk-file=FILE",
        kinds: &[Kind::NbdExport],
    },
    EndSpec {
        form: "nbd+vsock://CID[:PORT]/EXPORT",
        help: "an NBD export over vsock (a virtual machine's host or guest); \
               nbds+vsock:// over TLS",
        kinds: &[Kind::NbdExport],
    },
    EndSpec {
        form: "s3://BUCKET/KEY",
        help: "an object in Amazon S3 or an S3-compatible store (MinIO, Ceph, ...), its \
               endpoint and credentials from the AWS settings (the environment, below)",
        kinds: &[Kind::Object],
    },
    EndSpec {
        form: "http(s)://HOST/PATH",
        help: "an object a web server serves: http://... or https://..., as if= only",
        kinds: &[Kind::Object],
    },
    EndSpec {
        form: "tcp://HOST:PORT",
        help: "a TCP connection to HOST, or with ?listen the first one made to HOST:PORT \
               (tcp://0.0.0.0:PORT?listen on every interface), read as a pipe is; neither \
               encrypted nor authenticated, as netcat's",
        kinds: &[Kind::Socket],
    },
    EndSpec {
        form: "mem:PATH",
        help: "the file PATH held whole in memory while the copy runs (at most 4 GiB) and, \
               as of=, written back when the copy ends: an end without a descriptor, for \
               testing",
        kinds: &[Kind::Memory],
    },
];

/// When a word is taken as a URI.
pub const URI_RULE: &str = "A value of if= or of= is taken as a URI only when it begins with \
one of these schemes and '://' (or with mem:), and no file of that name exists, nor the directory its first \
component would be: GNU dd could not open such a name, so nothing GNU dd does changes. To \
name a file that looks like a URI, write ./ before it.";

/// How remote ends behave, for the man page's ENDS section.
pub const REMOTE_ENDS: &[&str] = &[
    "An NBD export is reached through libnbd, loaded the first time one is opened (Debian: \
     libnbd0). It reads as a regular file of its size and is written as a block device of its \
     size: never truncated, seek= past its end fails, a write across its end fails with 'No \
     space left on device', conv=fsync and conv=fdatasync send an NBD flush, and --trim sends \
     zero requests the server may deallocate. After GNU's message, a line gives libnbd's.",
    "An s3:// object is read with ranged GETs, several in flight, and written as a multipart \
     upload whose parts, sized from the input, go in parallel. It appears under its key only \
     when the upload completes: a failed or interrupted (SIGINT, SIGTERM) upload is aborted, \
     leaving no object and no pending upload. As an output an object takes no seek=, \
     conv=notrunc, conv=sparse, conv=excl, conv=nocreat or oflag=append, nor --rescue or \
     --trim. --map=FILE keeps the upload resumable: it stays on the server when the copy fails, \
     and --resume sends only the parts the server does not hold. Every part carries its \
     SHA-256, which the server checks; --verify compares the server's checksum of the whole \
     object with ddx's, and reads the object back only from a server that gives none.",
    "An http:// or https:// object is read with ranged GETs where the server takes them, \
     else as one body. https is verified against the system's trusted certificates and \
     AWS_CA_BUNDLE's. A password or a presigned URL's query in a URL never appears in a \
     message.",
];

/// A group of ddx's options that serve one job, as `--help` and the man
/// page list them.
#[derive(Debug, Clone, Copy)]
pub struct OptionGroup {
    pub title: &'static str,
    /// The options' names, in the order they are listed.
    pub options: &'static [&'static str],
}

/// ddx's options by job. Every option of `OPTIONS` is in exactly one
/// group (a test holds it); `--help` and `--version` are GNU's and listed
/// in GNU's part of `--help`.
pub const OPTION_GROUPS: &[OptionGroup] = &[
    OptionGroup {
        title: "Images",
        options: &[
            "decompress",
            "no-decompress",
            "compress",
            "bmap",
            "bmap-create",
            "used-only",
        ],
    },
    OptionGroup {
        title: "Chunk stores (casync indexes)",
        options: &["store", "seed", "chunk-size"],
    },
    OptionGroup {
        title: "Outputs",
        options: &["tee", "trim", "fua"],
    },
    OptionGroup {
        title: "Rescue and resume",
        options: &["rescue", "map", "resume", "sector-size", "retry-passes"],
    },
    OptionGroup {
        title: "Integrity",
        options: &["hash", "hash-file", "verify"],
    },
    OptionGroup {
        title: "Progress and safety",
        options: &["progress-fd", "verbose", "force"],
    },
    OptionGroup {
        title: "Tuning",
        options: &[
            "backend",
            "queue-depth",
            "request-size",
            "offload",
            "no-offload",
            "keep-cache",
            "drop-cache",
        ],
    },
    OptionGroup {
        title: "Information",
        options: &["help", "version"],
    },
];

/// The options of `group`, from `OPTIONS`.
pub fn group_options(group: &OptionGroup) -> impl Iterator<Item = &'static OptionSpec> + '_ {
    group
        .options
        .iter()
        .filter_map(|name| OPTIONS.iter().find(|o| o.name == *name))
}

/// The options no group lists (a test keeps this empty; `--help` and the
/// man page still show them, under "Other").
pub fn ungrouped_options() -> impl Iterator<Item = &'static OptionSpec> {
    OPTIONS
        .iter()
        .filter(|o| !OPTION_GROUPS.iter().any(|g| g.options.contains(&o.name)))
}

/// Environment variables ddx reads (or its libraries read for it), with
/// what each does.
#[derive(Debug, Clone, Copy)]
pub struct EnvVar {
    pub names: &'static [&'static str],
    pub help: &'static str,
}

pub const ENVIRONMENT: &[EnvVar] = &[
    EnvVar {
        names: &[
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ],
        help: "the keys s3:// is reached with (both, or neither), and the session token of \
               temporary keys; they win over a profile's",
    },
    EnvVar {
        names: &["AWS_PROFILE", "AWS_DEFAULT_PROFILE"],
        help: "the profile to read from the shared files (default: 'default'); one named \
               but in neither file is an error. From a profile ddx reads \
               aws_access_key_id, aws_secret_access_key, aws_session_token, region, \
               endpoint_url (also in a services section's s3), ca_bundle and \
               max_attempts; a profile whose credentials come another way (sso_session, \
               sso_start_url, role_arn, credential_process, web_identity_token_file) is \
               refused, naming the command that exports them",
    },
    EnvVar {
        names: &["AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "HOME"],
        help: "where the shared credentials and config files are (default: \
               ~/.aws/credentials and ~/.aws/config)",
    },
    EnvVar {
        names: &["AWS_REGION", "AWS_DEFAULT_REGION"],
        help: "the region, else the profile's, else (with no endpoint set) the bucket's \
               own, asked of S3",
    },
    EnvVar {
        names: &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        help: "the S3 endpoint, for an S3-compatible store (else the profile's); \
               http:// is allowed, being given explicitly",
    },
    EnvVar {
        names: &["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"],
        help: "'true': ignore every endpoint set in the environment or a profile",
    },
    EnvVar {
        names: &["AWS_CA_BUNDLE"],
        help: "a PEM file of certificates to trust besides the system's, for https \
               endpoints and https:// objects (not read for plain http)",
    },
    EnvVar {
        names: &["AWS_MAX_ATTEMPTS"],
        help: "tries per request, retried with exponential backoff (default: 11)",
    },
    EnvVar {
        names: &[
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
            "AWS_ROLE_SESSION_NAME",
            "AWS_ENDPOINT_URL_STS",
        ],
        help: "without keys: credentials for a web identity (Kubernetes service accounts)",
    },
    EnvVar {
        names: &[
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        ],
        help: "without keys: a container's credentials (ECS, EKS Pod Identity)",
    },
    EnvVar {
        names: &[
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            "AWS_EC2_METADATA_DISABLED",
        ],
        help: "without keys: where an EC2 instance's role is asked for, or 'true' not to \
               ask (then no credentials at all is an error)",
    },
    EnvVar {
        names: &["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"],
        help: "(or in lower case) the proxies s3:// and http(s):// go through, and the \
               hosts that do not",
    },
    EnvVar {
        names: &["SSL_CERT_FILE", "SSL_CERT_DIR"],
        help: "where the system's trusted certificates are, where not in the usual place",
    },
    EnvVar {
        names: &["LIBNBD_DEBUG"],
        help: "'1': libnbd's debug messages on standard error",
    },
    EnvVar {
        names: &["POSIXLY_CORRECT"],
        help: "as for GNU dd: SIGUSR1 is not caught, and kills ddx",
    },
];

/// What ddx exits with.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "the copy completed, and every check asked for (--verify, --bmap's digests) \
         passed",
    ),
    (
        "1",
        "any failure, as with GNU dd: a bad operand or option, an option these ends \
         cannot honour, an end that cannot be opened, a read or write error that \
         stopped the copy, a digest or read-back that differs, a --tee output dropped",
    ),
    (
        "2",
        "a rescue (--rescue) that ran its course, every phase and retry pass, with \
         bad areas left: everything readable was copied, the unreadable sectors are \
         zeros in the output, and the map lists them",
    ),
];

/// After the statuses: death by a signal.
pub const EXIT_SIGNALS: &str = "After SIGINT or SIGTERM ddx prints the statistics and dies \
of the signal (the shell reports 130 or 143), unless it came once an upload was committed \
(see SIGNALS). ddx bench's exit status is in its own help \
(ddx bench --help).";

/// One common job: what the README's common jobs, `--help` and the man
/// page's EXAMPLES show. Each command is run by the guide's test
/// (tests/all/guide.rs), its placeholders (/dev/sdX, my-bucket,
/// server.example) mapped onto devices and servers the test starts.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The job, in one line.
    pub job: &'static str,
    /// What the command does, for the man page.
    pub about: &'static str,
    pub command: &'static str,
}

pub const EXAMPLES: &[Example] = &[
    Example {
        job: "Copy a disk onto another, with a live progress line",
        about: "Copy a whole disk onto another, with a live progress line, and wait until \
                it is on the disk. From a terminal, ddx first says what /dev/sdY holds and \
                asks; a read error stops the copy, as with dd (see --rescue).",
        command: "ddx if=/dev/sdX of=/dev/sdY bs=4M conv=fsync status=progress",
    },
    Example {
        job: "Flash an image with its bmap, checking each range against the map",
        about: "Flash a compressed OS image onto a card: decompress it on every core, \
                write only the blocks its bmap names, each range checked against the \
                map's SHA-256 as it is written, and the card's first MiB last, so that a \
                write cut short leaves a card that looks blank.",
        command: "ddx if=raspios.img.xz of=/dev/sdX --decompress --bmap=raspios.img.bmap \
                  conv=fsync status=progress",
    },
    Example {
        job: "Write two cards at once, then read both back",
        about: "Write two cards at once from one decompressed stream, then read both back \
                to verify them; a card that fails is named and dropped while the other \
                completes.",
        command: "ddx if=raspios.img.xz of=/dev/sdX --tee=/dev/sdY --decompress bs=4M \
                  conv=fsync --verify",
    },
    Example {
        job: "Back up a disk to a compressed image",
        about: "Back up a disk to a zstd image compressed on every core (restore it with \
                ddx if=disk.img.zst of=/dev/sdX --decompress bs=4M conv=fsync).",
        command: "ddx if=/dev/sdX of=disk.img.zst --compress=zstd bs=4M status=progress",
    },
    Example {
        job: "Back up a disk to S3",
        about: "The same backup, uploaded to S3 as it is read (credentials, region and \
                endpoint from the AWS settings, see ENVIRONMENT); an interrupted upload \
                is aborted, leaving no object.",
        command: "ddx if=/dev/sdX of=s3://my-bucket/disk.img.zst --compress=zstd bs=8M",
    },
    Example {
        job: "Update a card in place from a release's chunk store",
        about: "Write a release published as a casync index onto a card that holds an \
                earlier one: chunks the card holds in place are neither fetched nor \
                written, runs of zeros are made, the rest fetched from the store beside \
                the index (many at once, each checked against its id), and the card read \
                back against the index.",
        command: "ddx if=https://downloads.example.org/raspios.caibx of=/dev/sdX --store \
                  --seed=/dev/sdX bs=4M conv=fsync --verify",
    },
    Example {
        job: "Rescue a failing disk; run it again to resume",
        about: "Rescue a failing disk as GNU ddrescue does (the good areas first, then \
                the failed areas' edges and the rest of them sector by sector), keeping \
                its map; after an interruption run the same command again to go on where \
                it stopped. The bad ranges are listed at the end, and the exit status is \
                2 if any remain.",
        command: "ddx if=/dev/sdX of=rescued.img --rescue --map=rescued.map --resume",
    },
    Example {
        job: "Copy an NBD export to a file",
        about: "Copy an NBD export (a disk served by nbdkit, qemu-nbd or nbd-server) to a \
                file.",
        command: "ddx if=nbd://server.example/disk of=disk.img bs=1M status=progress",
    },
    Example {
        job: "Benchmark a disk without writing to it",
        about: "Benchmark a disk without writing to it: sequential reads, the block-size \
                sweep and its recommendation, latency, queue depths and zones \
                (--destructive measures writes too; --html=report.html draws charts).",
        command: "ddx bench /dev/sdX",
    },
];

/// `command` as shell lines of at most `width` columns, broken between
/// words with a backslash, continuation lines indented by four.
pub fn shell_lines(command: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in command.split_whitespace() {
        let indent = if lines.is_empty() { 0 } else { 4 };
        if !line.trim().is_empty() && line.len() + 1 + word.len() + 2 > width {
            lines.push(format!("{line} \\"));
            line = " ".repeat(indent.max(4));
        } else if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

const WIDTH: usize = 78;
const GUTTER: usize = 24;

pub fn help_text(program: &str) -> String {
    let mut out = GNU_HELP.replace("{program}", program);
    out.push_str(&format!(
        "\nddx adds to dd:\n  {program} {}\n",
        bench_usage(program)
    ));
    out.push_str(&wrap("  bs=auto", bs_auto!(), GUTTER, WIDTH));
    out.push_str(&wrap(
        "  status=progress",
        status_progress!(),
        GUTTER,
        WIDTH,
    ));
    for (name, help) in FLAG_HELP {
        if UNLISTED_FLAGS.contains(name) {
            out.push_str(&wrap(&format!("  {name}"), help, GUTTER, WIDTH));
        }
    }
    out.push('\n');
    out.push_str(&wrap("", SIGNALS, 0, WIDTH));
    out.push_str("\nEnds: if= and of= name one of\n");
    for end in ENDS {
        out.push_str(&wrap(&format!("  {}", end.form), end.help, GUTTER, WIDTH));
    }
    out.push_str(&wrap("", URI_RULE, 0, WIDTH));
    out.push('\n');
    out.push_str(&wrap("", GUARD, 0, WIDTH));
    out.push_str("\nddx's options, by job (GNU operands stay key=value; these never collide):\n");
    for group in OPTION_GROUPS.iter().filter(|g| g.title != "Information") {
        out.push_str(&format!(" {}:\n", group.title));
        out.push_str(&layout(group_options(group)));
    }
    if ungrouped_options().next().is_some() {
        out.push_str(" Other:\n");
        out.push_str(&layout(ungrouped_options()));
    }
    out.push('\n');
    out.push_str(&wrap("", VALUE_RULE, 0, WIDTH));
    out.push_str("\nEnvironment (the man page says more):\n");
    for var in ENVIRONMENT {
        let names = var.names.join(", ");
        let help = short_help(var.help);
        if names.len() + 4 <= GUTTER {
            out.push_str(&wrap(&format!("  {names}"), &help, GUTTER, WIDTH));
        } else {
            out.push_str(&wrap("", &names, 2, WIDTH));
            out.push_str(&wrap("", &help, GUTTER, WIDTH));
        }
    }
    out.push_str("\nExit status:\n");
    for (status, help) in EXIT_STATUS {
        out.push_str(&wrap(&format!("  {status}"), help, 6, WIDTH));
    }
    out.push_str(&wrap("", EXIT_SIGNALS, 0, WIDTH));
    out.push_str("\nCommon jobs (placeholders: /dev/sdX, /dev/sdY, my-bucket, server.example):\n");
    for example in EXAMPLES {
        out.push_str(&format!("  # {}\n", example.job));
        for line in shell_lines(example.command, WIDTH - 2) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// The part of a help text before its first "; " or ". ": what `--help`
/// shows of a longer text the man page gives whole.
fn short_help(help: &str) -> String {
    let cut = ["; ", ". "]
        .iter()
        .filter_map(|end| help.find(end))
        .min()
        .unwrap_or(help.len());
    help[..cut].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operands::symbols;

    #[test]
    fn symbol_help_covers_exactly_the_parsers_symbols() {
        let conv: Vec<&str> = CONV_HELP.iter().map(|(n, _)| *n).collect();
        assert_eq!(conv, symbols::conv_names().collect::<Vec<_>>());
        let flags: Vec<&str> = FLAG_HELP.iter().map(|(n, _)| *n).collect();
        assert_eq!(flags, symbols::flag_names().collect::<Vec<_>>());
    }

    #[test]
    fn every_operand_is_one_the_parser_knows() {
        for operand in OPERANDS {
            let word = format!("{}=x", operand.name);
            let parsed = crate::operands::parse(&[word.as_str()]);
            let message = parsed.plan.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                !message.starts_with("unrecognized operand"),
                "{}: {message}",
                operand.name
            );
        }
    }

    fn words(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The tables the man page and completions are made from say what
    /// GNU's help says, in its words (wrapped differently).
    #[test]
    fn the_tables_use_gnus_words() {
        let gnu = words(GNU_HELP);
        for operand in OPERANDS {
            let line = format!("{}={} {}", operand.name, operand.value, words(operand.help));
            assert!(gnu.contains(&line), "{line}");
        }
        for (name, help) in CONV_HELP.iter().chain(FLAG_HELP) {
            let line = format!("{name} {}", words(help));
            assert_eq!(
                gnu.contains(&line),
                !UNLISTED_FLAGS.contains(name),
                "{line}"
            );
        }
    }

    #[test]
    fn every_option_is_in_one_group() {
        for option in OPTIONS {
            let groups = OPTION_GROUPS
                .iter()
                .filter(|g| g.options.contains(&option.name))
                .count();
            assert_eq!(
                groups, 1,
                "--{} is in {groups} groups of OPTION_GROUPS (src/cli/reference.rs): \
                 put it in the one for its job",
                option.name
            );
        }
        for name in OPTION_GROUPS.iter().flat_map(|g| g.options.iter()) {
            assert!(
                OPTIONS.iter().any(|o| o.name == *name),
                "OPTION_GROUPS lists --{name}, which is not an option"
            );
        }
        assert_eq!(ungrouped_options().count(), 0);
    }

    /// Every kind of end a user can name is in the table of ends that
    /// `--help` and the man page print, and shown there; the list of
    /// kinds is `Kind`'s own, so a kind added there fails here until the
    /// table names it (or this says why no one names it).
    #[test]
    fn the_table_of_ends_names_every_kind_a_user_can_name() {
        // An exhaustive match: a new kind does not compile until it is
        // placed here.
        let named_by_a_user = |kind: Kind| match kind {
            Kind::RegularFile
            | Kind::BlockDevice
            | Kind::CharDevice
            | Kind::Pipe
            | Kind::NbdExport
            | Kind::Object
            | Kind::Memory
            | Kind::GenericNode => true,
            // A socket or a directory fails as GNU dd's would; the others
            // are what ddx makes of an end, never named.
            Kind::Socket | Kind::Directory | Kind::Other | Kind::Stream => false,
        };
        let every = [
            Kind::RegularFile,
            Kind::BlockDevice,
            Kind::CharDevice,
            Kind::Pipe,
            Kind::Socket,
            Kind::Directory,
            Kind::Other,
            Kind::NbdExport,
            Kind::Object,
            Kind::Stream,
            Kind::Memory,
            Kind::GenericNode,
        ];
        let help = help_text("ddx");
        for kind in every.into_iter().filter(|&k| named_by_a_user(k)) {
            let rows: Vec<&EndSpec> = ENDS.iter().filter(|e| e.kinds.contains(&kind)).collect();
            assert!(!rows.is_empty(), "{kind:?} is in no row of ENDS");
            for row in rows {
                assert!(help.contains(row.form), "--help lacks {}", row.form);
            }
        }
    }

    #[test]
    fn help_starts_with_gnus_and_names_every_end_and_setting() {
        let help = help_text("ddx");
        assert!(help.starts_with("Usage: ddx [OPERAND]...\n  or:  ddx OPTION\n"));
        assert!(help.starts_with(&GNU_HELP.replace("{program}", "ddx")));
        for end in [
            "nbd://",
            "nbds://",
            "nbd+unix://",
            "nbds+unix://",
            "s3://",
            "https://",
        ] {
            assert!(help.contains(end), "{end}");
        }
        for name in ENVIRONMENT.iter().flat_map(|v| v.names.iter()) {
            assert!(help.contains(name), "{name}");
        }
        for example in EXAMPLES {
            assert!(help.contains(example.job), "{}", example.job);
        }
        for line in help.lines() {
            assert!(line.len() <= WIDTH, "too wide: {line:?}");
        }
    }

    #[test]
    fn shell_lines_break_between_words() {
        assert_eq!(shell_lines("ddx if=a of=b", 78), ["ddx if=a of=b"]);
        assert_eq!(
            shell_lines("ddx if=aaaa of=bbbb bs=4M", 16),
            ["ddx if=aaaa \\", "    of=bbbb \\", "    bs=4M"]
        );
    }

    /// Every variable the code reads by name is in ENVIRONMENT: the
    /// sources are read for `var("NAME")`, `var_os("NAME")` and the
    /// settings the object end passes to its client, tests left out.
    #[test]
    fn every_variable_the_code_reads_is_documented() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let documented: Vec<&str> = ENVIRONMENT.iter().flat_map(|v| v.names).copied().collect();
        let mut files = vec![root];
        let mut read = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || built_for_tests_only(&path) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Code before the file's tests.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (at, _) in code.match_indices('"') {
                let rest = &code[at + 1..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let quoted = rest[name.len()..].starts_with('"');
                let before = &code[..at];
                let by_name = before.ends_with("var(") || before.ends_with("var_os(");
                if quoted && name.len() > 3 && (by_name || name.starts_with("AWS_")) {
                    read.push(name);
                }
            }
        }
        assert!(read.iter().any(|n| n == "AWS_ENDPOINT_URL"), "{read:?}");
        for name in &read {
            assert!(
                documented.contains(&name.as_str()),
                "{name} is read but not in ENVIRONMENT (src/cli/reference.rs)"
            );
        }
    }

    /// Whether the module in `path` is built only for the unit tests
    /// (`#[cfg(test)]` on its `mod` line in its parent): what it reads is
    /// the test suite's setting, not ddx's.
    fn built_for_tests_only(path: &std::path::Path) -> bool {
        let (Some(stem), Some(dir)) = (path.file_stem().and_then(|s| s.to_str()), path.parent())
        else {
            return false;
        };
        let parent = std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default();
        ["pub mod", "mod"]
            .iter()
            .any(|m| parent.contains(&format!("#[cfg(test)]\n{m} {stem};")))
    }
}
