//! ListParts: the parts a server holds of an upload in progress, read
//! page by page, so that `--resume` goes on only with the parts the map
//! records and the server still holds. object_store makes no ListParts
//! request of its own: the request is signed by its signer and sent by
//! its client, and the answer's XML is read here.

use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;

use super::config::Store;
use super::{runtime, ObjectError};
use crate::sys::Errno;

/// A part the server holds: its number, size, and ETag where it gives one.
pub type Listed = (usize, u64, Option<String>);

/// The parts the server holds of upload `id` (ListParts, page by page).
pub(super) fn list_parts(
    store: &Store,
    runtime: &tokio::runtime::Runtime,
    id: &str,
) -> Result<Vec<Listed>, ObjectError> {
    let failed = |detail: String| ObjectError {
        errno: Errno::IO,
        detail: store.redactor.clean(&detail),
    };
    let (Some(signer), Some(options)) = (&store.signer, &store.client_options) else {
        return Err(failed("listing the upload's parts: not an S3 store".into()));
    };
    use object_store::client::HttpConnector;
    let client = object_store::client::ReqwestConnector::default()
        .connect(options)
        .map_err(|e| store.error("listing the upload's parts", &e))?;
    let mut parts = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let mut query = vec![("uploadId".to_owned(), id.to_owned())];
        if let Some(marker) = &marker {
            query.push(("part-number-marker".to_owned(), marker.clone()));
        }
        let (signer, client, path) = (Arc::clone(signer), client.clone(), store.path.clone());
        let attempts = store.retry.max_retries + 1;
        let answer = runtime::run(runtime, async move {
            list_parts_page(&*signer, &client, &path, query, attempts).await
        })
        .map_err(|e| store.error("listing the upload's parts", &e))?;
        let (status, body) = answer;
        if !(200..300).contains(&status) {
            let text = format!("Server returned non-2xx status code: {status}: {body}");
            let said = super::config::describe(&object_store::Error::Generic {
                store: "S3",
                source: text.into(),
            });
            return Err(failed(format!("listing the upload's parts: {said}")));
        }
        let page = parse_list_parts(&body)
            .map_err(|why| failed(format!("listing the upload's parts: {why}")))?;
        parts.extend(page.parts);
        match page.next {
            Some(next) => marker = Some(next),
            None => return Ok(parts),
        }
    }
}

/// One ListParts page: the HTTP status and the body.
async fn list_parts_page(
    signer: &dyn object_store::signer::Signer,
    client: &object_store::client::HttpClient,
    path: &Path,
    query: Vec<(String, String)>,
    attempts: usize,
) -> object_store::Result<(u16, String)> {
    use object_store::signer::SignedUrlOptions;
    let mut pause = Duration::from_millis(100);
    let mut tries = 0;
    loop {
        tries += 1;
        let url = signer
            .signed_url_opts(
                http::Method::GET,
                path,
                Duration::from_secs(300),
                &SignedUrlOptions::new().with_query(query.clone()),
            )
            .await?;
        let request = http::Request::get(url.as_str())
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        let failed = |e: object_store::client::HttpError| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        };
        let answered = match client.execute(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.into_body().bytes().await.map_err(failed);
                body.map(|b| (status, String::from_utf8_lossy(&b).into_owned()))
            }
            Err(e) => Err(failed(e)),
        };
        match answered {
            Ok((status, _)) if status >= 500 && tries < attempts => {}
            Err(_) if tries < attempts => {}
            other => return other,
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// A ListParts page's parts, and the marker of the next page if it is cut.
pub struct PartsPage {
    pub parts: Vec<Listed>,
    pub next: Option<String>,
}

pub fn parse_list_parts(body: &str) -> Result<PartsPage, String> {
    let document =
        roxmltree::Document::parse(body).map_err(|e| format!("an answer that is not XML: {e}"))?;
    let root = document.root_element();
    let child_text = |node: roxmltree::Node<'_, '_>, name: &str| {
        node.children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
            .map(str::to_owned)
    };
    let mut parts = Vec::new();
    for part in root.children().filter(|n| n.has_tag_name("Part")) {
        let number = child_text(part, "PartNumber").and_then(|n| n.parse::<usize>().ok());
        let size = child_text(part, "Size").and_then(|n| n.parse::<u64>().ok());
        let (Some(number), Some(size)) = (number, size) else {
            return Err("a part without its number or size".into());
        };
        parts.push((number, size, child_text(part, "ETag")));
    }
    let truncated = child_text(root, "IsTruncated").is_some_and(|t| t == "true");
    let next = truncated
        .then(|| child_text(root, "NextPartNumberMarker"))
        .flatten();
    if truncated && next.is_none() {
        return Err("a cut list without the marker of its next page".into());
    }
    Ok(PartsPage { parts, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parts_pages_are_read_with_their_marker() {
        let page = parse_list_parts(
            "<?xml version=\"1.0\"?><ListPartsResult><UploadId>u</UploadId>\
             <IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>\
             <Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag><Size>5</Size></Part>\
             <Part><PartNumber>2</PartNumber><Size>7</Size></Part></ListPartsResult>",
        )
        .expect("a page");
        assert_eq!(
            page.parts,
            vec![(1, 5, Some("\"a\"".to_owned())), (2, 7, None)]
        );
        assert_eq!(page.next.as_deref(), Some("2"));
        let last =
            parse_list_parts("<ListPartsResult><IsTruncated>false</IsTruncated></ListPartsResult>")
                .expect("a page");
        assert!(last.parts.is_empty() && last.next.is_none());
        assert!(parse_list_parts(
            "<ListPartsResult><IsTruncated>true</IsTruncated></ListPartsResult>"
        )
        .is_err());
        assert!(parse_list_parts("not xml").is_err());
    }
}
