use std::sync::{Arc, Mutex};

use super::*;
use crate::ends::Kind;
use crate::engine::stream::Stream;
use crate::image::testing::{sample, Memory};
use crate::sys::Errno;

fn digest(kind: ChecksumKind, data: &[u8]) -> String {
    let mut h = kind.hasher();
    h.update(data);
    h.hex()
}

/// An image of 10 blocks of 4 KiB plus 100 bytes, data in blocks 1-2 and
/// in the partial last block, and its map.
fn image_and_map() -> (Vec<u8>, Bmap) {
    let bs = 4096usize;
    let mut image = vec![0u8; 10 * bs + 100];
    // Odd bytes: no block of data is all zeros.
    let odd = |data: Vec<u8>| data.into_iter().map(|b| b | 1).collect::<Vec<u8>>();
    image[bs..3 * bs].copy_from_slice(&odd(sample(2 * bs, 1)));
    image[10 * bs..].copy_from_slice(&odd(sample(100, 2)));
    let map = Bmap {
        version: (2, 0),
        image_size: image.len() as u64,
        block_size: bs as u64,
        blocks: 11,
        checksum: Some(ChecksumKind::Sha256),
        ranges: vec![
            Range {
                first: 1,
                last: 2,
                digest: Some(digest(ChecksumKind::Sha256, &image[bs..3 * bs])),
            },
            Range {
                first: 10,
                last: 10,
                digest: Some(digest(ChecksumKind::Sha256, &image[10 * bs..])),
            },
        ],
    };
    (image, map)
}

/// Close `recorder` and finish the recording it handed to `slot`, for an
/// image of `size` bytes.
fn closed_map(recorder: Box<dyn Stream>, slot: &Mutex<Option<Recording>>, size: u64) -> Bmap {
    recorder.close().unwrap();
    let recording = slot.lock().unwrap().take().unwrap();
    recording.finish(size).unwrap()
}

/// A map that never ends (a device, a pipe: no size to check first) is
/// read only up to the bound, then refused.
#[test]
fn an_endless_map_is_refused_at_the_bound() {
    let e = Bmap::read(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(e.why.contains("too big for a bmap file"), "{e}");
}

#[test]
fn a_written_map_parses_back_the_same() {
    let (_, map) = image_and_map();
    let xml = map.to_xml();
    assert_eq!(Bmap::parse(&xml, "m.bmap").unwrap(), map);
    assert_eq!(map.mapped_bytes(), 2 * 4096 + 100);
    assert_eq!(map.mapped_blocks(), 3);
}

#[test]
fn a_damaged_map_is_refused_by_its_own_digest() {
    let (_, map) = image_and_map();
    let xml = map.to_xml().replace("> 1-2 <", "> 1-3 <");
    let err = Bmap::parse(&xml, "m.bmap").unwrap_err().to_string();
    assert!(
        err.starts_with("--bmap=m.bmap: the file is damaged"),
        "{err}"
    );
}

/// A 1.3 map (SHA-1 everywhere, `sha1` attributes) with its own digest.
fn version_1_3(ranges: &str) -> String {
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<bmap version=\"1.3\">\n<ImageSize> 8192 </ImageSize>\n\
         <BlockSize> 4096 </BlockSize>\n<BlocksCount> 2 </BlocksCount>\n\
         <MappedBlocksCount> 1 </MappedBlocksCount>\n\
         <BmapFileSHA1> {} </BmapFileSHA1>\n<BlockMap>\n{ranges}</BlockMap>\n</bmap>\n",
        "0".repeat(40)
    );
    let own = digest(ChecksumKind::Sha1, text.as_bytes());
    text.replace(&"0".repeat(40), &own)
}

#[test]
fn version_1_3_carries_sha1_digests() {
    let d = digest(ChecksumKind::Sha1, &[7u8; 4096]);
    let map = Bmap::parse(
        &version_1_3(&format!("<Range sha1=\"{d}\"> 1 </Range>\n")),
        "old",
    )
    .unwrap();
    assert_eq!(map.checksum, Some(ChecksumKind::Sha1));
    assert_eq!(
        map.ranges,
        vec![Range {
            first: 1,
            last: 1,
            digest: Some(d)
        }]
    );
}

#[test]
fn version_1_2_has_no_digests() {
    let xml = "<bmap version=\"1.2\"><ImageSize>8192</ImageSize><BlockSize>4096</BlockSize>\
               <BlocksCount>2</BlocksCount><MappedBlocksCount>2</MappedBlocksCount>\
               <BlockMap><Range> 0-1 </Range></BlockMap></bmap>";
    let map = Bmap::parse(xml, "old").unwrap();
    assert_eq!(map.checksum, None);
    assert_eq!(
        map.ranges,
        vec![Range {
            first: 0,
            last: 1,
            digest: None
        }]
    );
}

#[test]
fn bad_maps_are_refused_in_one_line() {
    let head = |version: &str, extra: &str| {
        format!(
            "<bmap version=\"{version}\"><ImageSize>8192</ImageSize><BlockSize>4096</BlockSize>\
             <BlocksCount>2</BlocksCount>{extra}<BlockMap>"
        )
    };
    let cases = [
        (format!("{}<Range> 0-2 </Range></BlockMap></bmap>", head("1.2", "")), "goes past"),
        (format!("{}<Range> 1 </Range><Range> 0 </Range></BlockMap></bmap>", head("1.2", "")), "overlaps"),
        (format!("{}<Range> 1-0 </Range></BlockMap></bmap>", head("1.2", "")), "bad range"),
        (format!("{}</BlockMap></bmap>", head("3.0", "")), "version 3.0 is not supported"),
        (
            format!("{}</BlockMap></bmap>", head("2.0", "<ChecksumType>md5</ChecksumType>")),
            "checksum type \"md5\" is not supported",
        ),
        (
            "<bmap version=\"1.2\"><ImageSize>8193</ImageSize><BlockSize>4096</BlockSize><BlocksCount>2</BlocksCount><BlockMap/></bmap>".to_owned(),
            "inconsistent",
        ),
        ("<html/>".to_owned(), "not a bmap file"),
        ("not xml".to_owned(), "not a bmap file"),
    ];
    for (xml, says) in cases {
        let err = Bmap::parse(&xml, "m").unwrap_err().to_string();
        assert!(
            err.starts_with("--bmap=m: ") && err.contains(says),
            "{says}: {err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }
}

fn filter_over(kind: Kind, image: Vec<u8>, map: Bmap) -> BmapFilter {
    let (input, _) = Memory::boxed(kind, image);
    BmapFilter::new(input, Arc::new(map), "img", "m.bmap").unwrap()
}

fn read_all(end: &mut dyn Stream, bs: usize) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; bs];
    loop {
        match end.read(&mut buf)? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn unmapped_blocks_read_as_holes_and_mapped_ones_are_checked() {
    let (mut image, map) = image_and_map();
    let expected = image.clone();
    // Garbage where the map says hole: the filter reads zeros there.
    image[5 * 4096..6 * 4096].fill(0xEE);
    for kind in [Kind::RegularFile, Kind::Stream] {
        let mut filter = filter_over(kind, image.clone(), map.clone());
        assert_eq!(read_all(&mut filter, 3000).unwrap(), expected, "{kind:?}");
        assert_eq!((filter.verified, filter.unverified), (2, 0));
    }
}

#[test]
fn holes_are_reported_and_can_be_sought_over() {
    let (image, map) = image_and_map();
    let mut filter = filter_over(Kind::Stream, image.clone(), map);
    assert_eq!(filter.next_data(0), Ok(Some(4096)));
    assert_eq!(filter.next_hole(4096), Ok(3 * 4096));
    assert_eq!(filter.next_hole(0), Ok(0));
    assert_eq!(filter.next_data(3 * 4096), Ok(Some(10 * 4096)));
    // The engine's way: seek to data, read it, seek to the next.
    let mut copied = vec![0u8; image.len()];
    let mut at = 0u64;
    while let Some(data) = filter.next_data(at).unwrap() {
        let hole_end = filter.next_hole(data).unwrap();
        filter.seek(crate::ends::Whence::Start(data)).unwrap();
        let n = filter
            .read(&mut copied[data as usize..hole_end as usize])
            .unwrap();
        assert_eq!(n as u64, hole_end - data);
        at = hole_end;
    }
    assert_eq!(copied, image);
    assert_eq!(filter.verified, 2);
    assert_eq!(filter.next_data(10 * 4096 + 100), Ok(None));
}

#[test]
fn a_range_that_does_not_match_stops_the_copy_naming_it() {
    let (mut image, map) = image_and_map();
    image[2 * 4096 + 17] ^= 1;
    let mut filter = filter_over(Kind::Stream, image, map);
    assert_eq!(read_all(&mut filter, 4096), Err(Errno::BADMSG));
    let detail = filter.take_detail().unwrap();
    assert!(
        detail.starts_with(
            "blocks 1-2 (image bytes 4096 to 12288) do not match the bmap: its SHA-256 is "
        ),
        "{detail}"
    );
    // It stands: reading on gives it again.
    assert_eq!(filter.read(&mut [0u8; 10]), Err(Errno::BADMSG));
}

#[test]
fn a_map_for_another_size_is_refused() {
    let (image, map) = image_and_map();
    let (input, _) = Memory::boxed(Kind::RegularFile, image[..8192].to_vec());
    let err = BmapFilter::new(input, Arc::new(map.clone()), "img", "m.bmap").unwrap_err();
    assert_eq!(
        err.to_string(),
        "--bmap=m.bmap: the map is for a 41060-byte image, but img is 8192 bytes"
    );
    // A stream's size is known only at its end: too long, and too short.
    let mut longer = image.clone();
    longer.push(0);
    let mut filter = filter_over(Kind::Stream, longer, map.clone());
    assert_eq!(read_all(&mut filter, 1 << 20), Err(Errno::BADMSG));
    assert!(filter.take_detail().unwrap().contains("img is longer"));
    let mut filter = filter_over(Kind::Stream, image[..5000].to_vec(), map);
    assert_eq!(read_all(&mut filter, 1 << 20), Err(Errno::BADMSG));
    assert!(filter
        .take_detail()
        .unwrap()
        .contains("img ends at byte 5000"));
}

#[test]
fn a_recorded_map_maps_extents_or_nonzero_blocks_and_checks_out() {
    let (image, _) = image_and_map();
    for extents in [false, true] {
        let (mut input, _) = Memory::new(
            if extents {
                Kind::RegularFile
            } else {
                Kind::Pipe
            },
            image.clone(),
        );
        input.read_limit = 1000;
        if extents {
            // Block 0 is allocated zeros: mapped by its extent.
            input.extents = Some(vec![(0, 3 * 4096), (10 * 4096, image.len() as u64)]);
        }
        let (recorder, slot) = BmapRecorder::new(Box::new(input), 4096, 0);
        let mut recorder: Box<dyn Stream> = Box::new(recorder);
        assert_eq!(read_all(&mut *recorder, 5000).unwrap(), image);
        let map = closed_map(recorder, &slot, image.len() as u64);
        let first = if extents { 0 } else { 1 };
        let spans: Vec<_> = map.ranges.iter().map(|r| (r.first, r.last)).collect();
        assert_eq!(spans, vec![(first, 2), (10, 10)], "extents: {extents}");
        let map = Bmap::parse(&map.to_xml(), "made").unwrap();
        let mut filter = filter_over(Kind::Stream, image.clone(), map);
        assert_eq!(read_all(&mut filter, 4096).unwrap(), image);
        assert_eq!(filter.verified, 2);
    }
}

#[test]
fn a_recording_skips_what_precedes_its_origin_and_covers_holes_sought_over() {
    let (image, _) = image_and_map();
    let (mut input, _) = Memory::new(Kind::RegularFile, image.clone());
    input.extents = Some(vec![(4096, 3 * 4096), (10 * 4096, image.len() as u64)]);
    let (recorder, slot) = BmapRecorder::new(Box::new(input), 4096, 4096);
    let mut recorder: Box<dyn Stream> = Box::new(recorder);
    // skip=1 (4 KiB), read two blocks, seek over the hole, read the rest.
    recorder.seek(crate::ends::Whence::Start(4096)).unwrap();
    let mut buf = vec![0u8; 2 * 4096];
    assert_eq!(recorder.read(&mut buf).unwrap(), 2 * 4096);
    recorder
        .seek(crate::ends::Whence::Start(10 * 4096))
        .unwrap();
    assert_eq!(recorder.read(&mut buf).unwrap(), 100);
    let map = closed_map(recorder, &slot, image.len() as u64 - 4096);
    let spans: Vec<_> = map.ranges.iter().map(|r| (r.first, r.last)).collect();
    assert_eq!(spans, vec![(0, 1), (9, 9)]);
    assert_eq!(map.image_size, image.len() as u64 - 4096);
}

#[test]
fn an_abandoned_copy_records_no_map() {
    let (input, _) = Memory::boxed(Kind::Pipe, vec![1; 10]);
    let (recorder, slot) = BmapRecorder::new(input, 4096, 0);
    Box::new(recorder).abandon();
    assert!(slot.lock().unwrap().is_none());
}

#[test]
fn a_block_device_is_mapped_by_its_zeros_not_by_its_all_data_extents() {
    let (image, _) = image_and_map();
    let (mut input, _) = Memory::new(Kind::BlockDevice, image.clone());
    // What SEEK_DATA says on a block device: all of it is data.
    input.extents = Some(vec![(0, image.len() as u64)]);
    let (recorder, slot) = BmapRecorder::new(Box::new(input), 4096, 0);
    let mut recorder: Box<dyn Stream> = Box::new(recorder);
    assert_eq!(read_all(&mut *recorder, 1 << 20).unwrap(), image);
    let map = closed_map(recorder, &slot, image.len() as u64);
    let spans: Vec<_> = map.ranges.iter().map(|r| (r.first, r.last)).collect();
    assert_eq!(spans, vec![(1, 2), (10, 10)]);
}
