//! Ends named by a URI in `if=`/`of=`: an NBD export (`nbd://`,
//! `nbd+unix://`, ...), an object (`s3://BUCKET/KEY`, and for reading
//! `http://` and `https://`), a TCP connection (`tcp://HOST:PORT`), or a
//! file held in memory (`mem:PATH`). A value is taken as a URI only when no file of
//! that name exists, nor the directory its first component would be
//! (`nbd+unix:` in `nbd+unix:///?socket=...`, where GNU dd would create
//! a file): GNU dd could not open such a name, so no GNU behaviour
//! changes. Each kind of end named by a URI is a module of `ends`; this
//! one only tells them apart (one arm each in [`recognise_in`], [`open`]
//! and [`UriEnd::kind`]) and opens them.

use std::path::{Component, Path, PathBuf};

use super::memory;
use super::nbd::{self, NbdUri};
use super::object::{self, ObjectUrl};
use super::tcp::{self, TcpUri};
use super::{Capabilities, End, Kind};
use crate::sys::Errno;

/// An end named by a URI, recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriEnd {
    Nbd(NbdUri),
    Object(ObjectUrl),
    /// `mem:PATH`: the file at PATH, held in memory.
    Memory(PathBuf),
    /// `tcp://HOST:PORT`: a connection to, or from, another machine.
    Tcp(TcpUri),
}

impl UriEnd {
    pub fn kind(&self) -> Kind {
        match self {
            UriEnd::Nbd(_) => Kind::NbdExport,
            UriEnd::Object(_) => Kind::Object,
            UriEnd::Memory(_) => Kind::Memory,
            UriEnd::Tcp(_) => Kind::Socket,
        }
    }

    /// What the end will be able to do once opened, as its URI says.
    pub fn capabilities(&self) -> Capabilities {
        let of_kind = Capabilities::of(self.kind());
        match self {
            UriEnd::Object(url) if !url.writable() => Capabilities {
                read_only: Some(
                    "only s3:// objects can be written (http:// and https:// are read only)",
                ),
                ..of_kind
            },
            _ => of_kind,
        }
    }
}

/// Whether `value` names an upload the server keeps in parts until it
/// completes (an `s3://` object), which a map can keep resumable: a
/// stream copy then, not a copy by position.
pub fn is_resumable_upload(value: &Path) -> bool {
    recognise(value).is_some_and(|named| {
        named.is_ok_and(|named| {
            let can = named.capabilities();
            can.resumable_upload && can.read_only.is_none()
        })
    })
}

/// Why an end named by a URI could not be opened: the errno GNU's
/// message shows, and what the other side said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError {
    pub errno: Errno,
    pub detail: String,
}

/// What `value` names, when it names an end by URI: None for a file name;
/// Some(Err) for a URI of a known scheme that cannot be right (the
/// reason).
pub fn recognise(value: &Path) -> Option<Result<UriEnd, String>> {
    recognise_in(Path::new("."), value)
}

/// [`recognise`], with relative names taken from `base`.
fn recognise_in(base: &Path, value: &Path) -> Option<Result<UriEnd, String>> {
    let text = value.to_str()?;
    if base.join(value).symlink_metadata().is_ok() {
        return None;
    }
    if let Some(Component::Normal(first)) = value.components().next() {
        if base.join(first).symlink_metadata().is_ok() {
            return None;
        }
    }
    if let Some(parsed) = memory::recognise(text) {
        return Some(parsed.map(UriEnd::Memory));
    }
    if let Some(parsed) = tcp::recognise(text) {
        return Some(parsed.map(UriEnd::Tcp));
    }
    if let Some(parsed) = nbd::recognise(text) {
        return Some(parsed.map(UriEnd::Nbd).map_err(|e| e.0));
    }
    let parsed = object::recognise(text)?;
    Some(parsed.map(UriEnd::Object).map_err(|e| e.to_string()))
}

/// How the operand `value` may appear in messages: as given, except that
/// an object URL's secrets (a password, a presigned URL's signature) are
/// blanked.
pub fn shown(value: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    match value.to_str() {
        Some(text) if object::recognise(text).is_some() && recognise(value).is_some() => {
            object::shown(text).into_bytes()
        }
        _ => value.as_os_str().as_bytes().to_vec(),
    }
}

/// How an end named by a URI is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    Read,
    Write,
    /// For writing, each write durable on the server before it returns
    /// (oflag=sync or oflag=dsync, which a file gets from O_SYNC and
    /// O_DSYNC).
    WriteDurable,
}

/// Open `named` as `opening` says.
pub fn open(named: &UriEnd, opening: Opening) -> Result<Box<dyn End>, UriError> {
    let writing = opening != Opening::Read;
    match named {
        UriEnd::Nbd(uri) => open_nbd(uri, opening),
        // An object's upload is durable when it completes, and only then;
        // a file held in memory is never durable.
        UriEnd::Object(url) => open_object(url, writing),
        UriEnd::Memory(path) => memory::MemoryEnd::open(path, writing)
            .map(|end| Box::new(end) as Box<dyn End>)
            .map_err(|e| UriError {
                errno: e.errno,
                detail: e.detail,
            }),
        UriEnd::Tcp(uri) => tcp::open(uri).map(|end| Box::new(end) as Box<dyn End>),
    }
}

#[cfg(feature = "object")]
fn open_object(url: &ObjectUrl, writing: bool) -> Result<Box<dyn End>, UriError> {
    let failed = |e: object::ObjectError| UriError {
        errno: e.errno,
        detail: e.detail,
    };
    let config = object::Config::from_env().map_err(failed)?;
    if writing {
        object::ObjectWriter::create(url, &config)
            .map(|end| Box::new(end) as Box<dyn End>)
            .map_err(failed)
    } else {
        object::ObjectReader::open(url, &config)
            .map(|end| Box::new(end) as Box<dyn End>)
            .map_err(failed)
    }
}

#[cfg(not(feature = "object"))]
fn open_object(_url: &ObjectUrl, _writing: bool) -> Result<Box<dyn End>, UriError> {
    Err(UriError {
        errno: Errno::PROTONOSUPPORT,
        detail: "this ddx was built without object storage support (the `object` feature)".into(),
    })
}

#[cfg(feature = "nbd")]
fn open_nbd(uri: &NbdUri, opening: Opening) -> Result<Box<dyn End>, UriError> {
    let access = if opening == Opening::Read {
        nbd::Access::Read
    } else {
        nbd::Access::Write
    };
    let mut end = nbd::NbdEnd::open(uri, access).map_err(|e| UriError {
        errno: e.errno,
        detail: e.message,
    })?;
    if opening == Opening::WriteDurable {
        end.make_writes_durable();
    }
    Ok(Box::new(end))
}

#[cfg(not(feature = "nbd"))]
fn open_nbd(_uri: &NbdUri, _opening: Opening) -> Result<Box<dyn End>, UriError> {
    Err(UriError {
        errno: Errno::PROTONOSUPPORT,
        detail: "this ddx was built without NBD support (the `nbd` feature, libnbd)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_is_a_uri_only_where_no_file_stands() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        let uri = Path::new("nbd+unix:///?socket=/tmp/x.sock");
        let recognised = recognise_in(base, uri);
        assert!(
            matches!(recognised, Some(Ok(UriEnd::Nbd(_)))),
            "{recognised:?}"
        );
        assert!(matches!(
            recognise_in(base, Path::new("nbd+unix:///")),
            Some(Err(_))
        ));
        std::fs::write(base.join("plain.img"), b"").unwrap();
        assert_eq!(recognise_in(base, Path::new("plain.img")), None);
        assert_eq!(recognise_in(base, Path::new("nbd:disk")), None);
        assert!(matches!(
            recognise_in(base, Path::new("s3://bucket/disk.img")),
            Some(Ok(UriEnd::Object(_)))
        ));
        assert!(matches!(
            recognise_in(base, Path::new("https://host/golden.img")),
            Some(Ok(UriEnd::Object(_)))
        ));
        assert!(matches!(
            recognise_in(base, Path::new("s3://bucket")),
            Some(Err(_))
        ));
        assert_eq!(recognise_in(base, Path::new("s3:disk")), None);
        assert_eq!(
            recognise_in(base, Path::new("mem:disk.img")),
            Some(Ok(UriEnd::Memory("disk.img".into())))
        );
        assert!(matches!(
            recognise_in(base, Path::new("tcp://backup:9000")),
            Some(Ok(UriEnd::Tcp(_)))
        ));
        // A directory named like the scheme: GNU dd would write into it.
        std::fs::create_dir(base.join("nbd+unix:")).unwrap();
        assert_eq!(recognise_in(base, uri), None);
        std::fs::create_dir(base.join("s3:")).unwrap();
        assert_eq!(recognise_in(base, Path::new("s3://bucket/disk.img")), None);
    }
}
