//! `--decompress`: the recognition of a format by its magic number, and
//! each decoder ddx drives, on threads of its own, through the end the
//! copy reads. Each target reads the whole stream from that end, checks
//! that a failure is EBADMSG with a one-line detail after which the end
//! reads as ended, and compares what it gave with what the format's
//! reference decoder gives for the same bytes.

use std::io::Read;

use super::assert_one_line;
use super::input::{drain, Bytes, Drained};
use crate::ends::End;
use crate::image::decompress::{self, FrameChecksums, Mode, Opened};
use crate::image::{Decompressed, Format};
use crate::sys::Errno;

/// Decoded bytes read at most: a small input may stand for gigabytes.
const LIMIT: usize = 64 << 20;
/// The reads the copy would make: an odd size, so that reads end inside
/// every piece the decoder hands over.
const STEP: usize = 65521;

/// `data` is an input read with `--decompress=auto`: its format is
/// recognised, or it is copied as it is.
pub fn decompress(data: &[u8]) {
    for file in [true, false] {
        let input = if file {
            Bytes::file(data.to_vec())
        } else {
            Bytes::pipe(data.to_vec())
        };
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
}

/// `data` is a zstd stream: ddx's dispatcher cuts it into frames for its
/// workers, or decodes a frame itself, one-shot, as a stream or block by
/// block.
pub fn zstd(data: &[u8]) {
    run(Format::Zstd, data, 2, FrameChecksums::Verify);
    run(Format::Zstd, data, 1, FrameChecksums::Redundant);
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

/// Decode `data` as `format` (as if its magic had said so), from a file
/// and from a pipe, and compare with the reference decoder.
fn run(format: Format, data: &[u8], threads: usize, checksums: FrameChecksums) {
    // Without a magic number, no input reaches a decoder; zstd's own
    // reader calls an empty one an incomplete frame, ddx no bytes.
    let expected = reference(format, data, checksums).filter(|_| !data.is_empty());
    for input in [Bytes::file(data.to_vec()), Bytes::pipe(data.to_vec())] {
        let decoder = Decompressed::start(input, format, Vec::new(), threads, checksums);
        let got = read_all(decoder);
        if let Some(expected) = &expected {
            compare(format, &got, expected);
        }
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
    let decoder: Box<dyn End> = Box::new(decoder);
    if got.cut {
        decoder.abandon();
    } else {
        decoder.close().expect("closing the decoder");
    }
    got
}

/// What ddx gave agrees with the reference decoder: the same bytes, or
/// both fail (ddx's bytes before its failure are a prefix of the
/// reference's).
fn compare(format: Format, got: &Drained, expected: &Result<Vec<u8>, String>) {
    if got.cut {
        if let Ok(expected) = expected {
            assert!(
                expected.starts_with(&got.data),
                "{format}: differs within the limit"
            );
        }
        return;
    }
    match (&got.error, expected) {
        (None, Ok(expected)) => assert!(
            got.data == *expected,
            "{format}: {} bytes decoded, the reference gives {}",
            got.data.len(),
            expected.len()
        ),
        // A frame decoded as a stream keeps zstd's own bound on its
        // window (128 MiB, as `zstd -d` has it); the reference allows
        // any.
        (Some((_, Some(detail))), Ok(_))
            if format == Format::Zstd && detail.contains("Frame requires too much memory") => {}
        (Some((_, detail)), Ok(expected)) => {
            panic!(
                "{format}: ddx fails ({detail:?}) where the reference decodes {} bytes",
                expected.len()
            )
        }
        (None, Err(why)) => {
            panic!(
                "{format}: ddx decodes {} bytes where the reference fails ({why})",
                got.data.len()
            )
        }
        (Some(_), Err(_)) => {}
    }
}

/// The format's reference decoder, reading everything (concatenated
/// frames, members and streams included), or None where none decodes
/// exactly ddx's way (lz4: ddx goes on past a frame's end and skips
/// skippable frames itself). Err when the data is refused, or when it
/// decodes to more than [`LIMIT`] (Ok then holds the first bytes).
fn reference(
    format: Format,
    data: &[u8],
    checksums: FrameChecksums,
) -> Option<Result<Vec<u8>, String>> {
    let reader: Box<dyn Read> = match format {
        Format::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(data).ok()?;
            // ddx decodes any window the machine can hold.
            decoder.window_log_max(31).ok()?;
            if checksums == FrameChecksums::Redundant {
                decoder
                    .set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true))
                    .ok()?;
            }
            Box::new(decoder)
        }
        Format::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(data)),
        Format::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Format::Bzip2 => Box::new(::bzip2::read::MultiBzDecoder::new(data)),
        Format::Lz4 => return None,
    };
    let mut out = Vec::new();
    let read = reader.take(LIMIT as u64 + 1).read_to_end(&mut out);
    Some(match read {
        Ok(_) if out.len() > LIMIT => {
            out.truncate(LIMIT);
            Ok(out)
        }
        Ok(_) => Ok(out),
        Err(e) => Err(e.to_string()),
    })
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
    let mut context = zstd::zstd_safe::DCtx::create();
    let _ = context.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(31));
    if !verify {
        let _ = context.set_parameter(zstd::zstd_safe::DParameter::ForceIgnoreChecksum(true));
    }
    let expected = stream_one_frame(&mut context, frame);
    match (got, expected) {
        (Ok(got), Ok(expected)) => {
            let n = got.len().min(expected.len());
            assert!(got[..n] == expected[..n], "the decoded bytes differ");
            assert!(
                got.len() == expected.len() || n == LIMIT,
                "{} bytes decoded, the reference gives {}",
                got.len(),
                expected.len()
            );
        }
        (Err(why), Ok(expected)) if expected.len() < LIMIT => {
            panic!("the block decoder fails ({why}) where the reference decodes")
        }
        (Ok(got), Err(why)) if got.len() < LIMIT => {
            panic!("the block decoder decodes where the reference fails ({why})")
        }
        _ => {}
    }
}

/// The first frame of `frame`, with the streaming API, up to [`LIMIT`]
/// bytes; Err if it is corrupt or ends early.
fn stream_one_frame(
    context: &mut zstd::zstd_safe::DCtx<'_>,
    frame: &[u8],
) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::{InBuffer, OutBuffer};
    let mut input = InBuffer::around(frame);
    let mut out: Vec<u8> = Vec::new();
    loop {
        let mut piece = Vec::with_capacity(1 << 17);
        let hint = {
            let mut output = OutBuffer::around(&mut piece);
            context
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())?
        };
        let stalled = piece.is_empty() && input.pos() == frame.len();
        out.extend_from_slice(&piece);
        if hint == 0 || out.len() >= LIMIT {
            return Ok(out);
        }
        if stalled {
            return Err("the frame is truncated".into());
        }
    }
}
