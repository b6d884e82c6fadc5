//! Whether an operand names an NBD export: the URI schemes libnbd 1.14's
//! `nbd_connect_uri` accepts, and the rules it applies before connecting,
//! checked here without I/O so that a malformed URI is bad input (one
//! line, nothing opened) rather than a connection error.
//!
//! libnbd stays the parser of record: the text goes to it unchanged. This
//! module only classifies and pulls out the fields a message or a planner
//! wants (transport, TLS, export name, socket). A general URL crate would
//! parse corners differently from libxml2 and still hand the same string
//! to libnbd, so the few rules are written out here. Whether a value that
//! looks like a URI is one (no file of that name exists) is the opener's
//! rule, not this module's.

use std::fmt;
use std::path::PathBuf;

use crate::text::quote::printable;

/// How the connection is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Unix,
    Vsock,
}

/// An NBD URI as libnbd will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    /// The operand, unchanged: what libnbd is given and messages name.
    pub text: String,
    pub transport: Transport,
    /// `nbds...`: TLS required.
    pub tls: bool,
    /// The export name: the path without its leading '/', decoded.
    pub export: String,
    /// `socket=` (Unix transports only).
    pub socket: Option<PathBuf>,
    /// The user named before '@' (TLS identity), if any.
    pub user: Option<String>,
}

/// Why a value with an NBD scheme is not a URI libnbd would accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError(pub String);

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UriError {}

/// The schemes libnbd 1.14 connects to, compared as it does (exactly, in
/// lower case).
const SCHEMES: [(&str, Transport, bool); 6] = [
    ("nbd", Transport::Tcp, false),
    ("nbds", Transport::Tcp, true),
    ("nbd+unix", Transport::Unix, false),
    ("nbds+unix", Transport::Unix, true),
    ("nbd+vsock", Transport::Vsock, false),
    ("nbds+vsock", Transport::Vsock, true),
];

/// None: `value` is not an NBD URI (it is a file name). Some(Err): it has
/// an NBD scheme followed by "://" but libnbd would refuse it, and why.
///
/// A scheme not followed by "://" ("nbd:disk") is taken as a file name,
/// as libnbd also insists on `scheme://`: GNU dd would open or create
/// such a file, and ddx must too.
pub fn recognise(value: &str) -> Option<Result<NbdUri, UriError>> {
    let (scheme, rest) = value.split_once("://")?;
    let &(_, transport, tls) = SCHEMES.iter().find(|(name, _, _)| *name == scheme)?;
    Some(parse(value, rest, transport, tls))
}

fn parse(text: &str, rest: &str, transport: Transport, tls: bool) -> Result<NbdUri, UriError> {
    let bad = |why: String| Err(UriError(why));
    let (rest, _fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(decode(user)?), host),
        None => (None, authority),
    };
    let (host, port) = split_port(hostport)?;
    if let Some(port) = port {
        if port.parse::<u32>().is_err() {
            return bad(format!("the port '{}' is not a number", printable(port)));
        }
    }
    let export = decode(path.strip_prefix('/').unwrap_or(path))?;
    let mut socket = None;
    for pair in query.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if decode(name)? == "socket" {
            socket = Some(PathBuf::from(decode(value)?));
        }
    }
    match (transport, &socket) {
        (Transport::Unix, None) => return bad("a +unix URI needs ?socket=PATH".into()),
        (Transport::Tcp | Transport::Vsock, Some(_)) => {
            return bad("socket= is only for the +unix schemes".into())
        }
        _ => {}
    }
    if transport == Transport::Vsock && !host.is_empty() && host.parse::<u32>().is_err() {
        return bad(format!(
            "the vsock CID '{}' is not a number",
            printable(host)
        ));
    }
    Ok(NbdUri {
        text: text.to_owned(),
        transport,
        tls,
        export,
        socket,
        user,
    })
}

/// Split "host:port" (a bracketed IPv6 host keeps its colons).
fn split_port(hostport: &str) -> Result<(&str, Option<&str>), UriError> {
    if let Some(inner) = hostport.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err(UriError("an IPv6 address lacks its ']'".into()));
        };
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(UriError(format!(
                "unexpected '{}' after the host",
                printable(after)
            ))),
        };
    }
    Ok(match hostport.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (hostport, None),
    })
}

/// Percent-decoding, as RFC 3986 has it (libxml2's xmlURIUnescapeString).
pub(crate) fn decode(text: &str) -> Result<String, UriError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits: from_str_radix alone would take "+f".
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(byte) = hex else {
                return Err(UriError(format!(
                    "bad percent-escape in '{}'",
                    printable(text)
                )));
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| UriError(format!("'{}' does not decode to UTF-8", printable(text))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(value: &str) -> NbdUri {
        recognise(value)
            .expect("an NBD URI")
            .unwrap_or_else(|e| panic!("{value}: {e}"))
    }

    #[test]
    fn file_names_are_not_uris() {
        for value in [
            "disk.img",
            "/dev/sda",
            "nbd:disk",
            "NBD://host",
            "http://host/x",
            "nbd+ssh://host",
            "nbd//host",
            "",
        ] {
            assert_eq!(recognise(value), None, "{value}");
        }
    }

    #[test]
    fn every_scheme_libnbd_parses_is_recognised() {
        let cases = [
            ("nbd://example.com", Transport::Tcp, false),
            ("nbds://example.com:10810/disk", Transport::Tcp, true),
            ("nbd+unix:///?socket=/tmp/s", Transport::Unix, false),
            ("nbds+unix://alice@/x?socket=/tmp/s", Transport::Unix, true),
            ("nbd+vsock:///", Transport::Vsock, false),
            ("nbds+vsock://2:10809/", Transport::Vsock, true),
        ];
        for (value, transport, tls) in cases {
            let uri = ok(value);
            assert_eq!((uri.transport, uri.tls), (transport, tls), "{value}");
            assert_eq!(uri.text, value);
        }
    }

    #[test]
    fn fields_are_decoded() {
        let uri = ok("nbds+unix://al%69ce@/my%20disk?socket=/tmp/a%26b&tls-psk-file=/k");
        assert_eq!(uri.user.as_deref(), Some("alice"));
        assert_eq!(uri.export, "my disk");
        assert_eq!(uri.socket, Some(PathBuf::from("/tmp/a&b")));
        assert_eq!(ok("nbd://[::1]:10809/e").export, "e");
        assert_eq!(ok("nbd://h").export, "");
    }

    #[test]
    fn what_libnbd_refuses_is_an_error() {
        for value in [
            "nbd+unix:///",
            "nbds+unix://",
            "nbd://host/?socket=/tmp/s",
            "nbd+vsock://host/",
            "nbd://host:port/",
            "nbd://host/%zz",
            // A sign is no hex digit (from_str_radix takes one).
            "nbd://host/%+d",
            "nbd://[::1/",
        ] {
            assert!(matches!(recognise(value), Some(Err(_))), "{value}");
        }
    }
}
