//! ddx's `--options`, told apart from dd operands as GNU getopt would:
//! a word starting with '-' (other than "-" itself) before "--" is an
//! option; everything else is an operand, kept in order.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    Operands(Vec<OsString>),
    Help,
    Version,
    /// A getopt-style message ("unrecognized option '--x'").
    Error(String),
}

/// Long options ddx knows; unique prefixes are accepted, as with getopt.
const LONG_OPTIONS: &[&str] = &["help", "version"];

pub fn scan(words: &[OsString]) -> Scan {
    let mut operands = Vec::with_capacity(words.len());
    let mut options_ended = false;
    for word in words {
        let bytes = word.as_bytes();
        if options_ended || bytes.len() < 2 || bytes[0] != b'-' {
            operands.push(word.clone());
            continue;
        }
        if bytes == b"--" {
            options_ended = true;
            continue;
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let text = String::from_utf8_lossy(long);
            let (name, has_value) = match text.split_once('=') {
                Some((name, _)) => (name.to_owned(), true),
                None => (text.clone().into_owned(), false),
            };
            let matches: Vec<&str> = LONG_OPTIONS
                .iter()
                .copied()
                .filter(|o| o.starts_with(name.as_str()))
                .collect();
            let chosen = match matches.as_slice() {
                [one] => *one,
                _ if LONG_OPTIONS.contains(&name.as_str()) => LONG_OPTIONS
                    .iter()
                    .copied()
                    .find(|o| *o == name)
                    .unwrap_or_default(),
                [] => return Scan::Error(format!("unrecognized option '--{text}'")),
                several => {
                    let list: Vec<String> = several.iter().map(|o| format!("'--{o}'")).collect();
                    return Scan::Error(format!(
                        "option '--{name}' is ambiguous; possibilities: {}",
                        list.join(" ")
                    ));
                }
            };
            if has_value {
                return Scan::Error(format!("option '--{chosen}' doesn't allow an argument"));
            }
            return match chosen {
                "help" => Scan::Help,
                _ => Scan::Version,
            };
        }
        let letter = String::from_utf8_lossy(&bytes[1..2]).into_owned();
        return Scan::Error(format!("invalid option -- '{letter}'"));
    }
    Scan::Operands(operands)
}

pub fn version_text() -> String {
    format!(
        "ddx {} (GNU coreutils dd 9.1 compatible)\n\
         dd rebuilt for today's disks: a byte-exact drop-in for GNU dd.\n",
        env!("CARGO_PKG_VERSION")
    )
}

pub fn help_text(program: &str) -> String {
    format!(
        "\
Usage: {program} [OPERAND]...
  or:  {program} OPTION
Copy a file, converting and formatting according to the operands
(a drop-in replacement for GNU dd).

  bs=BYTES        read and write up to BYTES bytes at a time (default: 512);
                  overrides ibs and obs
  cbs=BYTES       convert BYTES bytes at a time
  conv=CONVS      convert the file as per the comma separated symbol list
  count=N         copy only N input blocks
  ibs=BYTES       read up to BYTES bytes at a time (default: 512)
  if=FILE         read from FILE instead of standard input
  iflag=FLAGS     read as per the comma separated symbol list
  obs=BYTES       write BYTES bytes at a time (default: 512)
  of=FILE         write to FILE instead of standard output
  oflag=FLAGS     write as per the comma separated symbol list
  seek=N          (or oseek=N) skip N obs-sized output blocks
  skip=N          (or iseek=N) skip N ibs-sized input blocks
  status=LEVEL    what to print on standard error: 'none' only errors,
                  'noxfer' no transfer statistics, 'progress' a line
                  every second

N and BYTES may be followed by a multiplier: c=1, w=2, b=512, kB=1000,
K=1024, MB=1000*1000, M=1024*1024, xM=M, GB, G, and so on for T, P, E,
Z, Y; KiB=K, MiB=M, and so on. AxB multiplies. If N ends in 'B', it counts
bytes, not blocks.

CONV symbols:
  ascii     EBCDIC to ASCII          ebcdic    ASCII to EBCDIC
  ibm       ASCII to alternate EBCDIC
  block     pad newline-terminated records with spaces to cbs bytes
  unblock   replace trailing spaces in cbs-byte records with a newline
  lcase     upper case to lower case ucase     lower case to upper case
  sparse    seek over all-zero output blocks instead of writing them
  swab      swap every pair of input bytes
  sync      pad every input block to ibs with NULs (spaces with
            block/unblock)
  excl      fail if the output file exists
  nocreat   do not create the output file
  notrunc   do not truncate the output file
  noerror   continue after read errors
  fdatasync write output data to the device before finishing
  fsync     likewise, and metadata too

FLAG symbols:
  append    append mode (output only; conv=notrunc suggested)
  direct    direct I/O, bypassing the page cache
  directory fail unless a directory
  dsync     synchronized I/O for data
  sync      synchronized I/O for data and metadata
  fullblock accumulate full input blocks (iflag only)
  nonblock  non-blocking I/O
  noatime   do not update access times
  nocache   ask the kernel to drop the cache
  noctty    do not take a controlling terminal from the file
  nofollow  do not follow symlinks
  count_bytes, skip_bytes, seek_bytes
            count= / skip= / seek= count bytes, not blocks

Sending SIGUSR1 to a running {program} prints I/O statistics to standard
error; the copy goes on. SIGINT prints them and stops.

Options:
      --help     display this help and exit
      --version  output version information and exit
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn operands_pass_through_in_order() {
        assert_eq!(
            scan(&words(&["if=a", "-", "of=b"])),
            Scan::Operands(words(&["if=a", "-", "of=b"]))
        );
        assert_eq!(
            scan(&words(&["if=a", "--", "--help"])),
            Scan::Operands(words(&["if=a", "--help"]))
        );
    }

    #[test]
    fn help_and_version_anywhere_and_abbreviated() {
        assert_eq!(scan(&words(&["if=a", "--help"])), Scan::Help);
        assert_eq!(scan(&words(&["--he"])), Scan::Help);
        assert_eq!(scan(&words(&["--v"])), Scan::Version);
    }

    #[test]
    fn getopt_style_errors() {
        assert_eq!(
            scan(&words(&["-x"])),
            Scan::Error("invalid option -- 'x'".into())
        );
        assert_eq!(
            scan(&words(&["--foo"])),
            Scan::Error("unrecognized option '--foo'".into())
        );
        assert_eq!(
            scan(&words(&["--help=1"])),
            Scan::Error("option '--help' doesn't allow an argument".into())
        );
    }
}
