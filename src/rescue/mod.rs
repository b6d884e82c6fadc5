//! Copies that know where they are: `--rescue` (GNU ddrescue's four
//! phases, so that the good data comes off a failing disk first and only
//! unreadable sectors are lost), `--map=FILE` (ddrescue's mapfile of what
//! is done and what is bad, saved as the copy goes) and `--resume`
//! (continue from that map after a crash, a signal or an error, copying
//! only what is not done yet; with `--retry-passes`, reading its bad
//! sectors again).
//!
//! These copies address both ends by position (pread/pwrite), not as
//! streams, which is what makes a map meaningful; so they run their own
//! loop here rather than the record engine, and accept only the operands
//! for which a byte of output has one fixed source byte (the rows of
//! `planner::needs`).
//!
//! Without `--rescue`, the pending ranges are read in requests of ibs,
//! in order, and a read error stops the copy (or, with conv=noerror,sync,
//! zero-fills the rest of its request and marks it bad). With it, the
//! phases of [`phases`] run instead, in requests of ddrescue's cluster
//! (64 KiB) unless a record size is given. Either way the requests of the
//! first reads lie on one grid (ibs apart from skip=), each a whole
//! number of GNU's records, which the statistics count as GNU dd reading
//! record by record would: a record read whole is a full record, one cut
//! short by an error or the end of the input a partial one; a request
//! whose failed part was filled with zeros was still written whole. The
//! sector-by-sector reads of the later phases count only what they
//! recover where this run had not written (a resumed retry pass), as
//! records read and written. The bytes are the output bytes this run
//! wrote, each once.

mod copier;
pub mod identity;
pub mod mapfile;
pub mod phases;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::Events;
use crate::engine::counters::Counters;
use crate::integrity::Tap;

use crate::ends::Whence;
use crate::engine::stream::Stream;
use crate::operands::CopyPlan;
use crate::sys::Errno;
use mapfile::{BlockStatus, Map};
pub use phases::{Phase, PhaseStart, Standing};

/// The sector size when the input does not tell (a file).
pub const DEFAULT_SECTOR: usize = 512;

/// A rescue's request when no record size is given: ddrescue's cluster
/// (128 sectors of 512 bytes). GNU's default record (512 bytes) would
/// make every read one sector: a healthy disk read a sector a request,
/// and each transient failure a request of its own to trim.
pub const RESCUE_CLUSTER: usize = 64 << 10;

/// The request size of a copy by position's first reads: the record
/// size (ibs) as given; for a rescue without one, [`RESCUE_CLUSTER`]
/// (a whole number of GNU's records, which the statistics still count).
pub fn request_size(plan: &CopyPlan, rescue: bool) -> usize {
    let record = plan.input_block_size;
    if !rescue || plan.input_block_size_given || record >= RESCUE_CLUSTER {
        return record;
    }
    RESCUE_CLUSTER / record * record
}

/// ddx's options that ask for a copy by position, as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked<'a> {
    /// `--rescue`.
    pub rescue: bool,
    /// `--map=FILE`.
    pub map: Option<&'a Path>,
    /// `--resume`.
    pub resume: bool,
    /// `--sector-size=N`.
    pub sector: Option<usize>,
    /// `--retry-passes=N` (a rescue, even without `--rescue`).
    pub retry_passes: Option<u32>,
}

impl Asked<'_> {
    /// Whether a copy by position is asked for at all.
    pub fn any(&self) -> bool {
        self.rescue || self.map.is_some() || self.resume || self.retry_passes.is_some()
    }
}

/// What the positional copy is asked to do, from ddx's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionalCopy {
    /// `--rescue` (or `--retry-passes`): ddrescue's phases.
    pub rescue: bool,
    /// Where the map is kept, if anywhere.
    pub map_path: Option<PathBuf>,
    /// `--resume`: continue from the map if it exists.
    pub resume: bool,
    /// The map path was chosen by ddx (OF.ddx-map): removed once the copy
    /// is complete, as a checkpoint no longer needed.
    pub map_is_checkpoint: bool,
    /// `--sector-size=N`, if given.
    pub sector: Option<usize>,
    /// `--retry-passes=N`: passes over the bad sectors after scraping.
    pub retry_passes: u32,
}

/// The suffix of the checkpoint map `--resume` keeps next to the output.
pub const CHECKPOINT_SUFFIX: &str = ".ddx-map";

/// The positional copy `asked` for. What it cannot be combined with, and
/// the ends it needs, are rows of `planner::needs`, refused before this is
/// made.
pub fn request(plan: &CopyPlan, asked: Asked<'_>) -> PositionalCopy {
    let Asked {
        rescue,
        map,
        resume,
        sector,
        retry_passes,
    } = asked;
    let (map_path, map_is_checkpoint) = match (map, &plan.output) {
        (Some(path), _) => (Some(path.to_path_buf()), false),
        (None, Some(output)) if resume => {
            let mut path = output.as_os_str().to_owned();
            path.push(CHECKPOINT_SUFFIX);
            (Some(PathBuf::from(path)), true)
        }
        (None, _) => (None, false),
    };
    PositionalCopy {
        rescue: rescue || retry_passes.is_some(),
        map_path,
        resume,
        map_is_checkpoint,
        sector,
        retry_passes: retry_passes.unwrap_or(0),
    }
}

/// How a copy by position starts, as its map (if any) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// No map to go on from: the copy starts from the beginning, and the
    /// line that says so where a map was named (a mistyped map's name
    /// would otherwise read a failing disk again from its start unseen).
    Fresh(Option<String>),
    /// The map exists and `--resume` continues it: what it records of
    /// its copy's ends, to hold the input to once it is open.
    Resumed(identity::Recorded),
}

/// Whether this request continues an earlier copy: a map to resume from
/// exists. An existing map without `--resume`, or one whose copy wrote
/// another output than this one or an output that is gone, is an error:
/// the one line saying which file the map's copy wrote and how to go on.
pub fn resuming(request: &PositionalCopy, plan: &CopyPlan) -> Result<Start, String> {
    let Some(map) = &request.map_path else {
        return Ok(Start::Fresh(None));
    };
    let shown = crate::text::quote::quote_file(map.as_os_str().as_encoded_bytes());
    if !map.exists() {
        let named_by = if request.map_is_checkpoint {
            "--resume: no checkpoint"
        } else if request.resume {
            "--resume: no map"
        } else {
            "--map: no map"
        };
        return Ok(Start::Fresh(Some(format!(
            "{named_by} {shown} yet: the copy starts from the beginning, and {shown} \
             will record it"
        ))));
    }
    if !request.resume {
        return Err(format!(
            "the map {shown} exists: add --resume to continue that copy, or remove it to \
             start over"
        ));
    }
    // Unreadable here: the copy says why when it reads it.
    let recorded = std::fs::read_to_string(map)
        .map(|text| identity::Recorded::read(&text))
        .unwrap_or_default();
    let output = plan.output.as_deref().unwrap_or(Path::new(""));
    if let Some(why) = wrong_output(&recorded, output) {
        return Err(format!("--resume: the map {shown} {why}"));
    }
    Ok(Start::Resumed(recorded))
}

/// Why `output` is not where the map's copy can go on (the rest of the
/// sentence after "the map M"), or None.
fn wrong_output(recorded: &identity::Recorded, output: &Path) -> Option<String> {
    use crate::text::quote::quote_file;
    let quoted = |path: &Path| quote_file(path.as_os_str().as_encoded_bytes());
    // An export named by a URI is no file: whether it is there is for
    // its opening to say.
    let by_uri = crate::ends::uri::recognise(output).is_some();
    let now = identity::EndRecord::at(output);
    match &recorded.output {
        Some(was) if !same_output(was, output, now.as_ref()) => {
            let was_path = Path::new(&was.name);
            let gone =
                !by_uri && crate::ends::uri::recognise(was_path).is_none() && !was_path.exists();
            let there = if gone {
                " (which is not there either: put it back)"
            } else {
                ""
            };
            Some(format!(
                "records a copy to {}, not to {}{there}: give of={} to continue that copy, \
                 or remove the map to start over",
                quoted(was_path),
                quoted(output),
                was.name
            ))
        }
        _ if !by_uri && now.is_none() => Some(format!(
            "records a copy to {}, which is not there: put it back to continue that copy \
             (its finished ranges are in it), or remove the map to start over",
            quoted(output)
        )),
        _ => None,
    }
}

/// Whether `output` (what stands there now: `now`) is the output the
/// map's copy wrote: the same name, or the same file under another name.
fn same_output(
    was: &identity::EndRecord,
    output: &Path,
    now: Option<&identity::EndRecord>,
) -> bool {
    use identity::Identity;
    if Path::new(&was.name) == output {
        return true;
    }
    let Some(now) = now else {
        return false;
    };
    let same = |a: &Identity, b: &Identity| match (a, b) {
        (
            Identity::File { device, inode, .. },
            Identity::File {
                device: d,
                inode: i,
                ..
            },
        ) => (device, inode) == (d, i),
        (Identity::Device { number, .. }, Identity::Device { number: n, .. }) => number == n,
        (Identity::Uri(a), Identity::Uri(b)) => a == b,
        _ => false,
    };
    if same(&was.identity, &now.identity) {
        return true;
    }
    // Recorded by name only (an older map): the same file if that name
    // leads to it.
    matches!(was.identity, Identity::Unknown)
        && identity::EndRecord::at(Path::new(&was.name))
            .is_some_and(|there| same(&there.identity, &now.identity))
}

/// The bytes of the copy's extent that earlier runs dealt with, as its
/// map says: everything but what is left to read (finished, or found
/// bad; with `retrying`, retry passes read the bad areas again, so they
/// are still to do). A resumed copy's progress starts there, and counts
/// what this run reads on top, up to the whole extent.
pub fn resumed_bytes(map: &Map, retrying: bool) -> u64 {
    let left: u64 = map.pending().iter().map(|b| b.size).sum();
    let bad = if retrying {
        map.bytes_with(BlockStatus::BadSector)
    } else {
        0
    };
    map.blocks()
        .iter()
        .map(|b| b.size)
        .sum::<u64>()
        .saturating_sub(left + bad)
}

/// The one line a resumed copy starts with: what its map says is done,
/// left to read and bad, in bytes of the copy's extent. Its percentage is
/// of [`resumed_bytes`] (`retrying` as there), as the progress line's
/// first one is.
pub fn resume_summary(map: &Map, path: &Path, retrying: bool) -> String {
    let done = map.bytes_with(BlockStatus::Finished);
    let bad = map.bytes_with(BlockStatus::BadSector);
    let left: u64 = map.pending().iter().map(|b| b.size).sum();
    let total = done + bad + left;
    // Rounded down: "100% done" only when nothing is left.
    let percent = if total == 0 {
        100
    } else {
        (u128::from(resumed_bytes(map, retrying)) * 100 / u128::from(total)) as u64
    };
    format!(
        "resuming from {}: {done} bytes done, {left} left, {bad} bad ({percent}% done)",
        crate::text::quote::quote_file(path.as_os_str().as_encoded_bytes())
    )
}

/// The copy's two ends and its extent, opened.
pub struct Job<'a> {
    pub input: &'a mut dyn Stream,
    /// The input's path, where sectors can be read again with O_DIRECT
    /// (a file or block device).
    pub input_path: Option<&'a Path>,
    pub output: &'a mut dyn Stream,
    /// The output's path, where it can be opened again to read back what
    /// a rescue wrote out of order, for the digests.
    pub output_path: Option<&'a Path>,
    /// Input positions `[start, end)` are copied.
    pub start: u64,
    pub end: u64,
    /// Output position of input position `start`.
    pub output_start: u64,
    /// The request size of the first reads: ibs, or a rescue's cluster
    /// ([`request_size`]); a whole number of records.
    pub chunk: usize,
    /// GNU's record (ibs), the unit the statistics count.
    pub record: usize,
    pub sector: usize,
    /// ddrescue's phases (`--rescue`, `--retry-passes`).
    pub rescue: bool,
    /// Passes over the bad sectors once scraping is done.
    pub retry_passes: u32,
    /// conv=noerror,sync without --rescue: a failed request is zero-filled
    /// from where it failed, as dd pads a lost block.
    pub pad_failed_chunks: bool,
    pub map: Map,
    pub map_path: Option<PathBuf>,
    pub command_line: String,
    /// Comment lines the saved map carries after the command line: what
    /// identifies the copy's ends (`identity`).
    pub notes: String,
    pub tap: Option<Tap>,
    /// Where the rescue stands, for the progress line.
    pub standing: Arc<Standing>,
    /// Told as each phase of a rescue starts (`--verbose`).
    pub on_phase: Option<&'a dyn Fn(&PhaseStart)>,
}

/// Why the copy stopped.
#[derive(Debug)]
pub enum Ended {
    /// Every pass ran (bad sectors may remain: see the map).
    Complete,
    /// A read error without --rescue or noerror: the map says where.
    ReadError { offset: u64, errno: Errno },
    /// The output refused a write at output `offset` (all before it is written).
    WriteError { offset: u64, errno: Errno },
}

/// How a positional copy went.
#[derive(Debug)]
pub struct RescueOutcome {
    pub ended: Ended,
    pub map: Map,
    /// A map save that failed (the copy went on).
    pub map_error: Option<(PathBuf, String)>,
    /// Bytes the map held as bad sectors before this run.
    pub bad_before: u64,
    /// Why `--hash`/`--verify` cover less than the output, if they do.
    pub digest_error: Option<String>,
    /// The phases a rescue ran, in order.
    pub phases: Vec<Phase>,
    /// Reads that failed in this run (requests and sectors).
    pub read_errors: u64,
}

impl RescueOutcome {
    /// A rescue that ran every phase and pass and still holds bad
    /// sectors: what exit status 2 says.
    pub fn bad_areas_remain(&self) -> bool {
        matches!(self.ended, Ended::Complete) && self.map.bytes_with(BlockStatus::BadSector) > 0
    }
}

/// Run a positional copy over what `job.map` has not finished.
pub fn run(job: Job<'_>, counters: &Counters, events: &dyn Events) -> Result<RescueOutcome, Errno> {
    copier::Copier::new(job, counters, events)?.run()
}

/// The input's size: its data size (a file's, an export's), else where
/// its end is (a device's). The position is left at the end.
pub fn input_size(input: &mut dyn Stream) -> Result<u64, Errno> {
    match input.size()? {
        Some(size) => Ok(size),
        None => input.seek(Whence::End(0)),
    }
}

/// The input's logical sector size (its logical block, where the end
/// addresses one; BLKSSZGET for a block device).
pub fn logical_sector(input: &dyn Stream) -> usize {
    input
        .logical_block()
        .map(|b| b as usize)
        .or_else(|| {
            input
                .fd()
                .and_then(|fd| rustix::fs::ioctl_blksszget(fd).ok())
                .map(|s| s as usize)
        })
        .filter(|s| s.is_power_of_two() && *s >= 512)
        .unwrap_or(DEFAULT_SECTOR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn plan(words: &[&str]) -> CopyPlan {
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        crate::operands::parse(&words).plan.expect("valid operands")
    }

    #[test]
    fn a_resume_says_what_its_map_holds() {
        let mut map = Map::new(0, 1 << 20);
        map.mark(0, 1 << 18, BlockStatus::Finished);
        map.mark(1 << 18, 512, BlockStatus::BadSector);
        assert_eq!(
            resume_summary(&map, Path::new("out.map"), false),
            "resuming from 'out.map': 262144 bytes done, 785920 left, 512 bad (25% done)"
        );
        assert_eq!(resumed_bytes(&map, false), (1 << 18) + 512);
        // Retry passes read the bad areas again: they are still to do.
        assert_eq!(resumed_bytes(&map, true), 1 << 18);
        map.mark(1 << 18, (1 << 20) - (1 << 18), BlockStatus::BadSector);
        assert!(resume_summary(&map, Path::new("m"), false)
            .ends_with(" 0 left, 786432 bad (100% done)"));
        assert!(
            resume_summary(&map, Path::new("m"), true).ends_with(" 0 left, 786432 bad (25% done)")
        );
        map.mark(0, 1 << 20, BlockStatus::Finished);
        assert!(resume_summary(&map, Path::new("m"), false).ends_with(" 0 left, 0 bad (100% done)"));
    }

    #[test]
    fn resume_keeps_a_checkpoint_next_to_the_output() {
        let resume = Asked {
            resume: true,
            ..Asked::default()
        };
        let checkpoint = request(&plan(&["if=a", "of=dir/b.img"]), resume);
        assert_eq!(
            checkpoint.map_path,
            Some(PathBuf::from("dir/b.img.ddx-map"))
        );
        assert!(checkpoint.map_is_checkpoint);
        let asked = Asked {
            rescue: true,
            map: Some(Path::new("m")),
            resume: true,
            sector: Some(4096),
            retry_passes: None,
        };
        let named = request(&plan(&["if=a", "of=b"]), asked);
        assert_eq!(named.map_path, Some(PathBuf::from("m")));
        assert!(!named.map_is_checkpoint);
        assert_eq!(named.sector, Some(4096));
        assert_eq!(named.retry_passes, 0);
    }

    #[test]
    fn retry_passes_make_a_rescue() {
        let asked = Asked {
            retry_passes: Some(3),
            ..Asked::default()
        };
        assert!(asked.any());
        let rescue = request(&plan(&["if=a", "of=b", "conv=noerror"]), asked);
        assert!(rescue.rescue);
        assert_eq!(rescue.retry_passes, 3);
    }
}
