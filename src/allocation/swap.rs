//! Linux swap: only its header page is kept (the label, the UUID, the
//! list of bad pages); what was swapped out means nothing once the
//! machine that wrote it has stopped. A swap area that holds a
//! hibernation image is copied whole: resuming needs it.

use super::{le32, Extents, Region, Verdict};

/// The page sizes swap headers are written in.
const PAGES: [u64; 5] = [4096, 8192, 16384, 32768, 65536];

/// Signatures in a swap header's last ten bytes.
const SWAP: &[u8; 10] = b"SWAPSPACE2";
const HIBERNATION: &[&[u8; 10]] = &[
    b"S1SUSPEND\0",
    b"S2SUSPEND\0",
    b"ULSUSPEND\0",
    b"LINHIB0001",
];

/// A swap area at the region's start, or None.
pub(super) fn probe(region: &mut Region<'_>) -> Option<Verdict> {
    for page in PAGES {
        if region.len < page {
            break;
        }
        let mut signature = [0u8; 10];
        if region.read(page - 10, &mut signature).is_err() {
            return None;
        }
        if &signature == SWAP {
            let mut header = [0u8; 8];
            region.read(1024, &mut header).ok()?;
            // last_page, in the writer's byte order: where it reads as
            // more than the partition, the partition's end stands.
            let pages = u64::from(le32(&header, 4)).saturating_add(1);
            let size = pages.saturating_mul(page).clamp(page, region.len);
            return Some(Verdict::Mapped {
                name: "swap".into(),
                size,
                used: Extents::whole(0..page),
                note: None,
            });
        }
        if HIBERNATION.contains(&&signature) {
            return Some(Verdict::Whole {
                name: "swap".into(),
                why: "it holds a hibernation image".into(),
            });
        }
        if &signature == b"SWAP-SPACE" {
            return Some(Verdict::Whole {
                name: "swap".into(),
                why: "an old-style (version 0) swap area".into(),
            });
        }
    }
    None
}
