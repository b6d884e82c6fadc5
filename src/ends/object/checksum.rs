//! Checksums end to end for an upload.
//!
//! Every part, and a small object's one PUT, carries the SHA-256 of its
//! bytes (`x-amz-checksum-sha256`, computed by object_store from the
//! buffer ddx hands over, once, for the signature as well): the server
//! hashes what it received and refuses a part whose bytes changed on the
//! way (400 BadDigest), which the writer names like any other refused
//! part, and the upload is not completed. A server that checks answers a
//! part with the checksum it checked; object_store keeps it beside the
//! part's ETag in the part's id ([`PartAnswer`] reads it back).
//!
//! Once the upload is complete the object's own checksum is asked for (a
//! HEAD with `x-amz-checksum-mode: ENABLED`): for a multipart object S3's
//! composite form, the SHA-256 of the parts' SHA-256s and their count
//! (`BASE64-N`), for one PUT the SHA-256 of the whole. It is compared
//! with the same computed by ddx from the parts it sent ([`composite`]):
//! equal, the store holds exactly those bytes in that order
//! ([`Confirmation::Confirmed`]); different, the copy fails, naming both.
//!
//! Not every store can say: one that ignores the header gives no checksum
//! back, and then nothing is claimed ([`Confirmation::Unchecked`], with
//! why): `--verify` reads such an object back instead. AWS S3, SeaweedFS
//! and MinIO check and answer; s3s-fs (0.14) checks nothing.
//!
//! The parts an earlier run stored keep their checksums in the map (see
//! `ends::upload`), so that a resumed upload completes with every part's
//! checksum, as S3 requires of an upload created with an algorithm.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use sha2::{Digest, Sha256};

use super::config::Store;
use super::ObjectError;

/// The header a checksum is sent and answered in.
pub const SHA256_HEADER: &str = "x-amz-checksum-sha256";

/// What the server answered a stored part with: its ETag, and the
/// checksum it checked the part's bytes against, if it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartAnswer {
    pub etag: String,
    pub sha256: Option<String>,
}

impl PartAnswer {
    /// A part's id as object_store gives it: with a checksum algorithm
    /// set, `<PartMetadata><e_tag>E</e_tag><checksum_sha256>C
    /// </checksum_sha256></PartMetadata>` (its own serialisation), else
    /// the bare ETag. Anything that is not such a document is a bare
    /// ETag.
    pub fn of_part_id(content_id: &str) -> PartAnswer {
        let bare = || PartAnswer {
            etag: content_id.to_owned(),
            sha256: None,
        };
        if !content_id.starts_with("<PartMetadata") {
            return bare();
        }
        let Ok(document) = roxmltree::Document::parse(content_id) else {
            return bare();
        };
        let root = document.root_element();
        if !root.has_tag_name("PartMetadata") {
            return bare();
        }
        let field = |name: &str| {
            root.children()
                .find(|n| n.has_tag_name(name))
                .map(|n| n.text().unwrap_or("").to_owned())
        };
        match field("e_tag") {
            Some(etag) => PartAnswer {
                etag,
                sha256: field("checksum_sha256").filter(|c| !c.is_empty()),
            },
            None => bare(),
        }
    }

    /// The part's id for object_store's completing request, which sends
    /// each part's ETag and checksum.
    pub fn part_id(&self) -> String {
        // Characters XML cannot hold, even escaped, leave the bare ETag
        // (the checksum is then not sent: no server answers with those).
        let legal = |s: &str| {
            s.chars().all(|c| {
                (!c.is_control() || matches!(c, '\t' | '\n' | '\r'))
                    && !matches!(c, '\u{fffe}' | '\u{ffff}')
            })
        };
        if !legal(&self.etag) || self.sha256.as_deref().is_some_and(|c| !legal(c)) {
            return self.etag.clone();
        }
        match &self.sha256 {
            // A bare ETag, unless it would read as such a document.
            None if !self.etag.starts_with("<PartMetadata") => self.etag.clone(),
            None => format!(
                "<PartMetadata><e_tag>{}</e_tag></PartMetadata>",
                escape(&self.etag)
            ),
            Some(sha256) => format!(
                "<PartMetadata><e_tag>{}</e_tag><checksum_sha256>{}</checksum_sha256>\
                 </PartMetadata>",
                escape(&self.etag),
                escape(sha256)
            ),
        }
    }
}

/// `text` as XML character data.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// A SHA-256 as S3 writes it (base64).
pub fn sha256(data: &[u8]) -> String {
    BASE64.encode(Sha256::digest(data))
}

/// The checksum of a multipart object made of parts with these
/// checksums, in order: the SHA-256 of their digests, then `-` and their
/// count (S3's composite checksum). Err names a part whose checksum is
/// not a base64 SHA-256.
pub fn composite<'a>(parts: impl IntoIterator<Item = &'a str>) -> Result<String, String> {
    let mut hasher = Sha256::new();
    let mut count = 0usize;
    for (index, part) in parts.into_iter().enumerate() {
        let digest = BASE64
            .decode(part)
            .ok()
            .filter(|d| d.len() == 32)
            .ok_or_else(|| format!("part {} has no SHA-256 the server checked", index + 1))?;
        hasher.update(&digest);
        count += 1;
    }
    Ok(format!("{}-{count}", BASE64.encode(hasher.finalize())))
}

/// The composite checksum of the parts with these ids (object_store's,
/// see [`PartAnswer`]), in order; Err says why there is none.
pub fn composite_of(parts: &[object_store::multipart::PartId]) -> Result<String, String> {
    let answers: Vec<PartAnswer> = parts
        .iter()
        .map(|p| PartAnswer::of_part_id(&p.content_id))
        .collect();
    composite(answers.iter().map(|a| a.sha256.as_deref().unwrap_or("")))
}

/// What is known of the object under the key once its upload completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmation {
    /// The server's checksum of the object is the one computed from the
    /// bytes sent (S3's form: `BASE64` or `BASE64-N`).
    Confirmed { sha256: String },
    /// The store gave no checksum to compare: why.
    Unchecked(String),
}

/// How a confirmed checksum is reported ("the server's SHA-256 of its
/// 3 parts, 4b0o...=-3, is that of the bytes sent").
pub fn described(sha256: &str) -> String {
    match sha256.rsplit_once('-') {
        Some((_, parts)) => format!(
            "the server's SHA-256 of its {parts} parts, {sha256}, is that of the bytes sent"
        ),
        None => format!("the server's SHA-256, {sha256}, is that of the bytes sent"),
    }
}

/// Compare what the server says the object's checksum is (`answered`:
/// the HEAD's header, if any) with `sent`, computed by ddx. Err says how
/// they differ, in one line.
pub fn confirm(
    sent: Result<String, String>,
    answered: Option<&str>,
) -> Result<Confirmation, String> {
    let sent = match sent {
        Ok(sent) => sent,
        Err(why) => return Ok(Confirmation::Unchecked(why)),
    };
    let Some(answered) = answered.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Confirmation::Unchecked(
            "the server gives no SHA-256 of the object".into(),
        ));
    };
    // A composite checksum may be answered with its count or without.
    let bare = |c: &str| c.split('-').next().unwrap_or("").to_owned();
    if answered == sent || (answered == bare(&sent) && sent.contains('-')) {
        Ok(Confirmation::Confirmed { sha256: sent })
    } else {
        Err(format!(
            "the server's SHA-256 of the object is {}, not {sent} as of the bytes sent",
            crate::text::quote::printable(answered)
        ))
    }
}

/// The object's checksum as the server gives it: a HEAD signed with
/// `x-amz-checksum-mode: ENABLED`, tried as the store's other requests
/// are. None when the server gives none.
pub(super) fn stored_sha256(
    store: &Store,
    runtime: &tokio::runtime::Runtime,
) -> Result<Option<String>, ObjectError> {
    use object_store::client::HttpConnector;
    use object_store::signer::SignedUrlOptions;

    let asking = "asking for the object's checksum";
    let (Some(signer), Some(options)) = (&store.signer, &store.client_options) else {
        return Ok(None);
    };
    let client = object_store::client::ReqwestConnector::default()
        .connect(options)
        .map_err(|e| store.error(asking, &e))?;
    let (signer, path) = (Arc::clone(signer), store.path.clone());
    let attempts = store.retry.max_retries + 1;
    let mode = (
        http::HeaderName::from_static("x-amz-checksum-mode"),
        http::HeaderValue::from_static("ENABLED"),
    );
    let answer = super::runtime::run(runtime, async move {
        let mut pause = Duration::from_millis(100);
        let mut tries = 0;
        loop {
            tries += 1;
            let url = signer
                .signed_url_opts(
                    http::Method::HEAD,
                    &path,
                    Duration::from_secs(300),
                    &SignedUrlOptions::new().with_signed_header(mode.0.clone(), mode.1.clone()),
                )
                .await?;
            let failed =
                |e: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
                    store: "S3",
                    source: e,
                };
            let request = http::Request::head(url.as_str())
                .header(mode.0.clone(), mode.1.clone())
                .body(object_store::client::HttpRequestBody::empty())
                .map_err(|e| failed(Box::new(e)))?;
            let answered = client.execute(request).await.map(|response| {
                let status = response.status().as_u16();
                let header = response
                    .headers()
                    .get(SHA256_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (status, header)
            });
            match answered {
                Ok((status, _)) if status >= 500 && tries < attempts => {}
                Err(_) if tries < attempts => {}
                Ok(answer) => return Ok(answer),
                Err(e) => return Err(failed(Box::new(e))),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    })
    .map_err(|e| store.error(asking, &e))?;
    match answer {
        (200..=299, header) => Ok(header),
        (status, _) => Err(ObjectError {
            errno: crate::sys::Errno::IO,
            detail: format!("{asking}: the server answered {status}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_id_reads_back_as_written_with_or_without_its_checksum() {
        let with = PartAnswer {
            etag: "\"79b281060d337b9b2b84ccf390adcf74\"".into(),
            sha256: Some("oplo+tLngqqfIECjXwWtuX7Yl56x9XLIyOp4Y34nXzw=".into()),
        };
        assert_eq!(PartAnswer::of_part_id(&with.part_id()), with);
        let without = PartAnswer {
            etag: "\"abc\"".into(),
            sha256: None,
        };
        assert_eq!(without.part_id(), "\"abc\"");
        assert_eq!(PartAnswer::of_part_id("\"abc\""), without);
        // object_store's own serialisation (quick-xml escapes quotes).
        let theirs = "<PartMetadata><e_tag>&quot;e&quot;</e_tag>\
                      <checksum_sha256>c2hh</checksum_sha256></PartMetadata>";
        assert_eq!(
            PartAnswer::of_part_id(theirs),
            PartAnswer {
                etag: "\"e\"".into(),
                sha256: Some("c2hh".into())
            }
        );
    }

    /// The figures SeaweedFS 4.48 answered a two-part upload with (5 MiB
    /// of 'a', 1 MiB of 'b'), as boto3 showed them.
    #[test]
    fn the_composite_checksum_is_s3s() {
        let parts = [sha256(&vec![b'a'; 5 << 20]), sha256(&vec![b'b'; 1 << 20])];
        assert_eq!(parts[0], "oplo+tLngqqfIECjXwWtuX7Yl56x9XLIyOp4Y34nXzw=");
        assert_eq!(
            composite(parts.iter().map(String::as_str)),
            Ok("4b0o13OGbYmXv5QenBgYkQfFFWwZUxaxssJCW8WXE9w=-2".into())
        );
        assert!(composite(["not base64!"]).is_err());
    }

    #[test]
    fn the_objects_checksum_confirms_or_is_named() {
        let sent = Ok("4b0o13OGbYmXv5QenBgYkQfFFWwZUxaxssJCW8WXE9w=-2".to_owned());
        assert!(matches!(
            confirm(
                sent.clone(),
                Some("4b0o13OGbYmXv5QenBgYkQfFFWwZUxaxssJCW8WXE9w=-2")
            ),
            Ok(Confirmation::Confirmed { .. })
        ));
        assert!(matches!(
            confirm(
                sent.clone(),
                Some("4b0o13OGbYmXv5QenBgYkQfFFWwZUxaxssJCW8WXE9w=")
            ),
            Ok(Confirmation::Confirmed { .. })
        ));
        assert!(matches!(
            confirm(sent.clone(), None),
            Ok(Confirmation::Unchecked(_))
        ));
        let differs = confirm(sent, Some("AAAA-2")).expect_err("differs");
        assert!(differs.contains("AAAA-2"), "{differs}");
    }
}
