//! Sequential read and the six write modes: what `hdparm -t`/`-T` and
//! `dd oflag=...` commands measure, done so the numbers mean what their
//! names say. The buffered write is reported beside the synced ones
//! precisely to show how much of it the page cache absorbed. O_DIRECT is
//! measured twice: one request at a time (pread, pwrite, as dd makes
//! them) and with 8 in flight, the summary's SEQ1M Q8T1 and SEQ1M Q1T1;
//! every run is a whole pass over the working set.
//!
//! On an end that is no descriptor's storage there is no page cache and
//! no open flag. On a server (an NBD export) the requests go over one
//! connection, one in flight and [`SEQ_DEPTH`]; writes are acknowledged
//! by the server, or followed by a timed flush. On a disk reached by its
//! own commands (a generic node) each request is at most one command's
//! worth (the summary then names the row by that size), one in flight and
//! [`SEQ_DEPTH`]; the writes are plain, followed by a timed cache flush,
//! or each with force unit access where the end's commands carry it.

use crate::operands::IoFlags;

use super::{
    buffers_note, in_flight, load, made_by, one_by_call, opened, owns_buffers, sequential,
    uncached_mode, Flight, Limit, Offsets, Op, Outcome, Stream, Timing, COPIED, NO_DIRECT,
    SEQ_BLOCK,
};
use crate::bench::measure::{Pass, Runner, Sample, Stopwatch};
use crate::bench::results::Figure;
use crate::bench::summary::SEQ_DEPTH;
use crate::bench::target::Target;
use crate::bench::BenchError;
use crate::ends::End;
use crate::sys::buffer::AlignedBuf;

/// Most bytes the cached read keeps in the page cache.
const CACHED_MAX: u64 = 256 << 20;

/// A sequential figure, one request in flight, each run's throughput.
pub(super) fn figure(test: &'static str, mode: &'static str, op: Op, bs: u64) -> Figure {
    Figure::new(test, mode, op.name(), "sequential", bs)
}

/// The sequential request: [`SEQ_BLOCK`], or the most the end takes in
/// one request where that is less (a generic node's command), so that
/// every request is one of the end's.
fn seq_block(target: &Target) -> u64 {
    let most = u64::try_from(target.can.requests.max_len).unwrap_or(u64::MAX);
    SEQ_BLOCK.min(most).min(target.len)
}

/// Why the pass is noted: how the requests travelled, where the end is
/// no descriptor's storage.
fn travelled(target: &Target, depth: u32, op: Op, engine: &str) -> Option<String> {
    if target.can.local_storage {
        None
    } else if target.can.served {
        Some(match depth {
            1 => "NBD reads, one in flight, over one connection".to_owned(),
            _ => format!("NBD {}s, {depth} in flight, over one connection", op.name()),
        })
    } else {
        Some(match depth {
            1 => "one command at a time, through the copy's passthrough end".to_owned(),
            _ => format!(
                "{depth} commands in flight on the node's queue, as fio's {engine} engine keeps \
                 them"
            ),
        })
    }
}

/// The pass with [`SEQ_DEPTH`] requests in flight, on the end opened for
/// it (O_DIRECT on a descriptor: through io_uring); skipped with the
/// reason where the filesystem refuses O_DIRECT or the end keeps fewer
/// in flight. Where the end moves the bytes through buffers of its own
/// (an sg node's mapped reserve buffers), the same pass again with the
/// driver copying each buffer, fio's way ([`COPIED`]).
fn deep(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    test: &'static str,
    op: Op,
    len: u64,
    bs: u64,
) -> Result<(), BenchError> {
    let target = runner.target;
    let mode = uncached_mode(target);
    let figure = figure(test, mode, op, bs).in_flight(SEQ_DEPTH, "");
    if out.reuse(figure) {
        return Ok(());
    }
    let Some(mut end) = target.end(op, IoFlags::DIRECT, SEQ_DEPTH as usize)? else {
        out.skip(test, Some(mode), NO_DIRECT).at_depth(SEQ_DEPTH);
        return Ok(());
    };
    if let Some(why) = super::fewer_in_flight(target, end.as_ref(), SEQ_DEPTH) {
        out.skip(test, Some(mode), why).at_depth(SEQ_DEPTH);
        return Ok(());
    }
    let own = owns_buffers(end.as_ref());
    deep_pass(runner, out, figure, end.as_mut(), (op, len, bs))?;
    if own {
        drop(end);
        let mut end = opened(target.end_copied(op, IoFlags::DIRECT, SEQ_DEPTH as usize)?);
        let figure = self::figure(test, COPIED, op, bs).in_flight(SEQ_DEPTH, "");
        deep_pass(runner, out, figure, end.as_mut(), (op, len, bs))?;
    }
    Ok(())
}

/// [`SEQ_DEPTH`] in flight on `end`, whole passes over `0..len` in
/// `bs` requests, pushed as `figure` by the end's engine.
fn deep_pass(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    figure: Figure,
    end: &mut dyn End,
    (op, len, bs): (Op, u64, u64),
) -> Result<(), BenchError> {
    let target = runner.target;
    let engine = end.capabilities().requests.via;
    let buffers = buffers_note(end, figure.mode);
    let figure = figure.by(engine);
    let mut load = load(target, end, op, bs, SEQ_DEPTH)?;
    let label = format!("{} {}, {SEQ_DEPTH} in flight", figure.test, figure.mode);
    let samples = runner.repeat(&label, target.can.local_storage, |pass| {
        let flight = Flight {
            op,
            offsets: Offsets::Sequential { start: 0, end: len },
            limit: Limit::bytes(pass_bytes(pass, len, bs)),
            timing: Timing::Untimed,
        };
        in_flight(target, &mut load, flight, bs)
    })?;
    let note = travelled(target, SEQ_DEPTH, op, engine).map(|how| how + &buffers);
    out.push_noted(figure, &samples, note);
    Ok(())
}

/// One request at a time on an end that is no descriptor's storage: one
/// in flight through the load, each pass followed by a timed flush where
/// `flush` says; `flags` as the end is opened with (O_DSYNC: force unit
/// access on a disk's commands); in [`COPIED`] mode, with the driver
/// copying each buffer. Ok(true): the end moved the bytes through
/// buffers of its own (see [`owns_buffers`]).
#[allow(clippy::too_many_arguments)]
fn one_deep(
    runner: &mut Runner<'_>,
    out: &mut Outcome,
    test: &'static str,
    (mode, flags, flush): (&'static str, IoFlags, bool),
    op: Op,
    len: u64,
    bs: u64,
    note: Option<String>,
) -> Result<bool, BenchError> {
    let target = runner.target;
    let end = match mode {
        COPIED => target.end_copied(op, flags, 1)?,
        _ => target.end(op, flags, 1)?,
    };
    let mut end = opened(end);
    let note = note.map(|note| note + &buffers_note(end.as_ref(), mode));
    let own = owns_buffers(end.as_ref());
    let mut load = load(target, end.as_mut(), op, bs, 1)?;
    let samples = runner.repeat(&format!("{test} {mode}"), false, |pass| {
        let watch = Stopwatch::start();
        let flight = Flight {
            op,
            offsets: Offsets::Sequential { start: 0, end: len },
            limit: Limit::bytes(pass_bytes(pass, len, bs)),
            timing: Timing::Untimed,
        };
        let moved = in_flight(target, &mut load, flight, bs)?;
        if flush {
            flushed(target, load.end())?;
        }
        Ok::<Sample, BenchError>(watch.stop(moved.bytes, moved.ios))
    })?;
    out.push_noted(made_by(target, figure(test, mode, op, bs)), &samples, note);
    Ok(own)
}

/// A cache flush (fdatasync on a descriptor, an NBD flush, SYNCHRONIZE
/// CACHE or an NVMe Flush), its failure in the end's words.
fn flushed(target: &Target, end: &mut dyn End) -> Result<(), BenchError> {
    end.sync(true).map_err(|e| {
        let detail = end.take_detail().map(|d| format!(" ({d})"));
        BenchError::sys(
            format!(
                "cache flush of {}{}",
                target.path.display(),
                detail.unwrap_or_default()
            ),
            e,
        )
    })
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
    let bs = seq_block(target);
    let len = target.len - target.len % bs;
    if !one_by_call(target) {
        let mode = uncached_mode(target);
        for mode in [mode, COPIED] {
            let note = travelled(target, 1, Op::Read, "");
            let how = (mode, IoFlags::empty(), false);
            let own = one_deep(runner, out, "seq-read", how, Op::Read, len, bs, note)?;
            if !own {
                break;
            }
        }
        deep(runner, out, "seq-read", Op::Read, len, bs)?;
        if target.can.served {
            out.skip("seq-read", Some("direct"), super::SERVED_NO_DIRECT);
        }
        out.skip("seq-read", Some("cached"), super::no_cache(target));
        return Ok(());
    }

    let mut buf = super::data_buffer(bs)?;
    match target.end(Op::Read, IoFlags::DIRECT, 1)? {
        None => {
            out.skip("seq-read", Some("direct"), NO_DIRECT);
        }
        Some(mut end) => {
            let samples = runner.repeat("seq-read direct", true, |pass| {
                sequential(
                    target,
                    end.as_mut(),
                    &mut buf,
                    stream(Op::Read, pass, len, bs),
                )
            })?;
            out.push(figure("seq-read", "direct", Op::Read, bs), &samples);
            drop(end);
            deep(runner, out, "seq-read", Op::Read, len, bs)?;
        }
    }

    // Cached: the warm-up reads the region into the page cache and the
    // runs read it back from memory, as `hdparm -T` does. The region is
    // capped so that a large working set still fits in memory.
    let cached = len.min(CACHED_MAX);
    let mut end = opened(target.end(Op::Read, IoFlags::empty(), 1)?);
    runner.drop_cache();
    let samples = runner.repeat("seq-read cached", false, |_| {
        let whole = Pass::Measured(0);
        sequential(
            target,
            end.as_mut(),
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

/// The write modes on a descriptor, in the order of the table: (name,
/// open flags, the sync call timed at the end).
const WRITE_MODES: [(&str, IoFlags, Sync); 6] = [
    ("buffered", IoFlags::empty(), Sync::None),
    ("fdatasync", IoFlags::empty(), Sync::Data),
    ("fsync", IoFlags::empty(), Sync::All),
    ("dsync", IoFlags::DSYNC, Sync::None),
    ("sync", IoFlags::SYNC, Sync::None),
    ("direct", IoFlags::DIRECT, Sync::None),
];

/// What is synced at the end of a pass, and timed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    None,
    /// fdatasync.
    Data,
    /// fsync.
    All,
}

/// Why an end on a server writes no more than one at a time here.
const SERVED_WRITES_ONE_AT_A_TIME: &str = "the bench's NBD connection sends one write at a time";

/// Why a disk reached by its commands has no buffered or synced write
/// figures.
const COMMANDS_NO_WRITE_FLAGS: &str = "the page cache, O_DSYNC, O_SYNC and O_DIRECT have no \
     meaning on a generic node: 'passthrough+flush' times a cache flush after the writes, \
     'passthrough+fua' sends each write with force unit access";

pub fn write(runner: &mut Runner<'_>, out: &mut Outcome) -> Result<(), BenchError> {
    let target = runner.target;
    if let Some(why) = &target.read_only {
        out.skip("seq-write", None, why.clone());
        return Ok(());
    }
    let bs = seq_block(target);
    let len = target.len - target.len % bs;
    if target.can.served {
        for (mode, flush, note) in [
            (
                "nbd",
                false,
                "NBD writes, one in flight, each acknowledged by the server",
            ),
            (
                "flush",
                true,
                "the same, then one NBD flush at the end (timed)",
            ),
        ] {
            let how = (mode, IoFlags::empty(), flush);
            let note = Some(note.to_owned());
            one_deep(runner, out, "seq-write", how, Op::Write, len, bs, note)?;
        }
        out.skip("seq-write", None, super::SERVED_NO_SYNC_FLAGS);
        out.skip("seq-write", Some("nbd"), SERVED_WRITES_ONE_AT_A_TIME)
            .at_depth(SEQ_DEPTH);
        return Ok(());
    }
    if !one_by_call(target) {
        for (mode, flags, flush, note) in [
            (
                "passthrough",
                IoFlags::empty(),
                false,
                "each write acknowledged by the device (its volatile cache may hold it)",
            ),
            (
                "passthrough+flush",
                IoFlags::empty(),
                true,
                "the same writes, then one cache flush at the end (timed)",
            ),
            (
                "passthrough+fua",
                IoFlags::DSYNC,
                false,
                "each write with force unit access: on the medium when it completes",
            ),
        ] {
            // Only an end whose commands carry the flag.
            if flags.contains(IoFlags::DSYNC) && !target.can.fua {
                continue;
            }
            let note = Some(note.to_owned());
            let how = (mode, flags, flush);
            let own = one_deep(
                runner,
                out,
                "seq-write",
                how,
                Op::Write,
                len,
                bs,
                note.clone(),
            )?;
            if own && mode == "passthrough" {
                let how = (COPIED, flags, flush);
                one_deep(runner, out, "seq-write", how, Op::Write, len, bs, note)?;
            }
        }
        deep(runner, out, "seq-write", Op::Write, len, bs)?;
        out.skip("seq-write", None, COMMANDS_NO_WRITE_FLAGS);
        return Ok(());
    }
    let mut buf: AlignedBuf = super::data_buffer(bs)?;
    for (mode, flags, sync) in WRITE_MODES {
        let Some(mut end) = target.end(Op::Write, flags, 1)? else {
            out.skip("seq-write", Some(mode), NO_DIRECT);
            continue;
        };
        let samples = runner.repeat(&format!("seq-write {mode}"), true, |pass| {
            let watch = Stopwatch::start();
            let written = sequential(
                target,
                end.as_mut(),
                &mut buf,
                stream(Op::Write, pass, len, bs),
            )?;
            let synced = match sync {
                Sync::Data => end.sync(true),
                Sync::All => end.sync(false),
                Sync::None => Ok(()),
            };
            synced.map_err(|e| BenchError::sys(format!("{mode} {}", target.path.display()), e))?;
            let sample = watch.stop(written.bytes, written.ios);
            // Untimed: what the buffered mode left dirty must not slow
            // the next mode down.
            if mode == "buffered" {
                let _ = end.sync(true);
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
            drop(end);
            deep(runner, out, "seq-write", Op::Write, len, bs)?;
        }
    }
    Ok(())
}
