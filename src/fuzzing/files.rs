//! Files other programs write and ddx reads or must write readably:
//! bmaptool's block maps, GNU ddrescue's mapfiles, and the check lines
//! of `--hash-file`, which sha256sum, b3sum and xxhsum read back.

use std::path::Path;
use std::sync::Arc;

use super::assert_one_line;
use super::input::{drain, Bytes};
use crate::ends::Whence;
use crate::engine::stream::Stream;
use crate::image::bmap::{Bmap, BmapFilter};
use crate::integrity::{checkfile, Algorithm, Digest};
use crate::rescue::mapfile::{BlockStatus, Map};
use crate::sys::Errno;

/// Images up to this size are also read through the map.
const IMAGE_READ: u64 = 256 << 10;

/// `data` is a bmap file.
pub fn bmap(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let map = match Bmap::parse(text, "fuzz.bmap") {
        Ok(map) => map,
        Err(e) => return assert_one_line("a bmap error", &e.to_string()),
    };
    assert!((1..=2).contains(&map.version.0), "{:?}", map.version);
    assert!(map.block_size >= 1);
    assert_eq!(map.blocks, map.image_size.div_ceil(map.block_size));
    let mut previous_last = None;
    let mut mapped = 0u64;
    for range in &map.ranges {
        assert!(
            range.first <= range.last && range.last < map.blocks,
            "{range:?}"
        );
        assert!(
            previous_last.is_none_or(|last| range.first > last),
            "{range:?}"
        );
        previous_last = Some(range.last);
        let (start, end) = map.byte_span(range);
        assert!(
            start < end && end <= map.image_size,
            "{range:?}: {start}..{end}"
        );
        mapped += end - start;
    }
    assert_eq!(map.mapped_bytes(), mapped);
    assert!(map.mapped_bytes() <= map.image_size);
    assert!(map.mapped_blocks() <= map.blocks);
    map.check_size("input", map.image_size, "fuzz.bmap")
        .expect("the map's own size");
    // What ddx writes (--bmap-create) reads back as the same map.
    let again = Bmap::parse(&map.to_xml(), "again.bmap").expect("ddx's own map parses");
    assert_eq!(
        (again.image_size, again.block_size, again.blocks),
        (map.image_size, map.block_size, map.blocks)
    );
    assert_eq!(again.ranges, map.ranges);
    if map.checksum.is_some() {
        assert_eq!(again.checksum, map.checksum);
    }
    if map.image_size <= IMAGE_READ {
        let map = Arc::new(map);
        for file in [true, false] {
            read_through(&map, file, false);
            read_through(&map, file, true);
        }
    }
}

/// The image's bytes: none is zero, so that a hole read from the input
/// instead of made shows.
fn image_byte(at: u64) -> u8 {
    (at % 251) as u8 + 1
}

/// Read an image through `map` as a file or a pipe, in order
/// (`by_extents`: as the engine does, from one mapped extent to the
/// next), and check that mapped blocks come from the input, holes are
/// zeros, and a failure is a digest that does not match.
fn read_through(map: &Arc<Bmap>, file: bool, by_extents: bool) {
    let image: Vec<u8> = (0..map.image_size).map(image_byte).collect();
    let input = if file {
        Bytes::file(image.clone())
    } else {
        Bytes::pipe(image.clone())
    };
    let mut filter = BmapFilter::new(input, Arc::clone(map), "input", "fuzz.bmap")
        .expect("the input is the map's size");
    let mut expected = vec![0u8; image.len()];
    for range in &map.ranges {
        let (start, end) = map.byte_span(range);
        expected[start as usize..end as usize]
            .copy_from_slice(&image[start as usize..end as usize]);
    }
    let mut out = vec![0u8; image.len()];
    let failure = if by_extents {
        read_extents(&mut filter, &mut out)
    } else {
        let got = drain(&mut filter, 1021, usize::MAX);
        out[..got.data.len()].copy_from_slice(&got.data);
        assert!(got.data.len() <= image.len());
        assert!(got.error.is_some() || got.data.len() == image.len());
        got.error
    };
    match failure {
        None => {
            assert!(out == expected, "the image read through the map differs");
            assert!(
                !map.ranges.iter().any(|r| r.digest.is_some()) || map.checksum.is_none(),
                "a made-up digest matched"
            );
        }
        Some((errno, detail)) => {
            assert_eq!(errno, Errno::BADMSG, "{detail:?}");
            let detail = detail.expect("a failure says why");
            assert!(detail.contains("do not match the bmap"), "{detail}");
            assert_one_line("a bmap failure", &detail);
            // The failure stands.
            assert_eq!(filter.read(&mut [0u8; 16]), Err(Errno::BADMSG));
        }
    }
}

/// Read the mapped extents only, as the engine does with holes.
fn read_extents(filter: &mut BmapFilter, out: &mut [u8]) -> Option<(Errno, Option<String>)> {
    let mut pos = 0u64;
    let mut buf = vec![0u8; 3001];
    loop {
        let data = match filter.next_data(pos) {
            Ok(Some(data)) => data,
            Ok(None) => return None,
            Err(errno) => return Some((errno, filter.take_detail())),
        };
        assert!(data >= pos && data < out.len() as u64, "{data} from {pos}");
        let hole = filter.next_hole(data).expect("inside the image");
        assert!(hole > data && hole <= out.len() as u64, "{data}..{hole}");
        assert_eq!(filter.seek(Whence::Start(data)), Ok(data));
        pos = data;
        while pos < hole {
            let want = ((hole - pos) as usize).min(buf.len());
            match filter.read(&mut buf[..want]) {
                Ok(n) => {
                    assert_eq!(n, want);
                    out[pos as usize..pos as usize + n].copy_from_slice(&buf[..n]);
                    pos += n as u64;
                }
                Err(errno) => return Some((errno, filter.take_detail())),
            }
        }
    }
}

/// `data` is a mapfile.
pub fn mapfile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let whole = match Map::parse(text, 0, i64::MAX as u64) {
        Ok(map) => map,
        Err(e) => return assert_one_line("a mapfile error", &e.to_string()),
    };
    check_map(&whole, 0, i64::MAX as u64);
    // A copy whose extent starts and ends inside the file's blocks.
    let blocks = whole.blocks();
    let pick = |i: usize| blocks[i % blocks.len()];
    let start = pick(text.len()).pos + pick(text.len()).size / 3;
    let end = pick(text.len() / 3).end().saturating_sub(1);
    let part = Map::parse(text, start, end).expect("parsed once already");
    check_map(&part, start, end);
}

fn check_map(map: &Map, start: u64, end: u64) {
    let mut at = start;
    let mut previous: Option<BlockStatus> = None;
    for block in map.blocks() {
        assert_eq!(block.pos, at, "blocks are contiguous: {:?}", map.blocks());
        assert!(block.size > 0);
        assert_ne!(Some(block.status), previous, "neighbours are merged");
        previous = Some(block.status);
        at = block.end();
    }
    assert_eq!(at, end.max(start), "the map covers the copy's extent");
    let statuses = [
        BlockStatus::NonTried,
        BlockStatus::NonTrimmed,
        BlockStatus::NonScraped,
        BlockStatus::BadSector,
        BlockStatus::Finished,
    ];
    let total: u64 = statuses.iter().map(|&s| map.bytes_with(s)).sum();
    assert_eq!(total, end.saturating_sub(start));
    for retrying in [false, true] {
        let summary = crate::rescue::resume_summary(map, Path::new("copy.map"), retrying);
        assert_one_line("the resume line", &summary);
    }
    // What ddx saves reads back as the same map, header and all.
    let saved = map.render("ddx if=a of=b --map=copy.map");
    let again = Map::parse(&saved, start, end).expect("ddx's own mapfile parses");
    assert_eq!(&again, map);
}

/// `data` is the name of an input (after one byte choosing the
/// algorithm): its check line reads back as that name in the checker's
/// own rules.
pub fn hash_file(data: &[u8]) {
    let Some((&choice, name)) = data.split_first() else {
        return;
    };
    let (algorithm, hex_len) = match choice % 3 {
        0 => (Algorithm::Sha256, 64),
        1 => (Algorithm::Blake3, 64),
        _ => (Algorithm::Xxh3, 16),
    };
    if let Some(why) = checkfile::unwritable(algorithm, name) {
        assert_one_line("--hash-file's refusal", &why);
        return;
    }
    let hex = "0123456789abcdef".repeat(4)[..hex_len].to_owned();
    let line = checkfile::line(
        &Digest {
            algorithm,
            hex: hex.clone(),
        },
        name,
    );
    let read = match algorithm {
        Algorithm::Sha256 => sha256sum_reads(&line),
        Algorithm::Blake3 => b3sum_reads(&line),
        Algorithm::Xxh3 => xxhsum_reads(&line),
    };
    assert_eq!(
        read,
        Some((hex.into_bytes(), name.to_vec())),
        "{algorithm:?} line {line:?}"
    );
}

/// How coreutils 9.1's `sha256sum -c` reads a line: the newline goes,
/// then a carriage return before it (a DOS line ending); a line that
/// starts with a backslash has `\\`, `\n` and `\r` escapes in its name.
fn sha256sum_reads(line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let line = line.strip_suffix(b"\n")?;
    if line.contains(&b'\n') {
        return None;
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (escaped, line) = match line.strip_prefix(b"\\") {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let (hex, name) = split_digest_line(line)?;
    let name = if escaped {
        unescape(name, b"\\nr")?
    } else {
        name.to_vec()
    };
    Some((hex, name))
}

/// How b3sum 1.2's `-c` reads a line: no carriage return is dropped, and
/// an escaped name has only `\\` and `\n`.
fn b3sum_reads(line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let line = line.strip_suffix(b"\n")?;
    if line.contains(&b'\n') {
        return None;
    }
    let (escaped, line) = match line.strip_prefix(b"\\") {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let (hex, name) = split_digest_line(line)?;
    let name = if escaped {
        unescape(name, b"\\n")?
    } else {
        name.to_vec()
    };
    Some((hex, name))
}

/// How xxhsum 0.8.1 reads a tagged line: `XXH3 (NAME) = HEX`, the name
/// taken raw.
fn xxhsum_reads(line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let line = line.strip_suffix(b"\n")?;
    if line.contains(&b'\n') {
        return None;
    }
    let rest = line.strip_prefix(b"XXH3 (")?;
    let split = rest.len().checked_sub(16 + 4)?;
    let (name, tail) = rest.split_at(split);
    let hex = tail.strip_prefix(b") = ")?;
    Some((hex.to_vec(), name.to_vec()))
}

/// `HEX  NAME`: the digest, two spaces, the name.
fn split_digest_line(line: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let hex_len = line.iter().position(|&b| b == b' ')?;
    let name = line[hex_len..].strip_prefix(b"  ")?;
    Some((line[..hex_len].to_vec(), name))
}

/// Undo backslash escapes, knowing only those in `known` (`n` and `r`
/// stand for the control characters); an unknown one is a bad line.
fn unescape(name: &[u8], known: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(name.len());
    let mut bytes = name.iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let next = *bytes.next()?;
        if !known.contains(&next) {
            return None;
        }
        out.push(match next {
            b'n' => b'\n',
            b'r' => b'\r',
            other => other,
        });
    }
    Some(out)
}
