//! The flavours of generated cases: each one drafts a case about one area
//! of dd (offsets, conversions, flags, ...) on top of the common draft.
//!
//! Flavours only tilt the odds: they add what they are about and then let the
//! common draft choose input source and output sink, so the areas still meet.

use super::content::Kind;
use super::generate::{render_size, Draft, Sink, Source};
use super::prng::Rng;

/// A flavour's name (the label of its cases), weight, and drafting step.
pub type Flavour = (&'static str, u32, fn(&mut Draft));

/// Flavours and their weights.
pub const FLAVOURS: &[Flavour] = &[
    ("copy", 12, copy),
    ("offsets", 16, offsets),
    ("conv", 18, conversions),
    ("sparse", 7, sparse),
    ("flags", 10, flags),
    ("existing-output", 10, existing_output),
    ("stdin", 8, stdin),
    ("next-reader", 5, next_reader),
    ("stdout-redirect", 4, stdout_redirect),
    ("error", 10, error),
    ("large", 3, large),
    ("same-file", 3, same_file),
];

/// Just sizes, maybe a count, maybe a status level.
fn copy(d: &mut Draft) {
    if d.rng.chance(35) {
        d.add_count();
    }
    if d.rng.chance(25) {
        d.add_status();
    }
    if d.rng.chance(10) {
        // A repeated size operand: the last one wins.
        let key = *d.rng.pick(&["bs", "ibs", "obs"]);
        let size = d.rng.range(1, 600);
        let text = render_size(&mut d.rng, size);
        d.op(format!("{key}={text}"));
    }
    d.random_source();
    d.random_sink();
}

/// count/skip/seek in records and bytes, including past the end of input.
fn offsets(d: &mut Draft) {
    let mut any = false;
    while !any {
        if d.rng.chance(55) {
            d.add_count();
            any = true;
        }
        if d.rng.chance(55) {
            d.add_skip();
            any = true;
        }
        if d.rng.chance(45) {
            d.add_seek();
            any = true;
        }
    }
    if d.rng.chance(20) {
        d.add_iflag("fullblock");
    }
    if d.rng.chance(15) {
        d.add_conv("notrunc");
    }
    d.random_source();
    d.random_sink();
}

/// Conversions, on text most of the time since that is where they act.
fn conversions(d: &mut Draft) {
    if d.rng.chance(70) {
        d.refill_as(Kind::Text);
    }
    let extra = d.rng.range(0, 3);
    d.add_conversions(extra);
    d.add_cbs_if_useful();
    if d.rng.chance(25) {
        d.add_count();
    }
    if d.rng.chance(15) {
        d.add_skip();
    }
    d.random_source();
    d.random_sink();
}

/// conv=sparse over zero runs aligned to the output block, into files that
/// are new, longer, shorter or seeked into.
fn sparse(d: &mut Draft) {
    if d.rng.chance(85) {
        let kind = if d.rng.chance(85) {
            Kind::ZeroRuns
        } else {
            Kind::Zeros
        };
        d.refill_as(kind);
    }
    d.add_conv("sparse");
    if d.rng.chance(30) {
        d.add_conv("notrunc");
    }
    if d.rng.chance(30) {
        d.add_seek();
    }
    if d.rng.chance(15) {
        d.add_conversions(0);
    }
    if d.rng.chance(15) {
        d.add_conv("sync");
    }
    d.random_source();
    d.sink = match d.rng.weighted(&[55, 35, 10]) {
        0 => Sink::NewFile,
        1 => Sink::Existing(d.old_output()),
        _ => Sink::Stdout,
    };
}

/// iflag= and oflag= symbols, alone and together.
fn flags(d: &mut Draft) {
    const IFLAGS: &[(&str, u32)] = &[
        ("fullblock", 20),
        ("count_bytes", 10),
        ("skip_bytes", 10),
        ("nocache", 10),
        ("dsync", 6),
        ("sync", 6),
        ("noatime", 8),
        ("nofollow", 8),
        ("nonblock", 4),
        ("noctty", 4),
        ("direct", 10),
        ("directory", 3),
    ];
    const OFLAGS: &[(&str, u32)] = &[
        ("append", 14),
        ("nocache", 10),
        ("dsync", 6),
        ("sync", 6),
        ("noatime", 6),
        ("nofollow", 8),
        ("seek_bytes", 10),
        ("nonblock", 3),
        ("noctty", 3),
        ("direct", 10),
        ("directory", 3),
    ];
    let pick = |rng: &mut Rng, table: &[(&'static str, u32)]| {
        let weights: Vec<u32> = table.iter().map(|(_, w)| *w).collect();
        table[rng.weighted(&weights)].0
    };
    for _ in 0..d.rng.range(0, 2) {
        let flag = pick(&mut d.rng, IFLAGS);
        d.add_iflag(flag);
    }
    for _ in 0..d.rng.range(usize::from(d.iflag.is_empty()), 2) {
        let flag = pick(&mut d.rng, OFLAGS);
        d.add_oflag(flag);
    }
    if d.iflag.contains(&"direct") || d.oflag.contains(&"direct") {
        // O_DIRECT wants aligned transfers; mostly give it those (the
        // interesting part is then the short final block), sometimes not
        // (the interesting part is the EINVAL).
        if d.rng.chance(80) {
            let bs = *d.rng.pick(&[512, 1024, 4096]);
            d.ibs = bs;
            d.obs = bs;
            d.size_ops = vec![format!("bs={}", render_size(&mut d.rng, bs))];
        }
    }
    if d.iflag.contains(&"direct") && d.rng.chance(40) {
        // Misaligned O_DIRECT reads are the one reproducible way to get read
        // errors from a regular file, which is what noerror is about.
        d.add_conv("noerror");
        if d.rng.chance(50) {
            d.add_conv("sync");
        }
    }
    if d.rng.chance(40) {
        d.add_count();
    }
    if d.rng.chance(30) {
        d.add_skip();
    }
    if d.rng.chance(30) {
        d.add_seek();
    }
    d.random_source();
    d.random_sink();
    if d.oflag.contains(&"append") && d.rng.chance(50) {
        d.sink = Sink::Existing(d.old_output());
    }
}

/// An output file that is already there: truncation, notrunc, seek, append,
/// excl and nocreat.
fn existing_output(d: &mut Draft) {
    let exists = d.rng.chance(80);
    d.sink = if exists {
        Sink::Existing(d.old_output())
    } else {
        Sink::NewFile
    };
    if d.rng.chance(50) {
        d.add_conv("notrunc");
    }
    if d.rng.chance(50) {
        d.add_seek();
    }
    if d.rng.chance(30) {
        d.add_count();
    }
    match d.rng.range(0, 5) {
        0 => d.add_conv("excl"),
        1 => d.add_conv("nocreat"),
        2 => d.add_oflag("append"),
        _ => {}
    }
    if d.rng.chance(10) {
        d.sink = Sink::Symlink(d.old_output());
        if d.rng.chance(50) {
            d.add_oflag("nofollow");
        }
    }
    d.random_source();
}

/// Standard input as a file, a full pipe or a pipe fed in chunks, with
/// skip/count (lseek on a file, read-and-discard on a pipe).
fn stdin(d: &mut Draft) {
    d.source = match d.rng.range(0, 2) {
        0 => Source::StdinFile,
        1 => Source::StdinPipe,
        _ => Source::StdinChunks,
    };
    if d.rng.chance(50) {
        d.add_skip();
    }
    if d.rng.chance(50) {
        d.add_count();
    }
    if d.rng.chance(35) {
        d.add_iflag("fullblock");
    }
    if d.rng.chance(20) {
        d.add_conv("sync");
    }
    d.random_sink();
}

/// `"$DD" "$@"; cat` on one stdin: what dd did not consume must still be
/// there for cat, at exactly the right offset.
fn next_reader(d: &mut Draft) {
    d.then_cat = true;
    d.source = match d.rng.range(0, 2) {
        0 => Source::StdinFile,
        1 => Source::StdinPipe,
        _ => Source::StdinChunks,
    };
    d.add_count();
    if d.rng.chance(50) {
        d.add_skip();
    }
    if d.rng.chance(25) {
        d.add_iflag("fullblock");
    }
    d.sink = if d.rng.chance(70) {
        Sink::Stdout
    } else {
        Sink::NewFile
    };
}

/// Output is the shell's redirection of stdout: `>`, `>>` or `1<>`, the
/// last one letting seek= and notrunc act on an existing file through fd 1.
fn stdout_redirect(d: &mut Draft) {
    let op = *d.rng.pick(&[">", ">>", "1<>"]);
    let old = d.rng.chance(75).then(|| d.old_output());
    d.sink = Sink::Redirect(op, old);
    d.name_stdout = d.rng.chance(25);
    if d.rng.chance(50) {
        d.add_seek();
    }
    if d.rng.chance(35) {
        d.add_conv("notrunc");
    }
    if d.rng.chance(20) {
        d.add_conv("sparse");
    }
    if d.rng.chance(20) {
        d.add_count();
    }
    d.random_source();
    if d.source == Source::Directory {
        d.source = Source::File;
    }
}

/// A valid case with one thing wrong: usage errors, invalid numbers, bad
/// symbols, conflicting conversions, open failures, zero-multiplier warnings.
fn error(d: &mut Draft) {
    d.random_source();
    d.random_sink();
    match d.rng.range(0, 7) {
        0 => {
            let bad = *d.rng.pick(&[
                "foo=1", "bar", "=5", "bs", "if", "IF=in", "bs:4", "conv", "-", "--", "bs==4",
            ]);
            d.op(bad.to_string());
        }
        1 | 2 => {
            let key = *d.rng.pick(&[
                "bs", "ibs", "obs", "cbs", "count", "skip", "seek", "iseek", "oseek",
            ]);
            let value = *d.rng.pick(&[
                "0",
                "-1",
                "1e",
                "x",
                "",
                "2x",
                "x2",
                "1Kib",
                "1.5",
                "2x3x4",
                "3x1B",
                " 5",
                "5 ",
                "1Q",
                "99999999999999999999",
                "18446744073709551616",
                "-0",
                "+4",
                "1kK",
                "1iB",
                "0x",
            ]);
            d.op(format!("{key}={value}"));
        }
        3 => {
            // '0x' is a zero multiplier: a warning, then a zero count or an
            // invalid block size.
            let key = *d
                .rng
                .pick(&["bs", "ibs", "obs", "count", "skip", "seek", "cbs"]);
            let value = *d.rng.pick(&["0x5", "0x0", "00x5", "0x1k", "1x0x2", "0x"]);
            d.op(format!("{key}={value}"));
        }
        4 => {
            let bad = *d.rng.pick(&[
                "conv=foo",
                "conv=",
                "conv=,sync",
                "conv=sync,",
                "conv=SYNC",
                "conv=sync,,notrunc",
                "iflag=nolinks",
                "iflag=binary",
                "iflag=",
                "iflag=fullblock,foo",
                "oflag=fullblock",
                "oflag=",
                "oflag=count_bytes",
                "iflag=seek_bytes",
                "iflag=append",
                "status=foo",
                "status=",
                "status=none,noxfer",
                "status=NONE",
            ]);
            d.op(bad.to_string());
        }
        5 => {
            let pair = *d.rng.pick(&[
                "ascii,ebcdic",
                "ebcdic,ibm",
                "ascii,ibm",
                "block,unblock",
                "lcase,ucase",
                "excl,nocreat",
                "ascii,block",
                "ebcdic,unblock",
                "ibm,unblock",
            ]);
            d.op(format!("conv={pair}"));
            if d.rng.chance(60) {
                d.op("cbs=4".to_string());
            }
        }
        _ => match d.rng.range(0, 6) {
            0 => d.source = Source::Missing,
            1 => {
                d.sink = Sink::NewFile;
                d.add_conv("nocreat");
            }
            2 => {
                d.sink = Sink::Existing(d.old_output());
                d.add_conv("excl");
            }
            3 => {
                d.source = Source::File;
                d.add_iflag("directory");
            }
            4 => {
                d.sink = Sink::NewFile;
                d.add_oflag("directory");
            }
            _ => d.sink = Sink::Directory,
        },
    }
    // A directory named by both if= and of= would be one "sub"; keep them
    // apart so the case means what it says.
    if d.source == Source::Directory && d.sink == Sink::Directory {
        d.source = Source::File;
    }
}

/// Inputs of 64 KiB to 2 MiB with big blocks: an implementation may switch
/// strategy (offload, threads, bigger buffers) above some size, and every
/// strategy must still produce dd's records and bytes.
fn large(d: &mut Draft) {
    let sizes = [4096, 65536, 131_072, 1 << 20, 1536, 100_000, 65537];
    let ibs = *d.rng.pick(&sizes);
    let obs = if d.rng.chance(60) {
        ibs
    } else {
        *d.rng.pick(&sizes)
    };
    d.size_ops = if ibs == obs {
        vec![format!("bs={}", render_size(&mut d.rng, ibs))]
    } else {
        vec![
            format!("ibs={}", render_size(&mut d.rng, ibs)),
            format!("obs={}", render_size(&mut d.rng, obs)),
        ]
    };
    d.ibs = ibs;
    d.obs = obs;
    let base = d.rng.range(64 * 1024, 2 << 20);
    let block = if d.rng.chance(50) { ibs } else { obs };
    let len = match d.rng.range(0, 3) {
        0 => base / block * block,
        1 => base / block * block + 1,
        2 => (base / block * block).saturating_sub(1),
        _ => base,
    };
    let kind = *d.rng.pick(&[Kind::Random, Kind::ZeroRuns, Kind::Text]);
    d.kind = kind;
    d.fill_input(len);
    if d.rng.chance(30) {
        d.add_count();
    }
    if d.rng.chance(25) {
        d.add_skip();
    }
    if d.rng.chance(25) {
        d.add_seek();
    }
    match d.rng.range(0, 5) {
        0 => d.add_conv("sparse"),
        1 => d.add_conv("notrunc"),
        2 => d.add_conv("sync"),
        _ => {}
    }
    d.source = match d.rng.weighted(&[60, 20, 20]) {
        0 => Source::File,
        1 => Source::StdinFile,
        _ => Source::StdinStream,
    };
    d.sink = match d.rng.weighted(&[50, 20, 30]) {
        0 => Sink::NewFile,
        1 => Sink::Existing(d.old_output()),
        _ => Sink::Stdout,
    };
}

/// Input and output are one file, overlapping: GNU reads a block, writes a
/// block, so a forward shift smears the first block over the rest. Read-ahead,
/// offload or threads must not change that. count= is always there, because
/// a forward shift without it never reaches the end of the file.
fn same_file(d: &mut Draft) {
    d.source = if d.rng.chance(80) {
        Source::File
    } else {
        Source::StdinFile
    };
    d.sink = Sink::SameAsInput;
    if d.rng.chance(85) {
        d.add_conv("notrunc");
    }
    let records = d.rng.range(0, 8);
    if d.rng.chance(70) {
        d.op(format!("count={records}"));
    } else {
        let bytes = d.rng.range(0, 8 * d.ibs);
        d.op(format!("count={bytes}B"));
    }
    if d.rng.chance(60) {
        let n = d.rng.range(1, 3);
        d.op(format!("seek={n}"));
    }
    if d.rng.chance(40) {
        let n = d.rng.range(1, 3);
        d.op(format!("skip={n}"));
    }
    if d.rng.chance(20) {
        d.add_conversions(0);
    }
    if d.rng.chance(20) {
        // Big blocks, where an implementation is most tempted to offload.
        let bs = *d.rng.pick(&[65536, 1 << 20]);
        d.size_ops = vec![format!("bs={}", render_size(&mut d.rng, bs))];
        d.ibs = bs;
        d.obs = bs;
        let len = d.rng.range(1, 3 * bs);
        d.fill_input(len);
        d.add_iflag("fullblock");
    }
}
