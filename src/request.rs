//! What the user asked for, checked and complete, before anything is
//! opened: GNU's operands (the [`CopyPlan`]) and ddx's own `--options`
//! ([`Settings`]). The command line produces it; the planner and the copy
//! driver consume it. Nothing here does I/O.

use crate::operands::CopyPlan;

/// The first of `options` (whether given, the option's name) that was
/// given: the one a refusal names where several would be refused.
pub fn first_given<const N: usize>(options: [(bool, &'static str); N]) -> Option<&'static str> {
    options
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
}

/// One copy, as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub plan: CopyPlan,
    pub settings: Settings,
}

/// ddx's own settings, from its `--options`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// `--backend=`; None is auto.
    pub backend: Option<BackendChoice>,
    /// `--queue-depth=N`.
    pub queue_depth: Option<usize>,
    /// `--keep-cache` / `--drop-cache` (the last one given wins).
    pub cache: CacheChoice,
    /// `--rescue`: retry failed reads sector by sector.
    pub rescue: bool,
    /// `--map=FILE`: keep a GNU ddrescue mapfile.
    pub map: Option<std::path::PathBuf>,
    /// `--resume`: continue from the map (or OF.ddx-map).
    pub resume: bool,
    /// `--sector-size=N`: the retry unit of --rescue.
    pub sector_size: Option<usize>,
    /// `--retry-passes=N`: a rescue's passes over its bad sectors.
    pub retry_passes: Option<u32>,
    /// `--hash=ALG[,ALG]`.
    pub hash: Vec<crate::integrity::Algorithm>,
    /// `--hash-file=FILE`: the digest in its checker's format.
    pub hash_file: Option<std::path::PathBuf>,
    /// `--verify`: read the output back and compare.
    pub verify: bool,
    /// `--decompress[=auto]`: copy the input's decompressed stream.
    pub decompress: Option<crate::image::Mode>,
    /// `--no-decompress`: a compressed input is copied as its bytes, onto
    /// a disk too, without asking (the last of it and `--decompress`
    /// given wins).
    pub no_decompress: bool,
    /// `--compress=ALG[:LEVEL]`: write the output compressed.
    pub compress: Option<crate::image::Compression>,
    /// `--bmap=FILE`: write only the blocks the map names, checked.
    pub bmap: Option<std::path::PathBuf>,
    /// `--bmap-create=FILE`: record a block map of the input.
    pub bmap_create: Option<std::path::PathBuf>,
    /// `--used-only`: read only the blocks the input disk's file systems
    /// use; the rest are holes.
    pub used_only: bool,
    /// `--tee=FILE`, repeatable: further outputs of the same bytes.
    pub tee: Vec<std::path::PathBuf>,
    /// `--offload` / `--no-offload` (the last one given wins).
    pub offload: Offload,
    /// `--request-size=BYTES`: bulk request size instead of the default.
    pub request_size: Option<usize>,
    /// `--force`: skip the wrong-device guard's refusals and prompt.
    pub force: bool,
    /// `--trim`: discard zero blocks and holes on the output instead of
    /// writing them.
    pub trim: bool,
    /// `--fua`: writes to a passthrough output with force unit access.
    pub fua: bool,
    /// `--verbose`: how the copy ran, after GNU's statistics.
    pub verbose: bool,
    /// `--progress-fd=N`: JSON progress records to this descriptor.
    pub progress_fd: Option<i32>,
    /// `--store[=STORE]`: the chunk store of a casync index, made or
    /// extracted (see [`Request::index_job`]).
    pub store: Option<StoreChoice>,
    /// `--seed=FILE`, repeatable: where an extracted blob's chunks may
    /// already be.
    pub seeds: Vec<std::path::PathBuf>,
    /// `--chunk-size=[MIN:]AVG[:MAX]`: how an index is cut.
    pub chunk_size: Option<crate::casync::ChunkSizes>,
}

/// Which chunk store `--store` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// `--store` alone: casync's default, `default.castr` beside the
    /// index.
    Beside,
    /// `--store=STORE`: a directory or a URL.
    At(std::path::PathBuf),
}

/// What a copy does with a casync index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexJob {
    /// `of=` is the index: the input is cut into chunks, stored.
    Make,
    /// `if=` is the index: its blob is written to the output.
    Extract,
}

/// What an index's name ends in.
pub const INDEX_SUFFIX: &str = ".caibx";

/// Whether `path` names a casync blob index: its last component (before
/// a URL's query) ends in `.caibx`.
pub fn names_index(path: &std::path::Path) -> bool {
    let text = path.to_string_lossy();
    let name = text.split(['?', '#']).next().unwrap_or(&text);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.len() > INDEX_SUFFIX.len() && last.ends_with(INDEX_SUFFIX)
}

impl Request {
    /// Whether the copy makes or extracts a casync index: any of
    /// `--store`, `--seed` and `--chunk-size` given.
    pub fn indexed(&self) -> bool {
        let s = &self.settings;
        s.store.is_some() || !s.seeds.is_empty() || s.chunk_size.is_some()
    }

    /// Which end is the index, for a copy that is [`Request::indexed`]:
    /// of= when it is named as one, else if=; None when neither is (the
    /// table refuses that, and both).
    pub fn index_job(&self) -> Option<IndexJob> {
        if !self.indexed() {
            return None;
        }
        let named = |end: &Option<std::path::PathBuf>| end.as_deref().is_some_and(names_index);
        if named(&self.plan.output) {
            Some(IndexJob::Make)
        } else if named(&self.plan.input) {
            Some(IndexJob::Extract)
        } else {
            None
        }
    }
}

impl Settings {
    /// How a generic-node end (an sg, bsg or ng node) is opened: the
    /// commands in flight (`--queue-depth`, else the end's default) and
    /// FUA on writes.
    pub fn passthrough(&self) -> crate::ends::generic_node::Options {
        crate::ends::generic_node::Options {
            depth: self
                .queue_depth
                .unwrap_or(crate::ends::generic_node::DEFAULT_DEPTH),
            fua: self.fua,
            mapped: true,
        }
    }
}

/// Whether the kernel's copy (copy_file_range, splice) may take a copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Offload {
    /// Where it is expected to be the faster way (see `engine::shape`).
    #[default]
    Auto,
    /// Wherever the kernel takes it.
    Always,
    /// Never: every byte through ddx's buffers.
    Never,
}

/// Whether a copy's pages stay in the page cache (see `planner::cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheChoice {
    /// As the memory ddx may use allows.
    #[default]
    Auto,
    /// `--keep-cache`: through the cache, as cp and dd.
    Keep,
    /// `--drop-cache`: dropped behind the copy from its first byte.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    Sync,
    Threads,
    Uring,
}
