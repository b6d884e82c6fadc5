//! The symbol sets of `conv=`, `iflag=`/`oflag=` and `status=`.
//!
//! Each set is a table from GNU's spelling to a flag, parsed the way dd
//! parses it: a comma-separated list in which every item must be a known
//! symbol (an empty item is an error too).

use bitflags::bitflags;

bitflags! {
    /// `conv=` symbols.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Conv: u32 {
        const ASCII = 1 << 0;
        const EBCDIC = 1 << 1;
        const IBM = 1 << 2;
        const BLOCK = 1 << 3;
        const UNBLOCK = 1 << 4;
        const LCASE = 1 << 5;
        const UCASE = 1 << 6;
        const SWAB = 1 << 7;
        const NOERROR = 1 << 8;
        const NOTRUNC = 1 << 9;
        const SYNC = 1 << 10;
        const NOCREAT = 1 << 11;
        const EXCL = 1 << 12;
        const FDATASYNC = 1 << 13;
        const FSYNC = 1 << 14;
        const SPARSE = 1 << 15;
    }
}

bitflags! {
    /// `iflag=`/`oflag=` symbols: open(2) flags and dd's private ones.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct IoFlags: u32 {
        const APPEND = 1 << 0;
        const DIRECT = 1 << 1;
        const DIRECTORY = 1 << 2;
        const DSYNC = 1 << 3;
        const SYNC = 1 << 4;
        const NONBLOCK = 1 << 5;
        const NOATIME = 1 << 6;
        const NOCACHE = 1 << 7;
        const NOCTTY = 1 << 8;
        const NOFOLLOW = 1 << 9;
        const FULLBLOCK = 1 << 10;
        const COUNT_BYTES = 1 << 11;
        const SKIP_BYTES = 1 << 12;
        const SEEK_BYTES = 1 << 13;
    }
}

/// `status=` level; the default prints the full statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum StatusLevel {
    None,
    Noxfer,
    #[default]
    Default,
    Progress,
}

/// The conv symbols that need separate input and output buffers (GNU's
/// C_TWOBUFS): they transform data, so records are re-blocked to obs.
/// The conversions that change the bytes, each under the conv= name that
/// sets it (for messages refusing them where bytes must pass unchanged).
pub const DATA_CONVERSIONS: &[(Conv, &str)] = &[
    (Conv::ASCII, "ascii"),
    (Conv::EBCDIC, "ebcdic"),
    (Conv::IBM, "ibm"),
    (Conv::BLOCK, "block"),
    (Conv::UNBLOCK, "unblock"),
    (Conv::LCASE, "lcase"),
    (Conv::UCASE, "ucase"),
    (Conv::SWAB, "swab"),
];

pub const TWO_BUFFER_CONVERSIONS: Conv = Conv::ASCII
    .union(Conv::EBCDIC)
    .union(Conv::IBM)
    .union(Conv::BLOCK)
    .union(Conv::UNBLOCK)
    .union(Conv::LCASE)
    .union(Conv::UCASE)
    .union(Conv::SWAB);

const CONV_SYMBOLS: &[(&str, Conv)] = &[
    ("ascii", Conv::ASCII.union(Conv::UNBLOCK)),
    ("ebcdic", Conv::EBCDIC.union(Conv::BLOCK)),
    ("ibm", Conv::IBM.union(Conv::BLOCK)),
    ("block", Conv::BLOCK),
    ("unblock", Conv::UNBLOCK),
    ("lcase", Conv::LCASE),
    ("ucase", Conv::UCASE),
    ("sparse", Conv::SPARSE),
    ("swab", Conv::SWAB),
    ("noerror", Conv::NOERROR),
    ("nocreat", Conv::NOCREAT),
    ("excl", Conv::EXCL),
    ("notrunc", Conv::NOTRUNC),
    ("sync", Conv::SYNC),
    ("fdatasync", Conv::FDATASYNC),
    ("fsync", Conv::FSYNC),
];

const FLAG_SYMBOLS: &[(&str, IoFlags)] = &[
    ("append", IoFlags::APPEND),
    ("direct", IoFlags::DIRECT),
    ("directory", IoFlags::DIRECTORY),
    ("dsync", IoFlags::DSYNC),
    ("noatime", IoFlags::NOATIME),
    ("nocache", IoFlags::NOCACHE),
    ("noctty", IoFlags::NOCTTY),
    ("nofollow", IoFlags::NOFOLLOW),
    ("nonblock", IoFlags::NONBLOCK),
    ("sync", IoFlags::SYNC),
    ("fullblock", IoFlags::FULLBLOCK),
    ("count_bytes", IoFlags::COUNT_BYTES),
    ("skip_bytes", IoFlags::SKIP_BYTES),
    ("seek_bytes", IoFlags::SEEK_BYTES),
];

const STATUS_SYMBOLS: &[(&str, StatusLevel)] = &[
    ("none", StatusLevel::None),
    ("noxfer", StatusLevel::Noxfer),
    ("progress", StatusLevel::Progress),
];

/// The names the parser accepts, for help, man page and completions.
pub fn conv_names() -> impl Iterator<Item = &'static str> {
    CONV_SYMBOLS.iter().map(|(name, _)| *name)
}

pub fn flag_names() -> impl Iterator<Item = &'static str> {
    FLAG_SYMBOLS.iter().map(|(name, _)| *name)
}

pub fn status_names() -> impl Iterator<Item = &'static str> {
    STATUS_SYMBOLS.iter().map(|(name, _)| *name)
}

/// The `conv=` symbols `conv` holds, by name (for messages that name
/// what cannot be combined).
pub fn conv_symbols_in(conv: Conv) -> impl Iterator<Item = &'static str> {
    CONV_SYMBOLS
        .iter()
        .filter(move |(_, flag)| conv.contains(*flag))
        .map(|(name, _)| *name)
}

/// The `iflag=`/`oflag=` symbols `flags` holds, by name.
pub fn flag_symbols_in(flags: IoFlags) -> impl Iterator<Item = &'static str> {
    FLAG_SYMBOLS
        .iter()
        .filter(move |(_, flag)| flags.contains(*flag))
        .map(|(name, _)| *name)
}

/// The first item of a list that is not a symbol of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSymbol(pub String);

fn lookup<T: Copy>(table: &[(&str, T)], item: &str) -> Result<T, UnknownSymbol> {
    table
        .iter()
        .find(|(name, _)| *name == item)
        .map(|(_, value)| *value)
        .ok_or_else(|| UnknownSymbol(item.to_owned()))
}

/// Parse a `conv=` list; symbols accumulate.
pub fn parse_conv(list: &str) -> Result<Conv, UnknownSymbol> {
    list.split(',').try_fold(Conv::empty(), |acc, item| {
        Ok(acc | lookup(CONV_SYMBOLS, item)?)
    })
}

/// Parse an `iflag=`/`oflag=` list; symbols accumulate.
pub fn parse_flags(list: &str) -> Result<IoFlags, UnknownSymbol> {
    list.split(',').try_fold(IoFlags::empty(), |acc, item| {
        Ok(acc | lookup(FLAG_SYMBOLS, item)?)
    })
}

/// Parse a `status=` list; as in GNU, the last symbol wins.
pub fn parse_status(list: &str) -> Result<StatusLevel, UnknownSymbol> {
    list.split(',')
        .try_fold(StatusLevel::Default, |_, item| lookup(STATUS_SYMBOLS, item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_conv_symbol_is_known() {
        for (name, _) in CONV_SYMBOLS {
            assert!(parse_conv(name).is_ok(), "{name}");
        }
        assert_eq!(CONV_SYMBOLS.len(), 16);
    }

    #[test]
    fn charset_conversions_imply_blocking() {
        assert_eq!(parse_conv("ascii").unwrap(), Conv::ASCII | Conv::UNBLOCK);
        assert_eq!(parse_conv("ebcdic").unwrap(), Conv::EBCDIC | Conv::BLOCK);
        assert_eq!(parse_conv("ibm").unwrap(), Conv::IBM | Conv::BLOCK);
    }

    #[test]
    fn lists_accumulate() {
        assert_eq!(
            parse_conv("notrunc,sync,swab").unwrap(),
            Conv::NOTRUNC | Conv::SYNC | Conv::SWAB
        );
        assert_eq!(
            parse_flags("direct,fullblock").unwrap(),
            IoFlags::DIRECT | IoFlags::FULLBLOCK
        );
    }

    #[test]
    fn unknown_and_empty_items_are_errors() {
        assert_eq!(parse_conv("nosuch"), Err(UnknownSymbol("nosuch".into())));
        assert_eq!(parse_conv("sync,,swab"), Err(UnknownSymbol(String::new())));
        assert_eq!(parse_conv(""), Err(UnknownSymbol(String::new())));
        assert_eq!(parse_flags("binary"), Err(UnknownSymbol("binary".into())));
        assert_eq!(parse_flags("text"), Err(UnknownSymbol("text".into())));
        assert_eq!(parse_status("all"), Err(UnknownSymbol("all".into())));
    }

    #[test]
    fn status_last_symbol_wins() {
        assert_eq!(
            parse_status("none,progress").unwrap(),
            StatusLevel::Progress
        );
        assert_eq!(parse_status("noxfer").unwrap(), StatusLevel::Noxfer);
    }

    #[test]
    fn every_flag_symbol_is_known() {
        for name in [
            "append",
            "direct",
            "directory",
            "dsync",
            "sync",
            "fullblock",
            "nonblock",
            "noatime",
            "nocache",
            "noctty",
            "nofollow",
            "count_bytes",
            "skip_bytes",
            "seek_bytes",
        ] {
            assert!(parse_flags(name).is_ok(), "{name}");
        }
    }
}
