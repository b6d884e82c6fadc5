//! The wrong-device guard: before any output is opened for writing, refuse
//! the copies that destroy data by mistake, and say what a whole-disk copy
//! is about to overwrite.
//!
//! Refused (unless `--force`): an output block device that is mounted,
//! holds a mounted partition, is active swap or is held by RAID, LVM or
//! device-mapper (its `holders/`); an output file that is active swap; and
//! a copy of a file or disk onto itself whose write range runs over input
//! not yet read (see [`damage`] for the exact rule); and an output that
//! does not exist in /dev, where a mistyped device name (`of=/dev/sdz`)
//! would become a regular file in memory and the copy would seem to have
//! written the disk (see [`new_file_in_dev`]). Everything else passes
//! untouched, so a script that uses GNU operands on ordinary files cannot
//! tell the guard is there. A `--used-only` source is held to one rule
//! more ([`source_in_use`]): none of its file systems may be mounted
//! read-write, as their allocation maps could change while they are read. The guard only looks (stat, sysfs, procfs); it
//! opens nothing, and when it cannot judge it lets the copy go on. Before
//! a person is asked about a whole disk, [`contents`] reads what it holds
//! from the device itself (signatures, not the kernel's view).

pub mod contents;

use std::fmt;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, Stat};

use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::sys::block::{self, BlockDevice, DeviceNumber};
use crate::sys::mounts;
use crate::text::human::{human, Base};
use crate::text::quote::quote_file;
use contents::Contents;

/// Why a copy is refused. Display is one line without the program name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hazard {
    /// The output device, or one of its partitions, is in use.
    #[error("refusing to write {output}: {why}; --force overrides")]
    InUse { output: String, why: String },
    /// Input and output are the same file or disk and the copy would
    /// destroy input before reading it.
    #[error("refusing to copy {output} onto itself: {damage}; --force overrides")]
    Overlap { output: String, damage: Damage },
    /// The output does not exist and would be created in /dev.
    #[error(
        "refusing to create {output}: there is no such device, and a new file in /dev \
         is not one; --force overrides"
    )]
    NoSuchDevice { output: String },
    /// A `--used-only` source with a file system mounted read-write.
    #[error(
        "refusing to read {input} by its used blocks: {why}, so what it uses may change \
         while it is read (mount it read-only, or unmount it); --force overrides"
    )]
    SourceInUse { input: String, why: String },
}

/// A whole disk about to be overwritten: what to tell a person first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WholeDisk {
    pub path: String,
    pub device: BlockDevice,
}

impl WholeDisk {
    /// What to say before overwriting it, given what it holds (read from
    /// the device by [`contents::probe`]). Where that could not be read,
    /// the partitions the kernel lists stand in.
    pub fn notice(&self, contents: &Contents) -> String {
        let mut text = format!(
            "about to overwrite {}, which holds {}",
            describe(&self.path, &self.device),
            contents::describe(contents)
        );
        if let Contents::Unknown(_) = contents {
            if self.device.partitions.is_empty() {
                text.push_str("; the kernel lists no partitions");
            } else {
                let parts: Vec<String> = self
                    .device
                    .partitions
                    .iter()
                    .map(|p| format!("{} ({})", p.name, size_text(p.size)))
                    .collect();
                text.push_str(&format!(
                    "; the kernel lists partitions {}",
                    parts.join(", ")
                ));
            }
        }
        text
    }
}

fn size_text(bytes: u64) -> String {
    human(bytes, Base::Iec, 1, 1)
}

/// "'/dev/sdb' (SanDisk Ultra, 29 GiB)".
fn describe(path: &str, device: &BlockDevice) -> String {
    let size = size_text(device.size);
    match &device.model {
        Some(model) => format!("{path} ({model}, {size})"),
        None => format!("{path} ({}, {size})", device.name),
    }
}

/// Check a plan before its ends are opened. Ok(Some) when the output is a
/// whole disk (for the caller's notice); refusals are skipped by `force`.
pub fn check(plan: &CopyPlan, force: bool) -> Result<Option<WholeDisk>, Hazard> {
    let output_name = quote_file(&match &plan.output {
        Some(path) => path.as_os_str().as_bytes().to_vec(),
        None => b"standard output".to_vec(),
    });
    if !force && new_file_in_dev(plan) {
        return Err(Hazard::NoSuchDevice {
            output: output_name,
        });
    }
    let Some(output) = output_end(plan) else {
        return Ok(None);
    };
    if !force {
        if let Some(refusal) = in_use_refusal(&output_name, &output.place) {
            return Err(refusal);
        }
        if let Some(damage) = input_end(plan).and_then(|input| overlap(plan, &input, &output)) {
            return Err(Hazard::Overlap {
                output: output_name,
                damage,
            });
        }
    }
    Ok(match output.place {
        Place::Device(device) if !device.is_partition => Some(WholeDisk {
            path: output_name,
            device,
        }),
        _ => None,
    })
}

/// `of=` names nothing that exists, in /dev itself, under /dev/disk (the
/// by-id, by-path... links) or anywhere on a devtmpfs: a device name,
/// mistyped or for a disk not plugged in. GNU dd would create a regular
/// file there, in memory, and report the copy done. With conv=nocreat GNU
/// fails by itself, and /dev/shm (a tmpfs for files) is not concerned.
pub fn new_file_in_dev(plan: &CopyPlan) -> bool {
    let Some(path) = &plan.output else {
        return false;
    };
    !plan.conv.contains(Conv::NOCREAT) && creates_in_dev(path)
}

/// Whether opening `path` to write would create a file in /dev (see
/// [`new_file_in_dev`]).
fn creates_in_dev(path: &Path) -> bool {
    if path.exists() {
        return false;
    }
    let parent = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Ok(dir) = parent.canonicalize() else {
        return false;
    };
    let on_devtmpfs = || {
        mounts::mounts()
            .into_iter()
            .filter(|mount| dir.starts_with(&mount.mount_point))
            .max_by_key(|mount| mount.mount_point.as_os_str().len())
            .is_some_and(|mount| mount.fstype == "devtmpfs")
    };
    dir == Path::new("/dev") || dir.starts_with("/dev/disk") || on_devtmpfs()
}

/// The guard's refusals for an output named by its path alone, in the
/// copy's words, for writers other than the copy (`ddx bench`): a path
/// that does not exist and would be created in /dev; and when `writing`
/// an existing one, a device or file in use. Ok also when it cannot judge.
pub fn check_output(path: &Path, writing: bool) -> Result<(), Hazard> {
    let name = quote_file(path.as_os_str().as_bytes());
    if creates_in_dev(path) {
        return Err(Hazard::NoSuchDevice { output: name });
    }
    match path_end(path).filter(|_| writing) {
        Some(end) => in_use_refusal(&name, &end.place).map_or(Ok(()), Err),
        None => Ok(()),
    }
}

/// A `--used-only` source (if=, else standard input) whose file systems
/// are not all held still: the device, one of its partitions, or a
/// device stacked on either (LVM, device-mapper), mounted read-write.
/// None also when it cannot judge.
pub fn source_in_use(plan: &CopyPlan) -> Option<Hazard> {
    let name = quote_file(&match &plan.input {
        Some(path) => path.as_os_str().as_bytes().to_vec(),
        None => b"standard input".to_vec(),
    });
    let Place::Device(device) = input_end(plan)?.place else {
        return None;
    };
    let mut members: Vec<(String, DeviceNumber)> = vec![(device.name.clone(), device.number)];
    members.extend(device.partitions.iter().map(|p| (p.name.clone(), p.number)));
    // One level of devices stacked on them (a volume group's volumes).
    let stacked: Vec<(String, DeviceNumber)> = members
        .iter()
        .filter_map(|(_, number)| block::describe(*number))
        .flat_map(|d| d.holders)
        .filter_map(|holder| {
            let number = block::Node::named(&holder).number()?;
            Some((block::holder_label(&holder), number))
        })
        .collect();
    members.extend(stacked);
    let mounts = mounts::mounts();
    for (member, number) in &members {
        let read_write = mounts.iter().find(|m| {
            (m.number == *number
                || (m.source.starts_with('/')
                    && device_number_of(Path::new(&m.source)) == Some(*number)))
                && m.super_options.split(',').any(|o| o == "rw")
        });
        if let Some(mount) = read_write {
            let subject = if *member == device.name {
                "it".to_owned()
            } else {
                member.clone()
            };
            return Some(Hazard::SourceInUse {
                input: describe(&name, &device),
                why: format!(
                    "{subject} is mounted read-write on {}",
                    mount.mount_point.display()
                ),
            });
        }
    }
    None
}

/// The refusal for writing `place` (named `name`) while it is in use.
fn in_use_refusal(name: &str, place: &Place) -> Option<Hazard> {
    let why = in_use(place)?;
    Some(Hazard::InUse {
        output: match place {
            Place::Device(device) => describe(name, device),
            Place::File { .. } => name.to_owned(),
        },
        why,
    })
}

/// What an end of the copy is, as far as overlap goes.
#[derive(Debug, Clone)]
enum Place {
    File { dev: u64, ino: u64, size: u64 },
    Device(BlockDevice),
}

#[derive(Debug, Clone)]
struct OverlapEnd {
    place: Place,
    /// The descriptor's offset for standard input/output (dd starts
    /// there), 0 for a path dd opens itself.
    offset: u64,
    /// Writes go to the end of the file whatever the offset.
    append: bool,
}

fn place_of(st: &Stat) -> Option<Place> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Some(Place::File {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size.max(0) as u64,
        }),
        FileType::BlockDevice => {
            block::describe(DeviceNumber::from_raw(st.st_rdev)).map(Place::Device)
        }
        // A generic node reaches the disk past the block layer, its
        // exclusivity and its mounts: the disk's block device is what is
        // in use, what overlaps, what a whole-disk write destroys.
        FileType::CharacterDevice => generic_node_disk(DeviceNumber::from_raw(st.st_rdev)),
        _ => None,
    }
}

/// The block device of the disk behind the generic node `number`,
/// described as the node's: "QEMU HARDDISK, SCSI generic node of
/// /dev/sda".
fn generic_node_disk(number: DeviceNumber) -> Option<Place> {
    use crate::sys::passthrough;
    let interface = passthrough::interface_of_number(number)?;
    let name = passthrough::block_device_of(number)?;
    let disk = block::Node::named(&name).number()?;
    let mut device = block::describe(disk)?;
    let via = format!("{} node of /dev/{name}", interface.name());
    device.model = Some(match device.model.take() {
        Some(model) => format!("{model}, {via}"),
        None => via,
    });
    Some(Place::Device(device))
}

fn path_end(path: &Path) -> Option<OverlapEnd> {
    let st = rustix::fs::stat(path).ok()?;
    Some(OverlapEnd {
        place: place_of(&st)?,
        offset: 0,
        append: false,
    })
}

fn fd_end(fd: std::os::fd::BorrowedFd<'_>) -> Option<OverlapEnd> {
    let st = rustix::fs::fstat(fd).ok()?;
    let offset = crate::sys::file::current_offset(fd).ok()?.max(0) as u64;
    let append = rustix::fs::fcntl_getfl(fd)
        .map(|f| f.contains(rustix::fs::OFlags::APPEND))
        .unwrap_or(false);
    Some(OverlapEnd {
        place: place_of(&st)?,
        offset,
        append,
    })
}

fn input_end(plan: &CopyPlan) -> Option<OverlapEnd> {
    match &plan.input {
        Some(path) => path_end(path),
        None => fd_end(std::io::stdin().as_fd()),
    }
}

fn output_end(plan: &CopyPlan) -> Option<OverlapEnd> {
    let mut end = match &plan.output {
        Some(path) => path_end(path)?,
        None => fd_end(std::io::stdout().as_fd())?,
    };
    end.append |= plan.output_flags.contains(IoFlags::APPEND);
    Some(end)
}

/// Why writing this place would destroy something in use, if it would.
fn in_use(place: &Place) -> Option<String> {
    match place {
        Place::Device(device) => device_in_use(device),
        Place::File { dev, ino, .. } => {
            let is_swap = mounts::swaps().iter().any(|swap| {
                rustix::fs::stat(swap).is_ok_and(|st| st.st_dev == *dev && st.st_ino == *ino)
            });
            is_swap.then(|| "it is an active swap file".to_owned())
        }
    }
}

fn device_in_use(device: &BlockDevice) -> Option<String> {
    // The device itself first, then each partition of a whole disk.
    let mut members: Vec<(Option<&str>, DeviceNumber)> = vec![(None, device.number)];
    members.extend(
        device
            .partitions
            .iter()
            .map(|p| (Some(p.name.as_str()), p.number)),
    );
    let subject = |partition: Option<&str>| match partition {
        None => "it".to_owned(),
        Some(name) => format!("its partition {name}"),
    };

    let mount_list = mounts::mounts();
    for (partition, number) in &members {
        let mounted = mount_list.iter().find(|m| {
            m.number == *number
                || (m.source.starts_with('/')
                    && device_number_of(Path::new(&m.source)) == Some(*number))
        });
        if let Some(mount) = mounted {
            return Some(format!(
                "{} is mounted on {}",
                subject(*partition),
                mount.mount_point.display()
            ));
        }
    }
    let swap_list = mounts::swaps();
    for (partition, number) in &members {
        if swap_list
            .iter()
            .any(|swap| device_number_of(swap) == Some(*number))
        {
            return Some(format!("{} is active swap", subject(*partition)));
        }
    }
    for (partition, number) in &members {
        let holders = match partition {
            None => device.holders.clone(),
            Some(_) => block::describe(*number)
                .map(|d| d.holders)
                .unwrap_or_default(),
        };
        if !holders.is_empty() {
            let labels: Vec<String> = holders.iter().map(|h| block::holder_label(h)).collect();
            return Some(format!(
                "{} is held by {} (RAID, LVM or device-mapper)",
                subject(*partition),
                labels.join(", ")
            ));
        }
    }
    None
}

/// The device number of a block special file.
fn device_number_of(path: &Path) -> Option<DeviceNumber> {
    let st = rustix::fs::stat(path).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::BlockDevice)
        .then(|| DeviceNumber::from_raw(st.st_rdev))
}

/// How a copy onto itself would destroy its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Writing from `write_from` overwrites input not yet read (reading
    /// from `read_from`).
    OverwritesUnread { write_from: u64, read_from: u64 },
    /// Writing from `write_from` extends the file before its end is read:
    /// the copy would read back its own output (and without count= never
    /// end).
    ReadsOwnOutput { write_from: u64 },
    /// Opening the output truncates it at `at`, before the input there
    /// is read.
    TruncatesUnread { at: u64 },
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::OverwritesUnread {
                write_from,
                read_from,
            } => write!(
                f,
                "writing from byte {write_from} overwrites input not yet read \
                 (reading from byte {read_from})"
            ),
            Damage::ReadsOwnOutput { write_from } => write!(
                f,
                "writing from byte {write_from} extends it before its end is read, \
                 so the copy would read back its own output"
            ),
            Damage::TruncatesUnread { at } => write!(
                f,
                "opening it truncates it at byte {at}, destroying input not yet read \
                 (conv=notrunc keeps it)"
            ),
        }
    }
}

/// Where a copy onto itself reads and writes, in bytes of one file or
/// one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// First byte read (skip= and the input's own offset).
    pub read_from: u64,
    /// count= in bytes; None reads to the end.
    pub count: Option<u64>,
    /// count= in reads (GNU counts records: whole ones, then one for the
    /// extra bytes); None without count=.
    pub reads: Option<u64>,
    /// First byte written (seek=, the output's offset, or the end under
    /// append).
    pub write_from: u64,
    /// Where opening the output truncates (or extends) it, if it does.
    pub truncate_at: Option<u64>,
    /// Where the input's data ends now: the file's size, or the end of
    /// the input partition on its disk.
    pub size: u64,
    /// A regular file, which writes past its end extend.
    pub grows: bool,
    /// ibs.
    pub read_block: u64,
    /// obs when records are re-blocked (GNU's two buffers: a write only
    /// once obs bytes are buffered); None when each read is written as is.
    pub write_block: Option<u64>,
}

/// The overlap rule, from GNU's one-record loop (same-file copies always
/// run it): reads are sequential from `read_from`, writes sequential from
/// `write_from`, and the first write comes after the first read (or, when
/// re-blocking, once obs bytes are buffered). So:
///
/// - writing *behind* or *at* the reading position (seek <= skip, in
///   bytes) only ever overwrites what was already read: an in-place
///   rewrite (`conv=notrunc,ucase` with equal skip and seek) or a shift
///   towards the start is safe, as GNU users rely on;
/// - writing *ahead* (seek > skip) is destructive when a read comes after
///   the first write and reaches the written range: the copy then copies
///   its own output instead of its input. A copy whose whole input is
///   read before anything is written (one record; less than obs when
///   re-blocking) is safe however the ranges lie;
/// - in a regular file, a write past the current end extends it; if that
///   happens before the reader meets the end, the reader never meets it
///   and reads back its own output (appending a file to itself);
/// - truncating the output at open destroys the input from that point
///   before any read: refused when input still to be read lies there.
pub fn damage(layout: &Layout) -> Option<Damage> {
    let read_from = layout.read_from;
    let wanted = layout.count.unwrap_or(u64::MAX);
    if let Some(at) = layout.truncate_at {
        let original = wanted.min(layout.size.saturating_sub(read_from));
        if at.max(read_from) < read_from.saturating_add(original) {
            return Some(Damage::TruncatesUnread { at });
        }
    }
    let write_from = layout.write_from;
    if write_from <= read_from {
        return None;
    }
    // The end of the data once the output is open.
    let end = match layout.truncate_at {
        Some(at) if layout.grows => at,
        _ => layout.size,
    };
    let available = end.saturating_sub(read_from);
    // Bytes the copy reads if nothing it writes is read back.
    let total = wanted.min(available);
    if total == 0 {
        return None;
    }
    // Bytes read when the first write happens; None if only at the end.
    let before_first_write = match layout.write_block {
        None => Some(layout.read_block.min(total)),
        Some(obs) if total >= obs => Some(
            obs.div_ceil(layout.read_block)
                .saturating_mul(layout.read_block)
                .min(total),
        ),
        Some(_) => None,
    };
    let before_first_write = before_first_write?;
    if total > before_first_write && read_from.saturating_add(total) > write_from {
        return Some(Damage::OverwritesUnread {
            write_from,
            read_from,
        });
    }
    // The reader looks for the end after the first write unless count=
    // stops it first (GNU counts reads, so a short last read ends it too):
    // has the writer moved the end by then?
    let written = match layout.write_block {
        None => total,
        Some(obs) => total / obs * obs,
    };
    let reads_of_data = available.div_ceil(layout.read_block);
    let looks_for_end = wanted > available && layout.reads.is_none_or(|r| r > reads_of_data);
    if layout.grows && looks_for_end && write_from.saturating_add(written) > end {
        return Some(Damage::ReadsOwnOutput { write_from });
    }
    None
}

/// The layout of a copy whose two ends are one file or one disk.
fn overlap(plan: &CopyPlan, input: &OverlapEnd, output: &OverlapEnd) -> Option<Damage> {
    let skip = plan.skip.total_bytes(plan.input_block_size)?;
    let seek = plan.seek.total_bytes(plan.output_block_size)?;
    let (count, reads) = if plan.has_count() {
        let extra = u64::from(plan.count.bytes > 0);
        (
            Some(plan.count.total_bytes(plan.input_block_size)?),
            Some(plan.count.records.saturating_add(extra)),
        )
    } else {
        (None, None)
    };
    let read_block = plan.input_block_size as u64;
    let write_block = plan.two_buffers.then_some(plan.output_block_size as u64);
    let layout = match (&input.place, &output.place) {
        (
            Place::File { dev, ino, size },
            Place::File {
                dev: out_dev,
                ino: out_ino,
                ..
            },
        ) if dev == out_dev && ino == out_ino => {
            // O_TRUNC on open, or GNU's ftruncate to a whole-record seek.
            let truncate_at = if plan.output.is_none() || plan.conv.contains(Conv::NOTRUNC) {
                None
            } else if plan.truncates_output_on_open() {
                Some(0)
            } else {
                Some(seek)
            };
            let size_after_open = truncate_at.unwrap_or(*size);
            Layout {
                read_from: input.offset.saturating_add(skip),
                count,
                reads,
                write_from: if output.append {
                    size_after_open
                } else {
                    output.offset.saturating_add(seek)
                },
                truncate_at,
                size: *size,
                grows: true,
                read_block,
                write_block,
            }
        }
        (Place::Device(a), Place::Device(b)) if a.disk == b.disk => {
            // Offsets on the whole disk, so a partition and its disk compare.
            Layout {
                read_from: a.start + input.offset.saturating_add(skip),
                count,
                reads,
                write_from: b.start + output.offset.saturating_add(seek),
                truncate_at: None,
                size: a.start + a.size,
                grows: false,
                read_block,
                write_block,
            }
        }
        _ => return None,
    };
    damage(&layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bs=512 (each read written as is) over a 10,000-byte file.
    fn layout(read_from: u64, count: Option<u64>, write_from: u64) -> Layout {
        Layout {
            read_from,
            count,
            reads: count.map(|c| c.div_ceil(512)),
            write_from,
            truncate_at: None,
            size: 10_000,
            grows: true,
            read_block: 512,
            write_block: None,
        }
    }

    #[test]
    fn in_place_rewrite_and_shift_back_are_safe() {
        // dd if=f of=f conv=notrunc,ucase
        assert_eq!(damage(&layout(0, None, 0)), None);
        // dd if=f of=f skip=1 conv=notrunc: moves the data towards the start
        assert_eq!(damage(&layout(512, None, 0)), None);
        assert_eq!(damage(&layout(1024, Some(4096), 512)), None);
    }

    #[test]
    fn writing_ahead_of_the_reader_is_refused() {
        assert_eq!(
            damage(&layout(0, None, 512)),
            Some(Damage::OverwritesUnread {
                write_from: 512,
                read_from: 0
            })
        );
        assert!(damage(&layout(0, Some(4096), 2048)).is_some());
        // Appending a file to itself never ends.
        assert_eq!(
            damage(&layout(0, None, 10_000)),
            Some(Damage::ReadsOwnOutput { write_from: 10_000 })
        );
        assert!(damage(&layout(0, None, 20_000)).is_some());
    }

    #[test]
    fn writing_past_the_read_range_is_safe() {
        // dd if=f of=f count=2 seek=2 conv=notrunc (bs=512): duplicate.
        assert_eq!(damage(&layout(0, Some(1024), 1024)), None);
        assert_eq!(damage(&layout(0, Some(1024), 5000)), None);
        // One record is read before anything is written.
        assert_eq!(damage(&layout(0, Some(512), 100)), None);
        // Reading starts at or past the end: nothing is read.
        assert_eq!(damage(&layout(10_000, None, 20_000)), None);
    }

    #[test]
    fn reblocking_writes_only_once_obs_is_buffered() {
        // ibs=500 obs=257 over a 1-byte file: read, end, then one write.
        let mut l = layout(0, Some(2224), 771);
        l.size = 1;
        l.read_block = 500;
        l.write_block = Some(257);
        assert_eq!(damage(&l), None);
        // The same over a long file reads what it wrote.
        l.size = 10_000;
        assert!(damage(&l).is_some());
    }

    #[test]
    fn count_counts_reads_so_a_short_last_read_ends_the_copy() {
        // dd if=f of=f count=1 bs=74 seek=2 over a 1-byte file: one read,
        // then count= is done; the write past the end is never read.
        let mut l = layout(0, Some(74), 148);
        l.size = 1;
        l.read_block = 74;
        l.reads = Some(1);
        assert_eq!(damage(&l), None);
        // Without count=, the reader looks for the end and finds the write.
        l.count = None;
        l.reads = None;
        assert_eq!(damage(&l), Some(Damage::ReadsOwnOutput { write_from: 148 }));
    }

    #[test]
    fn a_device_does_not_grow() {
        let mut l = layout(0, None, 10_000);
        l.grows = false;
        assert_eq!(damage(&l), None);
        l.write_from = 9_000;
        assert!(damage(&l).is_some());
    }

    #[test]
    fn truncating_unread_input_is_refused() {
        // dd if=f of=f: O_TRUNC empties the file before it is read.
        let mut l = layout(0, None, 0);
        l.truncate_at = Some(0);
        assert_eq!(damage(&l), Some(Damage::TruncatesUnread { at: 0 }));
        // dd if=f of=f count=1 seek=1 (no notrunc): reads [0,512) of what
        // the ftruncate to 512 keeps, writes after it.
        let mut l = layout(0, Some(512), 512);
        l.truncate_at = Some(512);
        assert_eq!(damage(&l), None);
        // An empty file has nothing to lose.
        let mut l = layout(0, None, 0);
        l.truncate_at = Some(0);
        l.size = 0;
        assert_eq!(damage(&l), None);
    }

    #[test]
    fn refusals_are_one_line_naming_the_override() {
        let refusal = Hazard::Overlap {
            output: "'f'".into(),
            damage: Damage::TruncatesUnread { at: 0 },
        };
        let text = refusal.to_string();
        assert!(!text.contains('\n'));
        assert!(text.contains("--force"), "{text}");
    }
}
