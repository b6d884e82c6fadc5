//! The random case generator.
//!
//! A case is drafted in three steps: block sizes and input bytes first (so
//! input lengths can sit on block boundaries), then a *flavour* adds what it
//! is about (offsets, conversions, flags, ...), then the input source and
//! output sink are chosen. Flavours only tilt the odds; every dimension can
//! still show up in every flavour, so unusual combinations get exercised too.
//!
//! Everything here is a pure function of `(seed, index)`. Values stay small
//! (inputs of a few KiB, seeks of a few blocks) because process start-up, not
//! copying, is what a case costs; only the "large" flavour goes up to a few
//! MiB, for implementations that change strategy with size.

use super::case::{Case, Stdin};
use super::content::{self, Kind};
use super::flavours::FLAVOURS;
use super::prng::Rng;

pub fn case(seed: u64, index: u64) -> Case {
    let mut rng = Rng::for_case(seed, index);
    let weights: Vec<u32> = FLAVOURS.iter().map(|(_, weight, _)| *weight).collect();
    let (name, _, shape) = FLAVOURS[rng.weighted(&weights)];
    let mut draft = Draft::new(rng);
    shape(&mut draft);
    draft.finish(name)
}

/// Where the input comes from.
#[derive(Clone, Copy, PartialEq)]
pub enum Source {
    /// `if=in`
    File,
    /// `if=in` where `in` is a symlink to `data` (for iflag=nofollow).
    Symlink,
    /// `if=in` naming nothing.
    Missing,
    /// `if=sub`, a directory: reading fails with EISDIR.
    Directory,
    /// `if=/dev/zero`: endless, so always paired with count=.
    DevZero,
    /// `if=/dev/stdin` with `< in`: opening it makes a new file description,
    /// so its offset is not the one the next reader of stdin sees.
    DevStdin,
    StdinFile,
    StdinPipe,
    StdinChunks,
    /// A pipe larger than its buffer, written concurrently (needs fullblock).
    StdinStream,
}

/// Where the output goes.
#[derive(Clone, PartialEq)]
pub enum Sink {
    /// `of=out`, absent before the run.
    NewFile,
    /// `of=out`, holding these bytes before the run.
    Existing(Vec<u8>),
    /// `of=out` where `out` is a symlink to an existing `target`.
    Symlink(Vec<u8>),
    /// `of=sub`, a directory.
    Directory,
    DevNull,
    /// `of=/dev/full`: every write fails with ENOSPC.
    DevFull,
    /// `of=in`: the input file itself. Reads must see earlier writes,
    /// exactly as dd's one-block-at-a-time loop does.
    SameAsInput,
    /// Captured stdout (a pipe).
    Stdout,
    /// Stdout redirected by the shell (`>`, `>>` or `1<>`) to `out`, which
    /// may exist beforehand.
    Redirect(&'static str, Option<Vec<u8>>),
}

pub struct Draft {
    pub rng: Rng,
    /// Effective sizes, used to put lengths and offsets near boundaries.
    pub ibs: usize,
    pub obs: usize,
    /// bs/ibs/obs operands as they will be written.
    pub size_ops: Vec<String>,
    pub kind: Kind,
    pub input: Vec<u8>,
    /// Operands other than sizes, if/of, conv and flags.
    pub ops: Vec<String>,
    pub conv: Vec<&'static str>,
    pub iflag: Vec<&'static str>,
    pub oflag: Vec<&'static str>,
    pub source: Source,
    pub sink: Sink,
    /// `"$DD" "$@"; cat`: whatever dd leaves unread reaches stdout too.
    pub then_cat: bool,
    /// With a stdout sink, name it `of=/dev/stdout`: dd then opens it (with
    /// O_TRUNC unless notrunc) instead of using fd 1 as it is.
    pub name_stdout: bool,
}

impl Draft {
    fn new(mut rng: Rng) -> Draft {
        let (ibs, obs, size_ops) = block_sizes(&mut rng);
        let kind = content::kind(&mut rng);
        let mut draft = Draft {
            rng,
            ibs,
            obs,
            size_ops,
            kind,
            input: Vec::new(),
            ops: Vec::new(),
            conv: Vec::new(),
            iflag: Vec::new(),
            oflag: Vec::new(),
            source: Source::File,
            sink: Sink::NewFile,
            then_cat: false,
            name_stdout: false,
        };
        let len = draft.boundary_len();
        draft.fill_input(len);
        draft
    }

    /// An input length that sits on, just before or just after a multiple of
    /// one of the block sizes, or a plain odd size.
    pub fn boundary_len(&mut self) -> usize {
        let block = if self.rng.chance(60) {
            self.ibs
        } else {
            self.obs
        };
        let k = self.rng.range(2, 5);
        let len = match self.rng.range(0, 9) {
            0 => 0,
            1 => 1,
            2 => block - 1,
            3 => block,
            4 => block + 1,
            5 => k * block - 1,
            6 => k * block,
            7 => k * block + 1,
            8 => self.rng.range(0, 3 * block + 10),
            _ => self.rng.range(0, 2000) | 1,
        };
        len.min(24_000)
    }

    pub fn fill_input(&mut self, len: usize) {
        let line_hint = self.rng.range(1, 40);
        self.input = content::generate(&mut self.rng, self.kind, len, self.obs, line_hint);
    }

    pub fn refill_as(&mut self, kind: Kind) {
        self.kind = kind;
        let len = self.input.len();
        self.fill_input(len);
    }

    pub fn op(&mut self, operand: String) {
        self.ops.push(operand);
    }

    pub fn add_conv(&mut self, symbol: &'static str) {
        if !self.conv.contains(&symbol) {
            self.conv.push(symbol);
        }
    }

    pub fn add_iflag(&mut self, symbol: &'static str) {
        if !self.iflag.contains(&symbol) {
            self.iflag.push(symbol);
        }
    }

    pub fn add_oflag(&mut self, symbol: &'static str) {
        if !self.oflag.contains(&symbol) {
            self.oflag.push(symbol);
        }
    }

    /// count= in records, with the B suffix, or with iflag=count_bytes.
    pub fn add_count(&mut self) {
        let records = self.input.len() / self.ibs.max(1);
        let bytes = self.input.len() + 5;
        match self.rng.weighted(&[45, 20, 20, 10, 5]) {
            unit @ 0..=2 => self.add_amount(unit, "count", records + 2, bytes, "count_bytes"),
            3 => self.op("count=0".to_string()),
            _ => {
                let big = *self.rng.pick(&["1M", "99999", "1G", "1x1k"]);
                self.op(format!("count={big}"));
            }
        }
    }

    /// `key=` up to `records` records (written any way the grammar
    /// allows), or up to `bytes` bytes, with the B suffix or with
    /// `bytes_flag`: `unit` 0, 1 or 2. count= and skip= share these three
    /// and differ in their bounds; the draws are made in one order, so a
    /// seed gives the same case as ever.
    fn add_amount(
        &mut self,
        unit: usize,
        key: &str,
        records: usize,
        bytes: usize,
        bytes_flag: &'static str,
    ) {
        match unit {
            0 => {
                let n = self.rng.range(0, records);
                let text = render_count(&mut self.rng, n);
                self.op(format!("{key}={text}"));
            }
            1 => {
                let n = self.rng.range(0, bytes);
                self.op(format!("{key}={n}B"));
            }
            _ => {
                let n = self.rng.range(0, bytes);
                self.add_iflag(bytes_flag);
                self.op(format!("{key}={n}"));
            }
        }
    }

    /// skip= or iseek=, in records or bytes, sometimes past the end.
    pub fn add_skip(&mut self) {
        let key = if self.rng.chance(75) { "skip" } else { "iseek" };
        let records = self.input.len() / self.ibs.max(1);
        let bytes = self.input.len() + 3;
        match self.rng.weighted(&[40, 20, 20, 20]) {
            unit @ 0..=2 => self.add_amount(unit, key, records + 1, bytes, "skip_bytes"),
            _ => {
                // Past the end: GNU warns "cannot skip to specified offset".
                let n = records + self.rng.range(1, 4);
                self.op(format!("{key}={n}"));
            }
        }
    }

    /// seek= or oseek=, in records or bytes; small so outputs stay small.
    pub fn add_seek(&mut self) {
        let key = if self.rng.chance(75) { "seek" } else { "oseek" };
        match self.rng.weighted(&[50, 25, 25]) {
            0 => {
                let n = self.rng.range(0, 40_000 / self.obs.max(1)).min(6);
                let text = render_count(&mut self.rng, n);
                self.op(format!("{key}={text}"));
            }
            1 => {
                let n = self.rng.range(0, 2 * self.obs + 5);
                self.op(format!("{key}={n}B"));
            }
            _ => {
                let n = self.rng.range(0, 2 * self.obs + 5);
                self.add_oflag("seek_bytes");
                self.op(format!("{key}={n}"));
            }
        }
    }

    pub fn add_status(&mut self) {
        let level = *self.rng.pick(&["none", "noxfer", "progress"]);
        self.op(format!("status={level}"));
        if self.rng.chance(15) {
            // The last status= wins.
            let again = *self.rng.pick(&["none", "noxfer", "progress"]);
            self.op(format!("status={again}"));
        }
    }

    /// A compatible set of conversions; `extra` of them beyond the first.
    pub fn add_conversions(&mut self, extra: usize) {
        for _ in 0..=extra {
            match self.rng.range(0, 10) {
                0 => {
                    let symbol = *self.rng.pick(&["ascii", "ebcdic", "ibm"]);
                    if !self
                        .conv
                        .iter()
                        .any(|c| ["ascii", "ebcdic", "ibm"].contains(c))
                    {
                        self.add_conv(symbol);
                    }
                }
                1 => {
                    let symbol = *self.rng.pick(&["lcase", "ucase"]);
                    if !self.conv.iter().any(|c| ["lcase", "ucase"].contains(c)) {
                        self.add_conv(symbol);
                    }
                }
                2 | 3 => {
                    let symbol = *self.rng.pick(&["block", "unblock"]);
                    if !self.conv.iter().any(|c| ["block", "unblock"].contains(c)) {
                        self.add_conv(symbol);
                    }
                }
                4 => self.add_conv("swab"),
                5 => self.add_conv("sync"),
                6 => self.add_conv("noerror"),
                7 => self.add_conv("sparse"),
                8 => self.add_conv("notrunc"),
                _ => {
                    let symbol = *self.rng.pick(&["fdatasync", "fsync"]);
                    self.add_conv(symbol);
                }
            }
        }
    }

    /// cbs= matters for block/unblock and for ascii/ebcdic/ibm (which imply
    /// unblock/block); sometimes it is given with nothing to act on.
    pub fn add_cbs_if_useful(&mut self) {
        let wants = self
            .conv
            .iter()
            .any(|c| ["block", "unblock", "ascii", "ebcdic", "ibm"].contains(c));
        if (wants && self.rng.chance(85)) || self.rng.chance(5) {
            let cbs = if self.rng.chance(70) {
                self.rng.range(1, 16)
            } else {
                self.rng.range(17, 100)
            };
            let text = render_size(&mut self.rng, cbs);
            self.op(format!("cbs={text}"));
        }
    }

    /// A random input source, weighted towards the plain `if=in`.
    pub fn random_source(&mut self) {
        self.source = match self.rng.weighted(&[62, 14, 10, 6, 4, 2, 2, 2, 2]) {
            0 => Source::File,
            1 => Source::StdinFile,
            2 => Source::StdinPipe,
            3 => Source::StdinChunks,
            4 => Source::Symlink,
            5 => Source::Missing,
            6 => Source::Directory,
            7 => Source::DevZero,
            _ => Source::DevStdin,
        };
    }

    /// A random output sink, weighted towards a new `of=out`.
    pub fn random_sink(&mut self) {
        self.sink = match self.rng.weighted(&[55, 14, 22, 3, 3, 2, 3]) {
            0 => Sink::NewFile,
            1 => Sink::Existing(self.old_output()),
            2 => Sink::Stdout,
            3 => Sink::DevNull,
            4 => Sink::Symlink(self.old_output()),
            5 => Sink::DevFull,
            _ => {
                let op = *self.rng.pick(&[">", ">>", "1<>"]);
                let old = self.rng.chance(70).then(|| self.old_output());
                Sink::Redirect(op, old)
            }
        };
        self.name_stdout = self.rng.chance(10);
    }

    /// Pre-existing output: shorter or longer than what will be written, so
    /// truncation (or its absence with notrunc) is visible in the result.
    pub fn old_output(&mut self) -> Vec<u8> {
        let written = self.input.len();
        let len = match self.rng.range(0, 5) {
            0 => 0,
            1 => self.rng.range(1, written.max(1)),
            2 => written + self.rng.range(1, 2 * self.obs + 3),
            3 => written * 2 + 7,
            4 => self.obs * self.rng.range(1, 6) + self.rng.range(0, 2),
            _ => self.rng.range(0, 5000),
        };
        // Distinctive bytes, so kept and overwritten regions are told apart
        // in failure reports.
        (0..len)
            .map(|i| b"0123456789ABCDEF"[i % 16] | 0x40)
            .collect()
    }

    fn finish(mut self, label: &str) -> Case {
        self.make_feasible();
        let mut case = Case::new(label);
        let mut operands = self.size_ops.clone();
        operands.extend(self.ops.iter().cloned());

        match self.source {
            Source::File => {
                case = case.file("in", self.input.clone());
                operands.push("if=in".to_string());
            }
            Source::Symlink => {
                case = case.file("data", self.input.clone()).symlink("in", "data");
                operands.push("if=in".to_string());
            }
            Source::Missing => operands.push("if=in".to_string()),
            Source::DevZero => operands.push("if=/dev/zero".to_string()),
            Source::DevStdin => {
                case = case
                    .file("in", self.input.clone())
                    .stdin(Stdin::File("in".to_string()));
                operands.push("if=/dev/stdin".to_string());
            }
            Source::Directory => {
                case = case.dir("sub");
                operands.push("if=sub".to_string());
            }
            Source::StdinFile => {
                case = case
                    .file("in", self.input.clone())
                    .stdin(Stdin::File("in".to_string()));
            }
            Source::StdinPipe => case = case.stdin(Stdin::Pipe(self.input.clone())),
            Source::StdinChunks => {
                let chunks = self.chunks();
                case = case.stdin(Stdin::Chunks(chunks));
            }
            Source::StdinStream => case = case.stdin(Stdin::Stream(self.input.clone())),
        }

        match &self.sink {
            Sink::NewFile => operands.push("of=out".to_string()),
            Sink::Existing(old) => {
                case = case.file("out", old.clone());
                operands.push("of=out".to_string());
            }
            Sink::Symlink(old) => {
                case = case.file("target", old.clone()).symlink("out", "target");
                operands.push("of=out".to_string());
            }
            Sink::Directory => {
                case = case.dir("sub");
                operands.push("of=sub".to_string());
            }
            Sink::DevNull => operands.push("of=/dev/null".to_string()),
            Sink::DevFull => operands.push("of=/dev/full".to_string()),
            Sink::SameAsInput => operands.push("of=in".to_string()),
            Sink::Stdout if self.name_stdout => operands.push("of=/dev/stdout".to_string()),
            Sink::Stdout => {}
            Sink::Redirect(_, old) => {
                if let Some(old) = old {
                    case = case.file("out", old.clone());
                }
                if self.name_stdout {
                    operands.push("of=/dev/stdout".to_string());
                }
            }
        }

        for (key, symbols) in [
            ("conv", &self.conv),
            ("iflag", &self.iflag),
            ("oflag", &self.oflag),
        ] {
            operands.extend(symbol_operands(&mut self.rng, key, symbols));
        }
        // Order is free in dd, except that a later duplicate wins; both
        // programs get the same order, so shuffling tests the parser for free.
        self.rng.shuffle(&mut operands);
        case.operands = operands;
        case.shell = self.script();
        case
    }

    /// Drop combinations whose outcome depends on timing or that never end,
    /// and keep slow ones small.
    fn make_feasible(&mut self) {
        let pipe_in = matches!(
            self.source,
            Source::StdinPipe | Source::StdinChunks | Source::StdinStream
        );
        if pipe_in || self.sink == Sink::Stdout || matches!(self.sink, Sink::Redirect(..)) {
            // O_DIRECT on a pipe turns it into a packet pipe: not a dd matter.
            self.iflag.retain(|f| *f != "direct");
            self.oflag.retain(|f| *f != "direct");
        }
        if self.source == Source::StdinChunks {
            // A non-blocking read of a momentarily empty pipe fails with
            // EAGAIN or not, depending on scheduling.
            self.iflag.retain(|f| *f != "nonblock");
            self.input.truncate(8 * 1024);
        }
        let seeks = self
            .ops
            .iter()
            .any(|op| op.starts_with("seek=") || op.starts_with("oseek="));
        if seeks && self.sink == Sink::Stdout && self.rng.chance(75) {
            // Seeking a pipe always fails the same way; a few cases say so,
            // the rest are more useful seeking a file.
            self.sink = Sink::NewFile;
        }
        if seeks && self.sink == Sink::Stdout {
            // With a seek, GNU opens of=/dev/stdout read-write and, since a
            // pipe cannot seek, reads the pipe to skip: it waits forever.
            self.name_stdout = false;
        }
        if self.source == Source::Directory {
            // conv=noerror retries the failing read of a directory forever.
            self.conv.retain(|c| *c != "noerror");
        }
        if self.source == Source::StdinPipe {
            self.input.truncate(60_000);
        }
        if self.source == Source::StdinStream {
            // Only full blocks make concurrent pipe reads deterministic.
            self.add_iflag("fullblock");
        }
        if self.source == Source::StdinStream {
            self.iflag.retain(|f| *f != "nonblock");
        }
        if self.source == Source::DevZero {
            // Endless input: replace whatever count there was by a small one.
            self.iflag
                .retain(|f| !["direct", "count_bytes"].contains(f));
            self.ops.retain(|op| !op.starts_with("count="));
            let records = self.rng.range(0, 5);
            self.op(format!("count={records}"));
        }
        if self.iflag.contains(&"direct") && self.conv.contains(&"noerror") {
            // Misaligned O_DIRECT reads fail with EINVAL; noerror then
            // reports and skips every block: keep the number of blocks sane.
            self.input.truncate(8 * 1024);
        }
        if self.oflag.iter().any(|f| ["sync", "dsync"].contains(f)) {
            // Every write is synchronous: keep it to a few dozen writes.
            self.input.truncate(48 * self.obs);
        }
    }

    /// Chunks of 1 byte up to twice the input block, capped at a pipe page.
    fn chunks(&mut self) -> Vec<Vec<u8>> {
        let mut chunks = Vec::new();
        let mut rest = &self.input[..];
        while !rest.is_empty() {
            let max = (2 * self.ibs).clamp(2, 4096);
            let take = if self.rng.chance(30) {
                self.ibs.min(4096)
            } else {
                self.rng.range(1, max)
            }
            .min(rest.len());
            chunks.push(rest[..take].to_vec());
            rest = &rest[take..];
        }
        chunks
    }

    fn script(&self) -> Option<String> {
        let program = if self.then_cat {
            "\"$DD\" \"$@\"; cat"
        } else {
            "\"$DD\" \"$@\""
        };
        match (&self.sink, self.then_cat) {
            (Sink::Redirect(op, _), true) => Some(format!("{{ {program}; }} {op} out")),
            (Sink::Redirect(op, _), false) => Some(format!("{program} {op} out")),
            (_, true) => Some(program.to_string()),
            (_, false) => None,
        }
    }
}

/// bs=, ibs=/obs= (usually different), one of them, or none (512 each).
fn block_sizes(rng: &mut Rng) -> (usize, usize, Vec<String>) {
    let mut ops = Vec::new();
    let (ibs, obs) = match rng.weighted(&[35, 30, 10, 10, 8, 7]) {
        0 => {
            let bs = size_value(rng);
            ops.push(format!("bs={}", render_size(rng, bs)));
            (bs, bs)
        }
        1 => {
            let ibs = size_value(rng);
            let mut obs = size_value(rng);
            if obs == ibs {
                obs += 1;
            }
            ops.push(format!("ibs={}", render_size(rng, ibs)));
            ops.push(format!("obs={}", render_size(rng, obs)));
            (ibs, obs)
        }
        2 => {
            let ibs = size_value(rng);
            ops.push(format!("ibs={}", render_size(rng, ibs)));
            (ibs, 512)
        }
        3 => {
            let obs = size_value(rng);
            ops.push(format!("obs={}", render_size(rng, obs)));
            (512, obs)
        }
        4 => {
            // bs= overrides ibs= and obs= wherever they appear.
            let bs = size_value(rng);
            ops.push(format!("bs={}", render_size(rng, bs)));
            for key in ["ibs", "obs"] {
                let ignored = size_value(rng);
                ops.push(format!("{key}={}", render_size(rng, ignored)));
            }
            (bs, bs)
        }
        _ => (512, 512),
    };
    (ibs, obs, ops)
}

/// Mostly tiny sizes (more records per byte of input, so more edge cases per
/// process spawn), some around 512 and powers of two.
fn size_value(rng: &mut Rng) -> usize {
    match rng.weighted(&[35, 25, 40]) {
        0 => rng.range(1, 7),
        1 => rng.range(8, 100),
        _ => *rng.pick(&[
            100, 128, 255, 256, 257, 500, 511, 512, 513, 1000, 1024, 1536, 2048, 4096,
        ]),
    }
}

/// One of the spellings GNU accepts for `n` bytes.
pub fn render_size(rng: &mut Rng, n: usize) -> String {
    let mut forms = vec![n.to_string(), n.to_string(), format!("{n}c")];
    if n % 2 == 0 {
        forms.push(format!("{}w", n / 2));
    }
    if n % 512 == 0 {
        forms.push(format!("{}b", n / 512));
        if n > 512 {
            forms.push(format!("{}x512", n / 512));
            forms.push(format!("{}x1b", n / 512));
        }
    }
    if n % 1024 == 0 {
        forms.push(format!("{}K", n / 1024));
        forms.push(format!("{}k", n / 1024));
        forms.push(format!("{}KiB", n / 1024));
        forms.push(format!("{}kx1", n / 1024));
    }
    if n % 1000 == 0 {
        forms.push(format!("{}kB", n / 1000));
    }
    if n % (1 << 20) == 0 {
        forms.push(format!("{}M", n >> 20));
        forms.push(format!("{}MiB", n >> 20));
    }
    if n % 1_000_000 == 0 {
        forms.push(format!("{}MB", n / 1_000_000));
    }
    if let Some(d) = (2..=16).rev().find(|d| n % d == 0 && n > *d) {
        forms.push(format!("{}x{d}", n / d));
        forms.push(format!("{d}x{}", n / d));
    }
    forms.push(format!("1x{n}"));
    forms.push(format!("{n}B"));
    forms.push(format!("0{n}"));
    rng.pick(&forms).clone()
}

/// A record count, mostly plain.
fn render_count(rng: &mut Rng, n: usize) -> String {
    match rng.range(0, 9) {
        0 if n > 1 && n % 2 == 0 => format!("{}x2", n / 2),
        1 => format!("1x{n}"),
        2 => format!("0{n}"),
        _ => n.to_string(),
    }
}

/// Symbols for conv=/iflag=/oflag=: usually one operand, sometimes one per
/// symbol (GNU ORs repeated operands together).
fn symbol_operands(rng: &mut Rng, key: &str, symbols: &[&str]) -> Vec<String> {
    if symbols.is_empty() {
        return Vec::new();
    }
    if symbols.len() > 1 && rng.chance(25) {
        symbols.iter().map(|s| format!("{key}={s}")).collect()
    } else {
        vec![format!("{key}={}", symbols.join(","))]
    }
}
