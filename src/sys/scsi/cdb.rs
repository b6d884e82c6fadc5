//! The SCSI command blocks a disk copy sends (SBC-4): READ and WRITE in
//! their 10- and 16-byte forms, READ CAPACITY (10) and (16), SYNCHRONIZE
//! CACHE (10). Pure: bytes in, bytes out, tested against the layouts the
//! standard gives (and that sg_dd sends).

/// A command block and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cdb {
    pub bytes: [u8; 16],
    pub len: u8,
}

impl Cdb {
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Which form of READ and WRITE a disk takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// READ(10)/WRITE(10): 32-bit block addresses, up to 65535 blocks.
    Short,
    /// READ(16)/WRITE(16): 64-bit block addresses, 32-bit lengths.
    Long,
}

impl Addressing {
    /// The form a disk of `blocks` logical blocks needs: the short one
    /// while every block has a 32-bit address, as sg_dd chooses.
    pub fn for_capacity(blocks: u64) -> Addressing {
        if blocks > u64::from(u32::MAX) {
            Addressing::Long
        } else {
            Addressing::Short
        }
    }

    /// The most blocks one command of this form can move.
    pub fn max_blocks(self) -> u32 {
        match self {
            Addressing::Short => u32::from(u16::MAX),
            Addressing::Long => u32::MAX,
        }
    }

    pub fn read_name(self) -> &'static str {
        match self {
            Addressing::Short => "READ(10)",
            Addressing::Long => "READ(16)",
        }
    }

    pub fn write_name(self) -> &'static str {
        match self {
            Addressing::Short => "WRITE(10)",
            Addressing::Long => "WRITE(16)",
        }
    }
}

/// The FUA bit of READ/WRITE's second byte: the write reaches the medium
/// before the command completes (a read bypasses the device's cache).
const FUA: u8 = 0x08;

/// READ or WRITE of `blocks` blocks at `lba`. The caller keeps `blocks`
/// within [`Addressing::max_blocks`] and `lba` within the form's range.
pub fn read_write(addressing: Addressing, write: bool, lba: u64, blocks: u32, fua: bool) -> Cdb {
    let mut bytes = [0u8; 16];
    let flags = if fua { FUA } else { 0 };
    let len = match addressing {
        Addressing::Short => {
            bytes[0] = if write { 0x2a } else { 0x28 };
            bytes[1] = flags;
            bytes[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
            bytes[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
            10
        }
        Addressing::Long => {
            bytes[0] = if write { 0x8a } else { 0x88 };
            bytes[1] = flags;
            bytes[2..10].copy_from_slice(&lba.to_be_bytes());
            bytes[10..14].copy_from_slice(&blocks.to_be_bytes());
            16
        }
    };
    Cdb { bytes, len }
}

/// READ CAPACITY (10): 8 bytes back, see [`capacity_10`].
pub fn read_capacity_10() -> Cdb {
    let mut bytes = [0u8; 16];
    bytes[0] = 0x25;
    Cdb { bytes, len: 10 }
}

/// Bytes READ CAPACITY (16) is asked to return.
pub const CAPACITY_16_LEN: usize = 32;

/// READ CAPACITY (16) (SERVICE ACTION IN (16), action 10h).
pub fn read_capacity_16() -> Cdb {
    let mut bytes = [0u8; 16];
    bytes[0] = 0x9e;
    bytes[1] = 0x10;
    bytes[10..14].copy_from_slice(&(CAPACITY_16_LEN as u32).to_be_bytes());
    Cdb { bytes, len: 16 }
}

/// SYNCHRONIZE CACHE (10) of the whole medium.
pub fn synchronize_cache() -> Cdb {
    let mut bytes = [0u8; 16];
    bytes[0] = 0x35;
    Cdb { bytes, len: 10 }
}

/// A disk's size as READ CAPACITY says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Logical blocks (the last LBA plus one).
    pub blocks: u64,
    pub block_len: u32,
}

/// READ CAPACITY (10)'s answer. A last LBA of FFFFFFFFh means the disk is
/// too large for it: ask READ CAPACITY (16).
pub fn capacity_10(data: &[u8]) -> Option<Capacity> {
    let last = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?);
    let block_len = u32::from_be_bytes(data.get(4..8)?.try_into().ok()?);
    Some(Capacity {
        blocks: u64::from(last) + 1,
        block_len,
    })
}

/// READ CAPACITY (16)'s answer.
pub fn capacity_16(data: &[u8]) -> Option<Capacity> {
    let last = u64::from_be_bytes(data.get(0..8)?.try_into().ok()?);
    let block_len = u32::from_be_bytes(data.get(8..12)?.try_into().ok()?);
    Some(Capacity {
        blocks: last.checked_add(1)?,
        block_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_byte_commands_lay_out_as_sbc_says() {
        let read = read_write(Addressing::Short, false, 0x0102_0304, 0x0506, false);
        assert_eq!(
            read.as_slice(),
            [0x28, 0, 1, 2, 3, 4, 0, 5, 6, 0],
            "READ(10)"
        );
        let write = read_write(Addressing::Short, true, 7, 128, true);
        assert_eq!(
            write.as_slice(),
            [0x2a, 0x08, 0, 0, 0, 7, 0, 0, 128, 0],
            "WRITE(10) with FUA"
        );
    }

    #[test]
    fn sixteen_byte_commands_carry_64_bit_addresses() {
        let read = read_write(
            Addressing::Long,
            false,
            0x0102_0304_0506_0708,
            0x090a_0b0c,
            false,
        );
        assert_eq!(
            read.as_slice(),
            [0x88, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0]
        );
        let write = read_write(Addressing::Long, true, 1, 1, true);
        assert_eq!(write.bytes[0], 0x8a);
        assert_eq!(write.bytes[1], 0x08);
    }

    #[test]
    fn the_form_follows_the_capacity() {
        assert_eq!(Addressing::for_capacity(1 << 20), Addressing::Short);
        assert_eq!(
            Addressing::for_capacity(u64::from(u32::MAX)),
            Addressing::Short
        );
        assert_eq!(Addressing::for_capacity(1 << 33), Addressing::Long);
    }

    #[test]
    fn capacities_are_read_back() {
        let ten = [0, 0, 0x1f, 0xff, 0, 0, 2, 0];
        assert_eq!(
            capacity_10(&ten),
            Some(Capacity {
                blocks: 8192,
                block_len: 512
            })
        );
        let mut sixteen = [0u8; 32];
        sixteen[0..8].copy_from_slice(&(5u64 << 32).to_be_bytes());
        sixteen[8..12].copy_from_slice(&4096u32.to_be_bytes());
        assert_eq!(
            capacity_16(&sixteen),
            Some(Capacity {
                blocks: (5 << 32) + 1,
                block_len: 4096
            })
        );
        assert_eq!(capacity_10(&ten[..7]), None);
        assert_eq!(read_capacity_16().as_slice()[..2], [0x9e, 0x10]);
        assert_eq!(synchronize_cache().as_slice()[0], 0x35);
    }
}
