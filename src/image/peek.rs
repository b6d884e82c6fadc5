//! Which compression format an input holds, found without taking its
//! bytes from the copy.
//!
//! A compressed image written as it is onto a disk (`dd if=img.xz
//! of=/dev/sdb`, without `--decompress`) is the commonest way to flash a
//! card wrongly; the copy asks first or refuses (see
//! `planner::needs::compressed_onto`), and for that it must know what
//! the input holds before the output is opened, while the copy itself
//! still reads every byte as GNU's would. So the first bytes are looked
//! at where looking takes nothing away: a file, a block device, an NBD
//! export or an object is read at the copy's first position without
//! moving (pread); a pipe is looked into with tee(2), which copies what
//! waits in it and leaves it there for the copy, so the copy keeps its
//! descriptor and its splice. A character device or a socket is not
//! looked at: reading one takes its bytes (a tape moves on), and nothing
//! replays them without costing every copy from a pipe its descriptor.
//! The format is told by the magic numbers (see [`super::format`]),
//! never by a name.

use std::time::{Duration, Instant};

use super::format::{recognise, Format, Recognised, MAGIC_LEN};
use crate::ends::Whence;
use crate::engine::stream::Stream;
use crate::sys::buffer::AlignedBuf;

/// Bytes looked at: the magic numbers, and the skippable frames pzstd
/// writes before its first frame.
const LOOK: usize = 64;
/// How long a pipe that has given fewer bytes than the magic numbers
/// take is waited on for more (a writer that starts with a short write).
const PIPE_PATIENCE: Duration = Duration::from_millis(500);

/// The compression format of the bytes `input` gives from `skip` bytes
/// past its position on (`skip` only for an end read by position: a
/// stream's skipped bytes are read over, and not looked at). None when
/// they are not compressed, or cannot be looked at without taking them
/// (see the module header), or the look fails (the copy then meets that
/// error itself, where GNU's would).
pub fn compressed_format(input: &mut dyn Stream, skip: u64) -> Option<Format> {
    let can = input.capabilities();
    if can.reads_at {
        let at = input.seek(Whence::Current(0)).ok()?.checked_add(skip)?;
        return format_at(input, at);
    }
    if !can.splices || skip != 0 {
        return None;
    }
    let fd = input.fd()?;
    let started = Instant::now();
    loop {
        let head = crate::sys::file::peek_pipe(fd, LOOK).ok()?;
        match recognise(&head) {
            Recognised::Format(format) => return Some(format),
            // Skippable frames lead: only zstd and lz4 have them; a frame
            // longer than a pipe holds is pzstd's, which is zstd.
            Recognised::NeedBytes(_) if head.len() >= LOOK => return Some(Format::Zstd),
            Recognised::Plain if head.len() >= MAGIC_LEN || head.is_empty() => return None,
            // Fewer bytes than the magic numbers take: the writer may not
            // have written the rest yet.
            _ if started.elapsed() >= PIPE_PATIENCE => return None,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The format of what a positional end holds at `at`. Read through an
/// aligned buffer from an aligned offset, so that an input opened with
/// O_DIRECT can be looked at too.
fn format_at(input: &mut dyn Stream, at: u64) -> Option<Format> {
    const ALIGN: u64 = 4096;
    let start = at - at % ALIGN;
    let lead = (at - start) as usize;
    let mut buf = AlignedBuf::new(ALIGN as usize * 2).ok()?;
    let mut filled = 0;
    let wanted = lead + LOOK;
    while filled < wanted {
        match input.read_at(&mut buf.as_mut_slice()[filled..], start + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(crate::sys::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    let head = buf.as_slice().get(lead..filled)?;
    match recognise(head) {
        Recognised::Format(format) => Some(format),
        Recognised::NeedBytes(_) => Some(Format::Zstd),
        Recognised::Plain => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::file::FileEnd;
    use crate::engine::window::Window;
    use crate::sys::file::Handle;

    #[test]
    fn a_file_is_looked_at_where_the_copy_starts_and_not_moved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut bytes = vec![0u8; 10_000];
        bytes[5000..5006].copy_from_slice(&[0xFD, b'7', b'z', b'X', b'Z', 0x00]);
        std::fs::write(&path, &bytes).unwrap();
        let fd = crate::sys::file::open_input(&path, rustix::fs::OFlags::empty()).unwrap();
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(fd))));
        assert_eq!(compressed_format(&mut end, 0), None);
        assert_eq!(compressed_format(&mut end, 5000), Some(Format::Xz));
        assert_eq!(end.seek(Whence::Current(0)).unwrap(), 0, "not moved");
        end.seek(Whence::Start(1000)).unwrap();
        assert_eq!(compressed_format(&mut end, 4000), Some(Format::Xz));
        assert_eq!(compressed_format(&mut end, 9_999), None, "past the end");
    }

    #[test]
    fn a_pipe_is_looked_into_and_keeps_its_bytes() {
        let (reader, writer) = rustix::pipe::pipe().unwrap();
        let gzip = [0x1F, 0x8B, 0x08, 0x00, 1, 2, 3, 4, 5, 6];
        rustix::io::write(&writer, &gzip).unwrap();
        drop(writer);
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(reader))));
        assert_eq!(compressed_format(&mut end, 0), Some(Format::Gzip));
        let mut back = [0u8; 16];
        assert_eq!(end.read(&mut back).unwrap(), gzip.len());
        assert_eq!(back[..gzip.len()], gzip);
        // An empty pipe at its end is no format, at once.
        let (reader, writer) = rustix::pipe::pipe().unwrap();
        drop(writer);
        let mut end = Window::over(Box::new(FileEnd::new(Handle::Owned(reader))));
        assert_eq!(compressed_format(&mut end, 0), None);
    }
}
