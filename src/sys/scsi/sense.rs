//! SCSI sense data, decoded into what a person reads: the sense key, the
//! additional sense code in T10's words, and the logical block the device
//! names, as in "medium error, unrecovered read error at LBA 4660".
//!
//! Sense bytes come from a device (or a driver, or a bridge that makes
//! them up), so nothing in them is trusted: [`Sense::parse`] is a pure
//! function of the bytes that never panics and never reads past them, and
//! its tests feed it every truncation of both formats and a run of
//! arbitrary bytes behind each response code. Both formats of SPC are read:
//! fixed (response codes 70h/71h, a 32-bit INFORMATION field with its
//! VALID bit) and descriptor (72h/73h, whose information descriptor holds
//! 64 bits).
//!
//! The table of additional sense codes holds the ones a disk copy meets
//! (media, hardware, addressing, readiness, protection), not all of T10's
//! list; an unknown code is shown as its two numbers.

use std::fmt;

/// Sense data as a device returned it, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    pub key: SenseKey,
    /// Additional sense code and its qualifier.
    pub asc: u8,
    pub ascq: u8,
    /// The INFORMATION field where the device marked it valid: for a
    /// read or write command, the first logical block that failed.
    pub information: Option<u64>,
    /// Deferred: the error belongs to an earlier command (71h, 73h).
    pub deferred: bool,
}

/// The sense key (SPC-5, table 51).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenseKey {
    NoSense,
    RecoveredError,
    NotReady,
    MediumError,
    HardwareError,
    IllegalRequest,
    UnitAttention,
    DataProtect,
    BlankCheck,
    VendorSpecific,
    CopyAborted,
    AbortedCommand,
    Reserved(u8),
    VolumeOverflow,
    Miscompare,
    Completed,
}

impl SenseKey {
    pub fn from_code(code: u8) -> SenseKey {
        match code & 0x0f {
            0x0 => SenseKey::NoSense,
            0x1 => SenseKey::RecoveredError,
            0x2 => SenseKey::NotReady,
            0x3 => SenseKey::MediumError,
            0x4 => SenseKey::HardwareError,
            0x5 => SenseKey::IllegalRequest,
            0x6 => SenseKey::UnitAttention,
            0x7 => SenseKey::DataProtect,
            0x8 => SenseKey::BlankCheck,
            0x9 => SenseKey::VendorSpecific,
            0xa => SenseKey::CopyAborted,
            0xb => SenseKey::AbortedCommand,
            0xd => SenseKey::VolumeOverflow,
            0xe => SenseKey::Miscompare,
            0xf => SenseKey::Completed,
            other => SenseKey::Reserved(other),
        }
    }
}

impl fmt::Display for SenseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            SenseKey::NoSense => "no sense",
            SenseKey::RecoveredError => "recovered error",
            SenseKey::NotReady => "not ready",
            SenseKey::MediumError => "medium error",
            SenseKey::HardwareError => "hardware error",
            SenseKey::IllegalRequest => "illegal request",
            SenseKey::UnitAttention => "unit attention",
            SenseKey::DataProtect => "data protect",
            SenseKey::BlankCheck => "blank check",
            SenseKey::VendorSpecific => "vendor specific sense key",
            SenseKey::CopyAborted => "copy aborted",
            SenseKey::AbortedCommand => "aborted command",
            SenseKey::VolumeOverflow => "volume overflow",
            SenseKey::Miscompare => "miscompare",
            SenseKey::Completed => "completed",
            SenseKey::Reserved(code) => return write!(f, "reserved sense key 0x{code:x}"),
        };
        f.write_str(text)
    }
}

impl Sense {
    /// Decode `bytes` (as many as the device wrote). None when they are
    /// not sense data: too short, or a response code SPC does not define.
    pub fn parse(bytes: &[u8]) -> Option<Sense> {
        let code = *bytes.first()? & 0x7f;
        match code {
            0x70 | 0x71 => Self::fixed(bytes, code == 0x71),
            0x72 | 0x73 => Self::descriptor(bytes, code == 0x73),
            _ => None,
        }
    }

    fn fixed(bytes: &[u8], deferred: bool) -> Option<Sense> {
        let key = SenseKey::from_code(*bytes.get(2)?);
        // The additional length says how much of the 18 usual bytes the
        // device filled in; the codes sit past the information field.
        let additional = bytes.get(7).map_or(0, |&n| usize::from(n));
        let filled = bytes.len().min(8 + additional);
        let byte = |i: usize| (i < filled).then(|| bytes[i]);
        let valid = bytes[0] & 0x80 != 0;
        let information = match bytes.get(3..7) {
            Some(field) if valid => Some(u64::from(u32::from_be_bytes(
                field.try_into().expect("four bytes"),
            ))),
            _ => None,
        };
        Some(Sense {
            key,
            asc: byte(12).unwrap_or(0),
            ascq: byte(13).unwrap_or(0),
            information,
            deferred,
        })
    }

    fn descriptor(bytes: &[u8], deferred: bool) -> Option<Sense> {
        let key = SenseKey::from_code(*bytes.get(1)?);
        let asc = bytes.get(2).copied().unwrap_or(0);
        let ascq = bytes.get(3).copied().unwrap_or(0);
        let additional = bytes.get(7).map_or(0, |&n| usize::from(n));
        let descriptors = bytes.get(8..bytes.len().min(8 + additional)).unwrap_or(&[]);
        let mut information = None;
        let mut rest = descriptors;
        // Each descriptor: type, additional length, then that many bytes.
        while let [kind, len, body @ ..] = rest {
            let len = usize::from(*len);
            let Some(body) = body.get(..len) else { break };
            // The information descriptor (type 0): VALID in its first
            // byte, the 64-bit field after two more.
            if *kind == 0x00 && len >= 0x0a && body[0] & 0x80 != 0 {
                information = Some(u64::from_be_bytes(
                    body[2..10].try_into().expect("eight bytes"),
                ));
            }
            rest = &rest[2 + len..];
        }
        Some(Sense {
            key,
            asc,
            ascq,
            information,
            deferred,
        })
    }

    /// The additional sense code in T10's words, where the table has it.
    pub fn code_text(&self) -> Option<&'static str> {
        ASC_TEXT
            .iter()
            .find(|(asc, ascq, _)| *asc == self.asc && *ascq == self.ascq)
            .map(|(_, _, text)| *text)
    }

    /// The command may well succeed if sent again: the device said
    /// something changed (unit attention), or it dropped the command.
    pub fn worth_retrying(&self) -> bool {
        matches!(self.key, SenseKey::UnitAttention | SenseKey::AbortedCommand)
            || (self.key == SenseKey::NotReady && (self.asc, self.ascq) == (0x04, 0x01))
    }

    /// The command did what it was asked, the device only reports how
    /// (recovered error, no sense).
    pub fn is_success(&self) -> bool {
        matches!(
            self.key,
            SenseKey::NoSense | SenseKey::RecoveredError | SenseKey::Completed
        ) && !self.deferred
    }
}

impl fmt::Display for Sense {
    /// One line: "medium error, unrecovered read error at LBA 4660".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.deferred {
            f.write_str("deferred ")?;
        }
        write!(f, "{}", self.key)?;
        match self.code_text() {
            Some(text) => write!(f, ", {text}")?,
            None if (self.asc, self.ascq) == (0, 0) => {}
            None => write!(f, ", asc 0x{:02x} ascq 0x{:02x}", self.asc, self.ascq)?,
        }
        if let Some(lba) = self.information {
            write!(f, " at LBA {lba}")?;
        }
        Ok(())
    }
}

/// Additional sense codes a disk copy meets (SPC-5 annex, in T10's words,
/// lower case).
const ASC_TEXT: &[(u8, u8, &str)] = &[
    (0x00, 0x06, "i/o process terminated"),
    (0x02, 0x00, "no seek complete"),
    (0x03, 0x00, "peripheral device write fault"),
    (0x04, 0x00, "logical unit not ready, cause not reportable"),
    (0x04, 0x01, "logical unit is in process of becoming ready"),
    (
        0x04,
        0x02,
        "logical unit not ready, initializing command required",
    ),
    (
        0x04,
        0x03,
        "logical unit not ready, manual intervention required",
    ),
    (0x04, 0x04, "logical unit not ready, format in progress"),
    (0x08, 0x00, "logical unit communication failure"),
    (0x08, 0x01, "logical unit communication time-out"),
    (0x0c, 0x00, "write error"),
    (0x0c, 0x02, "write error - auto reallocation failed"),
    (0x0c, 0x03, "write error - recommend reassignment"),
    (0x10, 0x00, "id crc or ecc error"),
    (0x10, 0x01, "logical block guard check failed"),
    (0x10, 0x02, "logical block application tag check failed"),
    (0x10, 0x03, "logical block reference tag check failed"),
    (0x11, 0x00, "unrecovered read error"),
    (0x11, 0x01, "read retries exhausted"),
    (0x11, 0x02, "error too long to correct"),
    (
        0x11,
        0x04,
        "unrecovered read error - auto reallocate failed",
    ),
    (
        0x11,
        0x0b,
        "unrecovered read error - recommend reassignment",
    ),
    (
        0x11,
        0x0c,
        "unrecovered read error - recommend rewrite the data",
    ),
    (0x14, 0x00, "recorded entity not found"),
    (0x14, 0x01, "record not found"),
    (0x15, 0x00, "random positioning error"),
    (0x16, 0x00, "data synchronization mark error"),
    (
        0x17,
        0x00,
        "recovered data with no error correction applied",
    ),
    (0x18, 0x00, "recovered data with error correction applied"),
    (0x1a, 0x00, "parameter list length error"),
    (0x20, 0x00, "invalid command operation code"),
    (0x21, 0x00, "logical block address out of range"),
    (0x24, 0x00, "invalid field in cdb"),
    (0x25, 0x00, "logical unit not supported"),
    (0x26, 0x00, "invalid field in parameter list"),
    (0x27, 0x00, "write protected"),
    (0x27, 0x01, "hardware write protected"),
    (0x27, 0x02, "logical unit software write protected"),
    (
        0x28,
        0x00,
        "not ready to ready change, medium may have changed",
    ),
    (0x29, 0x00, "power on, reset, or bus device reset occurred"),
    (0x2a, 0x01, "mode parameters changed"),
    (0x2a, 0x09, "capacity data has changed"),
    (0x31, 0x00, "medium format corrupted"),
    (0x3a, 0x00, "medium not present"),
    (0x3f, 0x0e, "reported luns data has changed"),
    (0x44, 0x00, "internal target failure"),
    (0x47, 0x00, "scsi parity error"),
    (0x4b, 0x00, "data phase error"),
    (0x5d, 0x00, "failure prediction threshold exceeded"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed-format sense as scsi_debug makes it for an injected medium
    /// error: VALID set, INFORMATION 4660, 11h/00h.
    fn fixed_medium_error(lba: u32) -> Vec<u8> {
        let mut sense = vec![0u8; 18];
        sense[0] = 0xf0;
        sense[2] = 0x03;
        sense[3..7].copy_from_slice(&lba.to_be_bytes());
        sense[7] = 10;
        sense[12] = 0x11;
        sense
    }

    #[test]
    fn a_fixed_medium_error_names_its_block() {
        let sense = Sense::parse(&fixed_medium_error(4660)).unwrap();
        assert_eq!(sense.key, SenseKey::MediumError);
        assert_eq!(sense.information, Some(4660));
        assert_eq!(
            sense.to_string(),
            "medium error, unrecovered read error at LBA 4660"
        );
        assert!(!sense.worth_retrying() && !sense.is_success());
    }

    #[test]
    fn without_the_valid_bit_no_block_is_named() {
        let mut bytes = fixed_medium_error(4660);
        bytes[0] = 0x70;
        let sense = Sense::parse(&bytes).unwrap();
        assert_eq!(sense.information, None);
        assert_eq!(sense.to_string(), "medium error, unrecovered read error");
    }

    #[test]
    fn a_descriptor_sense_carries_a_64_bit_block() {
        let lba: u64 = 0x1_2345_6789;
        let mut bytes = vec![0x72, 0x03, 0x11, 0x00, 0, 0, 0, 12];
        bytes.extend_from_slice(&[0x00, 0x0a, 0x80, 0x00]);
        bytes.extend_from_slice(&lba.to_be_bytes());
        let sense = Sense::parse(&bytes).unwrap();
        assert_eq!(sense.information, Some(lba));
        assert_eq!(
            sense.to_string(),
            format!("medium error, unrecovered read error at LBA {lba}")
        );
    }

    #[test]
    fn unknown_codes_are_shown_as_numbers_and_keys_by_name() {
        let bytes = [0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x99, 0x42];
        let sense = Sense::parse(&bytes).unwrap();
        assert_eq!(sense.to_string(), "illegal request, asc 0x99 ascq 0x42");
        let lba_range = [0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x21, 0x00];
        assert_eq!(
            Sense::parse(&lba_range).unwrap().to_string(),
            "illegal request, logical block address out of range"
        );
        let attention = [0x70, 0, 0x06, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29, 0x00];
        assert!(Sense::parse(&attention).unwrap().worth_retrying());
    }

    #[test]
    fn short_or_foreign_bytes_are_not_sense_and_never_panic() {
        assert_eq!(Sense::parse(&[]), None);
        assert_eq!(Sense::parse(&[0x00, 0x03]), None);
        // Truncated at every length, both formats.
        let fixed = fixed_medium_error(7);
        let mut descriptor = vec![0x72, 0x03, 0x11, 0x00, 0, 0, 0, 12, 0x00, 0x0a, 0x80, 0];
        descriptor.extend_from_slice(&7u64.to_be_bytes());
        for bytes in [&fixed[..], &descriptor[..]] {
            for len in 0..=bytes.len() {
                let _ = Sense::parse(&bytes[..len]).map(|s| s.to_string());
            }
        }
        // A descriptor whose length runs past the data is ignored.
        let runs_over = [0x72, 0x03, 0x11, 0x00, 0, 0, 0, 40, 0x00, 0xff, 0x80];
        assert_eq!(Sense::parse(&runs_over).unwrap().information, None);
        // The codes are not read past the additional length.
        let short = [0x70, 0, 0x03, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0x11, 0x00];
        assert_eq!(Sense::parse(&short).unwrap().to_string(), "medium error");
    }

    /// Arbitrary bytes behind every response code, at every length up
    /// to a long sense buffer: decoded or refused, never a panic.
    #[test]
    fn arbitrary_bytes_are_decoded_or_refused() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        };
        let mut decoded = 0;
        for round in 0..4096 {
            let len = round % 64;
            let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
            if let Some(first) = bytes.first_mut() {
                *first = [0x70, 0xf0, 0x71, 0x72, 0xf2, 0x73, 0x00][round % 7];
            }
            if let Some(sense) = Sense::parse(&bytes) {
                decoded += 1;
                assert!(!sense.to_string().is_empty());
            }
        }
        // Most lengths of the six codes of sense data decode.
        assert!(decoded > 3000, "{decoded}");
    }
}
