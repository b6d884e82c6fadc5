//! casync's formats, as stores and servers hand them to ddx: blob indexes
//! (`.caibx`) and chunk files (`.cacnk`).

use super::assert_one_line;
use crate::casync::{chunk, ChunkSizes, Cutter, Digest, Index};

/// `data` is an index file.
pub fn casync_index(data: &[u8]) {
    let index = match Index::parse(data) {
        Ok(index) => index,
        Err(e) => return assert_one_line("an index error", &e.to_string()),
    };
    let sizes = index.sizes;
    assert!(sizes.min >= 1 && sizes.min <= sizes.avg && sizes.avg <= sizes.max);
    let mut previous = 0;
    for (i, chunk) in index.chunks.iter().enumerate() {
        assert!(chunk.end > previous, "chunk {i} does not rise");
        assert!(chunk.end - previous <= sizes.max, "chunk {i} is too large");
        assert_eq!(index.span(i), (previous, chunk.end));
        assert_eq!(index.chunk_at(previous), Some(i));
        previous = chunk.end;
    }
    assert_eq!(index.blob_size(), previous);
    assert_eq!(index.chunk_at(previous), None);
    // The reader takes exactly what the writer writes: the same bytes.
    assert_eq!(
        index.to_bytes(),
        data,
        "the index does not read back as itself"
    );
}

/// `data` is a chunk's length as the index gives it (its first two
/// bytes, little-endian, in units of 16 bytes: up to 1 MiB) and the
/// chunk's file.
pub fn casync_chunk(data: &[u8]) {
    let Some((head, file)) = data.split_first_chunk::<2>() else {
        return;
    };
    let expected = usize::from(u16::from_le_bytes(*head)) * 16;
    match chunk::decode(file, expected) {
        Ok(bytes) => {
            assert_eq!(bytes.len(), expected);
            // What ddx stores decodes as the same chunk, with the same id.
            let stored = chunk::encode(&bytes, 1);
            assert_eq!(chunk::decode(&stored, expected).as_deref(), Ok(&bytes[..]));
            let id = Digest::Sha512_256.id(&bytes);
            assert_eq!(Digest::Sha512_256.check(&id, &bytes), Ok(()));
        }
        Err(e) => assert_one_line("a chunk error", &e.to_string()),
    }
    // The chunker on the same bytes, with small sizes: chunks that make
    // up the whole, each within the sizes but the last.
    let sizes = ChunkSizes {
        min: 64,
        avg: 256,
        max: 1024,
    };
    let cutter = Cutter::new(sizes);
    let lengths: Vec<usize> = cutter.lengths(file).collect();
    assert_eq!(lengths.iter().sum::<usize>(), file.len());
    if let Some((_, whole)) = lengths.split_last() {
        for &len in whole {
            assert!((sizes.min..=sizes.max).contains(&(len as u64)), "{len}");
        }
    }
}
