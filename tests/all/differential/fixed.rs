//! Hand-written cases for GNU behaviours that random generation would hit
//! rarely or that are easy to get subtly wrong.
//!
//! Each entry names the behaviour it pins down; the comment says what GNU dd
//! 9.1 does (observed, not guessed), so a mismatch report can be read next
//! to the reason the case exists. The expected result is still whatever the
//! system's dd does: the table chooses inputs, not answers.

use super::case::{Case, Signal, Stdin};

const TEXT: &[u8] = b"Hello World\nab\n\nthe quick brown fox jumps\n  lead\ntrail   \nx";

fn digits() -> Vec<u8> {
    b"0123456789abcdefghijklmnopqrstuvwxyz".to_vec()
}

fn with_zero_blocks() -> Vec<u8> {
    // data, two zero blocks of 512, data, one zero block at the very end.
    let mut bytes = vec![b'a'; 512];
    bytes.extend(vec![0; 1024]);
    bytes.extend(vec![b'b'; 100]);
    bytes.extend(vec![0; 412]);
    bytes.extend(vec![0; 512]);
    bytes
}

fn chunks(parts: &[&[u8]]) -> Stdin {
    Stdin::Chunks(parts.iter().map(|p| p.to_vec()).collect())
}

/// Standard input that brings "abcdefg", then `signal` to dd, then "hij".
fn signalled(signal: Signal) -> Stdin {
    Stdin::Signalled {
        before: b"abcdefg".to_vec(),
        signal,
        after: b"hij".to_vec(),
    }
}

fn case(name: &str) -> Case {
    Case::new(name)
}

pub fn cases() -> Vec<Case> {
    let mut cases = behaviours();
    cases.extend(human_sizes());
    cases
}

/// The "(1.0 kB, 1.0 KiB)" part of the statistics line at its rounding and
/// unit boundaries; /dev/zero to /dev/null makes even a gigabyte cheap.
fn human_sizes() -> Vec<Case> {
    const TOTALS: &[u64] = &[
        999,
        1000,
        1023,
        1024,
        9949,
        9950,
        99_949,
        99_950,
        999_499,
        999_500,
        1_048_575,
        1_048_576,
        10_485_760,
        999_999_999,
        1_073_741_824,
        1_500_000_000,
    ];
    TOTALS
        .iter()
        .map(|total| {
            let count = format!("count={total}B");
            case(&format!("human size of {total} bytes")).args(&[
                "if=/dev/zero",
                "of=/dev/null",
                "bs=1M",
                &count,
            ])
        })
        .collect()
}

fn behaviours() -> Vec<Case> {
    vec![
        // --- padding and conversions ---------------------------------------
        // conv=sync pads a short record with NULs ...
        case("sync pads with NUL")
            .file("in", "abc")
            .args(&["if=in", "bs=8", "conv=sync"]),
        // ... but with spaces when block or unblock is also given.
        case("sync,block pads with spaces")
            .file("in", "ab\ncdefgh\n")
            .args(&["if=in", "ibs=8", "cbs=4", "conv=sync,block"]),
        case("sync,unblock pads with spaces then strips them")
            .file("in", "abcd  \n")
            .args(&["if=in", "ibs=8", "cbs=4", "conv=sync,unblock"]),
        case("sync with ibs != obs").file("in", digits()).args(&[
            "if=in",
            "ibs=5",
            "obs=3",
            "conv=sync",
        ]),
        // swab keeps an odd final byte where it is.
        case("swab odd length")
            .file("in", "abcde")
            .args(&["if=in", "bs=5", "conv=swab"]),
        // swab carries the odd byte of one read into the next read.
        case("swab carries across reads")
            .file("in", "abcdefg")
            .args(&["if=in", "ibs=3", "obs=2", "conv=swab"]),
        case("swab one-byte reads")
            .file("in", "abcdefg")
            .args(&["if=in", "ibs=1", "conv=swab"]),
        case("swab with sync")
            .file("in", "abcde")
            .args(&["if=in", "bs=4", "conv=swab,sync"]),
        // unblock strips the trailing spaces of every cbs record.
        case("unblock trailing spaces")
            .file("in", "ab  cd      efgh")
            .args(&["if=in", "cbs=4", "conv=unblock"]),
        case("unblock partial final record")
            .file("in", "abcdef ")
            .args(&["if=in", "cbs=4", "conv=unblock"]),
        case("unblock all-space input")
            .file("in", "        ")
            .args(&["if=in", "cbs=4", "conv=unblock"]),
        // block pads lines to cbs and counts lines it had to cut.
        case("block one truncated record")
            .file("in", "abcdefg\nxy\n")
            .args(&["if=in", "cbs=4", "conv=block"]),
        case("block several truncated records")
            .file("in", TEXT)
            .args(&["if=in", "cbs=5", "conv=block"]),
        case("block final line without newline")
            .file("in", "ab\ncd")
            .args(&["if=in", "cbs=4", "conv=block"]),
        case("block empty lines")
            .file("in", "\n\n\n")
            .args(&["if=in", "cbs=3", "conv=block"]),
        case("block with small ibs").file("in", TEXT).args(&[
            "if=in",
            "ibs=3",
            "cbs=6",
            "conv=block",
        ]),
        case("unblock with small obs").file("in", TEXT).args(&[
            "if=in",
            "obs=3",
            "cbs=6",
            "conv=unblock",
        ]),
        // ascii implies unblock, ebcdic and ibm imply block, when cbs is set.
        case("ascii implies unblock")
            .file("in", digits())
            .args(&["if=in", "cbs=5", "conv=ascii"]),
        case("ebcdic implies block")
            .file("in", TEXT)
            .args(&["if=in", "cbs=8", "conv=ebcdic"]),
        case("ibm with lcase")
            .file("in", TEXT)
            .args(&["if=in", "cbs=8", "conv=ibm,lcase"]),
        case("ascii,block conflict")
            .file("in", TEXT)
            .args(&["if=in", "cbs=4", "conv=ascii,block"]),
        case("ebcdic,unblock conflict").file("in", TEXT).args(&[
            "if=in",
            "cbs=4",
            "conv=ebcdic,unblock",
        ]),
        case("ascii without cbs")
            .file("in", (0..=255u8).collect::<Vec<u8>>())
            .args(&["if=in", "conv=ascii"]),
        case("ebcdic without cbs")
            .file("in", (0..=255u8).collect::<Vec<u8>>())
            .args(&["if=in", "conv=ebcdic"]),
        case("ibm without cbs")
            .file("in", (0..=255u8).collect::<Vec<u8>>())
            .args(&["if=in", "conv=ibm"]),
        case("ucase on all bytes")
            .file("in", (0..=255u8).collect::<Vec<u8>>())
            .args(&["if=in", "conv=ucase"]),
        case("lcase,unblock").file("in", "ABCDEFGH  IJ").args(&[
            "if=in",
            "cbs=4",
            "conv=lcase,unblock",
        ]),
        case("ucase,swab,block").file("in", TEXT).args(&[
            "if=in",
            "cbs=7",
            "conv=ucase,swab,block",
        ]),
        case("cbs without block or unblock")
            .file("in", TEXT)
            .args(&["if=in", "cbs=3"]),
        case("conversion symbols repeated").file("in", TEXT).args(&[
            "if=in",
            "conv=ucase",
            "conv=ucase,swab",
        ]),
        // --- record counting -------------------------------------------------
        case("partial records in and out")
            .file("in", digits())
            .args(&["if=in", "ibs=7", "obs=5"]),
        case("count=2B is a partial record")
            .file("in", digits())
            .args(&["if=in", "bs=5", "count=2B"]),
        case("count_bytes not a multiple of ibs")
            .file("in", digits())
            .args(&["if=in", "bs=3", "count=7", "iflag=count_bytes"]),
        case("count bytes via 2Bx2")
            .file("in", digits())
            .args(&["if=in", "bs=3", "count=2Bx2"]),
        case("one byte copied (singular)")
            .file("in", "a")
            .args(&["if=in"]),
        case("zero bytes").file("in", "").args(&["if=in", "of=out"]),
        case("status=noxfer")
            .file("in", digits())
            .args(&["if=in", "status=noxfer"]),
        case("status=none")
            .file("in", digits())
            .args(&["if=in", "status=none"]),
        case("status=progress on a short copy")
            .file("in", digits())
            .args(&["if=in", "status=progress"]),
        case("status last one wins").file("in", digits()).args(&[
            "if=in",
            "status=none",
            "status=noxfer",
        ]),
        case("if= last one wins")
            .file("in", digits())
            .file("other", "other")
            .args(&["if=in", "if=other"]),
        case("bs overrides ibs and obs")
            .file("in", digits())
            .args(&["ibs=2", "bs=5", "obs=3", "if=in"]),
        // --- skip, seek and truncation ----------------------------------------
        // count=0 still skips, and warns when the skip is past the end.
        case("count=0 with skip past end")
            .file("in", digits())
            .args(&["if=in", "skip=100", "count=0"]),
        case("skip past end")
            .file("in", digits())
            .args(&["if=in", "bs=4", "skip=10"]),
        case("skip exactly to end")
            .file("in", digits())
            .args(&["if=in", "bs=4", "skip=9"]),
        case("skip_bytes not a multiple of ibs")
            .file("in", digits())
            .args(&["if=in", "bs=4", "skip=5", "iflag=skip_bytes"]),
        case("iseek synonym")
            .file("in", digits())
            .args(&["if=in", "bs=4", "iseek=2"]),
        case("oseek synonym")
            .file("in", digits())
            .args(&["if=in", "of=out", "bs=4", "oseek=2"]),
        // seek=N with notrunc overwrites in the middle and keeps the tail.
        case("seek with notrunc keeps tail")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .args(&["if=in", "of=out", "bs=4", "seek=2", "conv=notrunc"]),
        // Without notrunc, a record seek truncates to the seek offset.
        case("seek without notrunc truncates at seek")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .args(&["if=in", "of=out", "bs=4", "seek=2"]),
        // A byte seek (B suffix) without notrunc: GNU 9.1 keeps the bytes
        // before the offset and truncates at it, like a record seek.
        case("seek=5B without notrunc")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .args(&["if=in", "of=out", "bs=4", "seek=5B"]),
        case("seek_bytes without notrunc")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .args(&["if=in", "of=out", "bs=4", "seek=5", "oflag=seek_bytes"]),
        case("seek_bytes with notrunc")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .args(&[
                "if=in",
                "of=out",
                "bs=4",
                "seek=5",
                "oflag=seek_bytes",
                "conv=notrunc",
            ]),
        case("seek past end extends with zeros")
            .file("in", "abc")
            .file("out", "XY")
            .args(&["if=in", "of=out", "bs=4", "seek=3", "conv=notrunc"]),
        // The classic way to make a sparse file: nothing copied, size set.
        case("dev/null with seek sets size").args(&["if=/dev/null", "of=out", "bs=1k", "seek=3"]),
        case("count=0 seek truncates longer file")
            .file("in", "abc")
            .file("out", vec![b'X'; 5000])
            .args(&["if=in", "of=out", "bs=1k", "seek=2", "count=0"]),
        case("existing longer output is truncated")
            .file("in", "abc")
            .file("out", vec![b'X'; 100])
            .args(&["if=in", "of=out"]),
        case("notrunc keeps longer output")
            .file("in", "abc")
            .file("out", vec![b'X'; 100])
            .args(&["if=in", "of=out", "conv=notrunc"]),
        case("append with seek")
            .file("in", digits())
            .file("out", vec![b'X'; 25])
            .args(&["if=in", "of=out", "bs=4", "seek=1", "oflag=append"]),
        case("append with notrunc")
            .file("in", digits())
            .file("out", vec![b'X'; 25])
            .args(&["if=in", "of=out", "oflag=append", "conv=notrunc"]),
        // Seeking on a pipe is an error, not zero-filling.
        case("seek on stdout pipe")
            .file("in", digits())
            .args(&["if=in", "bs=4", "seek=2"]),
        case("seek on dev/null").file("in", digits()).args(&[
            "if=in",
            "of=/dev/null",
            "bs=4",
            "seek=2",
        ]),
        case("huge skip")
            .file("in", digits())
            .args(&["if=in", "bs=1k", "skip=1E"]),
        case("huge seek")
            .file("in", digits())
            .args(&["if=in", "of=out", "seek=1E"]),
        case("huge seek on stdout")
            .file("in", digits())
            .args(&["if=in", "seek=1E"]),
        // Reading and writing the same file shifts its contents.
        case("same file shift").file("f", digits()).args(&[
            "if=f",
            "of=f",
            "bs=3",
            "skip=1",
            "conv=notrunc",
        ]),
        // --- sparse ----------------------------------------------------------
        // A trailing zero block is not written: the size comes from ftruncate.
        case("sparse trailing hole")
            .file("in", with_zero_blocks())
            .args(&["if=in", "of=out", "conv=sparse"]),
        case("sparse with smaller obs")
            .file("in", with_zero_blocks())
            .args(&["if=in", "of=out", "ibs=512", "obs=100", "conv=sparse"]),
        // With notrunc, skipped zero blocks leave the old bytes in place.
        case("sparse,notrunc keeps old bytes under holes")
            .file("in", with_zero_blocks())
            .file("out", vec![b'X'; 4000])
            .args(&["if=in", "of=out", "conv=sparse,notrunc"]),
        case("sparse all zeros").file("in", vec![0; 2048]).args(&[
            "if=in",
            "of=out",
            "conv=sparse",
        ]),
        case("sparse to stdout pipe")
            .file("in", with_zero_blocks())
            .args(&["if=in", "conv=sparse"]),
        case("sparse with seek")
            .file("in", with_zero_blocks())
            .args(&["if=in", "of=out", "seek=2", "conv=sparse"]),
        // --- stdin and pipes -------------------------------------------------
        // What follows count= must be left for the next reader.
        case("next reader after count on file")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .shell("\"$DD\" \"$@\"; cat")
            .args(&["bs=3", "count=1"]),
        case("next reader after skip and count on file")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .shell("\"$DD\" \"$@\"; cat")
            .args(&["bs=3", "skip=2", "count=1"]),
        case("next reader after count on pipe")
            .stdin(Stdin::Pipe(digits()))
            .shell("\"$DD\" \"$@\"; cat")
            .args(&["bs=3", "count=1"]),
        case("next reader after count_bytes on pipe")
            .stdin(Stdin::Pipe(digits()))
            .shell("\"$DD\" \"$@\"; cat")
            .args(&["bs=4", "count=6", "iflag=count_bytes"]),
        case("two dd in a row on a file")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .shell("\"$DD\" \"$@\"; \"$DD\" \"$@\"")
            .args(&["bs=5", "count=1", "skip=1"]),
        case("skip on stdin file past end")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .args(&["bs=4", "skip=20"]),
        case("skip on pipe past end")
            .stdin(Stdin::Pipe(digits()))
            .args(&["bs=4", "skip=20"]),
        // Short reads: bs= writes each read as it came; ibs/obs reblocks.
        case("bs= writes short reads as they come")
            .stdin(chunks(&[b"abc", b"defgh"]))
            .args(&["bs=4"]),
        case("ibs/obs reblocks short reads")
            .stdin(chunks(&[b"abc", b"defgh"]))
            .args(&["ibs=4", "obs=4"]),
        case("partial read warning with count")
            .stdin(chunks(&[b"abc", b"defgh", b"ijklmnop"]))
            .args(&["bs=4", "count=3"]),
        case("fullblock with count")
            .stdin(chunks(&[b"abc", b"defgh", b"ijklmnop"]))
            .args(&["bs=4", "count=3", "iflag=fullblock"]),
        case("sync pads every short read")
            .stdin(chunks(&[b"a", b"bc", b"def"]))
            .args(&["bs=4", "conv=sync"]),
        case("skip on pipe with short reads")
            .stdin(chunks(&[b"abc", b"defgh", b"ijklmnop"]))
            .args(&["bs=4", "skip=2"]),
        case("skip_bytes on pipe with short reads")
            .stdin(chunks(&[b"abc", b"defgh", b"ijklmnop"]))
            .args(&["bs=4", "skip=5", "iflag=skip_bytes"]),
        case("one-byte reads into big obs")
            .stdin(chunks(&[b"a", b"b", b"c", b"d", b"e"]))
            .args(&["ibs=1", "obs=1k"]),
        case("block across short reads")
            .stdin(chunks(&[b"ab", b"c\nde", b"fghij\n", b"k"]))
            .args(&["cbs=4", "conv=block"]),
        case("unblock across short reads")
            .stdin(chunks(&[b"ab", b"cd  e", b"fgh   ", b"k"]))
            .args(&["cbs=4", "conv=unblock"]),
        case("swab across short reads")
            .stdin(chunks(&[b"abc", b"de", b"f", b"ghi"]))
            .args(&["bs=8", "conv=swab"]),
        // --- signals ---------------------------------------------------------------
        // SIGUSR1 prints the statistics so far and the copy carries on.
        case("SIGUSR1 prints statistics")
            .stdin(signalled(Signal::Usr1))
            .args(&["bs=4"]),
        case("SIGUSR1 with status=noxfer")
            .stdin(signalled(Signal::Usr1))
            .args(&["bs=4", "status=noxfer"]),
        case("SIGUSR1 with status=none")
            .stdin(signalled(Signal::Usr1))
            .args(&["bs=4", "status=none"]),
        // SIGINT prints the statistics, then dd dies of the signal.
        case("SIGINT prints statistics and dies")
            .stdin(signalled(Signal::Int))
            .args(&["ibs=4", "obs=3", "of=out"]),
        // --- stdout as a redirected file ---------------------------------------
        case("seek on redirected stdout keeps head")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .shell("\"$DD\" \"$@\" 1<> out")
            .args(&["if=in", "bs=4", "seek=2"]),
        case("notrunc on redirected stdout")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .shell("\"$DD\" \"$@\" 1<> out")
            .args(&["if=in", "bs=4", "seek=1", "conv=notrunc"]),
        case("append-redirected stdout with seek")
            .file("in", "abc")
            .file("out", vec![b'X'; 20])
            .shell("\"$DD\" \"$@\" >> out")
            .args(&["if=in", "bs=4", "seek=1"]),
        // --- flags -------------------------------------------------------------
        case("iflag=directory on a file")
            .file("in", digits())
            .args(&["if=in", "iflag=directory"]),
        case("iflag=directory on a directory")
            .dir("sub")
            .args(&["if=sub", "iflag=directory"]),
        case("oflag=directory on new output")
            .file("in", digits())
            .args(&["if=in", "of=out", "oflag=directory"]),
        case("oflag=directory on a directory")
            .file("in", digits())
            .dir("sub")
            .args(&["if=in", "of=sub", "oflag=directory"]),
        case("iflag=directory on stdin")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .args(&["iflag=directory"]),
        case("reading a directory").dir("sub").args(&["if=sub"]),
        case("writing to a directory")
            .file("in", digits())
            .dir("sub")
            .args(&["if=in", "of=sub"]),
        case("nofollow on symlinked input")
            .file("data", digits())
            .symlink("in", "data")
            .args(&["if=in", "iflag=nofollow"]),
        case("nofollow on symlinked output")
            .file("in", digits())
            .file("target", "old")
            .symlink("out", "target")
            .args(&["if=in", "of=out", "oflag=nofollow"]),
        case("output through symlink")
            .file("in", digits())
            .file("target", "old")
            .symlink("out", "target")
            .args(&["if=in", "of=out"]),
        case("oflag=fullblock is invalid")
            .file("in", digits())
            .args(&["if=in", "oflag=fullblock"]),
        case("direct with aligned blocks and short tail")
            .file("in", vec![b'd'; 5000])
            .args(&["if=in", "of=out", "bs=4096", "iflag=direct", "oflag=direct"]),
        case("iflag=direct with unaligned size")
            .file("in", vec![b'd'; 5000])
            .args(&["if=in", "of=out", "bs=100", "iflag=direct"]),
        case("oflag=direct with unaligned size")
            .file("in", vec![b'd'; 5000])
            .args(&["if=in", "of=out", "bs=100", "oflag=direct"]),
        case("fdatasync on stdout pipe")
            .file("in", digits())
            .args(&["if=in", "conv=fdatasync"]),
        case("fsync on file")
            .file("in", digits())
            .args(&["if=in", "of=out", "conv=fsync"]),
        case("excl on existing output")
            .file("in", digits())
            .file("out", "old")
            .args(&["if=in", "of=out", "conv=excl"]),
        case("excl on new output")
            .file("in", digits())
            .args(&["if=in", "of=out", "conv=excl"]),
        case("nocreat on missing output")
            .file("in", digits())
            .args(&["if=in", "of=out", "conv=nocreat"]),
        case("nocreat on existing output")
            .file("in", digits())
            .file("out", "old-content")
            .args(&["if=in", "of=out", "conv=nocreat"]),
        case("excl,nocreat conflict").file("in", digits()).args(&[
            "if=in",
            "of=out",
            "conv=excl,nocreat",
        ]),
        // --- read and write errors ----------------------------------------------
        // Misaligned O_DIRECT reads fail with EINVAL: a reproducible read error.
        case("noerror continues after read errors")
            .file("in", digits().repeat(30))
            .args(&["if=in", "of=out", "bs=100", "iflag=direct", "conv=noerror"]),
        case("noerror,sync pads failed reads")
            .file("in", digits().repeat(30))
            .args(&[
                "if=in",
                "of=out",
                "bs=100",
                "iflag=direct",
                "conv=noerror,sync",
            ]),
        case("read error without noerror stops")
            .file("in", digits().repeat(30))
            .args(&["if=in", "of=out", "bs=100", "iflag=direct"]),
        case("write to dev/full")
            .file("in", digits())
            .args(&["if=in", "of=/dev/full", "bs=4"]),
        case("stdout is dev/full")
            .file("in", digits())
            .shell("\"$DD\" \"$@\" > /dev/full")
            .args(&["if=in"]),
        case("stdin closed")
            .shell("\"$DD\" \"$@\" <&-")
            .args(&["bs=4"]),
        case("stdin closed but if= given")
            .file("in", digits())
            .shell("\"$DD\" \"$@\" <&-")
            .args(&["if=in", "of=out"]),
        case("stdout closed")
            .file("in", digits())
            .shell("\"$DD\" \"$@\" >&-")
            .args(&["if=in"]),
        case("stdout closed but of= given")
            .file("in", digits())
            .shell("\"$DD\" \"$@\" >&-")
            .args(&["if=in", "of=out"]),
        case("stderr closed")
            .file("in", digits())
            .shell("\"$DD\" \"$@\" 2>&-")
            .args(&["if=in", "of=out"]),
        // GNU dies of SIGPIPE silently when its reader goes away (more than a
        // pipe buffer is left to write, so this is not a race); the shell
        // reports the status on stderr.
        case("reader of stdout goes away")
            .file("in", digits().repeat(8000))
            .shell("{ \"$DD\" \"$@\"; echo \"status $?\" >&2; } | head -c 100")
            .args(&["if=in", "bs=4096"]),
        // --- operand errors ------------------------------------------------------
        case("option terminator")
            .file("in", digits())
            .args(&["--", "if=in"]),
        case("invalid short option").args(&["-x"]),
        case("unknown long option").args(&["--foo"]),
        case("empty if=").args(&["if="]),
        case("empty of=")
            .file("in", digits())
            .args(&["if=in", "of="]),
        case("unknown operand").args(&["foo=1"]),
        case("operand without equals").args(&["bar"]),
        case("bs=0").args(&["bs=0"]),
        case("bs=-1").args(&["bs=-1"]),
        case("bs=1e").args(&["bs=1e"]),
        case("count=x").args(&["count=x"]),
        case("empty value").args(&["bs="]),
        case("number too large").args(&["count=99999999999999999999"]),
        // '0x' warns, then is a zero: invalid as a size, a zero count.
        case("bs=0x5 warns then fails").args(&["bs=0x5"]),
        case("count=0x5 warns and copies nothing")
            .file("in", digits())
            .args(&["if=in", "count=0x5"]),
        case("0x warning even with status=none")
            .file("in", digits())
            .args(&["if=in", "count=0x5", "status=none"]),
        case("unknown conv").args(&["conv=foo"]),
        case("unknown iflag").args(&["iflag=foo"]),
        case("unknown status").args(&["status=foo"]),
        case("lcase,ucase conflict").args(&["conv=lcase,ucase"]),
        case("ascii,ebcdic conflict").args(&["conv=ascii,ebcdic"]),
        case("block,unblock conflict").args(&["cbs=4", "conv=block,unblock"]),
        case("block,unblock without cbs")
            .file("in", digits())
            .args(&["if=in", "conv=block,unblock"]),
        case("missing input").args(&["if=missing"]),
        case("of= last one wins")
            .file("in", digits())
            .args(&["if=in", "of=a", "of=b"]),
        case("excl on dev/null")
            .file("in", digits())
            .args(&["if=in", "of=/dev/null", "conv=excl"]),
        // Buffers are allocated up front; 1 EiB cannot be.
        case("input buffer too large")
            .file("in", digits())
            .args(&["if=in", "bs=1E"]),
        case("output buffer too large")
            .file("in", digits())
            .args(&["if=in", "ibs=1", "obs=1E"]),
        case("size overflows").args(&["bs=16E"]),
        case("size suffix beyond range").args(&["bs=1Z"]),
        case("unknown size suffix").args(&["bs=1R"]),
        // /dev/stdin is opened anew: its offset is not the shell's.
        case("if=/dev/stdin then next reader")
            .file("in", digits())
            .stdin(Stdin::File("in".into()))
            .shell("\"$DD\" \"$@\"; cat")
            .args(&["if=/dev/stdin", "bs=3", "count=1"]),
        // of=/dev/stdout truncates what the shell opened for appending.
        case("of=/dev/stdout truncates append redirection")
            .file("in", digits())
            .file("out", vec![b'X'; 50])
            .shell("\"$DD\" \"$@\" >> out")
            .args(&["if=in", "of=/dev/stdout"]),
        case("of=/dev/stdout with notrunc and seek")
            .file("in", digits())
            .file("out", vec![b'X'; 50])
            .shell("\"$DD\" \"$@\" 1<> out")
            .args(&["if=in", "of=/dev/stdout", "bs=4", "seek=2", "conv=notrunc"]),
        case("first error wins").args(&["bs=0", "foo=1", "conv=bar"]),
        case("error after valid operands")
            .file("in", digits())
            .args(&["if=in", "of=out", "bs=4", "count=zz"]),
        case("invalid operand creates no output")
            .file("in", digits())
            .args(&["if=in", "of=out", "bs=x"]),
    ]
}
