//! Chunk stores: where a casync index's chunks are kept, each in its
//! file `xxxx/<id>.cacnk`.
//!
//! A store is a directory ([`directory`]), objects in S3 (read and
//! written) or a directory a web server serves (read), the last two
//! through the object ends' client (`ends::object::Prefix`: the same
//! credentials, endpoints, retries and error words as `s3://` and
//! `https://` operands). [`Location`] says which, from the name the user
//! gives, and where casync's default store is (`default.castr` beside the
//! index).
//!
//! Every method takes `&self` and may be called from many threads at
//! once: making an index stores chunks on every core, and extracting one
//! fetches many at once. A chunk is stored whole or not at all (a
//! directory: a file of its own renamed over the name; S3: one PUT), so
//! several writers adding to one store at once never leave a part under
//! a chunk's name; a chunk two of them add is two writes of the same
//! bytes. What a chunk holds is checked where it arrives, against its id
//! (`image::indexed`): a store is not trusted.
//!
//! [`collect`] is casync's `gc`: it removes every chunk no given index
//! names.

mod directory;
mod gc;
mod location;

pub use gc::{collect, Collected};
pub use location::{Location, LocationError, DEFAULT_NAME};

use crate::casync::ChunkId;
use crate::sys::Errno;

/// Why a store failed: the errno closest to it and a line in the store's
/// own words (a server's status and code), without secrets. Messages put
/// the store's name and the chunk before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct StoreError {
    pub errno: Errno,
    pub detail: String,
}

/// A chunk store, open.
#[derive(Debug)]
pub struct Store {
    location: Location,
    backend: Backend,
}

#[derive(Debug)]
enum Backend {
    Directory(directory::Directory),
    #[cfg(feature = "object")]
    Objects(Box<crate::ends::object::Prefix>),
}

#[cfg(feature = "object")]
fn object_error(e: crate::ends::object::ObjectError) -> StoreError {
    StoreError {
        errno: e.errno,
        detail: e.detail,
    }
}

impl Store {
    /// Open the store at `location`, to read it or also to add to it (a
    /// directory is made where there is none).
    pub fn open(location: Location, write: bool) -> Result<Store, StoreError> {
        if write && !location.writable() {
            return Err(StoreError {
                errno: Errno::ROFS,
                detail: "a web server's directory can be read, not written: store chunks in a \
                         directory or in S3 (s3://)"
                    .into(),
            });
        }
        let backend = match &location {
            Location::Directory(root) => {
                Backend::Directory(directory::Directory::open(root, write)?)
            }
            #[cfg(feature = "object")]
            Location::Objects(url) => {
                let config = crate::ends::object::Config::from_env().map_err(object_error)?;
                Backend::Objects(Box::new(
                    crate::ends::object::Prefix::open(url, &config, write).map_err(object_error)?,
                ))
            }
            #[cfg(not(feature = "object"))]
            Location::Objects(_) => {
                return Err(StoreError {
                    errno: Errno::NOTSUP,
                    detail: "this ddx was built without S3 and HTTP (the 'object' feature)".into(),
                })
            }
        };
        Ok(Store { location, backend })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The store as messages name it, quoted, without secrets.
    pub fn shown(&self) -> String {
        self.location.shown()
    }

    /// The file of chunk `id`, compressed as stored; None where the store
    /// has none.
    pub fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.get(id),
            #[cfg(feature = "object")]
            Backend::Objects(objects) => objects
                .get(&id.store_path())
                .map(|got| got.map(|bytes| bytes.to_vec()))
                .map_err(object_error),
        }
    }

    /// Whether the store has chunk `id`.
    pub fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.has(id),
            #[cfg(feature = "object")]
            Backend::Objects(objects) => objects.has(&id.store_path()).map_err(object_error),
        }
    }

    /// Store `file` (compressed) as chunk `id`, whole.
    pub fn put(&self, id: &ChunkId, file: Vec<u8>) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.put(id, &file),
            #[cfg(feature = "object")]
            Backend::Objects(objects) => objects.put(&id.store_path(), file).map_err(object_error),
        }
    }

    /// Remove chunk `id` (gone already is fine).
    pub fn remove(&self, id: &ChunkId) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.remove(id),
            #[cfg(feature = "object")]
            Backend::Objects(objects) => objects.remove(&id.store_path()).map_err(object_error),
        }
    }

    /// Every chunk the store holds.
    pub fn chunks(&self) -> Result<Vec<Stored>, StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.chunks(),
            #[cfg(feature = "object")]
            Backend::Objects(objects) => Ok(objects
                .list()
                .map_err(object_error)?
                .into_iter()
                .filter_map(|(key, size, stored)| {
                    let (dir, name) = key.split_once('/')?;
                    let id = ChunkId::of_file_name(name)?;
                    (id.store_path().starts_with(dir) && dir.len() == 4).then_some(Stored {
                        id,
                        size,
                        stored,
                    })
                })
                .collect()),
        }
    }

    /// Make the chunks stored so far durable before an index names them
    /// (a directory's file system synced; an object is durable once its
    /// PUT is answered).
    pub fn sync(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Directory(dir) => dir.sync(),
            #[cfg(feature = "object")]
            Backend::Objects(_) => Ok(()),
        }
    }
}

/// A chunk a store holds: its id, its file's size, and when it was
/// stored, where the store says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub id: ChunkId,
    pub size: u64,
    pub stored: Option<std::time::SystemTime>,
}

/// The chunks a store holds, summed: how many, and their files' bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holding {
    pub chunks: u64,
    pub bytes: u64,
}

impl Holding {
    pub fn of(chunks: &[Stored]) -> Holding {
        Holding {
            chunks: chunks.len() as u64,
            bytes: chunks.iter().map(|c| c.size).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::casync::{chunk, Digest};

    #[test]
    fn a_directory_store_keeps_chunks_whole_under_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("nested/store");
        let store = Store::open(Location::Directory(root.clone()), true).unwrap();
        let data = vec![3u8; 70_000];
        let id = Digest::Sha512_256.id(&data);
        assert_eq!(store.get(&id), Ok(None));
        assert_eq!(store.has(&id), Ok(false));
        // Eight writers add the same chunk at once.
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| store.put(&id, chunk::encode(&data, 3)).unwrap());
            }
        });
        assert_eq!(store.has(&id), Ok(true));
        let file = store.get(&id).unwrap().unwrap();
        assert_eq!(chunk::decode(&file, data.len()).unwrap(), data);
        let held = store.chunks().unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!((held[0].id, held[0].size), (id, file.len() as u64));
        assert!(held[0].stored.is_some());
        // Nothing else is left in the chunk's directory.
        let names: Vec<_> = std::fs::read_dir(root.join(&id.to_string()[..4]))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![format!("{id}.cacnk")]);
        store.sync().unwrap();
        store.remove(&id).unwrap();
        assert_eq!(store.chunks().unwrap(), vec![]);
        assert!(!root.join(&id.to_string()[..4]).exists());
    }

    #[test]
    fn a_store_that_is_not_a_directory_is_named_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let error = Store::open(Location::Directory(file), false).unwrap_err();
        assert_eq!(error.errno, Errno::NOTDIR);
        let error =
            Store::open(Location::Directory(dir.path().join("missing")), false).unwrap_err();
        assert_eq!(error.errno, Errno::NOENT);
        let error = Store::open(
            Location::Objects(crate::ends::object::ObjectUrl::Http("http://h/s".into())),
            true,
        )
        .unwrap_err();
        assert_eq!(error.errno, Errno::ROFS);
    }
}
