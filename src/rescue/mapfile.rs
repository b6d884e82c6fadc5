//! GNU ddrescue's mapfile: which byte ranges of the input are finished,
//! bad or not tried yet. ddx keeps one in memory during a rescue or a
//! resumable copy and saves it in ddrescue's format, so the map of a ddx
//! rescue can be continued by ddrescue (and the other way round), read by
//! ddrescuelog, or fed to nbdkit's ddrescue filter.
//!
//! Format (ddrescue manual, "Mapfile structure"): `#` comment lines; one
//! status line `current_pos current_status current_pass`; then one line
//! per block, `pos size status`, positions and sizes in hexadecimal with a
//! 0x prefix, blocks sorted and contiguous. Block status characters:
//! `?` non-tried, `*` non-trimmed, `/` non-scraped, `-` bad sector,
//! `+` finished.

use std::io::Write;
use std::path::Path;

/// The status of one block of the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStatus {
    NonTried,
    NonTrimmed,
    NonScraped,
    BadSector,
    Finished,
}

impl BlockStatus {
    const ALL: [BlockStatus; 5] = [
        BlockStatus::NonTried,
        BlockStatus::NonTrimmed,
        BlockStatus::NonScraped,
        BlockStatus::BadSector,
        BlockStatus::Finished,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// Read and failed, not yet recovered: non-trimmed, non-scraped or
    /// bad sectors (ddrescue's "tried").
    pub fn failed(self) -> bool {
        matches!(
            self,
            BlockStatus::NonTrimmed | BlockStatus::NonScraped | BlockStatus::BadSector
        )
    }

    pub fn symbol(self) -> char {
        match self {
            BlockStatus::NonTried => '?',
            BlockStatus::NonTrimmed => '*',
            BlockStatus::NonScraped => '/',
            BlockStatus::BadSector => '-',
            BlockStatus::Finished => '+',
        }
    }

    fn from_symbol(c: char) -> Option<Self> {
        Some(match c {
            '?' => BlockStatus::NonTried,
            '*' => BlockStatus::NonTrimmed,
            '/' => BlockStatus::NonScraped,
            '-' => BlockStatus::BadSector,
            '+' => BlockStatus::Finished,
            _ => return None,
        })
    }
}

/// One contiguous block of equal status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub pos: u64,
    pub size: u64,
    pub status: BlockStatus,
}

impl Block {
    pub fn end(&self) -> u64 {
        self.pos + self.size
    }
}

/// A map of the input positions `[start, end)`: sorted, contiguous blocks
/// with no two neighbours of the same status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    blocks: Vec<Block>,
    /// Bytes of each status, indexed by [`BlockStatus::index`]: kept as
    /// blocks change, so the progress line and the phases ask in O(1).
    totals: [u64; 5],
    /// The header's current position and pass (informative only).
    pub current_pos: u64,
    /// The header's status: '?' copying, '/' scraping, '+' finished.
    pub current_status: char,
    pub current_pass: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: &'static str },
}

impl Map {
    /// Nothing tried yet over `[start, end)`.
    pub fn new(start: u64, end: u64) -> Self {
        let mut blocks = Vec::new();
        let mut totals = [0; 5];
        if end > start {
            blocks.push(Block {
                pos: start,
                size: end - start,
                status: BlockStatus::NonTried,
            });
            totals[BlockStatus::NonTried.index()] = end - start;
        }
        Map {
            blocks,
            totals,
            current_pos: start,
            current_status: '?',
            current_pass: 1,
        }
    }

    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Parse a mapfile, then fit it to `[start, end)`: what the file does
    /// not cover is non-tried, what lies outside is dropped.
    pub fn parse(text: &str, start: u64, end: u64) -> Result<Self, MapError> {
        let mut map = Map::new(start, end);
        let mut header = None;
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line_number = index + 1;
            let syntax = |what| MapError::Syntax {
                line: line_number,
                what,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            if header.is_none() {
                if fields.len() < 2 {
                    return Err(syntax("expected 'current_pos current_status [pass]'"));
                }
                let pos = parse_number(fields[0]).ok_or(syntax("bad current_pos"))?;
                let status = fields[1]
                    .chars()
                    .next()
                    .ok_or(syntax("bad current_status"))?;
                let pass = match fields.get(2) {
                    Some(p) => p.parse().map_err(|_| syntax("bad current_pass"))?,
                    None => 1,
                };
                header = Some((pos, status, pass));
                continue;
            }
            if fields.len() != 3 {
                return Err(syntax("expected 'pos size status'"));
            }
            let pos = parse_number(fields[0]).ok_or(syntax("bad pos"))?;
            let size = parse_number(fields[1]).ok_or(syntax("bad size"))?;
            let mut chars = fields[2].chars();
            let status = chars
                .next()
                .and_then(BlockStatus::from_symbol)
                .filter(|_| chars.next().is_none())
                .ok_or(syntax("bad status (one of ?*/-+)"))?;
            let block_end = pos
                .checked_add(size)
                .ok_or(syntax("pos + size overflows"))?;
            let (from, to) = (pos.max(start), block_end.min(end));
            if from < to {
                map.mark(from, to - from, status);
            }
        }
        let (pos, status, pass) = header.ok_or(MapError::Syntax {
            line: 0,
            what: "no status line",
        })?;
        map.current_pos = pos;
        map.current_status = status;
        map.current_pass = pass;
        Ok(map)
    }

    /// Set `[pos, pos+size)` to `status`, merging equal neighbours. The
    /// range must lie within the map. Only the blocks the range touches
    /// are rewritten (found by binary search): a rescue marks every
    /// sector it reads, in maps of many thousand blocks.
    pub fn mark(&mut self, pos: u64, size: u64, status: BlockStatus) {
        if size == 0 {
            return;
        }
        let end = pos + size;
        // blocks[first..last] overlap the range.
        let first = self.blocks.partition_point(|b| b.end() <= pos);
        let last = self.blocks.partition_point(|b| b.pos < end);
        let mut replacement: Vec<Block> = Vec::with_capacity(5);
        if first < last {
            let head = self.blocks[first];
            if head.pos < pos {
                replacement.push(Block {
                    pos: head.pos,
                    size: pos - head.pos,
                    status: head.status,
                });
            }
        }
        replacement.push(Block { pos, size, status });
        if first < last {
            let tail = self.blocks[last - 1];
            if tail.end() > end {
                replacement.push(Block {
                    pos: end,
                    size: tail.end() - end,
                    status: tail.status,
                });
            }
        }
        // The equal neighbours on either side join in.
        let mut from = first;
        let mut to = last;
        if from > 0 {
            replacement.insert(0, self.blocks[from - 1]);
            from -= 1;
        }
        if to < self.blocks.len() {
            replacement.push(self.blocks[to]);
            to += 1;
        }
        for block in &self.blocks[from..to] {
            self.totals[block.status.index()] -= block.size;
        }
        let mut merged: Vec<Block> = Vec::with_capacity(replacement.len());
        for block in replacement {
            self.totals[block.status.index()] += block.size;
            match merged.last_mut() {
                Some(last) if last.status == block.status && last.end() == block.pos => {
                    last.size += block.size;
                }
                _ => merged.push(block),
            }
        }
        self.blocks.splice(from..to, merged);
    }

    /// The status at input position `pos`, if the map covers it.
    pub fn status_at(&self, pos: u64) -> Option<BlockStatus> {
        let at = self.blocks.partition_point(|b| b.end() <= pos);
        self.blocks
            .get(at)
            .filter(|b| b.pos <= pos)
            .map(|b| b.status)
    }

    /// Bytes of `[pos, pos+size)` whose status is `status`.
    pub fn overlap(&self, pos: u64, size: u64, status: BlockStatus) -> u64 {
        let end = pos + size;
        let first = self.blocks.partition_point(|b| b.end() <= pos);
        self.blocks[first..]
            .iter()
            .take_while(|b| b.pos < end)
            .filter(|b| b.status == status)
            .map(|b| b.end().min(end) - b.pos.max(pos))
            .sum()
    }

    /// The blocks of `status`, in order.
    pub fn with_status(&self, status: BlockStatus) -> Vec<Block> {
        self.blocks
            .iter()
            .filter(|b| b.status == status)
            .copied()
            .collect()
    }

    /// Bytes read and failed, not recovered yet (see [`BlockStatus::failed`]).
    pub fn failed_bytes(&self) -> u64 {
        BlockStatus::ALL
            .iter()
            .filter(|s| s.failed())
            .map(|s| self.totals[s.index()])
            .sum()
    }

    /// The blocks still to be read (not finished and not bad), in order.
    pub fn pending(&self) -> Vec<Block> {
        self.blocks
            .iter()
            .filter(|b| !matches!(b.status, BlockStatus::Finished | BlockStatus::BadSector))
            .copied()
            .collect()
    }

    /// The bad blocks, in order.
    pub fn bad(&self) -> Vec<Block> {
        self.with_status(BlockStatus::BadSector)
    }

    /// Bytes with `status`.
    pub fn bytes_with(&self, status: BlockStatus) -> u64 {
        self.totals[status.index()]
    }

    /// The mapfile's text, as ddrescue writes it.
    pub fn render(&self, command_line: &str) -> String {
        self.render_noted(command_line, "")
    }

    /// [`Map::render`] with `notes` (comment lines, each ending in a
    /// newline: an upload's record) after the header's comments.
    pub fn render_noted(&self, command_line: &str, notes: &str) -> String {
        let mut text = String::new();
        text.push_str(&format!(
            "# Mapfile. Created by ddx version {}\n",
            env!("CARGO_PKG_VERSION")
        ));
        text.push_str(&format!("# Command line: {command_line}\n"));
        text.push_str(notes);
        if self.current_status == '+' {
            text.push_str("# Finished\n");
        }
        text.push_str("# current_pos  current_status  current_pass\n");
        text.push_str(&format!(
            "0x{:08X}     {}               {}\n",
            self.current_pos, self.current_status, self.current_pass
        ));
        text.push_str("#      pos        size  status\n");
        for block in &self.blocks {
            text.push_str(&format!(
                "0x{:08X}  0x{:08X}  {}\n",
                block.pos,
                block.size,
                block.status.symbol()
            ));
        }
        text
    }

    /// Save to `path` so that a crash at any moment leaves either the old
    /// map or the new one: write a temporary file beside it, sync it, and
    /// rename it over the old one. When the filesystem is full (a copy
    /// stopped by ENOSPC next to its map), the map is overwritten in place
    /// instead, within the room every saved map keeps allocated past its
    /// end for that ([`SAVED_ROOM`]): blocks reserved with fallocate's
    /// KEEP_SIZE, so that the file holds the map's lines and nothing else
    /// (ddrescue and ddrescuelog read it as they read their own).
    pub fn save(&self, path: &Path, command_line: &str) -> std::io::Result<()> {
        self.save_noted(path, command_line, "")
    }

    /// [`Map::save`] with `notes`, as [`Map::render_noted`] places them.
    pub fn save_noted(&self, path: &Path, command_line: &str, notes: &str) -> std::io::Result<()> {
        let text = self.render_noted(command_line, notes);
        let room = SAVED_ROOM.max(text.len() + SAVED_ROOM / 2);
        match save_atomically(path, &text, room) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                save_in_place(path, &text, room).map_err(|_| e)
            }
            other => other,
        }
    }
}

/// Bytes a saved map keeps allocated at least: room to be rewritten in
/// place.
const SAVED_ROOM: usize = 4096;

/// Keep `room` bytes allocated to `file` from its start, its size
/// unchanged. Where the filesystem cannot (EOPNOTSUPP), the map keeps
/// only the room its own text takes.
fn reserve(file: &std::fs::File, room: usize) {
    use std::os::fd::AsFd;
    let _ = crate::sys::file::reserve(file.as_fd(), room as u64);
}

fn save_atomically(path: &Path, text: &str, room: usize) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = std::path::PathBuf::from(temporary);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(text.as_bytes())?;
        reserve(&file, room);
        file.sync_data()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    std::fs::rename(&temporary, path)
}

/// Overwrite the existing map without allocating: only if the new text
/// fits in the room the file has allocated. Truncating a shorter text's
/// tail frees the blocks past it, which are taken back at once.
fn save_in_place(path: &Path, text: &str, room: usize) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    let meta = file.metadata()?;
    let allocated = meta.len().max(meta.blocks().saturating_mul(512));
    if text.len() as u64 > allocated {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    file.write_all(text.as_bytes())?;
    file.set_len(text.len() as u64)?;
    reserve(&file, room);
    file.sync_data()
}

/// ddrescue's numbers: 0x-hex, 0-octal or decimal.
fn parse_number(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if text.len() > 1 && text.starts_with('0') {
        u64::from_str_radix(&text[1..], 8).ok()
    } else {
        text.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_split_and_merge() {
        let mut map = Map::new(0, 100);
        map.mark(10, 20, BlockStatus::Finished);
        map.mark(40, 5, BlockStatus::BadSector);
        map.mark(30, 10, BlockStatus::Finished);
        let shape: Vec<(u64, u64, char)> = map
            .blocks()
            .iter()
            .map(|b| (b.pos, b.size, b.status.symbol()))
            .collect();
        assert_eq!(
            shape,
            vec![(0, 10, '?'), (10, 30, '+'), (40, 5, '-'), (45, 55, '?')]
        );
        assert_eq!(map.pending().len(), 2);
        assert_eq!(map.bytes_with(BlockStatus::Finished), 30);
    }

    proptest::proptest! {
        /// Marks found by binary search and spliced in leave the map a
        /// byte-by-byte model gives: sorted, contiguous, neighbours of
        /// different status, and the totals of each status right.
        #[test]
        fn marks_agree_with_a_byte_by_byte_model(
            marks in proptest::collection::vec((0u64..64, 1u64..24, 0usize..5), 1..40)
        ) {
            let (start, end) = (8u64, 72u64);
            let mut map = Map::new(start, end);
            let mut model = vec![BlockStatus::NonTried; (end - start) as usize];
            for (pos, size, status) in marks {
                let pos = pos.max(start).min(end - 1);
                let size = size.min(end - pos);
                let status = BlockStatus::ALL[status];
                map.mark(pos, size, status);
                for byte in &mut model[(pos - start) as usize..(pos - start + size) as usize] {
                    *byte = status;
                }
            }
            let mut at = start;
            for pair in map.blocks().windows(2) {
                proptest::prop_assert!(pair[0].status != pair[1].status);
            }
            for block in map.blocks() {
                proptest::prop_assert_eq!(block.pos, at);
                for offset in block.pos..block.end() {
                    proptest::prop_assert_eq!(model[(offset - start) as usize], block.status);
                }
                at = block.end();
            }
            proptest::prop_assert_eq!(at, end);
            for status in BlockStatus::ALL {
                let counted = model.iter().filter(|&&s| s == status).count() as u64;
                proptest::prop_assert_eq!(map.bytes_with(status), counted);
                proptest::prop_assert_eq!(map.overlap(start, end - start, status), counted);
            }
            for offset in start..end {
                proptest::prop_assert_eq!(map.status_at(offset), Some(model[(offset - start) as usize]));
            }
            proptest::prop_assert_eq!(map.status_at(end), None);
        }
    }

    #[test]
    fn round_trips_through_text() {
        let mut map = Map::new(0, 0x100000);
        map.mark(0, 0x19000, BlockStatus::Finished);
        map.mark(0x19000, 0x400, BlockStatus::BadSector);
        map.current_pos = 0x19400;
        let text = map.render("ddx --rescue");
        assert!(text.contains("0x00019000  0x00000400  -\n"), "{text}");
        assert_eq!(Map::parse(&text, 0, 0x100000).unwrap(), map);
    }

    /// Allocated bytes of `path` (st_blocks), and its size.
    fn allocation(path: &Path) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).unwrap();
        (meta.blocks() * 512, meta.len())
    }

    #[test]
    fn saved_maps_hold_their_lines_only_and_room_to_be_rewritten_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map");
        let mut map = Map::new(0, 1 << 20);
        map.save(&path, "ddx").unwrap();
        // The map's lines, as ddrescue writes them, and no padding.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), map.render("ddx"));
        let (allocated, _) = allocation(&path);
        assert!(
            allocated >= SAVED_ROOM as u64,
            "{allocated} bytes allocated"
        );
        for (pos, size) in [(0, 4096), (8192, 512), (0, 1 << 20)] {
            let status = if pos == 8192 {
                BlockStatus::BadSector
            } else {
                BlockStatus::Finished
            };
            map.mark(pos, size, status);
            let text = map.render("ddx");
            save_in_place(&path, &text, SAVED_ROOM).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            assert_eq!(Map::parse(&text, 0, 1 << 20).unwrap(), map);
            assert!(allocation(&path).0 >= SAVED_ROOM as u64);
        }
        // More than the room: refused, the old map left as it was.
        let long = "#".repeat(3 * SAVED_ROOM);
        assert!(save_in_place(&path, &long, SAVED_ROOM).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), map.render("ddx"));
    }

    #[test]
    fn parses_ddrescue_output_and_fits_the_domain() {
        let text = "# Mapfile. Created by GNU ddrescue version 1.27\n\
                    # current_pos  current_status  current_pass\n\
                    0x0004AC00     +               1\n\
                    #      pos        size  status\n\
                    0x00000000  0x00019000  +\n\
                    0x00019000  0x00001000  -\n\
                    0x0001A000  0x000E6000  +\n";
        let map = Map::parse(text, 0x1000, 0x20000).unwrap();
        assert_eq!(map.bad().len(), 1);
        assert_eq!(
            map.bytes_with(BlockStatus::Finished),
            0x20000 - 0x1000 - 0x1000
        );
        assert!(Map::parse("0x0 + 1\n0x0 0x10 x\n", 0, 16).is_err());
        assert!(Map::parse("", 0, 16).is_err());
    }

    #[test]
    fn what_the_file_leaves_out_is_non_tried() {
        let map = Map::parse("0 ? 1\n0x0 0x10 +\n", 0, 32).unwrap();
        assert_eq!(
            map.pending(),
            vec![Block {
                pos: 16,
                size: 16,
                status: BlockStatus::NonTried
            }]
        );
    }
}
