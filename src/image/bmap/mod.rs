//! bmaptool's block maps: which blocks of an image hold data, with a
//! digest per range of them, in bmaptool's XML format.
//!
//! Versions 1.0-1.2 carry no digests; 1.3 a SHA-1 per range (attribute
//! `sha1`) and of the file itself (`BmapFileSHA1`); 1.4 (a misnumbered
//! 2.0) and 2.0 name the digest in `ChecksumType` (attribute `chksum`,
//! element `BmapFileChecksum`). The file's own digest is computed with
//! its value replaced by ASCII zeros, and checked as bmaptool checks it.
//! ddx knows SHA-1 and SHA-256 (what bmaptool writes); a map naming any
//! other digest is refused rather than copied unchecked.
//!
//! This module owns the map as data: [`Bmap::parse`] and [`Bmap::to_xml`].
//! [`BmapFilter`] applies a map to an input (`--bmap`), [`BmapRecorder`]
//! makes one from an input (`--bmap-create`).

mod filter;
mod record;

pub use filter::{BmapFilter, Recorded};
pub use record::{BmapRecorder, Recording};

use std::fmt;
use std::io::Read;
use std::path::Path;

use sha1::Digest as _;

use crate::text::quote::printable;

/// The digest a map's ranges carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumKind {
    Sha1,
    Sha256,
}

impl ChecksumKind {
    fn from_name(name: &str) -> Option<ChecksumKind> {
        match name.trim().to_ascii_lowercase().as_str() {
            "sha1" => Some(ChecksumKind::Sha1),
            "sha256" => Some(ChecksumKind::Sha256),
            _ => None,
        }
    }

    /// The name bmaptool writes in `ChecksumType`.
    pub fn name(self) -> &'static str {
        match self {
            ChecksumKind::Sha1 => "sha1",
            ChecksumKind::Sha256 => "sha256",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            ChecksumKind::Sha1 => 40,
            ChecksumKind::Sha256 => 64,
        }
    }

    pub fn hasher(self) -> Hasher {
        match self {
            ChecksumKind::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            ChecksumKind::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        }
    }
}

impl fmt::Display for ChecksumKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChecksumKind::Sha1 => "SHA-1",
            ChecksumKind::Sha256 => "SHA-256",
        })
    }
}

/// A running digest of either kind.
#[derive(Clone)]
pub enum Hasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl fmt::Debug for Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hasher")
    }
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// The digest in lower-case hex, as bmap files write it.
    pub fn hex(self) -> String {
        match self {
            Hasher::Sha1(h) => format!("{:x}", h.finalize()),
            Hasher::Sha256(h) => format!("{:x}", h.finalize()),
        }
    }
}

/// Blocks `first..=last` of the image, and their digest where the map
/// gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub first: u64,
    pub last: u64,
    /// Lower-case hex.
    pub digest: Option<String>,
}

/// A parsed block map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bmap {
    pub version: (u32, u32),
    pub image_size: u64,
    pub block_size: u64,
    pub blocks: u64,
    pub checksum: Option<ChecksumKind>,
    /// Sorted, disjoint, within the image.
    pub ranges: Vec<Range>,
}

/// Why a map cannot be used: one line, naming the option and the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option}={file}: {why}")]
pub struct BmapError {
    pub option: &'static str,
    pub file: String,
    pub why: String,
}

/// Maps bigger than this are not bmap files (a 1 TiB image in 4 KiB blocks
/// with every other block mapped is about 20 MiB of XML).
const MAX_FILE: u64 = 256 << 20;

impl Bmap {
    /// Every range carries a digest that reading it checks.
    pub fn checks_every_range(&self) -> bool {
        self.checksum.is_some() && self.ranges.iter().all(|range| range.digest.is_some())
    }

    /// Read and parse the map in `path` (for `--bmap=PATH`).
    pub fn read(path: &Path) -> Result<Bmap, BmapError> {
        let file = path.display().to_string();
        let bad = |why: String| BmapError {
            option: "--bmap",
            file: file.clone(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(io_text(&e)))?;
        if meta.len() > MAX_FILE {
            return Err(bad(format!(
                "{} bytes is too big for a bmap file",
                meta.len()
            )));
        }
        // The size above is a regular file's; a pipe's or a device's is
        // 0, and only reading stops at the bound (/dev/zero never ends).
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_FILE + 1).read_to_end(&mut bytes))
            .map_err(|e| bad(io_text(&e)))?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(bad(format!(
                "more than {MAX_FILE} bytes is too big for a bmap file"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        Bmap::parse(&text, &file)
    }

    /// Parse a map's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Bmap, BmapError> {
        let bad = |why: String| BmapError {
            option: "--bmap",
            file: file.to_owned(),
            why,
        };
        let doc = roxmltree::Document::parse(text).map_err(|e| {
            bad(format!(
                "not a bmap file (XML: {})",
                printable(&e.to_string())
            ))
        })?;
        let root = doc.root_element();
        if root.tag_name().name() != "bmap" {
            return Err(bad(format!(
                "not a bmap file (its root element is <{}>)",
                root.tag_name().name()
            )));
        }
        let version_text = root
            .attribute("version")
            .ok_or_else(|| bad("the <bmap> element has no version".into()))?;
        let version = parse_version(version_text)
            .ok_or_else(|| bad(format!("version {version_text:?} is not MAJOR.MINOR")))?;
        if version.0 > 2 || version.0 == 0 {
            return Err(bad(format!(
                "bmap format version {} is not supported (1.x and 2.x are)",
                printable(version_text)
            )));
        }
        let element = |name: &str| {
            root.children()
                .find(|n| n.is_element() && n.tag_name().name() == name)
        };
        let text_of = |name: &str| -> Result<String, BmapError> {
            element(name)
                .map(|n| n.text().unwrap_or("").trim().to_owned())
                .ok_or_else(|| bad(format!("the <{name}> element is missing")))
        };
        let number = |name: &str| -> Result<u64, BmapError> {
            let text = text_of(name)?;
            text.parse::<u64>()
                .map_err(|_| bad(format!("<{name}> {text:?} is not a number")))
        };
        let image_size = number("ImageSize")?;
        let block_size = number("BlockSize")?;
        let blocks = number("BlocksCount")?;
        if block_size == 0 {
            return Err(bad("<BlockSize> is 0".into()));
        }
        if blocks != image_size.div_ceil(block_size) {
            return Err(bad(format!(
                "inconsistent: {image_size} bytes in {block_size}-byte blocks are not {blocks} blocks"
            )));
        }
        // 1.3 spells everything "sha1"; 1.4 and 2.x name the digest.
        let (checksum, attribute, self_element) = if version >= (1, 4) {
            let name = text_of("ChecksumType")?;
            let kind = ChecksumKind::from_name(&name).ok_or_else(|| {
                bad(format!(
                    "checksum type {name:?} is not supported (sha256 and sha1 are)"
                ))
            })?;
            (Some(kind), "chksum", Some("BmapFileChecksum"))
        } else if version == (1, 3) {
            (Some(ChecksumKind::Sha1), "sha1", Some("BmapFileSHA1"))
        } else {
            (None, "chksum", None)
        };
        if let (Some(kind), Some(name)) = (checksum, self_element) {
            let expected = text_of(name)?.to_ascii_lowercase();
            let actual = self_digest(text, &expected, kind)
                .ok_or_else(|| bad(format!("<{name}> is not a {kind} digest")))?;
            if actual != expected {
                return Err(bad(format!(
                    "the file is damaged: its {kind} is {actual}, <{name}> says {expected}"
                )));
            }
        }
        let map =
            element("BlockMap").ok_or_else(|| bad("the <BlockMap> element is missing".into()))?;
        let mut ranges: Vec<Range> = Vec::new();
        for node in map.children().filter(|n| n.is_element()) {
            if node.tag_name().name() != "Range" {
                continue;
            }
            let line = doc.text_pos_at(node.range().start).row;
            let raw = node.text().unwrap_or("").trim();
            // As messages show it: one line.
            let text = printable(raw);
            let (first, last) =
                parse_range(raw).ok_or_else(|| bad(format!("line {line}: bad range {raw:?}")))?;
            if last >= blocks {
                return Err(bad(format!(
                    "line {line}: range {text} goes past the image's {blocks} blocks"
                )));
            }
            if let Some(previous) = ranges.last() {
                if first <= previous.last {
                    return Err(bad(format!(
                        "line {line}: range {text} overlaps or comes before the range before it"
                    )));
                }
            }
            let digest = match (checksum, node.attribute(attribute)) {
                (Some(kind), Some(digest)) => {
                    let digest = digest.trim().to_ascii_lowercase();
                    if digest.len() != kind.hex_len()
                        || !digest.bytes().all(|b| b.is_ascii_hexdigit())
                    {
                        return Err(bad(format!(
                            "line {line}: {digest:?} is not a {kind} digest"
                        )));
                    }
                    Some(digest)
                }
                _ => None,
            };
            ranges.push(Range {
                first,
                last,
                digest,
            });
        }
        Ok(Bmap {
            version,
            image_size,
            block_size,
            blocks,
            checksum,
            ranges,
        })
    }

    /// The image bytes a range covers: its last block may be partial.
    pub fn byte_span(&self, range: &Range) -> (u64, u64) {
        let start = range.first * self.block_size;
        let end = ((range.last + 1) * self.block_size).min(self.image_size);
        (start, end)
    }

    /// Bytes in mapped blocks: what `--bmap` copies, for the ETA.
    pub fn mapped_bytes(&self) -> u64 {
        self.ranges
            .iter()
            .map(|r| {
                let (start, end) = self.byte_span(r);
                end - start
            })
            .sum()
    }

    pub fn mapped_blocks(&self) -> u64 {
        self.ranges.iter().map(|r| r.last - r.first + 1).sum()
    }

    /// Refuse a map made for another image (`input` names the input).
    pub fn check_size(&self, input: &str, size: u64, file: &str) -> Result<(), BmapError> {
        if size == self.image_size {
            return Ok(());
        }
        Err(BmapError {
            option: "--bmap",
            file: file.to_owned(),
            why: format!(
                "the map is for a {}-byte image, but {input} is {size} bytes",
                self.image_size
            ),
        })
    }

    /// The map as a bmap file of format 2.0, with its own digest, as
    /// bmaptool writes and checks it.
    pub fn to_xml(&self) -> String {
        let kind = self.checksum.unwrap_or(ChecksumKind::Sha256);
        let placeholder = "0".repeat(kind.hex_len());
        let mut xml = String::new();
        xml.push_str("<?xml version=\"1.0\" ?>\n");
        xml.push_str(
            "<!-- A block map written by ddx (bmaptool's format): the blocks of the\n     \
             image that hold data, and a digest of each range of them. -->\n",
        );
        xml.push_str("<bmap version=\"2.0\">\n");
        xml.push_str(&format!(
            "    <ImageSize> {} </ImageSize>\n",
            self.image_size
        ));
        xml.push_str(&format!(
            "    <BlockSize> {} </BlockSize>\n",
            self.block_size
        ));
        xml.push_str(&format!(
            "    <BlocksCount> {} </BlocksCount>\n",
            self.blocks
        ));
        xml.push_str(&format!(
            "    <MappedBlocksCount> {} </MappedBlocksCount>\n",
            self.mapped_blocks()
        ));
        xml.push_str(&format!(
            "    <ChecksumType> {} </ChecksumType>\n",
            kind.name()
        ));
        xml.push_str(&format!(
            "    <BmapFileChecksum> {placeholder} </BmapFileChecksum>\n"
        ));
        xml.push_str("    <BlockMap>\n");
        for range in &self.ranges {
            let blocks = if range.first == range.last {
                range.first.to_string()
            } else {
                format!("{}-{}", range.first, range.last)
            };
            match &range.digest {
                Some(digest) => xml.push_str(&format!(
                    "        <Range chksum=\"{digest}\"> {blocks} </Range>\n"
                )),
                None => xml.push_str(&format!("        <Range> {blocks} </Range>\n")),
            }
        }
        xml.push_str("    </BlockMap>\n</bmap>\n");
        let mut hasher = kind.hasher();
        hasher.update(xml.as_bytes());
        let digest = hasher.hex();
        xml.replacen(
            &format!("<BmapFileChecksum> {placeholder} </BmapFileChecksum>"),
            &format!("<BmapFileChecksum> {digest} </BmapFileChecksum>"),
            1,
        )
    }
}

fn io_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(raw) => crate::sys::errno_text(crate::sys::Errno::from_raw_os_error(raw)),
        None => e.to_string(),
    }
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// "X - Y" or (old formats) "X".
fn parse_range(text: &str) -> Option<(u64, u64)> {
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (first.trim().parse().ok()?, last.trim().parse().ok()?),
        None => {
            let block = text.trim().parse().ok()?;
            (block, block)
        }
    };
    (first <= last).then_some((first, last))
}

/// The file's digest with its own recorded digest replaced by zeros, as
/// bmaptool computes it (the first occurrence of the value is replaced).
fn self_digest(text: &str, recorded: &str, kind: ChecksumKind) -> Option<String> {
    if recorded.len() != kind.hex_len() {
        return None;
    }
    let at = text.to_ascii_lowercase().find(recorded)?;
    let mut bytes = text.as_bytes().to_vec();
    bytes[at..at + recorded.len()].fill(b'0');
    let mut hasher = kind.hasher();
    hasher.update(&bytes);
    Some(hasher.hex())
}

#[cfg(test)]
mod tests;
