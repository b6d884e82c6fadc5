//! Sequential read and the six write modes: what `hdparm -t`/`-T` and
//! `dd oflag=...` commands measure, done so the numbers mean what their
//! names say. The buffered write is reported beside the synced ones
//! precisely to show how much of it the page cache absorbed. O_DIRECT is
//! measured twice: one request at a time (pread, pwrite, as dd makes
//! them) and with 8 in flight through io_uring, the summary's SEQ1M Q1T1
//! and SEQ1M Q8T1; every run is a whole pass over the working set.
//!
//! On a disk's generic node there is no page cache and no open flag: the
//! requests are the disk's own commands, each at most one command's worth
//! (the summary then names the row by that size), one in flight through
//! the copy's passthrough end and [`SEQ_DEPTH`] in flight on the node's
//! command queue; the writes are plain, followed by a timed cache flush,
//! or each with force unit access.

use std::os::fd::AsFd;

use rustix::fs::OFlags;

use super::{
    commands_in_flight, in_flight, made_by, open, ring, sequential, stamp_commands, stamp_slots,
    Flight, Limit, Offsets, Op, Outcome, Port, Stream, Timing, NO_CACHE, NO_DIRECT, SEQ_BLOCK,
};
use crate::bench::measure::{Pass, Runner, Sample};
use crate::bench::nbd_target;
use crate::bench::results::Figure;
use crate::bench::summary::SEQ_DEPTH;
use crate::bench::target::Target;
use crate::bench::BenchError;
use crate::sys::file;

/// Most bytes the cached read keeps in the page cache.
const CACHED_MAX: u64 = 256 << 20;

/// A sequential figure, one request in flight, each run's throughput.
pub(super) fn figure(test: &'static str, mode: &'static str, op: Op, bs: u64) -> Figure {
    Figure::new(test, mode, op.name(), "sequential", bs)
}

/// The O_DIRECT pass with [`SEQ_DEPTH`] requests in flight through
/// io_uring, on a descriptor opened for it; skipped with the reason where
/// the filesystem refuses O_DIRECT or the kernel io_uring.
fn deep(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    test: &'static str,
    op: Op,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target = runner.target;
    let figure = figure(test, "direct", op, bs).in_flight(SEQ_DEPTH, "io_uring");
    if out.reuse(figure) {
        return Ok(());
    }
    let Some(fd) = open(target, op, OFlags::DIRECT)? else {
        out.skip(test, Some("direct"), NO_DIRECT)
            .at_depth(SEQ_DEPTH);
        return Ok(());
    };
    let mut ring = match ring(SEQ_DEPTH, bs) {
        Ok(ring) => ring,
        Err(reason) => {
            out.skip(test, Some("direct"), reason).at_depth(SEQ_DEPTH);
            return Ok(());
        }
    };
    if op == Op::Write {
        stamp_slots(&mut ring);
    }
    let label = format!("{test} direct, {SEQ_DEPTH} in flight");
    let samples = runner.repeat(&label, true, |pass| {
        let flight = Flight {
            op,
            block_size: bs,
            offsets: Offsets::Sequential { start: 0, end: len },
            limit: Limit::bytes(pass_bytes(pass, len, bs)),
            timing: Timing::Untimed,
        };
        in_flight(target, fd.as_fd(), &mut ring, flight)
    })?;
    out.push(figure, &samples);
    Ok(())
}

/// A generic node's sequential requests: [`SEQ_BLOCK`], or one command's
/// worth where that is less, so that every request is one command.
fn command_block(target: &Target) -> u64 {
    let command = target
        .passthrough
        .as_ref()
        .map_or(SEQ_BLOCK, |node| node.command_bytes());
    SEQ_BLOCK.min(command).min(target.len)
}

/// The pass with [`SEQ_DEPTH`] commands in flight on a generic node's
/// command queue; skipped with the reason where the node keeps fewer.
fn deep_commands(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    test: &'static str,
    op: Op,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target = runner.target;
    let Some(node) = &target.passthrough else {
        return Ok(());
    };
    let figure = figure(test, "passthrough", op, bs).in_flight(SEQ_DEPTH, node.engine());
    if out.reuse(figure) {
        return Ok(());
    }
    let Some(mut queue) = target.command_queue(op == Op::Write, SEQ_DEPTH)? else {
        return Ok(());
    };
    let depth = SEQ_DEPTH as usize;
    if queue.slots() < depth {
        out.skip(
            test,
            Some("passthrough"),
            super::fewer_slots(target, queue.slots()),
        )
        .at_depth(SEQ_DEPTH);
        return Ok(());
    }
    if op == Op::Write {
        stamp_commands(queue.as_mut(), depth);
    }
    let label = format!("{test} passthrough, {SEQ_DEPTH} in flight");
    let samples = runner.repeat(&label, false, |pass| {
        let flight = Flight {
            op,
            block_size: bs,
            offsets: Offsets::Sequential { start: 0, end: len },
            limit: Limit::bytes(pass_bytes(pass, len, bs)),
            timing: Timing::Untimed,
        };
        commands_in_flight(target, queue.as_mut(), depth, flight)
    })?;
    out.push_noted(
        figure,
        &samples,
        Some(format!(
            "{SEQ_DEPTH} commands in flight on the node's queue, as fio's {} engine keeps them",
            node.engine()
        )),
    );
    Ok(())
}

/// A generic node's reads: one command at a time through the copy's
/// end, then [`SEQ_DEPTH`] in flight.
fn read_commands(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    let bs = command_block(target);
    let len = target.len - target.len % bs;
    let mut buf = super::data_buffer(bs)?;
    if let Some(mut end) = target.passthrough_end(false, false)? {
        let samples = runner.repeat("seq-read passthrough", false, |pass| {
            sequential(
                target,
                &mut Port::End(end.as_mut()),
                &mut buf,
                stream(Op::Read, pass, len, bs),
            )
        })?;
        out.push_noted(
            made_by(target, figure("seq-read", "passthrough", Op::Read, bs)),
            &samples,
            Some("one command at a time, through the copy's passthrough end"),
        );
    }
    deep_commands(runner, out, "seq-read", Op::Read, len, bs)?;
    out.skip("seq-read", Some("cached"), NO_CACHE);
    Ok(())
}

/// A generic node's write modes, in the order of the table: (mode, force
/// unit access on each write, a cache flush at the end).
const COMMAND_WRITE_MODES: [(&str, bool, bool); 3] = [
    ("passthrough", false, false),
    ("passthrough+flush", false, true),
    ("passthrough+fua", true, false),
];

/// Why a generic node has no buffered or synced write figures.
const NO_WRITE_FLAGS: &str = "the page cache, O_DSYNC, O_SYNC and O_DIRECT have no meaning on a \
     generic node: 'passthrough+flush' times a cache flush after the writes, 'passthrough+fua' \
     sends each write with force unit access";

/// A generic node's writes, one command at a time through the copy's
/// end (each completed before the next is sent), in each mode, then plain
/// with [`SEQ_DEPTH`] in flight.
fn write_commands(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    buf: &mut crate::sys::buffer::AlignedBuf,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target = runner.target;
    for (mode, fua, flush) in COMMAND_WRITE_MODES {
        // Only an end whose commands carry the flag.
        if fua && !target.can.fua {
            continue;
        }
        let Some(mut end) = target.passthrough_end(true, fua)? else {
            return Ok(());
        };
        let samples = runner.repeat(&format!("seq-write {mode}"), false, |pass| {
            let watch = crate::bench::measure::Stopwatch::start();
            let written = sequential(
                target,
                &mut Port::End(end.as_mut()),
                buf,
                stream(Op::Write, pass, len, bs),
            )?;
            let (what, done) = match flush {
                true => ("cache flush", end.sync(true)),
                false => ("write", Ok(())),
            };
            done.map_err(|e| {
                let detail = end.take_detail().map(|d| format!(" ({d})"));
                BenchError::sys(
                    format!(
                        "{what} of {}{}",
                        target.path.display(),
                        detail.unwrap_or_default()
                    ),
                    e,
                )
            })?;
            Ok::<Sample, BenchError>(watch.stop(written.bytes, written.ios))
        })?;
        let note = match (fua, flush) {
            (true, _) => "each write with force unit access: on the medium when it completes",
            (_, true) => "the same writes, then one cache flush at the end (timed)",
            _ => "each write acknowledged by the device (its volatile cache may hold it)",
        };
        out.push_noted(
            made_by(target, figure("seq-write", mode, Op::Write, bs)),
            &samples,
            Some(note),
        );
    }
    deep_commands(runner, out, "seq-write", Op::Write, len, bs)?;
    out.skip("seq-write", None, NO_WRITE_FLAGS);
    Ok(())
}

/// The export's reads with [`SEQ_DEPTH`] in flight on one connection.
fn deep_export(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target: &Target = runner.target;
    let figure = figure("seq-read", "nbd", Op::Read, bs).in_flight(SEQ_DEPTH, "libnbd");
    let Some(mut conn) = target.connect(false)? else {
        return Ok(());
    };
    let samples = runner.repeat(
        &format!("seq-read nbd, {SEQ_DEPTH} in flight"),
        false,
        |pass| {
            let offsets = Offsets::Sequential { start: 0, end: len };
            let limit = Limit::bytes(pass_bytes(pass, len, bs));
            super::qd::export_in_flight(&mut conn, SEQ_DEPTH, bs, offsets, limit)
        },
    )?;
    out.push_noted(
        figure,
        &samples,
        Some(format!(
            "NBD reads, {SEQ_DEPTH} in flight, over one connection"
        )),
    );
    Ok(())
}

/// A whole pass over `0..len` in `bs` requests, or what `pass` allows.
fn stream(op: Op, pass: Pass, len: u64, bs: u64) -> Stream {
    Stream {
        op,
        start: 0,
        end: len,
        block_size: bs,
        limit: Limit::bytes(pass_bytes(pass, len, bs)),
        timing: Timing::Untimed,
    }
}

/// The warm-up touches a quarter of the working set: enough to wake the
/// device and fault in the buffer, without doubling the test's time.
fn pass_bytes(pass: Pass, len: u64, bs: u64) -> u64 {
    let bytes = match pass {
        Pass::WarmUp => len / 4,
        Pass::Measured(_) => len,
    };
    (bytes - bytes % bs).max(bs)
}

pub fn read(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    if target.passthrough.is_some() {
        return read_commands(runner, out);
    }
    let bs = SEQ_BLOCK.min(target.len);
    let len = target.len - target.len % bs;
    let mut buf = super::data_buffer(bs)?;

    if let Some(mut conn) = target.connect(false)? {
        let samples = runner.repeat("seq-read nbd", false, |pass| {
            sequential(
                target,
                &mut Port::End(conn.end()),
                &mut buf,
                stream(Op::Read, pass, len, bs),
            )
        })?;
        out.push_noted(
            figure("seq-read", "nbd", Op::Read, bs),
            &samples,
            Some("NBD reads, one in flight, over one connection"),
        );
        drop(conn);
        deep_export(runner, out, len, bs)?;
        out.skip("seq-read", Some("direct"), nbd_target::NO_DIRECT);
        out.skip("seq-read", Some("cached"), nbd_target::NO_CACHE);
        return Ok(());
    }

    match open(target, Op::Read, OFlags::DIRECT)? {
        None => {
            out.skip("seq-read", Some("direct"), NO_DIRECT);
        }
        Some(fd) => {
            let samples = runner.repeat("seq-read direct", true, |pass| {
                sequential(
                    target,
                    &mut Port::Fd(fd.as_fd()),
                    &mut buf,
                    stream(Op::Read, pass, len, bs),
                )
            })?;
            out.push(figure("seq-read", "direct", Op::Read, bs), &samples);
            drop(fd);
            deep(runner, out, "seq-read", Op::Read, len, bs)?;
        }
    }

    // Cached: the warm-up reads the region into the page cache and the
    // runs read it back from memory, as `hdparm -T` does. The region is
    // capped so that a large working set still fits in memory.
    let cached = len.min(CACHED_MAX);
    let fd = target.open_read(OFlags::empty())?;
    runner.drop_cache();
    let samples = runner.repeat("seq-read cached", false, |_| {
        let whole = Pass::Measured(0);
        sequential(
            target,
            &mut Port::Fd(fd.as_fd()),
            &mut buf,
            stream(Op::Read, whole, cached, bs),
        )
    })?;
    out.push_noted(
        figure("seq-read", "cached", Op::Read, bs),
        &samples,
        Some("from the page cache: memory and kernel speed, not the disk's"),
    );
    Ok(())
}

/// The write modes, in the order of the table: (name, open flags, the
/// sync call timed at the end).
const WRITE_MODES: [(&str, Sync); 6] = [
    ("buffered", Sync::None),
    ("fdatasync", Sync::Fdatasync),
    ("fsync", Sync::Fsync),
    ("dsync", Sync::Open(OFlags::DSYNC)),
    ("sync", Sync::Open(OFlags::SYNC)),
    ("direct", Sync::Open(OFlags::DIRECT)),
];

#[derive(Debug, Clone, Copy)]
enum Sync {
    None,
    Fdatasync,
    Fsync,
    Open(OFlags),
}

pub fn write(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    if let Some(why) = &target.read_only {
        out.skip("seq-write", None, why.clone());
        return Ok(());
    }
    let bs = SEQ_BLOCK.min(target.len);
    let len = target.len - target.len % bs;
    let mut buf = super::data_buffer(bs)?;
    if target.nbd.is_some() {
        return write_export(runner, out, &mut buf, len, bs);
    }
    if target.passthrough.is_some() {
        let bs = command_block(target);
        let len = target.len - target.len % bs;
        return write_commands(runner, out, &mut buf, len, bs);
    }
    for (mode, sync) in WRITE_MODES {
        let extra = match sync {
            Sync::Open(flags) => flags,
            _ => OFlags::empty(),
        };
        let Some(fd) = open(target, Op::Write, extra)? else {
            out.skip("seq-write", Some(mode), NO_DIRECT);
            continue;
        };
        let samples = runner.repeat(&format!("seq-write {mode}"), true, |pass| {
            let watch = crate::bench::measure::Stopwatch::start();
            let written = sequential(
                target,
                &mut Port::Fd(fd.as_fd()),
                &mut buf,
                stream(Op::Write, pass, len, bs),
            )?;
            let synced = match sync {
                Sync::Fdatasync => file::fdatasync(fd.as_fd()),
                Sync::Fsync => file::fsync(fd.as_fd()),
                Sync::None | Sync::Open(_) => Ok(()),
            };
            synced.map_err(|e| BenchError::sys(format!("{mode} {}", target.path.display()), e))?;
            let sample = watch.stop(written.bytes, written.ios);
            // Untimed: what the buffered mode left dirty must not slow
            // the next mode down.
            if matches!(sync, Sync::None) {
                let _ = file::fdatasync(fd.as_fd());
            }
            Ok::<Sample, BenchError>(sample)
        })?;
        let note = match mode {
            "buffered" => Some("into the page cache, no sync: not the disk's speed".to_owned()),
            "fdatasync" | "fsync" => Some(format!("buffered, then {mode} once at the end (timed)")),
            _ => None,
        };
        out.push_noted(figure("seq-write", mode, Op::Write, bs), &samples, note);
        if mode == "direct" {
            drop(fd);
            deep(runner, out, "seq-write", Op::Write, len, bs)?;
        }
    }
    Ok(())
}

/// An export's writes: each acknowledged by the server ("nbd"), and the
/// same followed by an NBD flush, timed ("flush": what the server makes
/// durable, as fdatasync does on a disk).
fn write_export(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    buf: &mut crate::sys::buffer::AlignedBuf,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target = runner.target;
    for (mode, flush) in [("nbd", false), ("flush", true)] {
        let Some(mut conn) = target.connect(true)? else {
            return Ok(());
        };
        let samples = runner.repeat(&format!("seq-write {mode}"), false, |pass| {
            let watch = crate::bench::measure::Stopwatch::start();
            let end = conn.end();
            let written = sequential(
                target,
                &mut Port::End(&mut *end),
                buf,
                stream(Op::Write, pass, len, bs),
            )?;
            let synced = if flush { end.sync(true) } else { Ok(()) };
            synced.map_err(|e| {
                let detail = end.take_detail().unwrap_or_default();
                BenchError::sys(
                    format!("NBD flush of {} ({detail})", target.path.display()),
                    e,
                )
            })?;
            Ok::<Sample, BenchError>(watch.stop(written.bytes, written.ios))
        })?;
        let note = match flush {
            false => "NBD writes, one in flight, each acknowledged by the server",
            true => "the same, then one NBD flush at the end (timed)",
        };
        out.push_noted(
            figure("seq-write", mode, Op::Write, bs),
            &samples,
            Some(note),
        );
    }
    out.skip("seq-write", None, nbd_target::NO_SYNC_FLAGS);
    out.skip(
        "seq-write",
        Some("nbd"),
        "the bench's NBD connection sends one write at a time",
    )
    .at_depth(SEQ_DEPTH);
    Ok(())
}
