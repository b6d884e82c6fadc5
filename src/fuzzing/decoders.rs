//! `--decompress`: the recognition of a format by its magic number, and
//! each decoder ddx drives, on threads of its own, through the end the
//! copy reads. Each target reads the whole stream from that end, checks
//! that a failure is EBADMSG with a one-line detail after which the end
//! reads as ended, and compares what it gave with what the format's
//! reference decoder gives for the same bytes.

use std::io::Read;

use super::assert_one_line;
use super::input::{drain, Bytes, Drained};
use crate::engine::stream::Stream;
use crate::image::decompress::{self, FrameChecksums, Mode, Opened};
use crate::image::{Decompressed, Format};
use crate::sys::Errno;

/// Decoded bytes read at most: a small input may stand for gigabytes.
const LIMIT: usize = 64 << 20;
/// The reads the copy would make: an odd size, so that reads end inside
/// every piece the decoder hands over.
const STEP: usize = 65521;

/// The input as a file (positional, sized) or as a pipe (short reads),
/// by the length of the data: one decoding per run keeps the runs
/// quick, and the fuzzer's changes of length reach both.
fn input(data: &[u8]) -> Box<dyn Stream> {
    if data.len() % 2 == 0 {
        Bytes::file(data.to_vec())
    } else {
        Bytes::pipe(data.to_vec())
    }
}

/// `data` is an input read with `--decompress=auto`: its format is
/// recognised, or it is copied as it is.
pub fn decompress(data: &[u8]) {
    let input = input(data);
    let opened = decompress::open(input, "input", Mode::Auto, 2, FrameChecksums::Verify);
    match opened {
        Ok(Opened::Decompressing(decoder)) => {
            let format = decoder.format();
            let got = read_all(decoder);
            if let Some(expected) = reference(format, data, FrameChecksums::Verify) {
                compare(format, &got, &expected);
            }
        }
        Ok(Opened::Plain(mut end)) => {
            // Not compressed: the input exactly as it was, its
            // first bytes given back after the look at them.
            let got = drain(end.as_mut(), STEP, usize::MAX);
            assert!(got.error.is_none());
            assert!(got.data == data, "a plain input was not given back whole");
            end.close().expect("closing the input");
        }
        Err(e) => panic!("an input in memory failed to open: {e}"),
    }
}

/// `data` is a zstd stream: ddx's dispatcher cuts it into frames for its
/// workers, or decodes a frame itself, one-shot, as a stream or block by
/// block.
pub fn zstd(data: &[u8]) {
    // Checksums verified on two threads, or not on one, by the length.
    if data.len() % 4 < 2 {
        run(Format::Zstd, data, 2, FrameChecksums::Verify);
    } else {
        run(Format::Zstd, data, 1, FrameChecksums::Redundant);
    }
}

/// `data` is an xz stream, or several.
pub fn xz(data: &[u8]) {
    run(Format::Xz, data, 2, FrameChecksums::Verify);
}

/// `data` is a gzip stream: members, one after another.
pub fn gzip(data: &[u8]) {
    run(Format::Gzip, data, 1, FrameChecksums::Verify);
}

/// `data` is a bzip2 stream, or several.
pub fn bzip2(data: &[u8]) {
    run(Format::Bzip2, data, 1, FrameChecksums::Verify);
}

/// `data` is an lz4 stream: frames, legacy frames, skippable frames.
pub fn lz4(data: &[u8]) {
    run(Format::Lz4, data, 1, FrameChecksums::Verify);
}

/// Decode `data` as `format` (as if its magic had said so) and compare
/// with the reference decoder.
fn run(format: Format, data: &[u8], threads: usize, checksums: FrameChecksums) {
    // Without a magic number, no input reaches a decoder; zstd's own
    // reader calls an empty one an incomplete frame, ddx no bytes.
    let expected = reference(format, data, checksums).filter(|_| !data.is_empty());
    let decoder = Decompressed::start(input(data), format, Vec::new(), threads, checksums);
    let got = read_all(decoder);
    if let Some(expected) = &expected {
        compare(format, &got, expected);
    }
}

/// Read the decoded stream to its end (or [`LIMIT`]), check how it
/// failed if it did, and close it.
fn read_all(mut decoder: Decompressed) -> Drained {
    let got = drain(&mut decoder, STEP, LIMIT);
    if let Some((errno, detail)) = &got.error {
        let detail = detail.as_deref().expect("a failure says why");
        assert_one_line("a decoding failure", detail);
        assert_eq!(*errno, Errno::BADMSG, "{detail}");
        // After an error the stream reads as ended.
        assert_eq!(
            decoder.read(&mut [0u8; 16]),
            Ok(0),
            "reading on after {detail}"
        );
    }
    let decoder: Box<dyn Stream> = Box::new(decoder);
    if got.cut {
        decoder.abandon();
    } else {
        decoder.close().expect("closing the decoder");
    }
    got
}

/// What the reference decoders make of some bytes.
struct Expected {
    /// What ddx must give when it decodes them: the strictest reference's
    /// result (None where it would pass [`LIMIT`]).
    bytes: Option<Result<Vec<u8>, String>>,
    /// Some reference refuses them: ddx may refuse them too.
    refusable: bool,
}

impl Expected {
    fn of(result: Option<Result<Vec<u8>, String>>) -> Expected {
        let refusable = matches!(result, Some(Err(_)));
        Expected {
            bytes: result,
            refusable,
        }
    }
}

/// What ddx gave agrees with the reference: the same bytes, or a
/// failure where a reference fails too (ddx's bytes before its failure
/// are not compared: a part decoded ahead may be withheld).
fn compare(format: Format, got: &Drained, expected: &Expected) {
    if got.cut {
        if let Some(Ok(bytes)) = &expected.bytes {
            let n = bytes.len().min(got.data.len());
            assert!(
                bytes[..n] == got.data[..n],
                "{format}: differs within the limit"
            );
        }
        return;
    }
    match (&got.error, &expected.bytes) {
        (None, Some(Ok(bytes))) => assert!(
            got.data == *bytes,
            "{format}: {} bytes decoded, the reference gives {}",
            got.data.len(),
            bytes.len()
        ),
        (None, Some(Err(why))) => panic!(
            "{format}: ddx decodes {} bytes where the reference fails ({why})",
            got.data.len()
        ),
        (Some((_, detail)), _) if !expected.refusable && expected.bytes.is_some() => {
            panic!("{format}: ddx fails ({detail:?}) where the references decode")
        }
        _ => {}
    }
}

/// The format's reference decoder, reading everything (concatenated
/// frames, members and streams included), or None where none decodes
/// exactly ddx's way (lz4: ddx goes on past a frame's end and skips
/// skippable frames itself). For zstd, the one-shot decoder frame by
/// frame is the reference, the strictest of zstd's (it checks each
/// frame's size and block structure), and the streaming decoder may
/// refuse too (it bounds the window at 128 MiB, as ddx's own streaming
/// path does).
fn reference(format: Format, data: &[u8], checksums: FrameChecksums) -> Option<Expected> {
    let reader: Box<dyn Read> = match format {
        Format::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(data).ok()?;
            if checksums == FrameChecksums::Redundant {
                decoder
                    .set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true))
                    .ok()?;
            }
            let streaming = read_limited(Box::new(decoder));
            let mut expected = Expected::of(zstd_one_shot(data, checksums, false));
            expected.refusable |= streaming.is_err();
            return Some(expected);
        }
        Format::Xz => {
            let stream = liblzma::stream::Stream::new_stream_decoder(
                u64::MAX,
                liblzma::stream::CONCATENATED,
            )
            .ok()?;
            Box::new(liblzma::read::XzDecoder::new_stream(data, stream))
        }
        Format::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Format::Bzip2 => Box::new(::bzip2::read::MultiBzDecoder::new(data)),
        Format::Lz4 => return None,
    };
    Some(Expected::of(Some(read_limited(reader))))
}

/// Everything `reader` gives, or its first [`LIMIT`] bytes.
fn read_limited(reader: Box<dyn Read + '_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    reader
        .take(LIMIT as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    out.truncate(LIMIT);
    Ok(out)
}

/// zstd's one-shot decoder over each frame of `data` (skippable frames
/// passed over; only the first frame if `first_only`); None where the
/// frames could decode to more than [`LIMIT`].
fn zstd_one_shot(
    data: &[u8],
    checksums: FrameChecksums,
    first_only: bool,
) -> Option<Result<Vec<u8>, String>> {
    use zstd::zstd_safe::{self, DParameter};
    let name = |code| zstd_safe::get_error_name(code).to_owned();
    let mut context = zstd_safe::DCtx::create();
    if checksums == FrameChecksums::Redundant {
        let _ = context.set_parameter(DParameter::ForceIgnoreChecksum(true));
    }
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let Some(magic) = rest.get(..4) else {
            return Some(Err("the stream ends inside a magic number".into()));
        };
        let magic = u32::from_le_bytes(magic.try_into().expect("4 bytes"));
        if crate::image::format::is_skippable_magic(magic) {
            let Some(len) = rest.get(4..8) else {
                return Some(Err("the stream ends inside a skippable frame".into()));
            };
            let len = 8 + u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            let Some(after) = rest.get(len..) else {
                return Some(Err("the stream ends inside a skippable frame".into()));
            };
            rest = after;
            continue;
        }
        let size = match zstd_safe::find_frame_compressed_size(rest) {
            Ok(size) if size <= rest.len() => size,
            Ok(_) => return Some(Err("the frame is truncated".into())),
            Err(code) => return Some(Err(name(code))),
        };
        let frame = &rest[..size];
        let bound = match zstd_safe::decompress_bound(frame) {
            Ok(bound) => bound,
            Err(code) => return Some(Err(name(code))),
        };
        if out.len() as u64 + bound > LIMIT as u64 {
            return None;
        }
        let mut piece = Vec::with_capacity(bound as usize);
        if let Err(code) = context.decompress(&mut piece, frame) {
            return Some(Err(name(code)));
        }
        out.extend_from_slice(&piece);
        rest = &rest[size..];
        if first_only {
            break;
        }
    }
    Some(Ok(out))
}

/// `data` is one zstd frame (after a byte: bit 0 set, checksums not
/// verified), decoded block by block into pieces a window apart (zstd's
/// buffer-less API over FFI), as ddx decodes a frame too large for one
/// buffer; the bytes must be the streaming decoder's.
pub fn zstd_blocks(data: &[u8]) {
    let Some((&flags, frame)) = data.split_first() else {
        return;
    };
    let verify = flags & 1 == 0;
    let Some(got) = decompress::decode_frame_by_blocks(frame, verify, LIMIT) else {
        // Not a frame whose window makes pieces: the stream decoder's.
        return;
    };
    let checksums = if verify {
        FrameChecksums::Verify
    } else {
        FrameChecksums::Redundant
    };
    let mut expected = Expected::of(zstd_one_shot(frame, checksums, true));
    if !expected.refusable {
        // The block path bounds matches by the frame's window, which
        // the one-shot decoder does not; the streaming decoder does.
        let mut context = zstd::zstd_safe::DCtx::create();
        let _ = context.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(31));
        if !verify {
            let _ = context.set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true));
        }
        expected.refusable = stream_one_frame(&mut context, frame).is_err();
    }
    let got = match got {
        Ok(data) => Drained {
            cut: data.len() >= LIMIT,
            data,
            error: None,
        },
        Err(why) => Drained {
            data: Vec::new(),
            error: Some((Errno::BADMSG, Some(why))),
            cut: false,
        },
    };
    compare(Format::Zstd, &got, &expected);
}

/// The first frame of `frame`, with the streaming API, up to [`LIMIT`]
/// bytes; Err if it is corrupt or ends early.
fn stream_one_frame(
    context: &mut zstd::zstd_safe::DCtx<'_>,
    frame: &[u8],
) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::{InBuffer, OutBuffer};
    let mut at = 0;
    let mut out: Vec<u8> = Vec::new();
    loop {
        // The header a byte at a time: given a whole frame at once, zstd
        // decodes it one-shot instead, with the one-shot decoder's rules.
        let step = if at < 32 { 1 } else { 1 << 16 };
        let mut input = InBuffer::around(&frame[at..frame.len().min(at + step)]);
        let mut piece = Vec::with_capacity(1 << 17);
        let hint = {
            let mut output = OutBuffer::around(&mut piece);
            context
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())?
        };
        at += input.pos();
        let stalled = piece.is_empty() && at == frame.len();
        out.extend_from_slice(&piece);
        if hint == 0 || out.len() >= LIMIT {
            return Ok(out);
        }
        if stalled {
            return Err("the frame is truncated".into());
        }
    }
}
