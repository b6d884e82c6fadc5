//! Round trips through the image ends, in memory (the same with real
//! files and the real tools as oracles is in tests/image.rs).

use std::io::Write as _;

use super::testing::{sample, Memory};
use super::*;
use crate::ends::Kind;
use crate::engine::stream::Stream;
use crate::sys::Errno;

fn compress(data: &[u8], spec: &str, piece: usize) -> Vec<u8> {
    let (output, bytes) = Memory::boxed(Kind::Pipe, Vec::new());
    let mut end: Box<dyn Stream> = Box::new(Compressed::start(
        output,
        Compression::parse(spec).unwrap(),
        2,
    ));
    for chunk in data.chunks(piece) {
        assert_eq!(end.write(chunk).unwrap(), chunk.len());
    }
    end.close().unwrap();
    let out = bytes.lock().unwrap().clone();
    out
}

fn open_kind(data: Vec<u8>, kind: Kind, mode: Mode) -> Result<Opened, OpenError> {
    let (input, _) = Memory::boxed(kind, data);
    open(input, "img", mode, 2, FrameChecksums::Verify)
}

fn decompressing(data: Vec<u8>) -> Decompressed {
    match open_kind(data, Kind::Pipe, Mode::Required).unwrap() {
        Opened::Decompressing(d) => d,
        Opened::Plain(_) => panic!("not recognised"),
    }
}

/// Read to the end in `bs` reads, which must all be full but the last.
fn read_all(end: &mut dyn Stream, bs: usize) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; bs];
    loop {
        let n = end.read(&mut buf)?;
        out.extend_from_slice(&buf[..n]);
        if n < bs {
            assert_eq!(end.read(&mut buf)?, 0, "a short read is the end");
            return Ok(out);
        }
    }
}

#[test]
fn each_algorithm_round_trips_in_frames_that_decode_in_parallel() {
    let data = sample(2 * compress::FRAME + 12345, 11);
    for spec in ["zstd", "zstd:1", "gzip:1", "xz:0"] {
        let packed = compress(&data, spec, 100_000);
        assert!(packed.len() < data.len(), "{spec} compresses");
        let mut end = decompressing(packed.clone());
        let progress = end.progress();
        assert_eq!(read_all(&mut end, 65536).unwrap(), data, "{spec}");
        assert_eq!(progress.consumed(), packed.len() as u64, "{spec}");
        Box::new(end).close().unwrap();
    }
}

#[test]
fn empty_input_compresses_to_a_stream_that_decodes_to_nothing() {
    for spec in ["zstd", "gzip", "xz"] {
        let packed = compress(&[], spec, 1);
        let mut end = decompressing(packed);
        assert_eq!(read_all(&mut end, 512).unwrap(), b"", "{spec}");
    }
}

#[test]
fn bzip2_and_lz4_decode_including_concatenated_streams_and_skippable_frames() {
    let data = sample(3 << 20, 12);
    let mut bz = Vec::new();
    for half in data.chunks(data.len() / 2 + 1) {
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        enc.write_all(half).unwrap();
        bz.extend(enc.finish().unwrap());
    }
    let mut lz = Vec::new();
    for half in data.chunks(data.len() / 2 + 1) {
        let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
        enc.write_all(half).unwrap();
        lz.extend(enc.finish().unwrap());
        lz.extend([0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
    }
    for (packed, format) in [(bz, Format::Bzip2), (lz, Format::Lz4)] {
        let mut end = decompressing(packed);
        assert_eq!(end.format(), format);
        assert_eq!(read_all(&mut end, 1 << 20).unwrap(), data, "{format}");
    }
}

#[test]
fn a_corrupt_stream_is_ebadmsg_naming_the_compressed_offset() {
    let data = sample(3 * compress::FRAME, 13);
    for spec in ["zstd", "gzip", "xz"] {
        let mut packed = compress(&data, spec, 1 << 20);
        let at = packed.len() / 2;
        for b in &mut packed[at..at + 64] {
            *b = !*b;
        }
        let mut end = decompressing(packed);
        assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG), "{spec}");
        let detail = end.take_detail().unwrap();
        assert!(
            detail.starts_with(&format!(
                "corrupt {} data at compressed offset ",
                &spec[..spec.find(':').unwrap_or(spec.len())]
            )),
            "{detail}"
        );
        // After the error, the stream reads as ended.
        assert_eq!(end.read(&mut [0u8; 10]), Ok(0));
        Box::new(end).close().unwrap();
    }
}

#[test]
fn a_truncated_stream_is_an_error_not_a_short_file() {
    let data = sample(3 << 20, 14);
    for spec in ["zstd", "gzip", "xz"] {
        let packed = compress(&data, spec, 1 << 20);
        let mut end = decompressing(packed[..packed.len() - 10].to_vec());
        assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG), "{spec}");
    }
}

#[test]
fn an_abandoned_compression_does_not_look_complete() {
    let data = sample(compress::FRAME + 100, 15);
    for spec in ["zstd", "gzip", "xz"] {
        let (output, bytes) = Memory::boxed(Kind::Pipe, Vec::new());
        let mut end: Box<dyn Stream> = Box::new(Compressed::start(
            output,
            Compression::parse(spec).unwrap(),
            2,
        ));
        end.write(&data).unwrap();
        end.abandon();
        let packed = bytes.lock().unwrap().clone();
        if packed.is_empty() {
            // liblzma had written nothing yet: nothing looks complete.
            assert_eq!(spec, "xz");
            continue;
        }
        let mut end = decompressing(packed);
        assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG), "{spec}");
    }
}

#[test]
fn an_output_that_fills_up_fails_a_later_write_or_the_close() {
    let data = sample(4 * compress::FRAME, 16);
    for spec in ["zstd:1", "xz:0"] {
        let (mut output, _) = Memory::new(Kind::Pipe, Vec::new());
        output.fail_at = Some((200_000, Errno::NOSPC));
        let mut end: Box<dyn Stream> = Box::new(Compressed::start(
            Box::new(output),
            Compression::parse(spec).unwrap(),
            2,
        ));
        let mut failed = None;
        for chunk in data.chunks(1 << 20) {
            if let Err(errno) = end.write(chunk) {
                failed = Some(errno);
                break;
            }
        }
        let failed = failed.or_else(|| end.settle().err());
        assert_eq!(failed, Some(Errno::NOSPC), "{spec}");
        let detail = end.take_detail().unwrap();
        assert!(
            detail.contains("failed at compressed offset 200000"),
            "{detail}"
        );
        assert!(end.written_until().unwrap() < 4 * compress::FRAME as u64);
        end.abandon();
    }
}

#[test]
fn plain_input_is_refused_or_passed_through() {
    let data = b"just some text, not compressed at all".to_vec();
    let err = open_kind(data.clone(), Kind::Pipe, Mode::Required).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--decompress: img is not compressed (no zstd, xz, gzip, bzip2 or lz4 magic number); --decompress=auto copies such input as it is"
    );
    for kind in [Kind::Pipe, Kind::RegularFile] {
        let Opened::Plain(mut end) = open_kind(data.clone(), kind, Mode::Auto).unwrap() else {
            panic!("passed through");
        };
        let mut back = vec![0u8; 100];
        let mut got = Vec::new();
        loop {
            let n = end.read(&mut back).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&back[..n]);
        }
        assert_eq!(got, data, "{kind:?}");
    }
}

#[test]
fn a_skip_reads_over_the_stream_as_gnu_does_on_a_pipe() {
    let mut end = decompressing(compress(&sample(1000, 1), "zstd", 1000));
    assert_eq!(
        end.seek(crate::ends::Whence::Current(10)),
        Err(Errno::SPIPE)
    );
    assert_eq!(end.size(), Ok(None));
    assert_eq!(end.kind(), Kind::Stream);
}

#[test]
fn concatenated_xz_streams_and_their_padding_decode_as_xz_does() {
    let (a, b) = (sample(300_000, 21), sample(200_000, 22));
    let mut packed = compress(&a, "xz:0", 65536);
    packed.extend([0u8; 8]);
    packed.extend(compress(&b, "xz:0", 65536));
    let mut end = decompressing(packed);
    assert_eq!(read_all(&mut end, 1 << 20).unwrap(), [a, b].concat());
    // Padding that is not a multiple of four is corruption.
    let mut bad = compress(&sample(1000, 23), "xz:0", 1000);
    bad.extend([0u8; 3]);
    let mut end = decompressing(bad);
    assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG));
    assert!(end.take_detail().unwrap().contains("padding"));
}

#[test]
fn runs_of_zeros_go_in_as_one_frame_compressed_once_and_decode_in_place() {
    // Bytes, then zeros from mid-frame across whole frames, then bytes:
    // the zeros are the stream's bytes wherever frames start and end.
    let head = sample(compress::FRAME / 3, 5);
    let zeros = 2 * compress::FRAME as u64 + 777;
    let tail = sample(4321, 6);
    for spec in ["zstd:1", "gzip:1", "xz:0"] {
        let (output, bytes) = Memory::boxed(Kind::Pipe, Vec::new());
        let mut end: Box<dyn Stream> = Box::new(Compressed::start(
            output,
            Compression::parse(spec).unwrap(),
            2,
        ));
        end.write(&head).unwrap();
        end.write_zeroes(zeros).unwrap();
        end.write(&tail).unwrap();
        end.close().unwrap();
        let packed = bytes.lock().unwrap().clone();
        let mut expected = head.clone();
        expected.resize(head.len() + zeros as usize, 0);
        expected.extend_from_slice(&tail);
        let mut decoded = decompressing(packed);
        assert!(read_all(&mut decoded, 65536).unwrap() == expected, "{spec}");
    }
}
