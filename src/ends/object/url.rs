//! Recognising an object URL by its scheme, and parsing it.
//!
//! `s3://BUCKET/KEY` names an object in an S3-compatible store (the
//! endpoint and credentials come from the environment, see `config`);
//! `http://` and `https://` name an object any web server serves. Only
//! the scheme, followed by `://`, decides whether a value is meant as an
//! object URL (`s3:disk` is a file name, as for GNU dd); whether it is one
//! *here* (no file of that name exists) is the opener's rule, applied
//! once, not this module's.
//!
//! Always built, like NBD's URIs: a ddx built without the `object`
//! feature still recognises such an operand and can say why it cannot
//! open it, instead of creating a file named `s3:`.
//!
//! An S3 key is taken verbatim, as the AWS CLI takes it: `%`, `?` and `#`
//! are characters of the key, not URL syntax. Keys object_store's paths
//! would change (a leading or trailing `/`, an empty, `.` or `..`
//! segment, a control character) are refused rather than silently
//! written somewhere else.

use std::fmt;

use crate::text::quote::printable;

/// Where an object is.
#[derive(Clone, PartialEq, Eq)]
pub enum ObjectUrl {
    /// `s3://BUCKET/KEY`.
    S3 { bucket: String, key: String },
    /// `http://...` or `https://...` as given, query string included (a
    /// presigned URL's signature lives there).
    Http(String),
}

/// Why a value with an object URL's scheme is not a usable URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(String);

/// None: `value` is not an object URL (it is a file name). Some(Err): it
/// starts with `s3://`, `http://` or `https://` (any case) but is not a
/// usable URL, and why.
pub fn recognise(value: &str) -> Option<Result<ObjectUrl, UrlError>> {
    let (scheme, rest) = value.split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "s3" => Some(parse_s3(rest)),
        "http" | "https" => Some(parse_http(value, rest)),
        _ => None,
    }
}

impl ObjectUrl {
    /// Whether ddx can write this object (only S3 takes uploads).
    pub fn writable(&self) -> bool {
        matches!(self, ObjectUrl::S3 { .. })
    }

    /// The object's path in its store: the key for S3; empty for HTTP,
    /// whose store is rooted at the whole URL (so that a query string
    /// stays on every request).
    #[cfg(feature = "object")]
    pub(crate) fn store_path(&self) -> object_store::path::Path {
        match self {
            ObjectUrl::S3 { key, .. } => {
                object_store::path::Path::parse(key).expect("checked when parsed")
            }
            ObjectUrl::Http(_) => object_store::path::Path::default(),
        }
    }

    /// The secrets the URL itself carries: a password, and the query
    /// string and its values (a presigned URL's signature and token), as
    /// written and decoded.
    #[cfg(feature = "object")]
    pub(crate) fn secrets(&self) -> Vec<String> {
        let ObjectUrl::Http(url) = self else {
            return Vec::new();
        };
        let mut secrets = Vec::new();
        let Parts {
            password, query, ..
        } = Parts::of(url);
        let raw = password
            .into_iter()
            .chain(query)
            .chain(query.into_iter().flat_map(query_values));
        for value in raw {
            secrets.push(value.to_owned());
            let decoded = percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned();
            secrets.push(decoded);
        }
        secrets
    }
}

/// The URL as it may be shown: a password and the query's values are
/// replaced by `***`.
impl fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectUrl::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            ObjectUrl::Http(url) => f.write_str(&redacted(url)),
        }
    }
}

impl fmt::Debug for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectUrl({self})")
    }
}

fn parse_s3(rest: &str) -> Result<ObjectUrl, UrlError> {
    // Messages show the URL one line long, whatever it holds.
    let shown = printable(rest);
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let missing = match (bucket.is_empty(), key.is_empty()) {
        (true, true) => Some("no bucket and no key given".to_owned()),
        (true, false) => Some(format!(
            "no bucket given before the key '{}'",
            printable(key)
        )),
        (false, true) => Some(format!(
            "no key given after the bucket '{}'",
            printable(bucket)
        )),
        (false, false) => None,
    };
    if let Some(missing) = missing {
        return Err(UrlError(format!(
            "s3://{shown}: {missing}: expected s3://BUCKET/KEY"
        )));
    }
    let valid_bucket = bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if !valid_bucket {
        return Err(UrlError(format!(
            "s3://{shown}: '{}' is not a bucket name (letters, digits, '.', '-' and '_')",
            printable(bucket)
        )));
    }
    // object_store's Path::parse would strip a leading or trailing '/'
    // (another key) and refuses the rest.
    let usable = key
        .split('/')
        .all(|s| !s.is_empty() && s != "." && s != ".." && !s.chars().any(|c| c.is_control()));
    if !usable {
        return Err(UrlError(format!(
            "s3://{shown}: keys with a leading or trailing '/', an empty, '.' or '..' \
             segment or a control character are not supported"
        )));
    }
    Ok(ObjectUrl::S3 {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
    })
}

fn parse_http(value: &str, rest: &str) -> Result<ObjectUrl, UrlError> {
    let bad = |why: &str| Err(UrlError(format!("{}: {why}", printable(&redacted(value)))));
    let parts = Parts::of(value);
    if parts.host.is_empty() {
        return bad("no host");
    }
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("a URL has no spaces or control characters (write them as %20...)");
    }
    if parts.path.is_empty() || parts.path.ends_with('/') {
        return bad("names a directory, not a file");
    }
    #[cfg(feature = "object")]
    if let Err(e) = url::Url::parse(value) {
        return bad(&e.to_string());
    }
    Ok(ObjectUrl::Http(value.to_owned()))
}

/// The pieces of an http(s) URL that matter here, by hand: enough to
/// show it without its secrets even when it does not parse.
struct Parts<'a> {
    host: &'a str,
    password: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
}

impl<'a> Parts<'a> {
    fn of(url: &'a str) -> Parts<'a> {
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (rest, query) = match rest.split_once('?') {
            Some((before, query)) => (before, Some(query)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (Some(userinfo), host),
            None => (None, authority),
        };
        let password = userinfo.and_then(|u| u.split_once(':')).map(|(_, p)| p);
        Parts {
            host,
            password,
            path,
            query,
        }
    }
}

/// A query's values (`name=value&...`), as written.
fn query_values(query: &str) -> impl Iterator<Item = &str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').map(|(_, value)| value))
}

/// `value`, an operand with an object URL's scheme, as messages may show
/// it: an http(s) URL's password and query values blanked.
pub fn shown(value: &str) -> String {
    redacted(value)
}

/// `url` with its password and its query's values replaced by `***` (a
/// query part without `=` is hidden whole).
fn redacted(url: &str) -> String {
    let Parts {
        password, query, ..
    } = Parts::of(url);
    let mut shown = url.to_owned();
    if let Some(query) = query {
        let hidden: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}=***"),
                None => "***".to_owned(),
            })
            .collect();
        shown = shown.replacen(&format!("?{query}"), &format!("?{}", hidden.join("&")), 1);
    }
    if let Some(password) = password {
        shown = shown.replacen(&format!(":{password}@"), ":***@", 1);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(value: &str) -> (String, String) {
        match recognise(value) {
            Some(Ok(ObjectUrl::S3 { bucket, key })) => (bucket, key),
            other => panic!("{value}: {other:?}"),
        }
    }

    fn refused(value: &str) -> String {
        match recognise(value) {
            Some(Err(e)) => e.to_string(),
            other => panic!("{value} was not refused: {other:?}"),
        }
    }

    /// Each URL is refused with a message that gives the reason.
    fn refused_because(cases: &[(&str, &str)]) {
        for &(value, reason) in cases {
            let message = refused(value);
            assert!(message.contains(reason), "{value}: {message}");
        }
    }

    #[test]
    fn only_the_three_schemes_are_object_urls() {
        for value in [
            "disk.img",
            "/dev/sda",
            "s3:bucket/key",
            "s3:/bucket/key",
            "ftp://host/file",
            "nbd://host/export",
            "file:///tmp/x",
            "",
        ] {
            assert!(recognise(value).is_none(), "{value}");
        }
        for value in ["s3://b/k", "S3://b/k", "http://h/f", "HTTPS://h/f", "s3://"] {
            assert!(recognise(value).is_some(), "{value}");
        }
    }

    #[test]
    fn s3_keys_are_taken_verbatim() {
        assert_eq!(s3("s3://bkt/disk.img"), ("bkt".into(), "disk.img".into()));
        assert_eq!(
            s3("s3://my.bkt-1/backups/2026/sda 50%?#.img"),
            ("my.bkt-1".into(), "backups/2026/sda 50%?#.img".into())
        );
    }

    #[test]
    fn s3_urls_without_a_usable_key_or_bucket_are_refused() {
        refused_because(&[
            ("s3://bkt", "no key given after the bucket 'bkt'"),
            ("s3://bkt/", "no key given after the bucket 'bkt'"),
            ("s3:///key", "no bucket given before the key 'key'"),
            ("s3://", "no bucket and no key given"),
            ("s3:///", "no bucket and no key given"),
            ("s3://bad:bucket/key", "bucket"),
        ]);
        for key in ["a//b", "dir/", "/abs", "a/./b", "a/../b", "x\ty"] {
            assert!(
                refused(&format!("s3://bkt/{key}")).contains("not supported"),
                "{key}"
            );
        }
    }

    #[test]
    fn http_urls_keep_their_query_and_hide_it_when_shown() {
        let value = "https://user:pa55word@host:8443/img/disk.img?X-Amz-Signature=abc123def&flag";
        let Some(Ok(url)) = recognise(value) else {
            panic!("not parsed");
        };
        assert_eq!(url, ObjectUrl::Http(value.to_owned()));
        assert_eq!(
            url.to_string(),
            "https://user:***@host:8443/img/disk.img?X-Amz-Signature=***&***"
        );
        assert!(!url.writable());
        assert!(matches!(recognise("s3://b/k"), Some(Ok(u)) if u.writable()));
    }

    #[cfg(feature = "object")]
    #[test]
    fn an_http_url_names_its_secrets_raw_and_decoded() {
        let Some(Ok(url)) = recognise("http://u:p%40ss@h/f?sig=a%2Bb&t=c+d") else {
            panic!("not parsed");
        };
        let secrets = url.secrets();
        for expected in ["p%40ss", "p@ss", "a%2Bb", "a+b", "c+d", "c d"] {
            assert!(
                secrets.contains(&expected.to_owned()),
                "{expected}: {secrets:?}"
            );
        }
    }

    #[test]
    fn bad_http_urls_are_refused_without_showing_secrets() {
        refused_because(&[
            ("https://h/dir/", "directory"),
            ("https://h", "directory"),
            ("http:///f", "no host"),
            ("http://h/a b", "spaces"),
        ]);
        let message = refused("http://user:secretpw@/f?sig=topsecret");
        assert!(!message.contains("secretpw"), "{message}");
        assert!(!message.contains("topsecret"), "{message}");
    }
}
