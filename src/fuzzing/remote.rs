//! Remote ends: the URIs that name them, the AWS settings and shared
//! files an S3 end is configured from, the texts a store sends back
//! (which must lose every secret before they are shown), and an NBD
//! server's block status replies.

use super::assert_one_line;
use crate::ends::nbd;
use crate::ends::object::{self, ObjectUrl};

/// `data` is the value of `if=` or `of=`.
pub fn uri(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match nbd::recognise(text) {
        Some(Ok(uri)) => {
            assert_eq!(uri.text, text);
            match uri.transport {
                nbd::Transport::Unix => assert!(uri.socket.is_some()),
                nbd::Transport::Tcp | nbd::Transport::Vsock => assert!(uri.socket.is_none()),
            }
        }
        Some(Err(e)) => assert_one_line("an NBD URI's refusal", &e.to_string()),
        None => {
            let scheme = text.split_once("://").map(|(scheme, _)| scheme);
            let nbd = [
                "nbd",
                "nbds",
                "nbd+unix",
                "nbds+unix",
                "nbd+vsock",
                "nbds+vsock",
            ];
            assert!(scheme.is_none_or(|s| !nbd.contains(&s)), "{text:?}");
        }
    }
    // Percent-escapes as libxml2 reads them: '%' and two hex digits.
    if let Ok(decoded) = nbd::uri::decode(text) {
        let reference: Vec<u8> = percent_encoding::percent_decode_str(text).collect();
        assert_eq!(decoded.as_bytes(), reference.as_slice(), "{text:?}");
        let escapes = text.match_indices('%').all(|(at, _)| {
            text.as_bytes()
                .get(at + 1..at + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        });
        assert!(escapes, "{text:?} decoded with a bad escape");
    }
    match object::recognise(text) {
        Some(Ok(url)) => {
            let shown = url.to_string();
            assert_one_line("an object URL as shown", &shown);
            match &url {
                ObjectUrl::S3 { bucket, key } => {
                    assert_eq!(shown, format!("s3://{bucket}/{key}"));
                    // The key is the object's path, unchanged.
                    #[cfg(feature = "object")]
                    assert_eq!(url.store_path().as_ref(), key);
                }
                ObjectUrl::Http(value) => {
                    assert_eq!(value, text);
                    assert_hidden(text, &shown);
                    assert_hidden(text, &object::shown(text));
                }
            }
        }
        Some(Err(e)) => {
            let message = e.to_string();
            assert_one_line("an object URL's refusal", &message);
            // A refusal is the URL as shown, ": ", then why in ddx's or
            // the url crate's own words, which hold no ": " and quote
            // nothing of the URL: the secrets are looked for in the URL
            // part, where those words cannot hold one by chance ("l
            // characte" of "control characters").
            let shown = message
                .rsplit_once(": ")
                .map_or(message.as_str(), |(url, _)| url);
            assert_hidden(text, shown);
        }
        None => {}
    }
}

/// How often `needle` occurs in `text`, overlapping occurrences counted
/// (`str::matches` skips them: in "s=?s=?s" the secret "s=?s" stands
/// twice, sharing an "s").
#[cfg(feature = "object")]
fn occurrences(text: &str, needle: &str) -> usize {
    (0..text.len())
        .filter(|&at| text.is_char_boundary(at) && text[at..].starts_with(needle))
        .count()
}

/// `shown` with each backslash escape of a control character (a backslash
/// and three octal digits) read as the one character `blank`.
#[cfg(feature = "object")]
fn without_escapes(shown: &str, blank: char) -> String {
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let octal = after.len() >= 3
            && after.as_bytes()[..3]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b));
        if octal {
            out.push(blank);
            rest = &after[3..];
        } else {
            out.push('\\');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// No secret an http(s) URL carries (a password, the query and its
/// values) is in `shown` but where the URL itself shows it: each secret
/// as written appears fewer times than in the URL (where it stood as a
/// secret, it is blanked), and decoded no more often than the URL's own
/// text holds it by chance.
fn assert_hidden(url: &str, shown: &str) {
    #[cfg(feature = "object")]
    {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return;
        }
        // The blank is read as one character the URL does not hold: a
        // secret ending in stars ("name=**") would otherwise be found
        // again in its own blank ("name=***").
        let Some(blank) = ('\u{1}'..='\u{7f}').find(|&c| !url.contains(c)) else {
            return;
        };
        // Escapes of control characters ("\\032") are read as the blank
        // too: their digits and what follows them could spell a secret
        // ("2" of "\\032" then "\u{fffd}") that was never shown.
        let blanked = without_escapes(&shown.replace("***", &blank.to_string()), blank);
        // `secrets` gives each secret as written, then decoded.
        let secrets = ObjectUrl::Http(url.to_owned()).secrets();
        for pair in secrets.chunks(2) {
            let (written, decoded) = (&pair[0], &pair[1]);
            // A query of names without values ("name=") hides nothing:
            // its names are shown by design.
            let names_only = written.split('&').all(|part| {
                part.split_once('=')
                    .is_some_and(|(_, value)| value.is_empty())
            });
            // A URL shown once already has `***` where its secrets were:
            // blanking them again changes nothing.
            // Nor is a secret holding a backslash looked for: the shown
            // URL writes control characters as backslash escapes
            // ("\\001"), which can spell it without leaking it.
            let checked = |secret: &str| {
                secret.len() >= 4
                    && url.contains(secret)
                    && !secret.contains("***")
                    && !secret.contains('\\')
            };
            if checked(written) && !names_only {
                assert!(
                    occurrences(&blanked, written) < occurrences(url, written),
                    "{written:?} of {url:?} is shown: {shown:?}"
                );
            }
            if decoded != written && checked(decoded) {
                assert!(
                    occurrences(&blanked, decoded) <= occurrences(url, decoded),
                    "{decoded:?}, decoded from {url:?}, is shown: {shown:?}"
                );
            }
        }
    }
    #[cfg(not(feature = "object"))]
    let _ = (url, shown);
}

/// `data` is an environment (`NAME=VALUE` lines), the shared credentials
/// file and the shared config file, separated by NUL bytes.
#[cfg(feature = "object")]
pub fn aws_config(data: &[u8]) {
    use std::collections::HashMap;

    use crate::ends::object::profile;
    use crate::ends::object::{Config, Credentials};

    let mut parts = data.split(|&b| b == 0).map(String::from_utf8_lossy);
    let (environment, credentials, config) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let env: HashMap<String, String> = environment
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let (credentials, config) = (profile::parse(&credentials), profile::parse(&config));

    // The credentials file wins over the config file, key by key.
    let name = env.get("AWS_PROFILE").map_or("default", String::as_str);
    if let Some(merged) = profile::profile(name, &credentials, &config) {
        for (key, value) in credentials.get(name).into_iter().flatten() {
            assert_eq!(merged.get(key), Some(value), "{key} of profile {name}");
        }
    }

    // The same settings with each secret (non-empty, as only those
    // count) replaced by a marker of its own: nothing the settings print
    // or say may hold one. Secrets only ever count as given or not, so
    // the markers take the same way through the settings.
    const SECRET_KEYS: [&str; 2] = ["aws_secret_access_key", "aws_session_token"];
    const SECRET_VARS: [&str; 2] = ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"];
    const MARKER: &str = "SecretMarker";
    let mut markers = 0;
    let mut mark = |value: &mut String| {
        if !value.is_empty() {
            markers += 1;
            *value = format!("{MARKER}{markers}");
        }
    };
    let mut env = env;
    for (var, value) in env.iter_mut() {
        if SECRET_VARS.contains(&var.as_str()) {
            mark(value);
        }
    }
    let (mut credentials, mut config) = (credentials, config);
    for section in credentials.values_mut().chain(config.values_mut()) {
        for (key, value) in section.iter_mut() {
            if SECRET_KEYS.contains(&key.as_str()) {
                mark(value);
            }
        }
    }
    let lookup = |var: &str| env.get(var).cloned();
    match Config::from_sections(lookup, &credentials, &config) {
        Ok(settings) => {
            let printed = format!("{settings:?}");
            assert!(!printed.contains(MARKER), "a secret is printed: {printed}");
            if let Credentials::Static { secret, .. } = &settings.credentials {
                assert!(secret.expose().starts_with(MARKER));
            }
            assert!(settings.max_attempts >= 1);
        }
        Err(e) => {
            assert_one_line("an AWS settings error", &e.detail);
            assert!(
                !e.detail.contains(MARKER),
                "a secret is shown: {}",
                e.detail
            );
        }
    }
}

/// `data` is a text a store sent back, then the secrets of the end it
/// came to, separated by NUL bytes: the cleaned text holds none of them,
/// plain or percent-encoded.
#[cfg(feature = "object")]
pub fn redact(data: &[u8]) {
    use crate::ends::object::secret::Redactor;

    let mut parts = data.split(|&b| b == 0).map(String::from_utf8_lossy);
    let text = parts.next().unwrap_or_default();
    let secrets: Vec<String> = parts.map(|s| s.into_owned()).collect();
    let clean = Redactor::new(secrets.iter().map(String::as_str)).clean(&text);
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        assert!(
            !clean.contains(secret.as_str()),
            "{secret:?} is left in {clean:?}"
        );
        let encoded =
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        assert!(
            !clean.contains(&encoded),
            "{encoded:?} is left in {clean:?}"
        );
    }
}

/// `data` is a series of block status replies and of the reads between
/// them: each reply's (length, flags) pairs become extents as libnbd's
/// callback hands them over, and the map of what is known must answer
/// every lookup as the replies said.
#[cfg(feature = "nbd")]
pub fn extents(data: &[u8]) {
    use crate::ends::nbd::extents::{from_pairs, ExtentMap};

    let mut bytes = data.iter().copied();
    let mut next = |n: usize| -> u64 {
        (0..n).fold(0u64, |v, _| (v << 8) | u64::from(bytes.next().unwrap_or(0)))
    };
    let limit = match next(1) % 4 {
        0 => u64::MAX,
        1 => i64::MAX as u64,
        _ => next(3),
    };
    let mut map = ExtentMap::default();
    let mut model = Model::default();
    for _ in 0..64 {
        let op = next(1);
        let offset = match next(1) % 4 {
            0 => model.end(),
            1 => next(2),
            2 => limit.saturating_sub(next(1)),
            _ => next(8),
        };
        match op % 3 {
            0 => {
                let count = next(1) % 8;
                let mut pairs = Vec::new();
                for _ in 0..count {
                    let len = match next(1) % 4 {
                        0 => u32::MAX as u64,
                        1 => 0,
                        _ => next(2),
                    };
                    pairs.extend([len as u32, next(1) as u32]);
                }
                let extents = from_pairs(offset, &pairs);
                assert_eq!(extents.len(), pairs.len() / 2);
                let learnt = map.learn(offset, &extents, limit);
                assert_eq!(learnt, model.learn(offset, &extents, limit));
            }
            1 => {
                map.forget_before(offset);
                model.forget_before(offset);
            }
            _ => {}
        }
        for at in [offset, offset.saturating_add(1), offset.saturating_sub(1)] {
            let answer = map.lookup(at);
            assert_eq!(answer, model.lookup(at), "lookup({at})");
            if let Some((end, _)) = answer {
                assert!(end > at && end <= limit);
            }
        }
    }
}

/// What the extent map should know, kept the plain way: a list of runs
/// (start, end, zero), neighbours of one kind merged.
#[cfg(feature = "nbd")]
#[derive(Default)]
struct Model {
    runs: Vec<(u64, u64, bool)>,
}

#[cfg(feature = "nbd")]
impl Model {
    fn end(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.1)
    }

    fn learn(&mut self, offset: u64, extents: &[nbd::extents::Extent], limit: u64) -> bool {
        if self.runs.last().is_none_or(|r| r.1 != offset) {
            self.runs.clear();
        }
        let mut at = offset;
        for extent in extents {
            if extent.start != at || extent.len == 0 || at >= limit {
                break;
            }
            let end = at.saturating_add(extent.len).min(limit);
            match self.runs.last_mut() {
                Some(last) if last.2 == extent.zero => last.1 = end,
                _ => self.runs.push((at, end, extent.zero)),
            }
            at = end;
        }
        at > offset
    }

    fn forget_before(&mut self, offset: u64) {
        self.runs.retain(|r| r.1 > offset);
    }

    fn lookup(&self, offset: u64) -> Option<(u64, bool)> {
        self.runs
            .iter()
            .find(|r| r.0 <= offset && offset < r.1)
            .map(|r| (r.1, r.2))
    }
}

/// `data` is a ListParts answer (S3's XML): a page read is written back
/// as XML by a writer of this target's own and read again to the same
/// parts and marker; a page that cannot be read is refused in one line.
#[cfg(feature = "object")]
pub fn list_parts(data: &[u8]) {
    use crate::ends::object::list_parts::parse_list_parts;

    let text = String::from_utf8_lossy(data);
    let page = match parse_list_parts(&text) {
        Ok(page) => page,
        Err(why) => return assert_one_line("a ListParts refusal", &why),
    };
    assert!(page.parts.len() <= text.matches("Part").count());
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('\r', "&#13;")
    };
    let mut xml = String::from("<ListPartsResult>");
    match page.next.as_ref().filter(|next| !next.is_empty()) {
        Some(next) => xml.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextPartNumberMarker>{}</NextPartNumberMarker>",
            escape(next)
        )),
        None => xml.push_str("<IsTruncated>false</IsTruncated>"),
    }
    for (number, size, etag) in &page.parts {
        xml.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><Size>{size}</Size>"
        ));
        if let Some(etag) = etag {
            xml.push_str(&format!("<ETag>{}</ETag>", escape(etag)));
        }
        xml.push_str("</Part>");
    }
    xml.push_str("</ListPartsResult>");
    let again = parse_list_parts(&xml).expect("a page ddx's own writer made");
    // An empty ETag or marker reads back as none.
    let present = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let parts = |page: &crate::ends::object::list_parts::PartsPage| -> Vec<_> {
        page.parts
            .iter()
            .map(|(n, size, etag)| (*n, *size, present(etag)))
            .collect()
    };
    assert_eq!(parts(&again), parts(&page), "{xml}");
    if page.next.as_deref().is_some_and(|n| !n.is_empty()) {
        assert_eq!(again.next, page.next, "{xml}");
    }
}

/// `data` is a map's text with an upload's record in its comments
/// (`--map` onto an object): a record read is numbered from 1 with input
/// offsets that never go back, and its own rendering reads back as the
/// same record; a map that cannot be read is refused in one line that
/// names the line.
pub fn upload_record(data: &[u8]) {
    use crate::ends::upload::UploadRecord;

    let text = String::from_utf8_lossy(data);
    match UploadRecord::parse(&text) {
        Ok(Some(record)) => {
            assert!(!record.id.is_empty());
            for (index, part) in record.parts.iter().enumerate() {
                assert_eq!(part.number, index + 1);
                assert!(!part.etag.is_empty());
            }
            assert!(record
                .parts
                .windows(2)
                .all(|w| w[0].source_end <= w[1].source_end));
            assert_eq!(
                record.source_end(),
                record.parts.last().map_or(0, |p| p.source_end)
            );
            let rendered = record.render();
            assert_eq!(
                UploadRecord::parse(&rendered),
                Ok(Some(record.clone())),
                "{rendered:?}"
            );
        }
        Ok(None) => assert!(!text.lines().any(|l| l.starts_with("# ddx upload: "))),
        Err(why) => {
            assert_one_line("an upload record's refusal", &why);
            assert!(why.starts_with("line "), "{why}");
        }
    }
}

/// `data` is what a store answers about an upload's checksums, separated
/// by NUL bytes: a part's id as object_store keeps it (the part's ETag
/// and the checksum the server checked), the checksums of the parts, and
/// the object's checksum as the server gives it. A part's id reads back
/// as written; the parts' composite checksum is S3's form (base64 of a
/// SHA-256, `-`, the count) or refused in one line; the comparison with
/// the server's confirms only an equal checksum and otherwise says so in
/// one line.
#[cfg(feature = "object")]
pub fn checksums(data: &[u8]) {
    use crate::ends::object::checksum::{self, Confirmation, PartAnswer};

    let text = String::from_utf8_lossy(data);
    let mut fields: Vec<&str> = text.split('\0').collect();
    let part_id = fields.remove(0);
    let answered = fields.pop();
    let answer = PartAnswer::of_part_id(part_id);
    let again = PartAnswer::of_part_id(&answer.part_id());
    // What XML can hold reads back whole; an ETag it cannot, at least
    // as the ETag.
    let legal = |s: &str| {
        s.chars().all(|c| {
            (!c.is_control() || matches!(c, '\t' | '\n' | '\r'))
                && !matches!(c, '\u{fffe}' | '\u{ffff}')
        })
    };
    if legal(&answer.etag) && answer.sha256.as_deref().is_none_or(legal) {
        assert_eq!(again, answer, "{part_id:?}");
    } else {
        assert_eq!(again.etag, answer.etag, "{part_id:?}");
    }
    if !part_id.starts_with("<PartMetadata") {
        assert_eq!(answer.etag, part_id);
        assert_eq!(answer.sha256, None);
    }
    let sent = checksum::composite(fields.iter().copied());
    match &sent {
        Ok(sum) => {
            let (digest, count) = sum.rsplit_once('-').expect("a count");
            assert_eq!(digest.len(), 44, "{sum}");
            assert_eq!(count, fields.len().to_string(), "{sum}");
        }
        Err(why) => assert_one_line("a composite checksum's refusal", why),
    }
    match checksum::confirm(sent.clone(), answered) {
        Ok(Confirmation::Confirmed { sha256 }) => {
            let answered = answered.expect("an answer").trim();
            let sent = sent.expect("a checksum sent");
            assert_eq!(sha256, sent);
            assert!(answered == sent || sent.starts_with(&format!("{answered}-")));
            assert_one_line("a confirmation", &checksum::described(&sha256));
        }
        Ok(Confirmation::Unchecked(why)) => assert_one_line("why a checksum is unchecked", &why),
        Err(why) => assert_one_line("a checksum mismatch", &why),
    }
}
