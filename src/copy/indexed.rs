//! casync indexes in the copy: `--store`, `--seed`, `--chunk-size`.
//!
//! The ends themselves are `image::indexed`'s; this module owns when they
//! apply and what is said about them. What the options cannot be combined
//! with, and which end is the index, are rows of `planner::needs`,
//! refused before anything is opened. Then:
//! - **making** (of=INDEX.caibx): the output is not opened as a file; an
//!   [`IndexMaker`] takes its place once the input is admitted, its store
//!   opened (a directory made where there is none), and the index written
//!   only when every chunk is stored ([`Indexed::open_output`]);
//! - **extracting** (if=INDEX.caibx): the index is read whole from the
//!   input as opened, and checked, its store opened and asked once (so
//!   that a store that does not answer writes nothing), the seeds opened,
//!   and the input becomes the blob ([`Indexed::wrap_input`]), before the
//!   output is opened. With of= a seed, blocks the output holds already
//!   are holes the copy leaves unwritten.
//!
//! After GNU's statistics, [`Indexed::finish`] says what the store gained
//! and holds, or where the blob's bytes came from, and
//! [`Indexed::verify`] reads each output back against the index's ids
//! (`--verify`).

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::casync::{ChunkSizes, Digest, Index};
use crate::diagnostic::Refusal;
use crate::ends;
use crate::engine::stream::{stream_of, Input, Output, Stream};
use crate::image::indexed::{
    ExtractReport, ExtractSettings, IndexFile, IndexMaker, IndexedBlob, MakeReport, MakeSettings,
    Seed, SeedKind, SeedReader,
};
use crate::integrity::verify::{self, RangeCheck, RangeDigest, RangesVerdict};
use crate::operands::{CopyPlan, StatusLevel};
use crate::progress::Reporter;
use crate::request::{IndexJob, Request, StoreChoice};
use crate::store::{Holding, Location, Store};
use crate::text::human::{human, Base};
use crate::text::quote::quote_file;

use super::Failure;

/// zstd's level for stored chunks: casync's.
const LEVEL: i32 = 3;

/// The largest index read (40 bytes a chunk: some 400 TiB of blob at the
/// default sizes).
const MAX_INDEX: u64 = 256 << 30;

/// Chunks worked on ahead of the copy when extracting.
const WINDOW: usize = 128;

/// A casync index made or extracted by this copy.
pub struct Indexed {
    job: IndexJob,
    location: Location,
    sizes: ChunkSizes,
    seeds: Vec<PathBuf>,
    verify: bool,
    store: Option<Arc<Store>>,
    made: Option<Arc<MakeReport>>,
    extracted: Option<(Arc<ExtractReport>, bool)>,
    /// The index, for `--verify`.
    index: Option<Arc<Index>>,
}

fn shown(path: &Path) -> String {
    quote_file(&ends::uri::shown(path))
}

/// The index job this request asks for, its store's place resolved.
/// Nothing is opened.
pub fn prepare(request: &Request) -> Result<Option<Indexed>, Refusal> {
    let Some(job) = request.index_job() else {
        return Ok(None);
    };
    let settings = &request.settings;
    let index = match job {
        IndexJob::Make => request.plan.output.as_deref(),
        IndexJob::Extract => request.plan.input.as_deref(),
    }
    .expect("an index job names its index");
    let location = match &settings.store {
        Some(StoreChoice::At(path)) => Location::parse(path),
        Some(StoreChoice::Beside) | None => Location::beside(index),
    }
    .map_err(|e| Refusal(format!("--store: {e}")))?;
    Ok(Some(Indexed {
        job,
        location,
        sizes: settings.chunk_size.unwrap_or_default(),
        seeds: settings.seeds.clone(),
        verify: settings.verify,
        store: None,
        made: None,
        extracted: None,
        index: None,
    }))
}

/// Threads that find, fetch or store chunks: every CPU, and more where
/// each request waits on a network.
fn workers(location: &Location) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match location {
        Location::Directory(_) => cpus.max(2),
        Location::Objects(_) => cpus.max(32),
    }
}

impl Indexed {
    pub fn job(&self) -> IndexJob {
        self.job
    }

    fn open_store(&mut self, write: bool) -> Result<Arc<Store>, Failure> {
        let store = Store::open(self.location.clone(), write).map_err(|e| {
            Failure::Refused(Refusal(format!(
                "--store={}: {}",
                self.location.shown(),
                e.detail
            )))
        })?;
        let store = Arc::new(store);
        self.store = Some(Arc::clone(&store));
        Ok(store)
    }

    /// Making: the output, an index maker over the store, in place of
    /// of= (which is written, whole, at the end).
    pub fn open_output(&mut self, plan: &CopyPlan) -> Result<Output, Failure> {
        let path = plan.output.clone().expect("making names of=");
        let store = self.open_store(true)?;
        let index = match ends::uri::recognise(&path) {
            Some(_) => {
                let mut warnings = Vec::new();
                let output = ends::open::open_output(
                    plan,
                    crate::request::Settings::default().passthrough().into(),
                    &mut warnings,
                )?;
                IndexFile::Stream(stream_of(output.stream))
            }
            None => IndexFile::Path(path.clone()),
        };
        let maker = IndexMaker::start(
            store,
            index,
            MakeSettings {
                sizes: self.sizes,
                digest: Digest::Sha512_256,
                level: LEVEL,
                workers: workers(&self.location),
            },
        );
        self.made = Some(maker.report());
        Ok(Output {
            stream: Box::new(maker),
            name: ends::uri::shown(&path),
        })
    }

    /// Extracting: the index read from `input` and checked, the store
    /// opened and asked, the seeds opened; the input becomes the blob.
    /// `holes`: blocks the output holds may be left unwritten (one
    /// output).
    pub fn wrap_input(
        &mut self,
        mut input: Input,
        plan: &CopyPlan,
        holes: bool,
    ) -> Result<Input, Failure> {
        let name = quote_file(&input.name);
        let bytes = read_whole(input.stream.as_mut()).map_err(|(errno, detail)| {
            let why = detail.unwrap_or_else(|| crate::sys::errno_text(errno));
            Failure::Refused(Refusal(format!("cannot read the index {name}: {why}")))
        })?;
        let index = Index::parse(&bytes).map_err(|e| {
            Failure::Refused(Refusal(format!(
                "{name} is not a usable casync blob index: {e}"
            )))
        })?;
        let store = self.open_store(false)?;
        // A store that does not answer is found now, before anything is
        // written: its first chunk asked for (missing is an answer).
        if let Some(first) = index.chunks.first() {
            store.has(&first.id).map_err(|e| {
                Failure::Refused(Refusal(format!(
                    "--store={}: it does not answer: {}",
                    store.shown(),
                    e.detail
                )))
            })?;
        }
        let seeds = self.open_seeds(plan, &index)?;
        let index = Arc::new(index);
        self.index = Some(Arc::clone(&index));
        let blob = IndexedBlob::start(
            (*index).clone(),
            store,
            seeds,
            ExtractSettings {
                workers: workers(&self.location),
                window: WINDOW,
                holes,
            },
        );
        self.extracted = Some((blob.report(), blob.holes()));
        let old = std::mem::replace(&mut input.stream, Box::new(blob));
        let _ = old.close();
        input.seekable = false;
        input.seek_errno = Some(crate::sys::Errno::SPIPE);
        input.offset = 0;
        input.inherited = false;
        Ok(input)
    }

    /// Each `--seed`, opened to be read: of= itself (the same file or
    /// device), an index with its blob beside it, or an image.
    fn open_seeds(&self, plan: &CopyPlan, index: &Index) -> Result<Vec<Seed>, Failure> {
        let output = plan
            .output
            .as_deref()
            .and_then(|p| crate::planner::facts::place(p).identity);
        let mut seeds = Vec::new();
        for path in &self.seeds {
            let same_as_output = plan.output.as_deref() == Some(path.as_path())
                || (output.is_some() && crate::planner::facts::place(path).identity == output);
            if crate::request::names_index(path) {
                seeds.push(self.open_indexed_seed(plan, path, index)?);
                continue;
            }
            // A file of= truncates at open would be read empty by then.
            let truncated = same_as_output
                && !plan.conv.contains(crate::operands::Conv::NOTRUNC)
                && crate::planner::facts::place(path).kind == Some(ends::Kind::RegularFile);
            if truncated {
                return Err(Failure::Refused(Refusal(format!(
                    "--seed={} is of= itself, a file that of= truncates when it is opened: \
                     give conv=notrunc to update it in place",
                    shown(path)
                ))));
            }
            let reader = open_seed(plan, path)?;
            let kind = if same_as_output {
                SeedKind::Output
            } else {
                SeedKind::Image
            };
            seeds.push(Seed { reader, kind });
        }
        Ok(seeds)
    }

    /// `--seed=OTHER.caibx`: its chunks, wherever its blob (OTHER, beside
    /// it) holds them.
    fn open_indexed_seed(
        &self,
        plan: &CopyPlan,
        path: &Path,
        index: &Index,
    ) -> Result<Seed, Failure> {
        let text = path.to_string_lossy();
        let blob = PathBuf::from(&text[..text.len() - crate::request::INDEX_SUFFIX.len()]);
        let opened = ends::open::open_input(
            &CopyPlan {
                input: Some(path.to_owned()),
                ..plan.clone()
            },
            crate::request::Settings::default().passthrough().into(),
        )?;
        let mut seed_stream = stream_of(opened.stream);
        let bytes = read_whole(seed_stream.as_mut()).map_err(|(errno, detail)| {
            let why = detail.unwrap_or_else(|| crate::sys::errno_text(errno));
            Failure::Refused(Refusal(format!("--seed={}: {why}", shown(path))))
        })?;
        let _ = seed_stream.close();
        let seed_index = Index::parse(&bytes).map_err(|e| {
            Failure::Refused(Refusal(format!(
                "--seed={} is not a usable casync blob index: {e}",
                shown(path)
            )))
        })?;
        let mut map = HashMap::new();
        if seed_index.digest() == index.digest() {
            for i in 0..seed_index.chunks.len() {
                let (start, end) = seed_index.span(i);
                map.entry(seed_index.chunks[i].id)
                    .or_insert((start, (end - start) as usize));
            }
        }
        let reader = open_seed(plan, &blob).map_err(|failure| match failure {
            Failure::Refused(Refusal(line)) => {
                Failure::Refused(Refusal(format!("--seed={}: its blob: {line}", shown(path))))
            }
            other => other,
        })?;
        Ok(Seed {
            reader,
            kind: SeedKind::Indexed(map),
        })
    }

    /// Blocks the output held, passed on as holes.
    pub fn mapped(&self) -> bool {
        self.extracted.as_ref().is_some_and(|(_, holes)| *holes)
    }

    /// After GNU's statistics: what the store gained and holds (making),
    /// or where the blob's bytes came from (extracting). Returns whether
    /// something failed.
    pub fn finish(&self, reporter: &Reporter, status: StatusLevel, copy_failed: bool) -> bool {
        if copy_failed || status == StatusLevel::None {
            return false;
        }
        let Some(store) = &self.store else {
            return false;
        };
        let show = |bytes: u64| human(bytes, Base::Iec, 1, 1);
        let shown = store.shown();
        if let Some(made) = &self.made {
            use std::sync::atomic::Ordering::Relaxed;
            let (chunks, distinct) = (made.chunks.load(Relaxed), made.distinct.load(Relaxed));
            reporter.message(format_args!(
                "--store: the index names {chunks} chunks ({distinct} distinct) of {}; \
                 {} were new to the store {shown}: {} of data, {} stored",
                show(made.bytes.load(Relaxed)),
                made.added.load(Relaxed),
                show(made.added_bytes.load(Relaxed)),
                show(made.added_stored.load(Relaxed)),
            ));
            return match store.chunks() {
                Ok(held) => {
                    let Holding { chunks, bytes } = Holding::of(&held);
                    reporter.message(format_args!(
                        "--store: {shown} holds {chunks} chunks, {}",
                        show(bytes)
                    ));
                    false
                }
                Err(e) => {
                    reporter.message(format_args!("--store: cannot list {shown}: {}", e.detail));
                    true
                }
            };
        }
        if let Some((report, holes)) = &self.extracted {
            use std::sync::atomic::Ordering::Relaxed;
            let mut parts = vec![format!("{} in place", report.in_place.load(Relaxed))];
            parts.push(format!("{} of zeros", report.zeros.load(Relaxed)));
            parts.push(format!("{} from seeds", report.seeded.load(Relaxed)));
            parts.push(format!(
                "{} fetched from {shown} ({} of data, {} transferred)",
                report.fetched.load(Relaxed),
                show(report.fetched_bytes.load(Relaxed)),
                show(report.fetched_stored.load(Relaxed)),
            ));
            reporter.message(format_args!(
                "--store: {} chunks: {}",
                report.chunks.load(Relaxed),
                parts.join(", ")
            ));
            if *holes {
                reporter.message(format_args!(
                    "--store: {} bytes the output held already were not written",
                    report.unwritten.load(Relaxed)
                ));
            }
        }
        false
    }

    /// `--verify` of an extraction: every output read back, each chunk's
    /// bytes held to its id. Returns whether an output differs or cannot
    /// be read.
    pub fn verify(
        &self,
        reporter: &Reporter,
        plan: &CopyPlan,
        outputs: &[PathBuf],
        passthrough: crate::ends::generic_node::Options,
        copy_failed: bool,
    ) -> bool {
        let (true, Some(index), false) = (self.verify, &self.index, copy_failed) else {
            return false;
        };
        let checks: Vec<RangeCheck> = (0..index.chunks.len())
            .map(|i| {
                let (start, end) = index.span(i);
                let hex = index.chunks[i].id.to_string();
                RangeCheck {
                    start,
                    end,
                    digest: match index.digest() {
                        Digest::Sha512_256 => RangeDigest::Sha512_256(hex),
                        Digest::Sha256 => RangeDigest::Sha256(hex),
                    },
                }
            })
            .collect();
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(4, 16);
        let mut failed = false;
        for output in outputs {
            let quoted = shown(output);
            let reopen = super::read_back::ReadBackOf::new(output, plan, passthrough);
            match verify::verify_ranges(&reopen, &checks, workers) {
                Ok(RangesVerdict::Identical { bytes }) => reporter.message(format_args!(
                    "verify: {bytes} bytes of {quoted} read back, each of the index's {} \
                     chunks as its id",
                    checks.len()
                )),
                Ok(RangesVerdict::Differs { index: i }) => {
                    let check = &checks[i];
                    reporter.message(format_args!(
                        "verify: {quoted} differs from the index's chunk {i} (blob bytes {} to \
                         {})",
                        check.start, check.end
                    ));
                    failed = true;
                }
                Err(errno) => {
                    reporter.message(format_args!(
                        "verify: cannot read {quoted} back: {}",
                        crate::sys::errno_text(errno)
                    ));
                    failed = true;
                }
            }
        }
        failed
    }
}

/// A seed, opened as `if=` would be, read by position: through a
/// descriptor of its own where it has one, else through the end.
fn open_seed(plan: &CopyPlan, path: &Path) -> Result<SeedReader, Failure> {
    let opened = ends::open::open_input(
        &CopyPlan {
            input: Some(path.to_owned()),
            ..plan.clone()
        },
        crate::request::Settings::default().passthrough().into(),
    )
    .map_err(|e| Failure::Refused(Refusal(format!("--seed={}: {}", shown(path), e.diagnostic))))?;
    let end = opened.stream;
    if let Some(fd) = end.fd() {
        if let Ok(own) = fd.as_fd().try_clone_to_owned() {
            let _ = end.close();
            return Ok(SeedReader::Fd(own));
        }
    }
    if !end.capabilities().reads_at {
        return Err(Failure::Refused(Refusal(format!(
            "--seed={}: it cannot be read by position ({})",
            shown(path),
            end.kind().described()
        ))));
    }
    Ok(SeedReader::End(std::sync::Mutex::new(end)))
}

/// All of `end`'s bytes, up to [`MAX_INDEX`]; Err with the end's detail.
fn read_whole(end: &mut dyn Stream) -> Result<Vec<u8>, (crate::sys::Errno, Option<String>)> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match end.read(&mut buf) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                if bytes.len() as u64 > MAX_INDEX {
                    return Err((
                        crate::sys::Errno::FBIG,
                        Some("it is larger than any index".into()),
                    ));
                }
            }
            Err(crate::sys::Errno::INTR) => {}
            Err(errno) => return Err((errno, end.take_detail())),
        }
    }
}
