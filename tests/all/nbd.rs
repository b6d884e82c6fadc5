//! The NBD end (`ddx::ends::nbd::NbdEnd`), seen through the engine's
//! window as the copy sees it (`ddx::engine::window::Window`), against real
//! servers each test starts on a Unix socket in a temporary directory:
//! nbdkit (memory, file, pattern, sparse-random; the error, ddrescue,
//! delay, log and nozero filters; a read-only export; TLS with a PSK made
//! here), qemu-nbd (a raw file, and blkdebug for a write error at a known
//! sector). The oracles are the servers' own files, nbdcopy's reading of
//! the export and nbdinfo's map of its extents.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::nbd::{
    nbdcopy_read, nbdkit, nbdkit_has_plugin, nbdkit_in, run, tempdir, Psk, Server,
};
use ddx::ends::nbd::ExportInfo;
use ddx::ends::nbd::{recognise, Access, NbdEnd, NbdUri};
use ddx::ends::{Kind, Whence};
use ddx::engine::stream::{Pipeline, Stream};
use ddx::engine::window::Window;
use ddx::sys::buffer::AlignedBuf;
use ddx::sys::Errno;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn uri(text: &str) -> NbdUri {
    recognise(text).expect("an NBD URI").expect("well-formed")
}

fn open(server: &Server, access: Access) -> Window {
    through_window(
        NbdEnd::open(&uri(&server.uri()), access)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", server.uri())),
    )
}

fn through_window(end: NbdEnd) -> Window {
    Window::over(Box::new(end))
}

/// What the server says of its export, asked on a connection of its own.
fn info(server: &Server) -> ExportInfo {
    NbdEnd::open(&uri(&server.uri()), Access::Read)
        .expect("connecting")
        .info()
}

fn pipelined(end: &mut Window, chunk: usize, depth: usize) {
    end.pipeline(Pipeline {
        chunk,
        depth,
        total: None,
    });
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    rigs::bytes::pattern(seed, len)
}

/// Read everything from the position to the end in `bs` reads.
fn read_to_end(end: &mut Window, bs: usize) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = vec![0; bs];
    loop {
        let n = end.read(&mut buf).expect("read");
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&buf[..n]);
    }
}

/// Write all of `data` in `bs` writes.
fn write_all(end: &mut Window, data: &[u8], bs: usize) {
    for block in data.chunks(bs) {
        assert_eq!(end.write(block), Ok(block.len()));
    }
}

fn have_tools(tools: &[(&str, &str)]) -> bool {
    for (tool, package) in tools {
        if !rigs::have(tool) {
            rigs::skip(&format!("{tool} is not installed (package {package})"));
            return false;
        }
    }
    true
}

/// Over a link with latency each option of a handshake is a round trip.
/// A reader asks for structured replies and the allocation map; a writer
/// uses neither, so its handshakes (the first connection's and those of
/// the connections that join once requests are in flight) ask only for
/// the export. nbdkit's debug log names every option it was sent.
#[test]
fn a_writer_handshakes_without_the_options_only_a_reader_uses() {
    let Some(server) = nbdkit(&["-v", "memory", "size=16M"]) else {
        return;
    };
    let options = |log: &str, option: &str| log.matches(option).count();
    let mut end = open(&server, Access::Read);
    assert_eq!(end.read(&mut [0; 4096]), Ok(4096));
    drop(end);
    let read = server.log();
    assert!(
        options(&read, "handshake complete") > 0,
        "nbdkit -v logs no handshake: {read}"
    );
    for option in ["NBD_OPT_STRUCTURED_REPLY", "NBD_OPT_SET_META_CONTEXT"] {
        assert!(options(&read, option) > 0, "a reader asked for no {option}");
    }

    let data = pattern(16 * MIB, 5);
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, MIB, 8);
    write_all(&mut end, &data, MIB);
    end.sync(false).expect("flush");
    end.seek(Whence::Start(0)).unwrap();
    assert!(read_to_end(&mut end, MIB) == data, "other bytes read back");
    drop(end);
    let log = server.log();
    let written = &log[read.len()..];
    assert!(
        options(written, "handshake complete") > 1,
        "the writer made one connection, and no more joined it"
    );
    for option in ["NBD_OPT_STRUCTURED_REPLY", "NBD_OPT_SET_META_CONTEXT"] {
        assert_eq!(options(written, option), 0, "a writer asked for {option}");
    }
}

#[test]
fn a_memory_export_reads_back_what_was_written_and_ends_like_a_file() {
    // A size that is no multiple of the block, so the last write is short.
    let size = 1_000_000;
    let Some(server) = nbdkit(&["memory", &format!("size={size}")]) else {
        return;
    };
    let data = pattern(size, 1);
    let mut end = open(&server, Access::Write);
    assert_eq!(end.kind(), Kind::NbdExport);
    assert_eq!(end.size(), Ok(Some(size as u64)));
    pipelined(&mut end, 64 * KIB, 8);
    for block in data.chunks(64 * KIB) {
        assert_eq!(end.write(block), Ok(block.len()));
    }
    // A write past the end: written up to it, then ENOSPC.
    assert_eq!(end.seek(Whence::End(-10)), Ok(size as u64 - 10));
    assert_eq!(end.write(&data[size - 10..]), Ok(10));
    assert_eq!(end.write(b"more"), Err(Errno::NOSPC));
    end.seek(Whence::Start(size as u64 - 4)).unwrap();
    assert_eq!(end.write(&[0xAA; 100]), Ok(4), "short count at the end");
    assert_eq!(end.write(&[0xAA; 100]), Err(Errno::NOSPC));
    assert_eq!(end.sync(true), Ok(()));
    assert_eq!(end.written_until(), Some(size as u64));
    Box::new(end).close().expect("close");

    let mut expected = data.clone();
    expected[size - 4..].fill(0xAA);
    let oracle = nbdcopy_read(&server.uri(), server.dir.path()).expect("nbdcopy");
    let first = oracle.iter().zip(&expected).position(|(a, b)| a != b);
    assert!(
        oracle == expected,
        "nbdcopy reads other bytes: {} vs {}, first at {first:?}",
        oracle.len(),
        expected.len()
    );

    // Read back unpipelined, then pipelined with reads that straddle
    // the chunks.
    let mut end = open(&server, Access::Read);
    assert!(read_to_end(&mut end, 100_000) == expected);
    end.seek(Whence::Start(0)).unwrap();
    pipelined(&mut end, 64 * KIB, 8);
    assert!(read_to_end(&mut end, 12_345) == expected);

    // Seeks as on a file of that size.
    assert_eq!(end.seek(Whence::Current(0)), Ok(size as u64));
    assert_eq!(end.seek(Whence::Current(-20)), Ok(size as u64 - 20));
    let mut buf = vec![0; 100];
    assert_eq!(end.read(&mut buf), Ok(20), "a full request until the end");
    assert_eq!(&buf[..20], &expected[size - 20..]);
    assert_eq!(end.read(&mut buf), Ok(0));
    assert_eq!(
        end.seek(Whence::Start(size as u64 + 10)),
        Ok(size as u64 + 10)
    );
    assert_eq!(end.read(&mut buf), Ok(0));
    assert_eq!(
        end.seek(Whence::Current(-(size as i64) - 11)),
        Err(Errno::INVAL)
    );
    end.seek(Whence::Start(1234)).unwrap();
    assert_eq!(end.read(&mut buf), Ok(100));
    assert_eq!(buf, expected[1234..1334]);
    assert_eq!(end.seek(Whence::Current(0)), Ok(1334));

    // Positional reads leave the position alone.
    assert_eq!(end.read_at(&mut buf, 500_000), Ok(100));
    assert_eq!(buf, expected[500_000..500_100]);
    assert_eq!(end.read_at(&mut buf, size as u64 - 30), Ok(30));
    assert_eq!(end.read_at(&mut buf, size as u64), Ok(0));
    assert_eq!(end.seek(Whence::Current(0)), Ok(1334));
    assert_eq!(end.truncate(10), Ok(()), "an export is never truncated");
    assert_eq!(end.size(), Ok(Some(size as u64)));
    Box::new(end).close().expect("close");
}

#[test]
fn unpipelined_writes_are_synchronous_and_positional_writes_stop_at_the_end() {
    let Some(server) = nbdkit(&["memory", "size=65536"]) else {
        return;
    };
    let mut end = open(&server, Access::Write);
    assert_eq!(end.write(&[1; 40_000]), Ok(40_000));
    assert_eq!(end.write(&[2; 40_000]), Ok(25_536));
    assert_eq!(end.write(&[3; 10]), Err(Errno::NOSPC));
    assert_eq!(end.written_until(), None, "nothing was deferred");
    assert_eq!(end.write_at(&[4; 100], 65_500), Ok(36));
    assert_eq!(end.write_at(&[4; 100], 65_536), Err(Errno::NOSPC));
    assert_eq!(end.write_at(&[5; 3], 10), Ok(3));
    assert_eq!(end.seek(Whence::Current(0)), Ok(65_536));
    Box::new(end).close().unwrap();
    let mut expected = [vec![1; 40_000], vec![2; 25_536]].concat();
    expected[65_500..].fill(4);
    expected[10..13].fill(5);
    assert!(nbdcopy_read(&server.uri(), server.dir.path()).unwrap() == expected);
}

#[test]
fn a_file_export_reads_and_writes_the_bytes_of_its_file() {
    let dir = tempdir().unwrap();
    let image = dir.path().join("image");
    let size = 3 * MIB + 123;
    let original = pattern(size, 2);
    std::fs::write(&image, &original).unwrap();
    let Some(server) = nbdkit_in(dir, &["file", &format!("file={}", image.display())]) else {
        return;
    };
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, MIB, 4);
    assert!(read_to_end(&mut end, MIB) == original);

    let update = pattern(2 * MIB, 3);
    end.seek(Whence::Start(4096)).unwrap();
    write_all(&mut end, &update, 256 * KIB);
    assert_eq!(end.settle(), Ok(()));
    assert_eq!(end.written_until(), Some(4096 + 2 * MIB as u64));
    Box::new(end).close().unwrap();
    let mut expected = original;
    expected[4096..4096 + 2 * MIB].copy_from_slice(&update);
    assert!(std::fs::read(&image).unwrap() == expected);
}

/// A pipelined end and the engine exchange whole buffers instead of
/// copying them: the buffer handed in comes back another one (its
/// mapping's address changes), holding the export's bytes on a read; on
/// a write the export ends with the bytes of the buffer handed over.
/// Where a buffer is not a whole piece, or would cross the export's end,
/// the bytes are copied (or the call declines), and stay right.
#[test]
fn whole_buffers_change_places_with_read_ahead_and_write_behind() {
    let dir = tempdir().unwrap();
    let image = dir.path().join("image");
    let size = 4 * MIB + 300;
    let original = pattern(size, 21);
    std::fs::write(&image, &original).unwrap();
    let Some(server) = nbdkit_in(dir, &["file", &format!("file={}", image.display())]) else {
        return;
    };
    let mut end = open(&server, Access::Write);
    let mut buf = AlignedBuf::new(MIB).unwrap();
    // Unpipelined there is no buffer of the end's to exchange.
    assert_eq!(end.read_exchange(&mut buf), None);
    assert_eq!(end.write_exchange(&mut buf), None);

    pipelined(&mut end, MIB, 4);
    let mut read = Vec::new();
    let mut moved = 0;
    loop {
        let before = buf.as_slice().as_ptr();
        let n = end
            .read_exchange(&mut buf)
            .expect("pipelined")
            .expect("read");
        if n == 0 {
            break;
        }
        moved += usize::from(buf.as_slice().as_ptr() != before);
        read.extend_from_slice(&buf.as_slice()[..n]);
    }
    assert!(read == original, "the bytes read by exchange differ");
    // Four whole pieces change places; the last 300 bytes are copied.
    assert_eq!(moved, 4);

    // A buffer other than the pieces' size is copied into.
    end.seek(Whence::Start(4096)).unwrap();
    let mut odd = AlignedBuf::new(MIB - 4096).unwrap();
    let before = odd.as_slice().as_ptr();
    assert_eq!(end.read_exchange(&mut odd), Some(Ok(MIB - 4096)));
    assert_eq!(odd.as_slice().as_ptr(), before);
    assert!(odd.as_slice() == &original[4096..MIB]);

    let update = pattern(2 * MIB, 22);
    end.seek(Whence::Start(MIB as u64)).unwrap();
    for block in update.chunks(MIB) {
        buf.as_mut_slice().copy_from_slice(block);
        let before = buf.as_slice().as_ptr();
        assert_eq!(end.write_exchange(&mut buf), Some(Ok(MIB)));
        assert_ne!(buf.as_slice().as_ptr(), before, "the buffer was not taken");
        assert_eq!(buf.len(), MIB);
        // What the end gave back may be scribbled on at once.
        buf.as_mut_slice().fill(0xee);
    }
    // Across the export's end the end declines; write() gives the short
    // count there.
    end.seek(Whence::Start((size - 100) as u64)).unwrap();
    assert_eq!(end.write_exchange(&mut buf), None);
    assert_eq!(end.settle(), Ok(()));
    Box::new(end).close().unwrap();
    let mut expected = original;
    expected[MIB..3 * MIB].copy_from_slice(&update);
    assert!(
        std::fs::read(&image).unwrap() == expected,
        "the export's bytes differ"
    );
}

/// nbdinfo --map: (offset, length, reads as zeros).
fn nbdinfo_map(uri: &str) -> Result<Vec<(u64, u64, bool)>, String> {
    let out = run(Command::new("nbdinfo").arg("--map").arg(uri))?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| f[i].parse::<u64>().expect(line);
            (num(0), num(1), num(2) & 2 != 0)
        })
        .collect())
}

/// Bytes the server was asked to read (`what` = "Read") or write
/// ("Write"), from nbdkit's log filter.
fn bytes_requested(log: &Path, what: &str) -> u64 {
    let what = format!(" {what} id=");
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|line| line.contains(&what))
        .map(|line| {
            let count = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("count=0x"))
                .expect(line);
            u64::from_str_radix(count, 16).unwrap()
        })
        .sum()
}

#[test]
fn next_data_finds_the_data_extents_nbdinfo_reports_and_zero_runs_are_never_read() {
    if !have_tools(&[("nbdinfo", "libnbd-bin"), ("nbdcopy", "libnbd-bin")]) {
        return;
    }
    if !nbdkit_has_plugin("sparse-random") {
        return rigs::skip("nbdkit has no sparse-random plugin");
    }
    let size: u64 = 64 << 20;
    let Some(server) = rigs::or_skip(Server::nbdkit_logged(&[
        "sparse-random",
        &format!("size={size}"),
        "runlength=262144",
        "percent=20",
        "seed=7",
    ])) else {
        return;
    };
    let log = server.log_file();
    let map = nbdinfo_map(&server.uri()).expect("nbdinfo --map");
    let data_bytes: u64 = map.iter().filter(|e| !e.2).map(|e| e.1).sum();
    assert!(map.len() > 10 && data_bytes > 0 && data_bytes < size / 2);

    let mut end = open(&server, Access::Read);
    assert!(info(&server).extents);
    for (k, &(offset, len, zero)) in map.iter().enumerate() {
        let expected = if zero {
            map[k + 1..].iter().find(|e| !e.2).map(|e| e.0)
        } else {
            Some(offset)
        };
        assert_eq!(end.next_data(offset), Ok(expected), "at {offset}");
        let middle = offset + len / 2;
        let expected = if zero { expected } else { Some(middle) };
        assert_eq!(end.next_data(middle), Ok(expected), "at {middle}");
    }
    assert_eq!(end.next_data(size), Ok(None));

    // Reading everything moves the data only, and gives nbdcopy's bytes.
    let before = bytes_requested(&log, "Read");
    end.seek(Whence::Start(0)).unwrap();
    pipelined(&mut end, MIB, 8);
    let all = read_to_end(&mut end, MIB);
    let moved = bytes_requested(&log, "Read") - before;
    let oracle = nbdcopy_read(&server.uri(), server.dir.path()).expect("nbdcopy");
    assert!(all == oracle, "other bytes than nbdcopy's");
    assert_eq!(moved, data_bytes, "bytes read for the data there is");
    // A reader that skips with next_data moves no more.
    let nbdcopy = bytes_requested(&log, "Read") - before - moved;
    assert!(nbdcopy >= data_bytes, "nbdcopy read {nbdcopy} bytes");
    let before = bytes_requested(&log, "Read");
    let mut end = open(&server, Access::Read);
    pipelined(&mut end, MIB, 8);
    let mut buf = vec![0; MIB];
    let mut at = 0;
    while let Some(data) = end.next_data(at).unwrap() {
        end.seek(Whence::Start(data)).unwrap();
        let n = end.read(&mut buf).unwrap();
        assert!(buf[..n] == oracle[data as usize..data as usize + n]);
        at = data + n as u64;
    }
    assert!(bytes_requested(&log, "Read") - before <= moved);
}

#[test]
fn a_write_error_comes_back_with_eio_and_the_acknowledged_prefix() {
    let dir = tempdir().unwrap();
    let trigger = dir.path().join("fail-now");
    let Some(server) = nbdkit_in(
        dir,
        &[
            "--filter=error",
            "memory",
            "size=16M",
            "error=EIO",
            "error-pwrite-rate=100%",
            &format!("error-pwrite-file={}", trigger.display()),
        ],
    ) else {
        return;
    };
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, 64 * KIB, 8);
    let block = pattern(64 * KIB, 4);
    for _ in 0..16 {
        assert_eq!(end.write(&block), Ok(block.len()));
    }
    assert_eq!(end.sync(true), Ok(()));
    std::fs::write(&trigger, b"").unwrap();
    let mut failed = None;
    for _ in 0..64 {
        if let Err(errno) = end.write(&block) {
            failed = Some(errno);
            break;
        }
    }
    let failed = failed.or_else(|| end.settle().err());
    assert_eq!(failed, Some(Errno::IO));
    assert_eq!(
        end.written_until(),
        Some(MIB as u64),
        "exactly what was acknowledged"
    );
    let detail = end.take_detail().expect("libnbd's message");
    assert!(detail.contains("Input/output error"), "{detail}");
    assert_eq!(end.write(&block), Err(Errno::IO), "the end has failed");
    assert_eq!(end.take_detail(), None, "the message is given once");
    assert_eq!(Box::new(end).close(), Ok(()), "already reported");
}

#[test]
fn a_read_error_at_a_known_offset_leaves_the_position_before_it() {
    let dir = tempdir().unwrap();
    let image = dir.path().join("image");
    let size = 2 * MIB;
    let contents = pattern(size, 5);
    std::fs::write(&image, &contents).unwrap();
    let map = dir.path().join("bad.map");
    let bad = 0x12_3400_u64;
    std::fs::write(&map, rigs::mapfile(size as u64, &[(bad, 0x200)])).unwrap();
    let Some(server) = nbdkit_in(
        dir,
        &[
            "--filter=ddrescue",
            "file",
            &format!("file={}", image.display()),
            &format!("ddrescue-mapfile={}", map.display()),
        ],
    ) else {
        return;
    };
    let chunk = 64 * KIB as u64;
    let failing_block = bad / chunk * chunk;
    let mut end = open(&server, Access::Read);
    pipelined(&mut end, chunk as usize, 8);
    let mut buf = vec![0; chunk as usize];
    let mut at = 0;
    let error = loop {
        match end.read(&mut buf) {
            Ok(n) => {
                assert!(n > 0, "end of input before the bad block");
                assert!(buf[..n] == contents[at..at + n]);
                at += n;
            }
            Err(errno) => break errno,
        }
    };
    assert_eq!(error, Errno::IO);
    assert_eq!(at as u64, failing_block);
    assert_eq!(end.seek(Whence::Current(0)), Ok(failing_block));
    assert!(end.take_detail().is_some());
    // Past the bad block, reading goes on (conv=noerror's way).
    end.seek(Whence::Current(chunk as i64)).unwrap();
    let rest = read_to_end(&mut end, chunk as usize);
    assert!(rest == contents[(failing_block + chunk) as usize..]);
}

#[test]
fn read_ahead_and_write_behind_overlap_requests_on_a_slow_server() {
    // 16 in flight: ideally two delays for all; on a loaded machine
    // anything under half the serial time still shows the overlap.
    let requests = 32;
    let delay = Duration::from_millis(20);
    let Some(server) = nbdkit(&[
        "--filter=delay",
        "memory",
        "size=4M",
        "delay-read=20ms",
        "delay-write=20ms",
    ]) else {
        return;
    };
    let data = pattern(requests * 64 * KIB, 6);
    let serial = delay * requests as u32;

    let mut end = open(&server, Access::Write);
    pipelined(&mut end, 64 * KIB, 16);
    let started = Instant::now();
    write_all(&mut end, &data, 64 * KIB);
    assert_eq!(end.settle(), Ok(()));
    let took = started.elapsed();
    assert!(took < serial / 2, "{requests} writes took {took:?}");
    Box::new(end).close().unwrap();

    let mut end = open(&server, Access::Read);
    pipelined(&mut end, 64 * KIB, 16);
    let started = Instant::now();
    let mut buf = vec![0; 64 * KIB];
    for block in data.chunks(64 * KIB) {
        assert_eq!(end.read(&mut buf), Ok(block.len()));
        assert!(buf == block);
    }
    let took = started.elapsed();
    assert!(took < serial / 2, "{requests} reads took {took:?}");
}

#[test]
fn a_read_only_export_refuses_writes_with_erofs() {
    let Some(server) = nbdkit(&["-r", "memory", "size=1M"]) else {
        return;
    };
    let refused = NbdEnd::open(&uri(&server.uri()), Access::Write).unwrap_err();
    assert_eq!(refused.errno, Errno::ROFS);
    let mut end = open(&server, Access::Read);
    assert!(info(&server).read_only);
    assert_eq!(end.write(b"x"), Err(Errno::ROFS));
    assert!(end.take_detail().unwrap().contains("read-only"));
    assert_eq!(end.write_zeroes(10), Err(Errno::ROFS));
    assert_eq!(end.write_at(b"x", 0), Err(Errno::ROFS));
    pipelined(&mut end, 4096, 2);
    let mut whole = AlignedBuf::new(4096).unwrap();
    // Declined: a plain write says why.
    assert_eq!(end.write_exchange(&mut whole), None);
    assert_eq!(end.write(whole.as_slice()), Err(Errno::ROFS));
    let mut buf = vec![1; 4096];
    assert_eq!(end.read(&mut buf), Ok(4096));
    assert!(buf.iter().all(|&b| b == 0));
}

#[test]
fn a_server_killed_mid_copy_fails_reads_and_writes_without_hanging() {
    if !nbdkit_has_plugin("pattern") {
        return rigs::skip("nbdkit has no pattern plugin");
    }
    // Reading.
    let Some(mut server) = nbdkit(&["--filter=delay", "pattern", "size=64M", "delay-read=2ms"])
    else {
        return;
    };
    let mut end = open(&server, Access::Read);
    pipelined(&mut end, 64 * KIB, 8);
    let mut buf = vec![0; 64 * KIB];
    for _ in 0..4 {
        assert_eq!(end.read(&mut buf), Ok(buf.len()));
    }
    server.kill();
    let started = Instant::now();
    let mut read = 4 * 64 * KIB as u64;
    let error = loop {
        match end.read(&mut buf) {
            Ok(n) => read += n as u64,
            Err(errno) => break errno,
        }
        assert!(read < 2 * MIB as u64, "reads go on after the server died");
    };
    assert_eq!(error, Errno::NOTCONN);
    assert_eq!(end.seek(Whence::Current(0)), Ok(read));
    assert!(end.take_detail().is_some());
    assert_eq!(end.read(&mut buf), Err(Errno::NOTCONN), "and stay failed");
    assert!(started.elapsed() < Duration::from_secs(5));
    Box::new(end).abandon();

    // Writing.
    let Some(mut server) = nbdkit(&["--filter=delay", "memory", "size=64M", "delay-write=2ms"])
    else {
        return;
    };
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, 64 * KIB, 8);
    let block = pattern(64 * KIB, 7);
    write_all(&mut end, &block.repeat(4), 64 * KIB);
    assert_eq!(end.settle(), Ok(()));
    server.kill();
    let mut failed = None;
    for _ in 0..64 {
        if let Err(errno) = end.write(&block) {
            failed = Some(errno);
            break;
        }
    }
    let failed = failed.or_else(|| end.sync(false).err());
    assert_eq!(failed, Some(Errno::NOTCONN));
    assert_eq!(end.written_until(), Some(4 * 64 * KIB as u64));
    assert!(end.take_detail().is_some());
    assert_eq!(Box::new(end).close(), Ok(()), "already reported");
}

#[test]
fn write_zeroes_leave_zeros_without_sending_them() {
    // The nozero filter's fastzeromode=slow refuses every fast zero: the
    // end must send it again as a plain zero.
    for fast in ["default", "slow", "none"] {
        let Some(server) = rigs::or_skip(Server::nbdkit_logged(&[
            "--filter=nozero",
            "memory",
            "size=4M",
            "zeromode=plugin",
            &format!("fastzeromode={fast}"),
        ])) else {
            return;
        };
        let log = server.log_file();
        let data = pattern(4 * MIB, 8);
        for depth in [None, Some(8)] {
            let mut end = open(&server, Access::Write);
            assert!(info(&server).can_zero);
            assert_eq!(info(&server).can_fast_zero, fast != "none", "{fast}");
            if let Some(depth) = depth {
                pipelined(&mut end, 64 * KIB, depth);
            }
            write_all(&mut end, &data, MIB);
            end.seek(Whence::Start(100_000)).unwrap();
            assert_eq!(end.write_zeroes(1_000_000), Ok(()));
            assert_eq!(end.seek(Whence::Current(0)), Ok(1_100_000));
            assert_eq!(
                end.write_zeroes(4 * MIB as u64),
                Err(Errno::NOTSUP),
                "past the end"
            );
            assert_eq!(end.sync(false), Ok(()));
            let mut expected = data.clone();
            expected[100_000..1_100_000].fill(0);
            let mut back = vec![0; 4 * MIB];
            assert_eq!(end.read_at(&mut back, 0), Ok(4 * MIB));
            assert!(back == expected, "fastzeromode={fast} depth={depth:?}");
            Box::new(end).close().unwrap();
        }
        assert_eq!(
            bytes_requested(&log, "Write"),
            2 * 4 * MIB as u64,
            "zeros sent as data ({fast})"
        );
        assert!(bytes_requested(&log, "Zero") >= 2 * 1_000_000, "({fast})");
    }
}

#[test]
fn qemu_nbd_serves_a_raw_file_and_a_write_error_at_a_known_sector_is_exact() {
    if !have_tools(&[("qemu-nbd", "qemu-utils")]) {
        return;
    }
    let dir = tempdir().unwrap();
    let image = dir.path().join("image.raw");
    let size = 4 * MIB;
    let original = pattern(size, 9);
    std::fs::write(&image, &original).unwrap();
    let server = match Server::qemu_nbd_in(dir, &["-f", "raw", &image.display().to_string()]) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, 256 * KIB, 8);
    assert!(read_to_end(&mut end, 256 * KIB) == original);
    let update = pattern(size, 10);
    end.seek(Whence::Start(0)).unwrap();
    write_all(&mut end, &update, 256 * KIB);
    assert_eq!(end.sync(false), Ok(()));
    Box::new(end).close().unwrap();
    assert!(std::fs::read(&image).unwrap() == update);
    drop(server);

    // blkdebug fails every write covering one sector with EIO.
    let dir = tempdir().unwrap();
    let image = dir.path().join("image.raw");
    std::fs::write(&image, vec![0; size]).unwrap();
    let config = dir.path().join("blkdebug.conf");
    let sector = 2345_u64;
    std::fs::write(
        &config,
        format!(
            "[inject-error]\nevent = \"pwritev\"\nerrno = \"5\"\nsector = \"{sector}\"\n\
             once = \"off\"\nimmediately = \"on\"\n"
        ),
    )
    .unwrap();
    let opts = format!(
        "driver=raw,file.driver=blkdebug,file.config={},file.image.driver=file,\
         file.image.filename={}",
        config.display(),
        image.display()
    );
    let server = match Server::qemu_nbd_in(dir, &["--image-opts", &opts]) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    let chunk = 64 * KIB as u64;
    let failing = sector * 512 / chunk * chunk;
    let mut end = open(&server, Access::Write);
    pipelined(&mut end, chunk as usize, 8);
    let data = pattern(size, 11);
    let mut failed = None;
    for block in data.chunks(chunk as usize) {
        if let Err(errno) = end.write(block) {
            failed = Some(errno);
            break;
        }
    }
    let failed = failed.or_else(|| end.settle().err());
    assert_eq!(failed, Some(Errno::IO));
    assert_eq!(end.written_until(), Some(failing));
    Box::new(end).close().unwrap();
    let written = std::fs::read(&image).unwrap();
    assert!(written[..failing as usize] == data[..failing as usize]);
}

#[test]
fn nbds_over_a_unix_socket_with_a_psk_made_here() {
    let Some((mut server, psk)) = rigs::or_skip(Server::nbdkit_psk(&["memory", "size=2M"])) else {
        return;
    };
    let tls = psk.uri(&server);
    let mut end = through_window(NbdEnd::open(&uri(&tls), Access::Write).expect("TLS connection"));
    pipelined(&mut end, 256 * KIB, 4);
    let data = pattern(2 * MIB, 12);
    write_all(&mut end, &data, 256 * KIB);
    assert_eq!(end.sync(false), Ok(()));
    end.seek(Whence::Start(0)).unwrap();
    assert!(read_to_end(&mut end, 256 * KIB) == data);
    Box::new(end).close().unwrap();

    // Without TLS, or with the wrong key, the server says no; the message
    // never shows a key.
    let plain = NbdEnd::open(&uri(&server.uri()), Access::Read).unwrap_err();
    assert!(!plain.message.is_empty());
    let wrong = Psk::make(server.path("wrong.psk")).unwrap();
    let bad = wrong.uri(&server);
    let refused = NbdEnd::open(&uri(&bad), Access::Read).unwrap_err();
    for message in [&plain.message, &refused.message] {
        assert!(
            !message.contains(&psk.key) && !message.contains(&wrong.key),
            "{message}"
        );
    }

    // A TLS server that dies mid-copy: an error, not SIGPIPE.
    let mut end = through_window(NbdEnd::open(&uri(&tls), Access::Write).unwrap());
    pipelined(&mut end, 256 * KIB, 4);
    write_all(&mut end, &data[..MIB], 256 * KIB);
    server.kill();
    let mut failed = None;
    for block in data.chunks(256 * KIB).cycle().take(64) {
        if let Err(errno) = end.write(block) {
            failed = Some(errno);
            break;
        }
    }
    let failed = failed.or_else(|| end.settle().err());
    assert_eq!(failed, Some(Errno::NOTCONN));
    let detail = end.take_detail().unwrap();
    assert!(!detail.contains(&psk.key), "{detail}");
}

/// Where the dynamic loader finds libnbd here, as ldconfig's cache says.
fn installed_libnbd() -> Option<std::path::PathBuf> {
    let cache = Command::new("ldconfig").arg("-p").output().ok()?;
    String::from_utf8_lossy(&cache.stdout)
        .lines()
        .filter(|line| line.trim_start().starts_with("libnbd.so.0 "))
        .find_map(|line| line.rsplit(" => ").next())
        .map(|path| std::fs::canonicalize(path.trim()).unwrap_or_else(|_| path.trim().into()))
}

#[test]
fn without_libnbd_an_nbd_operand_is_refused_and_every_other_copy_runs() {
    // libnbd is hidden from one ddx only: a private mount namespace
    // (unshare -m) where an empty file is bound over the library.
    let Some(library) = installed_libnbd() else {
        return rigs::skip("libnbd.so.0 is not installed (package libnbd0)");
    };
    if !have_tools(&[("unshare", "util-linux")]) {
        return;
    }
    let Some(server) = nbdkit(&["memory", "size=1M"]) else {
        return;
    };
    let dir = tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let copy_to = dir.path().join("copy");
    let script = format!(
        "mount --bind '{}' '{}' || exit 99; \
         '{ddx}' if='{uri}' of='{out}' bs=64k; echo \"nbd=$?\" >&2; \
         '{ddx}' if=/dev/zero of='{out}' bs=64k count=2 status=none; echo \"file=$?\" >&2",
        empty.display(),
        library.display(),
        ddx = rigs::cmd::DDX,
        uri = server.uri(),
        out = copy_to.display(),
    );
    let run = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if run.status.code() == Some(99) {
        return rigs::skip(&format!(
            "cannot hide libnbd in a mount namespace: {stderr}"
        ));
    }
    assert!(stderr.contains("nbd=1\n"), "{stderr}");
    assert!(
        stderr.contains("cannot load libnbd") && stderr.contains("libnbd0"),
        "the refusal says what to install: {stderr}"
    );
    assert!(stderr.contains("file=0\n"), "{stderr}");
    assert_eq!(std::fs::metadata(&copy_to).unwrap().len(), 128 * 1024);
}
