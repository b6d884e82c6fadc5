//! A chunk store in a directory, laid out as casync lays it out:
//! `ROOT/xxxx/<id>.cacnk`.
//!
//! A chunk appears under its name only whole: it is written to a file of
//! its own (`<id>.<writer>.tmp`, created exclusively, never shared) in the
//! chunk's directory and renamed over its name, which the file system
//! does in one step. Several writers adding the same chunk at once each
//! rename a whole file of the same bytes; no reader ever sees a part.
//! Chunk files are read-only (0444), as casync makes them.
//!
//! Durability is one `syncfs` of the store's file system once a backup's
//! chunks are all in ([`Directory::sync`]), before its index is written:
//! an fsync per chunk would cost a disk flush for every 64 KiB.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::casync::chunk::ChunkId;
use crate::sys::Errno;

use super::{StoreError, Stored};

#[derive(Debug)]
pub struct Directory {
    root: PathBuf,
}

/// Each temporary file's own number in this process.
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

fn io_error(what: String, e: &std::io::Error) -> StoreError {
    let errno = Errno::from_io_error(e).unwrap_or(Errno::IO);
    StoreError {
        errno,
        detail: format!("{what}: {}", crate::sys::errno_text(errno)),
    }
}

impl Directory {
    /// The store at `root`; for writing, the directory is made if it is
    /// not there.
    pub fn open(root: &Path, write: bool) -> Result<Directory, StoreError> {
        let shown = root.display();
        if write {
            std::fs::create_dir_all(root)
                .map_err(|e| io_error(format!("making the directory {shown}"), &e))?;
        }
        match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => Ok(Directory {
                root: root.to_owned(),
            }),
            Ok(_) => Err(StoreError {
                errno: Errno::NOTDIR,
                detail: "it is not a directory".into(),
            }),
            Err(e) => Err(io_error("opening it".into(), &e)),
        }
    }

    fn file(&self, id: &ChunkId) -> PathBuf {
        self.root.join(id.store_path())
    }

    pub fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(self.file(id)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(format!("reading {}", id.store_path()), &e)),
        }
    }

    pub fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        match std::fs::symlink_metadata(self.file(id)) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(format!("looking for {}", id.store_path()), &e)),
        }
    }

    pub fn put(&self, id: &ChunkId, file: &[u8]) -> Result<(), StoreError> {
        let target = self.file(id);
        let dir = target.parent().expect("a chunk's file is in a directory");
        let making = |e: &std::io::Error| io_error(format!("making {}", dir.display()), e);
        let writing = |e: &std::io::Error| io_error(format!("storing {}", id.store_path()), e);
        let mut made = false;
        let mut tries = 0;
        let (temporary, mut out) = loop {
            if !made {
                match std::fs::create_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(making(&e)),
                }
                made = true;
            }
            let number = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
            let name = format!("{id}.{:x}-{number:x}.tmp", std::process::id());
            let temporary = dir.join(name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&temporary)
            {
                Ok(out) => break (temporary, out),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                // A gc removing the directory's last chunk removed the
                // directory between its making and this file: made again.
                // (Once the file is in it, the directory is not empty and
                // stays.) Bounded, so that a directory that cannot be kept
                // is an error and not a loop.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 1000 => {
                    tries += 1;
                    made = false;
                }
                Err(e) => return Err(writing(&e)),
            }
        };
        let written = out.write_all(file).and_then(|()| {
            drop(out);
            std::fs::rename(&temporary, &target)
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(writing(&e));
        }
        Ok(())
    }

    pub fn remove(&self, id: &ChunkId) -> Result<(), StoreError> {
        let file = self.file(id);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(format!("removing {}", id.store_path()), &e)),
        }
        // The chunk's directory goes with its last chunk, as casync's gc
        // leaves it (a directory still holding chunks stays).
        if let Some(dir) = file.parent() {
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }

    /// Every chunk in the store. Files that are not chunks (a writer's
    /// temporary file) are left out.
    pub fn chunks(&self) -> Result<Vec<Stored>, StoreError> {
        let listing =
            |dir: &Path, e: &std::io::Error| io_error(format!("listing {}", dir.display()), e);
        let mut all = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(|e| listing(&self.root, &e))? {
            let entry = entry.map_err(|e| listing(&self.root, &e))?;
            let name = entry.file_name();
            let is_chunk_dir = name.len() == 4
                && name
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_hexdigit()));
            if !is_chunk_dir || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = entry.path();
            let files = match std::fs::read_dir(&dir) {
                Ok(files) => files,
                // Removed by a collection meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(listing(&dir, &e)),
            };
            for file in files {
                let file = file.map_err(|e| listing(&dir, &e))?;
                let Some(id) = file.file_name().to_str().and_then(ChunkId::of_file_name) else {
                    continue;
                };
                if let Ok(meta) = file.metadata() {
                    all.push(Stored {
                        id,
                        size: meta.len(),
                        stored: meta.modified().ok(),
                    });
                }
            }
        }
        Ok(all)
    }

    /// Make every chunk stored so far durable: one syncfs of the store's
    /// file system.
    pub fn sync(&self) -> Result<(), StoreError> {
        let root = std::fs::File::open(&self.root)
            .map_err(|e| io_error(format!("opening {}", self.root.display()), &e))?;
        rustix::fs::syncfs(&root).map_err(|errno| StoreError {
            errno,
            detail: format!("syncing its file system: {}", crate::sys::errno_text(errno)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gc removing the last chunk of a directory while a writer adds
    /// another to it: the writer's chunk is stored every time. Without
    /// making the directory again, a put here failed with "No such file
    /// or directory" within the first rounds.
    #[test]
    fn a_chunk_is_stored_while_a_gc_empties_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(Directory::open(root.path(), true).unwrap());
        // Two chunks in one directory (the same first four hex digits).
        let mut kept = [0u8; 32];
        kept[0] = 0xab;
        kept[1] = 0xcd;
        let mut added = kept;
        added[31] = 1;
        let (kept, added) = (ChunkId(kept), ChunkId(added));
        assert_eq!(kept.store_path()[..4], added.store_path()[..4]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gc = {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                // A writer of the other chunk, and a gc removing it.
                let mut removed = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    store.put(&kept, b"kept").unwrap();
                    store.remove(&kept).unwrap();
                    removed += 1;
                }
                removed
            })
        };
        for round in 0..3000 {
            store
                .put(&added, b"chunk")
                .unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            assert!(store.has(&added).unwrap());
            store.remove(&added).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(gc.join().unwrap() > 0);
    }
}
