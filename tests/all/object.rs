//! The object ends (`ddx::ends::object`) against real servers: a
//! SeaweedFS cluster on loopback for S3 (what its filer holds is the
//! oracle for writes, and objects put by curl the oracle for reads),
//! rclone's HTTP server for http:// and https:// (with a certificate
//! authority the test makes and trusts explicitly), python's http.server
//! for a server that ignores `Range`, and socat as a TLS front for the
//! cluster's gateway (an https S3 endpoint). A server that goes away and
//! comes back is the delay proxy in front of the gateway, cut and
//! restored (`rigs::delay`).

use std::collections::HashMap;
use std::time::Duration;

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::{bucket_or_skip, Bucket};
use crate::rigs::delay::DelayProxy;
use crate::rigs::object::{HttpServer, PythonHttpServer, TestCa, TlsFront};
use ddx::ends::object::{recognise, Config, ObjectError, ObjectReader, ObjectUrl, ObjectWriter};
use ddx::ends::{Kind, Whence};
use ddx::engine::stream::{stream_of, Pipeline, Stream};
use ddx::engine::window::Window;
use ddx::sys::Errno;

const MIB: usize = 1 << 20;

/// Settings for `bucket`'s cluster as the environment would give them,
/// with `extra` on top; no shared files are read (HOME points nowhere).
fn config_for(bucket: &Bucket, extra: &[(&str, &str)]) -> Config {
    let mut vars: HashMap<String, String> = bucket.env().into_iter().collect();
    vars.insert("HOME".into(), "/nonexistent".into());
    vars.insert("AWS_MAX_ATTEMPTS".into(), "2".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    Config::from_lookup(|name| vars.get(name).cloned()).expect("config")
}

fn url(value: &str) -> ObjectUrl {
    recognise(value).expect("an object URL").expect("valid")
}

/// Write `data` to `url` in `chunk`-byte writes, after `hint`.
fn upload(url: &ObjectUrl, config: &Config, data: &[u8], chunk: usize, hint: Option<Pipeline>) {
    let mut end: Box<dyn Stream> =
        stream_of(Box::new(ObjectWriter::create(url, config).expect("create")));
    if let Some(hint) = hint {
        end.pipeline(hint);
    }
    for piece in data.chunks(chunk) {
        assert_eq!(end.write(piece).expect("write"), piece.len());
    }
    end.close().expect("close");
}

/// Read `end` to its end in `chunk`-byte reads.
fn read_all(end: &mut dyn Stream, chunk: usize) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let n = end.read(&mut buf).expect("read");
        if n == 0 {
            return all;
        }
        // Reads are whole until the end: a short one only at the end.
        all.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_multipart_upload_round_trips_byte_for_byte() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[]);
    // Three 16 MiB parts and a short last one.
    let data = pattern(17, 3 * 16 * MIB + 12_345);
    let target = url(&bucket.url("images/disk.img"));
    let hint = Pipeline {
        chunk: MIB,
        depth: 4,
        total: Some(data.len() as u64),
    };
    upload(&target, &config, &data, MIB + 17, Some(hint));
    let stored = bucket.object("images/disk.img").expect("stored");
    assert!(stored == data, "the cluster stored other bytes");
    bucket.assert_no_pending_upload();

    let mut reader = Window::over(Box::new(
        ObjectReader::open(&target, &config).expect("open"),
    ));
    assert_eq!(reader.kind(), Kind::Object);
    assert_eq!(reader.size(), Ok(Some(data.len() as u64)));
    reader.pipeline(Pipeline {
        chunk: 8 * MIB,
        depth: 4,
        total: None,
    });
    let back = read_all(&mut reader, 8 * MIB);
    assert!(back == data, "read back other bytes");
    Box::new(reader).close().expect("close");
}

#[test]
fn ranged_reads_seeks_and_reads_at_an_offset_return_the_right_bytes() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let data = pattern(5, 20 * MIB + 999);
    bucket.put("put-on-disk", &data).expect("seed");
    let config = config_for(&bucket, &[]);
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&url(&bucket.url("put-on-disk")), &config).expect("open"),
    ));
    assert_eq!(reader.size(), Ok(Some(data.len() as u64)));

    // Unpipelined: each read is the range asked for.
    let mut buf = vec![0u8; 4096];
    assert_eq!(reader.seek(Whence::Start(1_000_000)), Ok(1_000_000));
    assert_eq!(reader.read(&mut buf), Ok(4096));
    assert_eq!(&buf[..], &data[1_000_000..1_004_096]);
    assert_eq!(reader.seek(Whence::Current(-96)), Ok(1_004_000));
    assert_eq!(reader.read(&mut buf[..100]), Ok(100));
    assert_eq!(&buf[..100], &data[1_004_000..1_004_100]);
    assert_eq!(reader.seek(Whence::End(-10)), Ok(data.len() as u64 - 10));
    assert_eq!(reader.read(&mut buf), Ok(10));
    assert_eq!(&buf[..10], &data[data.len() - 10..]);
    assert_eq!(reader.read(&mut buf), Ok(0));
    assert_eq!(
        reader.seek(Whence::Current(-(data.len() as i64) - 1)),
        Err(Errno::INVAL)
    );

    // read_at leaves the position alone, and is short only at the end.
    assert_eq!(reader.read_at(&mut buf, 7), Ok(4096));
    assert_eq!(&buf[..], &data[7..4103]);
    let near_end = data.len() as u64 - 100;
    assert_eq!(reader.read_at(&mut buf, near_end), Ok(100));
    assert_eq!(&buf[..100], &data[data.len() - 100..]);
    assert_eq!(reader.read_at(&mut buf, data.len() as u64 + 5), Ok(0));

    // Pipelined: ranges ahead, then a seek back into the middle of them
    // and one past where reading ahead stops.
    reader.seek(Whence::Start(3)).expect("seek");
    reader.pipeline(Pipeline {
        chunk: 64 * 1024,
        depth: 2,
        total: Some(12 * MIB as u64),
    });
    let mut big = vec![0u8; 3 * MIB];
    assert_eq!(reader.read(&mut big), Ok(3 * MIB));
    assert!(big[..] == data[3..3 + 3 * MIB]);
    reader.seek(Whence::Start(MIB as u64 + 1)).expect("seek");
    assert_eq!(reader.read(&mut big), Ok(3 * MIB));
    assert!(big[..] == data[MIB + 1..4 * MIB + 1]);
    reader.seek(Whence::Start(18 * MIB as u64)).expect("seek");
    let rest = read_all(&mut reader, 3 * MIB);
    assert!(rest[..] == data[18 * MIB..]);
}

#[test]
fn a_small_object_is_one_put_and_appears_only_at_close() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[]);
    let data = pattern(3, 100_000);
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("small")), &config).expect("create"),
    ));
    assert_eq!(writer.kind(), Kind::Object);
    assert_eq!(writer.write(&data), Ok(data.len()));
    assert!(!bucket.has("small"));
    bucket.assert_no_pending_upload();
    writer.close().expect("close");
    assert_eq!(bucket.object("small").expect("stored"), data);

    // Nothing written: an empty object, as dd makes an empty file.
    let writer = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("empty")), &config).expect("create"),
    ));
    writer.close().expect("close");
    assert_eq!(bucket.object("empty").expect("stored"), b"");
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&url(&bucket.url("empty")), &config).expect("open"),
    ));
    assert_eq!(reader.size(), Ok(Some(0)));
    assert_eq!(reader.read(&mut [0u8; 10]), Ok(0));
}

#[test]
fn a_large_object_appears_only_when_its_upload_completes() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[]);
    let data = pattern(9, 40 * MIB);
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("big")), &config).expect("create"),
    ));
    writer.write(&data).expect("write");
    writer.sync(true).expect("parts sent so far are stored");
    assert!(!bucket.has("big"));
    assert!(
        !bucket.pending_uploads().is_empty(),
        "an upload in progress is visible on the server's disk"
    );
    writer.close().expect("close");
    assert!(bucket.object("big").expect("stored") == data);
    bucket.assert_no_pending_upload();
}

#[test]
fn an_abandoned_upload_leaves_no_object_and_no_pending_upload() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[]);
    // A new key: nothing at all afterwards.
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("new")), &config).expect("create"),
    ));
    writer.write(&pattern(1, 50 * MIB)).expect("write");
    assert!(!bucket.pending_uploads().is_empty());
    writer.abandon();
    assert!(!bucket.has("new"));
    bucket.assert_no_pending_upload();

    // An existing key: the old object stays as it was.
    let old = pattern(2, 1000);
    bucket.put("old", &old).expect("seed");
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("old")), &config).expect("create"),
    ));
    writer.write(&pattern(3, 33 * MIB)).expect("write");
    writer.abandon();
    assert_eq!(bucket.object("old").expect("old"), old);
    bucket.assert_no_pending_upload();

    // Abandoned before a part was full: no request was ever made.
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("tiny")), &config).expect("create"),
    ));
    writer.write(b"tiny").expect("write");
    writer.abandon();
    assert!(!bucket.has("tiny"));
}

#[test]
fn a_part_that_cannot_be_uploaded_is_named() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    // The gateway behind a proxy that goes away (its port closed).
    let mut proxy = DelayProxy::start(bucket.cluster.port(), Duration::ZERO).expect("proxy");
    let config = config_for(&bucket, &[("AWS_ENDPOINT_URL", &proxy.endpoint())]);
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("cut")), &config).expect("create"),
    ));
    writer
        .write(&pattern(4, 16 * MIB))
        .expect("the first part starts the upload");
    proxy.cut();
    let data = pattern(5, 16 * MIB);
    let failed = (0..8)
        .map(|_| writer.write(&data))
        .find_map(Result::err)
        .or_else(|| writer.sync(true).err());
    assert_eq!(failed, Some(Errno::IO));
    let detail = writer.take_detail().expect("a detail");
    assert!(detail.starts_with("uploading part "), "{detail}");
    // Every later write fails too, and closing does not complete, even
    // with the server back: it aborts the upload instead (which, with
    // the server still gone, it would try for half a minute).
    assert_eq!(writer.write(b"more"), Err(Errno::IO));
    proxy.restore().expect("the proxy back");
    assert_eq!(writer.close(), Err(Errno::IO));
    assert!(!bucket.has("cut"));
    bucket.assert_no_pending_upload();
}

#[test]
fn parts_sent_while_the_server_is_down_are_retried_until_it_is_back() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    // object_store's backoff is jittered from 100 ms up: enough tries
    // that the outage (a second, plus the restart on a loaded machine)
    // cannot use them all up.
    let mut proxy = DelayProxy::start(bucket.cluster.port(), Duration::ZERO).expect("proxy");
    let config = config_for(
        &bucket,
        &[
            ("AWS_MAX_ATTEMPTS", "50"),
            ("AWS_ENDPOINT_URL", &proxy.endpoint()),
        ],
    );
    let data = pattern(12, 3 * 16 * MIB + 5);
    let mut writer: Box<dyn Stream> = stream_of(Box::new(
        ObjectWriter::create(&url(&bucket.url("outage")), &config).expect("create"),
    ));
    writer.write(&data[..16 * MIB]).expect("first part");
    writer.sync(true).expect("first part stored");
    // The gateway's port closed for a second.
    proxy.cut();
    let restorer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        proxy.restore().map(|()| proxy)
    });
    writer.write(&data[16 * MIB..]).expect("parts handed over");
    let _proxy = restorer.join().expect("restorer").expect("restored");
    let mut writer = writer;
    if let Err(errno) = writer.sync(true) {
        panic!("{errno}: {:?}", writer.take_detail());
    }
    writer.close().expect("completed once the server is back");
    let stored = bucket.object("outage").expect("stored");
    assert!(stored == data, "the cluster stored other bytes");
}

#[test]
fn a_missing_object_or_bucket_is_enoent_with_the_url_in_the_detail() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[]);
    for missing in [bucket.url("nothing-here"), "s3://no-bucket/key".to_owned()] {
        let error = ObjectReader::open(&url(&missing), &config).expect_err("missing");
        assert_eq!(error.errno, Errno::NOENT, "{error}");
        assert!(error.detail.starts_with("reading its size: "), "{error}");
    }
    // (s3s-fs makes a missing bucket's directory on a PUT, so a write
    // to one cannot be tested here.)
}

/// Known secrets, wrong for the server: every error and Debug text is
/// searched for them.
#[test]
fn secrets_appear_in_no_error_and_no_debug_text() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    bucket.put("obj", b"data").expect("seed");
    const SECRET: &str = "Known+Secret/Value0123456789";
    const TOKEN: &str = "Known/Session+Token=ABCDEF0123456789";
    let config = config_for(
        &bucket,
        &[
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", TOKEN),
        ],
    );
    let mut texts = vec![format!("{config:?}")];
    let error = ObjectReader::open(&url(&bucket.url("obj")), &config).expect_err("refused");
    assert!(
        matches!(error.errno, Errno::ACCESS | Errno::IO),
        "{error:?}"
    );
    texts.push(error.to_string());
    texts.push(format!("{error:?}"));
    let mut writer = Window::over(Box::new(
        ObjectWriter::create(&url(&bucket.url("new")), &config).expect("create"),
    ));
    texts.push(format!("{writer:?}"));
    writer
        .write(&pattern(6, 16 * MIB))
        .expect_err("the first part is refused");
    texts.push(writer.take_detail().expect("a detail"));
    texts.push(format!("{writer:?}"));
    Box::new(writer).abandon();

    // A URL's password and query (a presigned URL) are secrets too.
    let secret_url = rigs::object::secret_url();
    let error: ObjectError =
        ObjectReader::open(&url(&secret_url), &config).expect_err("nobody listens");
    texts.push(error.to_string());
    texts.push(format!("{:?}", url(&secret_url)));

    // Neither whole nor in part, nor percent-encoded.
    let secrets = [
        SECRET,
        TOKEN,
        "Known+Secret",
        "Known/Session",
        "Known%2BSecret",
        "Known%2FSession",
    ];
    rigs::object::assert_hidden(&texts, &secrets);
}

#[test]
fn an_http_endpoint_ignores_a_ca_bundle_meant_for_https() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let config = config_for(&bucket, &[("AWS_CA_BUNDLE", "/nonexistent/bundle.pem")]);
    upload(&url(&bucket.url("k")), &config, b"plain http", 4, None);
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&url(&bucket.url("k")), &config).expect("open"),
    ));
    assert_eq!(read_all(&mut reader, 3), b"plain http");
}

#[test]
fn http_urls_are_read_and_refused_for_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(8, 9 * MIB + 5);
    std::fs::write(dir.path().join("image.raw"), &data).expect("seed");
    let server = match HttpServer::start(dir.path(), None) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    let config = Config::from_lookup(|name| (name == "HOME").then(|| "/nonexistent".into()))
        .expect("config");
    let target = url(&server.url("image.raw"));
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&target, &config).expect("open"),
    ));
    assert_eq!(reader.size(), Ok(Some(data.len() as u64)));
    let mut buf = vec![0u8; 1000];
    assert_eq!(reader.read_at(&mut buf, 5 * MIB as u64), Ok(1000));
    assert_eq!(&buf[..], &data[5 * MIB..5 * MIB + 1000]);
    reader.pipeline(Pipeline {
        chunk: MIB,
        depth: 3,
        total: None,
    });
    assert!(read_all(&mut reader, 3 * MIB) == data);

    let missing = ObjectReader::open(&url(&server.url("nope")), &config).expect_err("missing");
    assert_eq!(missing.errno, Errno::NOENT);
    let refused = ObjectWriter::create(&target, &config).expect_err("read-only");
    assert_eq!(refused.errno, Errno::ROFS);
}

#[test]
fn https_is_read_with_an_explicitly_trusted_certificate_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = dir.path().join("www");
    std::fs::create_dir(&served).expect("mkdir");
    let data = pattern(10, 3 * MIB + 1);
    std::fs::write(served.join("golden.img"), &data).expect("seed");
    let started = TestCa::new(dir.path())
        .and_then(|ca| HttpServer::start(&served, Some(&ca)).map(|server| (ca, server)));
    let (ca, server) = match started {
        Ok(started) => started,
        Err(why) => return rigs::skip(&why),
    };
    let target = url(&server.url("golden.img"));
    let untrusting = Config::from_lookup(|name| (name == "HOME").then(|| "/nonexistent".into()))
        .expect("config");
    let error = ObjectReader::open(&target, &untrusting).expect_err("unknown issuer");
    // The server is named (not the path: the operand names the object).
    let origin = server.url("");
    assert!(
        error.detail.contains(origin.trim_end_matches('/')),
        "{error}"
    );

    let bundle = ca.ca.to_str().expect("utf-8").to_owned();
    let trusting = Config::from_lookup(|name| match name {
        "HOME" => Some("/nonexistent".into()),
        "AWS_CA_BUNDLE" => Some(bundle.clone()),
        _ => None,
    })
    .expect("config");
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&target, &trusting).expect("open"),
    ));
    assert_eq!(reader.size(), Ok(Some(data.len() as u64)));
    reader.pipeline(Pipeline {
        chunk: MIB,
        depth: 2,
        total: None,
    });
    assert!(read_all(&mut reader, MIB) == data);
}

#[test]
fn a_server_that_ignores_ranges_is_read_whole_and_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(11, 5 * MIB + 3);
    std::fs::write(dir.path().join("plain.img"), &data).expect("seed");
    let server = match PythonHttpServer::start(dir.path()) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    let config = Config::from_lookup(|name| (name == "HOME").then(|| "/nonexistent".into()))
        .expect("config");
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&url(&server.url("plain.img")), &config).expect("open"),
    ));
    assert_eq!(reader.size(), Ok(Some(data.len() as u64)));
    let mut buf = vec![0u8; 100_000];
    // Forward: skipped by reading; backward: started again.
    reader.seek(Whence::Start(3 * MIB as u64)).expect("seek");
    assert_eq!(reader.read(&mut buf), Ok(100_000));
    assert!(buf[..] == data[3 * MIB..3 * MIB + 100_000]);
    assert_eq!(reader.read_at(&mut buf, 10), Ok(100_000));
    assert!(buf[..] == data[10..100_010]);
    reader.seek(Whence::Start(0)).expect("seek");
    reader.pipeline(Pipeline {
        chunk: MIB,
        depth: 4,
        total: None,
    });
    assert!(read_all(&mut reader, 777_777) == data);
}

#[test]
fn without_credentials_anywhere_the_open_fails_soon_and_says_so() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    // No keys; the instance metadata service is a loopback port nobody
    // listens on.
    let metadata = format!("http://127.0.0.1:{}", rigs::object::free_port());
    let endpoint = bucket.endpoint();
    let config = Config::from_lookup(|name| match name {
        "HOME" => Some("/nonexistent".into()),
        "AWS_ENDPOINT_URL" => Some(endpoint.clone()),
        "AWS_EC2_METADATA_SERVICE_ENDPOINT" => Some(metadata.clone()),
        _ => None,
    })
    .expect("config");
    let started = std::time::Instant::now();
    let error = ObjectReader::open(&url(&bucket.url("k")), &config).expect_err("no credentials");
    assert_eq!(error.errno, Errno::ACCESS, "{error}");
    assert!(error.detail.contains("no AWS credentials"), "{error}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn an_https_endpoint_is_trusted_through_aws_ca_bundle() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let started = TestCa::new(dir.path())
        .and_then(|ca| TlsFront::start(&ca, bucket.cluster.port()).map(|front| (ca, front)));
    let (ca, front) = match started {
        Ok(started) => started,
        Err(why) => return rigs::skip(&why),
    };
    let endpoint = front.endpoint();
    let untrusting = config_for(&bucket, &[("AWS_ENDPOINT_URL", &endpoint)]);
    let error =
        ObjectReader::open(&url(&bucket.url("k")), &untrusting).expect_err("unknown issuer");
    assert!(error.detail.contains(&endpoint), "{error}");

    let bundle = ca.ca.to_str().expect("utf-8");
    let config = config_for(
        &bucket,
        &[("AWS_ENDPOINT_URL", &endpoint), ("AWS_CA_BUNDLE", bundle)],
    );
    // Over https the parts go unsigned (TLS guards them).
    let data = pattern(13, 2 * 16 * MIB + 77);
    upload(&url(&bucket.url("tls")), &config, &data, 3 * MIB, None);
    let stored = bucket.object("tls").expect("stored");
    assert!(stored == data, "the cluster stored other bytes");
    let mut reader = Window::over(Box::new(
        ObjectReader::open(&url(&bucket.url("tls")), &config).expect("open"),
    ));
    reader.pipeline(Pipeline {
        chunk: MIB,
        depth: 2,
        total: None,
    });
    assert!(read_all(&mut reader, 5 * MIB) == data);
}

#[test]
fn a_profile_in_the_shared_files_is_enough_to_reach_the_server() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(home.path().join(".aws")).expect("mkdir");
    std::fs::write(
        home.path().join(".aws/credentials"),
        format!(
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong-secret\n\n\
             [ddx]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            rigs::object::ACCESS_KEY,
            rigs::object::SECRET_KEY
        ),
    )
    .expect("credentials");
    std::fs::write(
        home.path().join(".aws/config"),
        format!(
            "[profile ddx]\nregion = us-east-1\nendpoint_url = {}\n",
            bucket.endpoint()
        ),
    )
    .expect("config");
    let home_dir = home.path().to_str().expect("utf-8").to_owned();
    let config = Config::from_lookup(|name| match name {
        "HOME" => Some(home_dir.clone()),
        "AWS_PROFILE" => Some("ddx".into()),
        _ => None,
    })
    .expect("config");
    upload(&url(&bucket.url("p")), &config, b"by profile", 1024, None);
    assert_eq!(bucket.object("p").expect("stored"), b"by profile");
}

/// A server's 4xx answer without a word of its own (a HEAD's has no
/// body) is not left bare: the message says what it means and what to
/// check, for a missing object, a missing bucket, credentials refused
/// (the cluster's gateway checks them against its identities), and a web
/// server's missing file; through the binary, one line each.
#[test]
fn a_servers_bare_answer_is_said_with_what_it_means() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let wrong_secret: Vec<(String, String)> = bucket
        .env()
        .into_iter()
        .map(|(k, v)| {
            let v = if k == "AWS_SECRET_ACCESS_KEY" {
                "not-the-secret-at-all".to_owned()
            } else {
                v
            };
            (k, v)
        })
        .collect();
    let http_dir = tempfile::tempdir().expect("tempdir");
    let http = match HttpServer::start(http_dir.path(), None) {
        Ok(http) => http,
        Err(why) => return rigs::skip(&why),
    };
    let cases = [
        (
            bucket.url("nothing-here"),
            bucket.env(),
            "404",
            "no such object",
        ),
        (
            format!("s3://{}-never-made/key", bucket.name),
            bucket.env(),
            "404",
            "no such object",
        ),
        (bucket.url("anything"), wrong_secret, "403", "access denied"),
        (http.url("nope.img"), Vec::new(), "404", "no such object"),
    ];
    for (uri, env, status, meaning) in cases {
        let ran = crate::rigs::fixture::Ddx::new()
            .env("HOME", "/nonexistent")
            .env("AWS_MAX_ATTEMPTS", "1")
            .envs(env)
            .arg(format!("if={uri}"))
            .arg(crate::rigs::cmd::operand("of", &out))
            .fails();
        let line = ran.stderr.trim_end();
        assert_eq!(line.lines().count(), 1, "{}", ran.stderr);
        assert!(
            line.contains(&format!("the server answered {status}")) && line.contains(meaning),
            "{uri}: {line}"
        );
        assert!(!line.ends_with(':'), "{uri}: a bare answer: {line}");
        assert!(!out.exists());
    }
}
