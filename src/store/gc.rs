//! Garbage collection, as casync's `gc`: every chunk of a store that no
//! index still names is removed.
//!
//! A backup adds its chunks before it writes the index that names them,
//! so a chunk stored less than `min_age` ago is kept whatever the
//! indexes say: a backup running during the collection keeps what it
//! added. Removal is spread over a few threads (a store's objects are
//! removed one request each).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::{Holding, Store, StoreError, Stored};
use crate::casync::ChunkId;

/// What a collection did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    /// The chunks removed (or that a dry run would remove).
    pub removed: Holding,
    /// The chunks kept because an index names them.
    pub named: Holding,
    /// The chunks kept, though no index names them, for being recent.
    pub recent: Holding,
}

/// Remove from `store` every chunk not in `keep` and stored at least
/// `min_age` ago (where the store says when; a chunk of unknown age is
/// old). `dry_run`: count, remove nothing.
pub fn collect(
    store: &Store,
    keep: &HashSet<ChunkId>,
    min_age: Duration,
    dry_run: bool,
) -> Result<Collected, StoreError> {
    let now = SystemTime::now();
    let all = store.chunks()?;
    let (named, unnamed): (Vec<Stored>, Vec<Stored>) =
        all.into_iter().partition(|c| keep.contains(&c.id));
    let young = |c: &Stored| {
        c.stored
            .and_then(|at| now.duration_since(at).ok())
            .is_some_and(|age| age < min_age)
    };
    let (recent, doomed): (Vec<Stored>, Vec<Stored>) = unnamed.into_iter().partition(young);
    if !dry_run {
        remove_all(store, &doomed)?;
    }
    Ok(Collected {
        removed: Holding::of(&doomed),
        named: Holding::of(&named),
        recent: Holding::of(&recent),
    })
}

/// Threads removing chunks: a store's objects are removed one request
/// each, so several in flight.
const REMOVERS: usize = 16;

fn remove_all(store: &Store, doomed: &[Stored]) -> Result<(), StoreError> {
    let next = AtomicUsize::new(0);
    let failed = Mutex::new(None::<StoreError>);
    std::thread::scope(|scope| {
        for _ in 0..REMOVERS.min(doomed.len()) {
            scope.spawn(|| loop {
                if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    return;
                }
                let Some(chunk) = doomed.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                if let Err(e) = store.remove(&chunk.id) {
                    let mut first = failed.lock().unwrap_or_else(|e| e.into_inner());
                    first.get_or_insert(e);
                    return;
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::casync::{chunk, Digest};
    use crate::store::Location;

    #[test]
    fn chunks_no_index_names_go_and_the_recent_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Location::Directory(dir.path().join("s")), true).unwrap();
        let ids: Vec<ChunkId> = (0..6u8)
            .map(|i| {
                let data = vec![i; 1000 + i as usize];
                let id = Digest::Sha512_256.id(&data);
                store.put(&id, chunk::encode(&data, 3)).unwrap();
                id
            })
            .collect();
        let keep: HashSet<ChunkId> = ids[..2].iter().copied().collect();
        // Everything was stored just now: kept as recent.
        let kept = collect(&store, &keep, Duration::from_secs(3600), false).unwrap();
        assert_eq!(
            (kept.removed.chunks, kept.named.chunks, kept.recent.chunks),
            (0, 2, 4)
        );
        let dry = collect(&store, &keep, Duration::ZERO, true).unwrap();
        assert_eq!(dry.removed.chunks, 4);
        assert_eq!(store.chunks().unwrap().len(), 6);
        let done = collect(&store, &keep, Duration::ZERO, false).unwrap();
        assert_eq!((done.removed.chunks, done.named.chunks), (4, 2));
        let left: HashSet<ChunkId> = store.chunks().unwrap().iter().map(|c| c.id).collect();
        assert_eq!(left, keep);
    }
}
