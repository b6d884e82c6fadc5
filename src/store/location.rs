//! Where a chunk store is, as the user names it: a directory, or a
//! prefix of objects (`s3://BUCKET[/PREFIX]`, `http(s)://HOST/PATH`),
//! and the store casync uses by default, `default.castr` beside the
//! index.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::ends::object::ObjectUrl;
use crate::text::quote::printable;

/// The directory name casync gives a store beside its index.
pub const DEFAULT_NAME: &str = "default.castr";

/// A store's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Directory(PathBuf),
    /// Objects under a prefix: for S3 the key is the prefix (empty for
    /// the bucket's root), for HTTP the URL the store's directory.
    Objects(ObjectUrl),
}

/// Why a store's name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LocationError(pub String);

impl Location {
    /// A store named `value`: an object URL where it has an object URL's
    /// scheme and no file of that name exists (as `if=` and `of=` are
    /// taken), else a directory.
    pub fn parse(value: &Path) -> Result<Location, LocationError> {
        let exists = value.symlink_metadata().is_ok();
        let text = value.to_str().filter(|_| !exists);
        let Some((scheme, rest)) = text.and_then(|t| t.split_once("://")) else {
            if value.as_os_str().is_empty() {
                return Err(LocationError(
                    "a store is a directory or a URL, not ''".into(),
                ));
            }
            return Ok(Location::Directory(value.to_owned()));
        };
        let text = text.expect("split above");
        match scheme.to_ascii_lowercase().as_str() {
            "s3" => {
                let rest = rest.trim_end_matches('/');
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                let valid_bucket = !bucket.is_empty()
                    && bucket
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
                if !valid_bucket {
                    return Err(LocationError(format!(
                        "s3://{}: '{}' is not a bucket name (letters, digits, '.', '-' and '_')",
                        printable(rest),
                        printable(bucket)
                    )));
                }
                let usable = prefix.is_empty()
                    || prefix.split('/').all(|s| {
                        !s.is_empty() && s != "." && s != ".." && !s.chars().any(|c| c.is_control())
                    });
                if !usable {
                    return Err(LocationError(format!(
                        "s3://{}: a store's prefix with an empty, '.' or '..' segment or a \
                         control character is not supported",
                        printable(rest)
                    )));
                }
                Ok(Location::Objects(ObjectUrl::S3 {
                    bucket: bucket.to_owned(),
                    key: prefix.to_owned(),
                }))
            }
            "http" | "https" => {
                // As a directory: the URL of a file under it, with the
                // trailing '/' that would make an empty name dropped.
                let (path, query) = match text.split_once('?') {
                    Some((path, query)) => (path.trim_end_matches('/'), Some(query)),
                    None => (text.trim_end_matches('/'), None),
                };
                let probe = format!(
                    "{path}/x{}",
                    query.map_or(String::new(), |q| format!("?{q}"))
                );
                match crate::ends::object::recognise(&probe) {
                    Some(Ok(_)) => Ok(Location::Objects(ObjectUrl::Http(match query {
                        Some(query) => format!("{path}?{query}"),
                        None => path.to_owned(),
                    }))),
                    Some(Err(e)) => Err(LocationError(e.to_string())),
                    None => unreachable!("an http(s) URL is recognised"),
                }
            }
            _ => Ok(Location::Directory(value.to_owned())),
        }
    }

    /// casync's default store for the index named `index`: a directory
    /// `default.castr` beside it, in the same directory or under the same
    /// URL (without the index's query string).
    pub fn beside(index: &Path) -> Result<Location, LocationError> {
        let text = index.to_str().filter(|_| index.symlink_metadata().is_err());
        if let Some(url) = text.filter(|t| crate::ends::object::recognise(t).is_some()) {
            let path = url.split(['?', '#']).next().unwrap_or(url);
            let dir = path.rsplit_once('/').map_or(path, |(dir, _)| dir);
            return Location::parse(Path::new(&format!("{dir}/{DEFAULT_NAME}")));
        }
        let dir = index.parent().unwrap_or(Path::new(""));
        Ok(Location::Directory(dir.join(DEFAULT_NAME)))
    }

    /// How messages name the store: quoted, without secrets.
    pub fn shown(&self) -> String {
        match self {
            Location::Directory(path) => {
                crate::text::quote::quote_file(path.as_os_str().as_bytes())
            }
            Location::Objects(ObjectUrl::S3 { bucket, key }) if key.is_empty() => {
                format!("'s3://{bucket}'")
            }
            Location::Objects(url) => format!("'{url}'"),
        }
    }

    /// Whether chunks can be stored there (a web server's is read only).
    pub fn writable(&self) -> bool {
        !matches!(self, Location::Objects(ObjectUrl::Http(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<Location, LocationError> {
        Location::parse(Path::new(value))
    }

    #[test]
    fn stores_are_directories_or_prefixes_of_objects() {
        assert_eq!(
            parse("/srv/store"),
            Ok(Location::Directory("/srv/store".into()))
        );
        assert_eq!(
            parse("s3://bkt/fleet/store/"),
            Ok(Location::Objects(ObjectUrl::S3 {
                bucket: "bkt".into(),
                key: "fleet/store".into()
            }))
        );
        assert_eq!(
            parse("s3://bkt"),
            Ok(Location::Objects(ObjectUrl::S3 {
                bucket: "bkt".into(),
                key: String::new()
            }))
        );
        assert_eq!(
            parse("https://h:8443/os/store/"),
            Ok(Location::Objects(ObjectUrl::Http(
                "https://h:8443/os/store".into()
            )))
        );
        assert!(parse("s3://bad:bucket/x").is_err());
        assert!(parse("s3://bkt/a//b").is_err());
        assert!(parse("https:///x").is_err());
        assert!(parse("").is_err());
        assert!(!parse("http://h/s").unwrap().writable());
        assert!(parse("s3://b/s").unwrap().writable());
    }

    #[test]
    fn the_default_store_is_beside_the_index() {
        assert_eq!(
            Location::beside(Path::new("/backups/web1.caibx")),
            Ok(Location::Directory("/backups/default.castr".into()))
        );
        assert_eq!(
            Location::beside(Path::new("web1.caibx")),
            Ok(Location::Directory("default.castr".into()))
        );
        assert_eq!(
            Location::beside(Path::new("s3://bkt/fleet/web1.caibx")),
            Ok(Location::Objects(ObjectUrl::S3 {
                bucket: "bkt".into(),
                key: "fleet/default.castr".into()
            }))
        );
        assert_eq!(
            Location::beside(Path::new("https://h/os/r2.caibx?sig=abc")),
            Ok(Location::Objects(ObjectUrl::Http(
                "https://h/os/default.castr".into()
            )))
        );
    }

    #[test]
    fn a_store_is_named_without_its_secrets() {
        let store = parse("https://u:pw@h/s?sig=topsecret").unwrap();
        let shown = store.shown();
        assert!(
            !shown.contains("topsecret") && !shown.contains("pw@"),
            "{shown}"
        );
    }
}
