//! A TCP connection as an end (`tcp://HOST:PORT`): the bytes of a copy
//! sent to, or received from, another machine, as `dd | nc HOST PORT`
//! and `nc -l PORT | dd` do, without the pipe and the second program.
//!
//! `tcp://HOST:PORT` connects to HOST; `tcp://HOST:PORT?listen` listens
//! there and takes the first connection (`tcp://0.0.0.0:PORT?listen` on
//! every interface, `tcp://[::1]:PORT?listen` on IPv6's loopback). Either
//! side may listen: the other connects. The connection is a socket, and
//! the end is the descriptor end over it (`ends::file`): read as a pipe
//! is (a read returns what has arrived; `iflag=fullblock` gathers whole
//! records), written until the other side closes, ended by closing it.
//! Nothing is encrypted or authenticated: a trusted network's tool, as
//! netcat is.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;

use super::file::FileEnd;
use super::uri::UriError;
use crate::sys::file::Handle;
use crate::sys::Errno;

/// A `tcp://` URI, recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpUri {
    /// `HOST:PORT` as given (a name, an IPv4 address or `[IPv6]`).
    pub address: String,
    /// Listen there for one connection, rather than connect.
    pub listen: bool,
}

const SCHEME: &str = "tcp://";

/// What `text` names, when it is a `tcp://` URI: None for anything else;
/// Some(Err) for one that cannot be right (the reason).
pub fn recognise(text: &str) -> Option<Result<TcpUri, String>> {
    let rest = text.strip_prefix(SCHEME)?;
    let (address, query) = match rest.split_once('?') {
        Some((address, query)) => (address, Some(query)),
        None => (rest, None),
    };
    let listen = match query {
        None => false,
        Some("listen") => true,
        Some(other) => {
            return Some(Err(format!(
                "'?{other}' is not a tcp:// option (only '?listen' is)"
            )))
        }
    };
    let address = address.trim_end_matches('/');
    let Some((host, port)) = address.rsplit_once(':') else {
        return Some(Err(format!(
            "{text}: a tcp:// URI names HOST:PORT (tcp://backup.example:9000)"
        )));
    };
    if host.is_empty() {
        return Some(Err(format!(
            "{text}: no host (to listen on every interface, name 0.0.0.0 or [::] with ?listen)"
        )));
    }
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return Some(Err(format!("{text}: '{port}' is not a port (1 to 65535)")));
    }
    Some(Ok(TcpUri {
        address: address.to_owned(),
        listen,
    }))
}

/// Connect to, or listen at and accept one connection on, the address
/// `uri` names: the descriptor end over the connection.
pub fn open(uri: &TcpUri) -> Result<FileEnd, UriError> {
    let failed = |what: &str, e: std::io::Error| UriError {
        errno: Errno::from_io_error(&e).unwrap_or(Errno::IO),
        detail: format!("{what} {}: {e}", uri.address),
    };
    let addresses: Vec<_> = uri
        .address
        .to_socket_addrs()
        .map_err(|e| failed("looking up", e))?
        .collect();
    let stream = if uri.listen {
        let listener = TcpListener::bind(&addresses[..]).map_err(|e| failed("listening on", e))?;
        listener
            .accept()
            .map(|(stream, _)| stream)
            .map_err(|e| failed("waiting for a connection on", e))?
    } else {
        TcpStream::connect(&addresses[..]).map_err(|e| failed("connecting to", e))?
    };
    Ok(FileEnd::new(Handle::Owned(OwnedFd::from(stream))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_are_named_and_listening_is_asked_for() {
        assert_eq!(recognise("disk.img"), None);
        assert_eq!(
            recognise("tcp://backup.example:9000"),
            Some(Ok(TcpUri {
                address: "backup.example:9000".into(),
                listen: false
            }))
        );
        assert_eq!(
            recognise("tcp://[::1]:9000?listen"),
            Some(Ok(TcpUri {
                address: "[::1]:9000".into(),
                listen: true
            }))
        );
        for bad in [
            "tcp://host",
            "tcp://:9000",
            "tcp://host:0",
            "tcp://host:99999",
            "tcp://host:9000?wait",
        ] {
            let why = recognise(bad).expect("a tcp URI").expect_err(bad);
            assert!(!why.contains('\n'), "{why}");
        }
    }
}
