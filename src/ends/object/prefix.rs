//! Objects under one prefix, each read, written, listed and removed
//! whole: what a chunk store (`store`) keeps in S3 or behind a web
//! server, with the same settings, retries and error words as the object
//! ends.
//!
//! A [`Prefix`] owns its runtime (see `runtime`); its methods take `&self`
//! and may be called from many threads at once, each waiting for its own
//! request, so that a store can keep many requests in flight. Keys are
//! relative to the prefix.

use bytes::Bytes;
use futures_util::stream::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::runtime::Runtime;

use super::config::{Config, Direction, Store};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};

/// Objects under a prefix of a bucket, or of a web server's tree.
pub struct Prefix {
    runtime: Runtime,
    store: Store,
    base: Path,
}

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefix({})", self.store.label)
    }
}

impl Prefix {
    /// The objects under `url` (for S3 its key is the prefix, possibly
    /// empty; for HTTP the URL is the directory), read or also written.
    pub fn open(url: &ObjectUrl, config: &Config, write: bool) -> Result<Prefix, ObjectError> {
        let runtime = runtime::new()?;
        let direction = if write {
            Direction::Write
        } else {
            Direction::Read
        };
        let store = config.store(url, direction, &runtime)?;
        let base = store.path.clone();
        Ok(Prefix {
            runtime,
            store,
            base,
        })
    }

    fn path(&self, key: &str) -> Path {
        key.split('/')
            .fold(self.base.clone(), |path, part| path.join(part))
    }

    /// An error of `what` ("reading KEY"), without secrets.
    fn error(&self, what: &str, e: &object_store::Error) -> ObjectError {
        self.store.error(what, e)
    }

    fn client(&self) -> std::sync::Arc<dyn ObjectStore> {
        self.store.store.clone()
    }

    /// The object `key`'s bytes; None where there is none.
    pub fn get(&self, key: &str) -> Result<Option<Bytes>, ObjectError> {
        let (client, path) = (self.client(), self.path(key));
        let got = runtime::run(&self.runtime, async move {
            match client.get(&path).await {
                Ok(got) => got.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map_err(|e| self.error(&format!("reading {key}"), &e))
    }

    /// Whether the object `key` exists.
    pub fn has(&self, key: &str) -> Result<bool, ObjectError> {
        let (client, path) = (self.client(), self.path(key));
        let found = runtime::run(&self.runtime, async move {
            match client.head(&path).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.error(&format!("looking for {key}"), &e))
    }

    /// Store `data` as the object `key`, in one request: the object
    /// appears whole or not at all.
    pub fn put(&self, key: &str, data: Vec<u8>) -> Result<(), ObjectError> {
        let (client, path) = (self.client(), self.path(key));
        let payload = PutPayload::from(data);
        runtime::run(&self.runtime, async move {
            client.put(&path, payload).await.map(|_| ())
        })
        .map_err(|e| self.error(&format!("storing {key}"), &e))
    }

    /// Remove the object `key` (gone already is fine).
    pub fn remove(&self, key: &str) -> Result<(), ObjectError> {
        let (client, path) = (self.client(), self.path(key));
        runtime::run(&self.runtime, async move {
            match client.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })
        .map_err(|e| self.error(&format!("removing {key}"), &e))
    }

    /// Every object under the prefix: its key (relative to the prefix),
    /// size and time of storing.
    pub fn list(&self) -> Result<Vec<(String, u64, Option<std::time::SystemTime>)>, ObjectError> {
        let (client, base) = (self.client(), self.base.clone());
        let prefix = (!base.as_ref().is_empty()).then(|| base.clone());
        let listed = runtime::run(&self.runtime, async move {
            let mut stream = client.list(prefix.as_ref());
            let mut all = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta?;
                let key = match base.as_ref() {
                    "" => meta.location.to_string(),
                    base => meta
                        .location
                        .as_ref()
                        .strip_prefix(base)
                        .and_then(|k| k.strip_prefix('/'))
                        .unwrap_or(meta.location.as_ref())
                        .to_owned(),
                };
                // object_store says the epoch when the store gave no time.
                let stored = (meta.last_modified.timestamp() > 0)
                    .then(|| std::time::SystemTime::from(meta.last_modified));
                all.push((key, meta.size, stored));
            }
            Ok(all)
        });
        listed.map_err(|e| self.error("listing its objects", &e))
    }
}
