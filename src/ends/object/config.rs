//! Where an object store is and who ddx is there: the standard AWS
//! settings, read once from the environment and the shared files, and
//! turned into an object_store client for one URL.
//!
//! The environment wins over the profile, as in the AWS CLI:
//! - credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+
//!   `AWS_SESSION_TOKEN`), else the profile's static keys (`AWS_PROFILE`,
//!   else `default`), else what object_store finds by itself (web
//!   identity, ECS/EKS container credentials, EC2 instance metadata);
//! - region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`,
//!   else asked of S3 (the bucket's own region) when no endpoint is set;
//! - endpoint: `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's
//!   (a `services` section, or `endpoint_url`), all ignored under
//!   `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`; an `http://` endpoint is
//!   allowed because it was given explicitly;
//! - `AWS_CA_BUNDLE` (or the profile's `ca_bundle`): extra trusted roots
//!   for an https endpoint, not even read for a plain-http one;
//! - `AWS_MAX_ATTEMPTS` (or the profile's `max_attempts`): tries per
//!   request, retried with object_store's exponential backoff.
//!
//! Secrets live in [`Secret`]s and every text this module makes goes
//! through a [`Redactor`] holding them.

use std::fmt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::multipart::MultipartStore;
use object_store::signer::Signer;
use object_store::{Certificate, ClientOptions, ObjectStore, RetryConfig};

use super::profile;
use super::secret::{Redactor, Secret};
use super::url::ObjectUrl;
use super::ObjectError;
use crate::sys::Errno;
use crate::text::quote::printable;

/// How ddx proves who it is to S3.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// Keys from the environment or a profile.
    Static {
        key_id: String,
        secret: Secret,
        token: Option<Secret>,
        /// Where they came from, for messages ("AWS_ACCESS_KEY_ID",
        /// "profile dev").
        source: String,
    },
    /// Whatever object_store finds itself: web identity, container
    /// credentials, or the EC2 instance metadata service.
    Ambient,
}

/// The settings every object end is built from.
#[derive(Clone)]
pub struct Config {
    pub credentials: Credentials,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    /// Extra trusted root certificates (PEM) for https.
    pub ca_bundle: Option<PathBuf>,
    /// Tries per request (the first included).
    pub max_attempts: usize,
    /// Longest time a request is retried for.
    pub retry_timeout: Duration,
    /// Settings object_store reads itself for ambient credentials
    /// (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN...), passed through.
    passthrough: Vec<(AmazonS3ConfigKey, String)>,
}

/// object_store's own default, kept: 10 retries.
const DEFAULT_ATTEMPTS: usize = 11;

/// Settings object_store's ambient credential providers read, by the
/// standard variable names.
const AMBIENT: [(&str, &str); 8] = [
    ("AWS_WEB_IDENTITY_TOKEN_FILE", "aws_web_identity_token_file"),
    ("AWS_ROLE_ARN", "aws_role_arn"),
    ("AWS_ROLE_SESSION_NAME", "aws_role_session_name"),
    ("AWS_ENDPOINT_URL_STS", "aws_endpoint_url_sts"),
    (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "aws_container_credentials_relative_uri",
    ),
    (
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "aws_container_credentials_full_uri",
    ),
    (
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "aws_container_authorization_token_file",
    ),
    ("AWS_EC2_METADATA_SERVICE_ENDPOINT", "aws_metadata_endpoint"),
];

impl Config {
    /// The settings from this process's environment and the shared
    /// files it points to.
    pub fn from_env() -> Result<Config, ObjectError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings from `var` (an environment: name to value), for tests
    /// that must not touch the process's own. Empty values count as
    /// unset.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Config, ObjectError> {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        let home = var("HOME").map(PathBuf::from);
        let file = |env: &str, default: &str| {
            var(env)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let credentials_file = read_shared(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"))?;
        let config_file = read_shared(file("AWS_CONFIG_FILE", "config"))?;
        Config::from_sections(var, &credentials_file, &config_file)
    }

    /// The settings from `var` and the shared files' sections, read
    /// already (what [`Config::from_lookup`] does once it has the files).
    pub(crate) fn from_sections(
        var: impl Fn(&str) -> Option<String>,
        credentials_file: &profile::Sections,
        config_file: &profile::Sections,
    ) -> Result<Config, ObjectError> {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        let explicit_profile = var("AWS_PROFILE").or_else(|| var("AWS_DEFAULT_PROFILE"));
        let profile_name = explicit_profile.clone().unwrap_or_else(|| "default".into());
        // As messages show it: one line, whatever the variable holds.
        let shown_name = printable(&profile_name);
        let profile = profile::profile(&profile_name, credentials_file, config_file);
        if explicit_profile.is_some() && profile.is_none() {
            return Err(ObjectError::config(format!(
                "AWS_PROFILE names profile '{shown_name}', which neither the shared \
                 credentials file nor the config file has"
            )));
        }
        let profile = profile.unwrap_or_default();
        let setting = |key: &str| profile.get(key).filter(|v| !v.is_empty()).cloned();

        let credentials = match (
            var("AWS_ACCESS_KEY_ID"),
            var("AWS_SECRET_ACCESS_KEY"),
            var("AWS_SESSION_TOKEN"),
        ) {
            (Some(key_id), Some(secret), token) => Credentials::Static {
                key_id,
                secret: Secret::new(secret),
                token: token.map(Secret::new),
                source: "AWS_ACCESS_KEY_ID".into(),
            },
            (Some(_), None, _) => {
                return Err(ObjectError::config(
                    "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
                ))
            }
            (None, Some(_), _) => {
                return Err(ObjectError::config(
                    "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".into(),
                ))
            }
            (None, None, _) => match (
                setting("aws_access_key_id"),
                setting("aws_secret_access_key"),
            ) {
                (Some(key_id), Some(secret)) => Credentials::Static {
                    key_id,
                    secret: Secret::new(secret),
                    token: setting("aws_session_token").map(Secret::new),
                    source: format!("profile {shown_name}"),
                },
                (Some(_), None) | (None, Some(_)) => {
                    return Err(ObjectError::config(format!(
                        "AWS profile '{shown_name}' has only one of aws_access_key_id and \
                         aws_secret_access_key"
                    )))
                }
                (None, None) => {
                    if let Some(how) = profile::INDIRECT_CREDENTIALS
                        .iter()
                        .find(|key| profile.contains_key(**key))
                    {
                        return Err(ObjectError::config(format!(
                            "AWS profile '{shown_name}' gets its credentials through {how}, \
                             which ddx does not resolve: export them instead (aws configure \
                             export-credentials --profile {shown_name} --format env)"
                        )));
                    }
                    Credentials::Ambient
                }
            },
        };

        let ignore_endpoints = var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let endpoint = if ignore_endpoints {
            None
        } else {
            var("AWS_ENDPOINT_URL_S3")
                .or_else(|| var("AWS_ENDPOINT_URL"))
                .or_else(|| setting("services.s3.endpoint_url"))
                .or_else(|| setting("endpoint_url"))
        };
        let max_attempts = match var("AWS_MAX_ATTEMPTS").or_else(|| setting("max_attempts")) {
            None => DEFAULT_ATTEMPTS,
            Some(text) => match text.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(ObjectError::config(format!(
                        "AWS_MAX_ATTEMPTS: '{}' is not a number of tries (1 or more)",
                        printable(&text)
                    )))
                }
            },
        };
        let passthrough = if matches!(credentials, Credentials::Ambient) {
            AMBIENT
                .iter()
                .filter_map(|(env, key)| {
                    Some((key.parse().expect("a key object_store knows"), var(env)?))
                })
                .collect()
        } else {
            Vec::new()
        };
        if matches!(credentials, Credentials::Ambient)
            && passthrough.is_empty()
            && var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Err(ObjectError::config(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                 AWS_PROFILE (AWS_EC2_METADATA_DISABLED rules out the instance's role)"
                    .into(),
            ));
        }
        Ok(Config {
            credentials,
            region: var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .or_else(|| setting("region")),
            endpoint,
            ca_bundle: var("AWS_CA_BUNDLE")
                .or_else(|| setting("ca_bundle"))
                .map(PathBuf::from),
            max_attempts,
            retry_timeout: RetryConfig::default().retry_timeout,
            passthrough,
        })
    }

    /// The secrets these settings hold, for a [`Redactor`].
    fn secrets(&self) -> Vec<String> {
        match &self.credentials {
            Credentials::Static { secret, token, .. } => std::iter::once(secret)
                .chain(token)
                .map(|s| s.expose().to_owned())
                .collect(),
            Credentials::Ambient => Vec::new(),
        }
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            max_retries: self.max_attempts.saturating_sub(1),
            retry_timeout: self.retry_timeout,
            ..RetryConfig::default()
        }
    }

    /// Client options for talking to `endpoint_is_https` or not: the CA
    /// bundle only for https (a plain-http endpoint never reads it, so a
    /// bundle meant for another endpoint cannot break it), and timeouts
    /// for `direction`.
    fn client_options(
        &self,
        https: bool,
        direction: Direction,
    ) -> Result<ClientOptions, ObjectError> {
        let mut options = ClientOptions::new()
            .with_allow_http(!https)
            .with_connect_timeout(Duration::from_secs(5))
            // object_store's default bounds a whole request by 30 s,
            // which a large part or range on a slow link overruns; a
            // dead peer is found by reqwest's TCP keepalive and
            // TCP_USER_TIMEOUT (unacknowledged data for 30 s) instead.
            .with_timeout_disabled();
        if direction == Direction::Read {
            // Time to the response's headers, then between body reads:
            // for a GET, a server silent this long is gone. (An upload's
            // headers come only after its whole body, so not for writes.)
            options = options.with_read_timeout(Duration::from_secs(60));
        }
        if https {
            if let Some(bundle) = &self.ca_bundle {
                for certificate in read_bundle(bundle)? {
                    options = options.with_root_certificate(certificate);
                }
            }
        }
        Ok(options)
    }

    /// A client for `url`, on `runtime` (where a bucket's region may have
    /// to be asked for).
    pub(super) fn store(
        &self,
        url: &ObjectUrl,
        direction: Direction,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Store, ObjectError> {
        let mut secrets = self.secrets();
        secrets.extend(url.secrets());
        let redactor = Redactor::new(secrets.iter().map(String::as_str));
        let label = url.to_string();
        let _context = runtime.enter();
        let failed = |what: &str, e: object_store::Error| ObjectError {
            errno: Errno::INVAL,
            detail: redactor.clean(&format!("{what}: {}", one_line(&e))),
        };
        let mut multipart: Option<Arc<dyn MultipartStore>> = None;
        let mut signer: Option<Arc<dyn Signer>> = None;
        let mut client_options = None;
        let store: Arc<dyn ObjectStore> = match url {
            ObjectUrl::S3 { bucket, .. } => {
                let https = self
                    .endpoint
                    .as_deref()
                    .is_none_or(|e| !e.to_ascii_lowercase().starts_with("http://"));
                let options = self.client_options(https, direction)?;
                let region = match (&self.region, &self.endpoint) {
                    (Some(region), _) => region.clone(),
                    (None, Some(_)) => "us-east-1".into(),
                    (None, None) => {
                        let (bucket, options) = (bucket.clone(), options.clone());
                        super::runtime::run(runtime, async move {
                            object_store::aws::resolve_bucket_region(&bucket, &options).await
                        })
                        .map_err(|e| failed("finding the bucket's region", e))?
                    }
                };
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_retry(self.retry())
                    .with_client_options(options.clone())
                    // As boto3 does: over https TLS guards the body, and
                    // hashing it for the signature costs the client and
                    // the server a pass over every byte; over plain http
                    // the signature is all that guards it.
                    .with_unsigned_payload(https);
                if let Some(endpoint) = &self.endpoint {
                    builder = builder.with_endpoint(endpoint);
                }
                if direction == Direction::Write {
                    // Every part, and a one-PUT object, carries its SHA-256
                    // for the server to check (see `checksum`).
                    builder = builder.with_checksum_algorithm(object_store::aws::Checksum::SHA256);
                }
                if let Credentials::Static {
                    key_id,
                    secret,
                    token,
                    ..
                } = &self.credentials
                {
                    builder = builder
                        .with_access_key_id(key_id)
                        .with_secret_access_key(secret.expose());
                    if let Some(token) = token {
                        builder = builder.with_token(token.expose());
                    }
                }
                for (key, value) in &self.passthrough {
                    builder = builder.with_config(*key, value);
                }
                if matches!(self.credentials, Credentials::Ambient) {
                    self.probe_ambient(builder.clone(), runtime, &redactor)?;
                }
                let s3 = Arc::new(builder.build().map_err(|e| failed("configuring S3", e))?);
                multipart = Some(s3.clone());
                signer = Some(s3.clone());
                client_options = Some(options);
                s3
            }
            ObjectUrl::Http(inner) => {
                let https = inner.to_ascii_lowercase().starts_with("https://");
                let options = self.client_options(https, direction)?;
                Arc::new(
                    HttpBuilder::new()
                        .with_url(inner.as_str())
                        .with_retry(self.retry())
                        .with_client_options(options)
                        .build()
                        .map_err(|e| failed("configuring HTTP", e))?,
                )
            }
        };
        Ok(Store {
            store,
            multipart,
            signer,
            client_options,
            retry: self.retry(),
            path: url.store_path(),
            redactor,
            label,
        })
    }
}

impl Config {
    /// Ask object_store's chain (web identity, container, EC2 instance
    /// metadata) for credentials once, with one retry: with the store's
    /// own retries, a machine with no credentials anywhere would wait a
    /// minute for the instance metadata service before saying so.
    fn probe_ambient(
        &self,
        builder: AmazonS3Builder,
        runtime: &tokio::runtime::Runtime,
        redactor: &Redactor,
    ) -> Result<(), ObjectError> {
        let quick = RetryConfig {
            max_retries: 1,
            retry_timeout: Duration::from_secs(5),
            ..RetryConfig::default()
        };
        let found = match builder.with_retry(quick).build() {
            Ok(probe) => super::runtime::run(runtime, async move {
                probe.credentials().get_credential().await.map(|_| ())
            }),
            Err(e) => Err(e),
        };
        found.map_err(|e| ObjectError {
            errno: Errno::ACCESS,
            detail: redactor.clean(&format!(
                "no AWS credentials: none in the environment (AWS_ACCESS_KEY_ID, \
                 AWS_SECRET_ACCESS_KEY) or a profile, and none from the instance or \
                 container: {}",
                one_line(&e)
            )),
        })
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("credentials", &self.credentials)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("ca_bundle", &self.ca_bundle)
            .field("max_attempts", &self.max_attempts)
            .field("retry_timeout", &self.retry_timeout)
            .field(
                "passthrough",
                &self.passthrough.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Which way an end moves data (timeouts differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    Read,
    Write,
}

/// A client for one object, and what its texts must not show.
pub(super) struct Store {
    pub store: Arc<dyn ObjectStore>,
    /// S3's multipart API (an upload's id, its parts one by one) and its
    /// signer (for requests object_store does not make: ListParts), with
    /// the options its own requests are made with.
    pub multipart: Option<Arc<dyn MultipartStore>>,
    pub signer: Option<Arc<dyn Signer>>,
    pub client_options: Option<ClientOptions>,
    pub retry: RetryConfig,
    pub path: object_store::path::Path,
    pub redactor: Redactor,
    /// The URL as it may be shown (the messages leave it out: the
    /// caller names the operand).
    pub label: String,
}

impl Store {
    /// An error of `what` (an action: "reading at 8388608"), errno and a
    /// one-line detail without secrets.
    pub fn error(&self, what: &str, e: &object_store::Error) -> ObjectError {
        ObjectError {
            errno: super::errno_of(e),
            detail: self.redactor.clean(&format!("{what}: {}", describe(e))),
        }
    }
}

/// What went wrong, in the server's words where it answered: its status,
/// its S3 error code and message (`500 Internal Server Error,
/// InternalError: We encountered an internal error`), else the cause the
/// client met (a refused connection, a reset), and how many tries were
/// made. object_store's own text names the request's URL, which a
/// message has no room for (the operand names the object), and stacks
/// its layers' wording around the cause.
pub(super) fn describe(e: &object_store::Error) -> String {
    let text = one_line(e);
    let said = server_answer(&text).unwrap_or_else(|| client_cause(&text));
    let said = match tries(&text) {
        Some(n) if n > 1 => format!("{said} (after {n} tries)"),
        _ => said,
    };
    if matches!(e, object_store::Error::Precondition { .. })
        || text.contains("412 Precondition Failed")
    {
        return format!(
            "the object changed since the copy began, and bytes of two versions are never \
             put together: {said}"
        );
    }
    said
}

/// The server's answer in an object_store error's text: `STATUS, CODE:
/// MESSAGE` from "status code: STATUS: BODY", the body an S3 error
/// document (or the start of whatever else it holds).
fn server_answer(text: &str) -> Option<String> {
    let (status, body) = if let Some(at) = text.find("status code: ") {
        let rest = &text[at + "status code: ".len()..];
        match rest.split_once(": ") {
            Some((status, body)) => (Some(status.trim()), body),
            None => (Some(rest.trim()), ""),
        }
    } else {
        let at = text.find("returned error response: ")?;
        (None, &text[at + "returned error response: ".len()..])
    };
    let body = body.trim();
    // An empty body leaves the status with its colon ("404 Not Found:").
    let status = status.map(|s| s.trim_end_matches(':').trim_end());
    let (code, message) = s3_error(body);
    let mut said = status.unwrap_or("an error").to_owned();
    match (code, message) {
        (Some(code), Some(message)) => said.push_str(&format!(", {code}: {message}")),
        (Some(code), None) => said.push_str(&format!(", {code}")),
        (None, _) if !body.is_empty() && !body.starts_with('<') => {
            let short: String = body.chars().take(200).collect();
            said.push_str(&format!(": {short}"));
        }
        // No word of the server's own (a HEAD's answer has no body): what
        // the status means here, and what to check.
        (None, _) => {
            if let Some(meaning) = status.and_then(status_meaning) {
                said.push_str(&format!(": {meaning}"));
            }
        }
    }
    Some(format!("the server answered {said}"))
}

/// What an HTTP status the server gave without a word of its own means
/// for an object, and what to check; None for a status not an error.
fn status_meaning(status: &str) -> Option<&'static str> {
    let code: u16 = status.split_whitespace().next()?.parse().ok()?;
    let said = match code {
        400 => {
            "the server found the request malformed (an endpoint of another kind of \
                server, or a bucket name it does not take?)"
        }
        401 => {
            "the server wants credentials it was not given (AWS_ACCESS_KEY_ID and \
                AWS_SECRET_ACCESS_KEY, a profile, or a user and password in the URL)"
        }
        403 => {
            "access denied: these credentials may not read or write this object (check \
                the key pair, the bucket's policy, and the clock, which signatures depend on)"
        }
        404 => {
            "no such object: check the bucket and key (or the URL), and the endpoint \
                (AWS_ENDPOINT_URL) and region"
        }
        405 => {
            "the server does not allow this request on this URL (not an object store's \
                endpoint?)"
        }
        408 => "the server gave up waiting for the request",
        409 => "the request conflicts with the bucket's state (being created or removed?)",
        411 | 413 => "the server refused the request's size",
        416 => {
            "the server would not serve that range of the object (it is shorter than \
                it was?)"
        }
        429 => "the server asks for fewer requests: try again later",
        _ if (400..500).contains(&code) => "the server refused the request",
        _ if (500..600).contains(&code) => "the server failed the request: try again later",
        _ => return None,
    };
    Some(said)
}

/// An S3 error document's `Code` and `Message`.
fn s3_error(body: &str) -> (Option<String>, Option<String>) {
    let Some(start) = body.find("<Error") else {
        return (None, None);
    };
    let end = body
        .rfind("</Error>")
        .map_or(body.len(), |e| e + "</Error>".len());
    let Ok(document) = roxmltree::Document::parse(&body[start..end]) else {
        return (None, None);
    };
    let field = |name: &str| {
        document
            .root_element()
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|t| !t.is_empty())
    };
    (field("Code"), field("Message"))
}

/// The cause under object_store's "Error performing METHOD URL in T,
/// after N retries ... - CAUSE", and the server it was met with (the
/// URL's scheme, host and port: its path, query and credentials are not
/// the message's to show).
fn client_cause(text: &str) -> String {
    let Some(at) = text.find("Error performing ") else {
        return text.to_owned();
    };
    let Some((request, cause)) = text[at..].split_once(" - ") else {
        return text.to_owned();
    };
    let cause = cause.trim();
    let cause = cause.strip_prefix("HTTP error: ").unwrap_or(cause);
    let server = request.split_whitespace().nth(3).and_then(|url| {
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let host = authority.rsplit('@').next()?;
        Some(format!("{scheme}://{host}"))
    });
    match server {
        Some(server) => format!("{cause} ({server})"),
        None => cause.to_owned(),
    }
}

/// The tries object_store made ("after N retries": N + 1).
fn tries(text: &str) -> Option<usize> {
    let at = text.find("after ")? + "after ".len();
    let n: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    text[at + n.len()..]
        .starts_with(" retries")
        .then(|| n.parse::<usize>().ok().map(|n| n + 1))?
}

/// The error and its causes on one line: object_store's text stops at
/// "error sending request", the cause ("Connection refused", a
/// certificate's issuer unknown) is further down the chain.
fn one_line(e: &object_store::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = inner.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A shared file's sections; a missing file has none.
fn read_shared(path: Option<PathBuf>) -> Result<profile::Sections, ObjectError> {
    let Some(path) = path else {
        return Ok(profile::Sections::new());
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(profile::parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(profile::Sections::new()),
        Err(e) => Err(ObjectError::config(format!("{}: {e}", path.display()))),
    }
}

fn read_bundle(path: &FsPath) -> Result<Vec<Certificate>, ObjectError> {
    let pem = std::fs::read(path)
        .map_err(|e| ObjectError::config(format!("AWS_CA_BUNDLE {}: {e}", path.display())))?;
    let certificates = Certificate::from_pem_bundle(&pem)
        .map_err(|e| ObjectError::config(format!("AWS_CA_BUNDLE {}: {e}", path.display())))?;
    if certificates.is_empty() {
        return Err(ObjectError::config(format!(
            "AWS_CA_BUNDLE {}: no certificate in it",
            path.display()
        )));
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ObjectError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| vars.get(name).cloned())
    }

    fn home_with(credentials: &str, config_text: &str) -> tempfile::TempDir {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(home.path().join(".aws")).expect("mkdir");
        std::fs::write(home.path().join(".aws/credentials"), credentials).expect("write");
        std::fs::write(home.path().join(".aws/config"), config_text).expect("write");
        home
    }

    #[test]
    fn environment_keys_win_over_the_profile() {
        let home = home_with(
            "[default]\naws_access_key_id=P\naws_secret_access_key=PS\n",
            "",
        );
        let home = home.path().to_str().expect("utf-8");
        let c = config(&[
            ("HOME", home),
            ("AWS_ACCESS_KEY_ID", "E"),
            ("AWS_SECRET_ACCESS_KEY", "ES-secret"),
            ("AWS_SESSION_TOKEN", "ET-token"),
            ("AWS_REGION", "eu-north-1"),
            ("AWS_DEFAULT_REGION", "us-west-1"),
        ])
        .expect("config");
        let Credentials::Static {
            key_id,
            secret,
            token,
            source,
        } = &c.credentials
        else {
            panic!("{c:?}")
        };
        assert_eq!(
            (key_id.as_str(), secret.expose(), source.as_str()),
            ("E", "ES-secret", "AWS_ACCESS_KEY_ID")
        );
        assert_eq!(token.as_ref().map(Secret::expose), Some("ET-token"));
        assert_eq!(c.region.as_deref(), Some("eu-north-1"));
    }

    #[test]
    fn a_named_profile_gives_keys_region_endpoint_and_bundle() {
        let home = home_with(
            "[dev]\naws_access_key_id = AKDEV\naws_secret_access_key = dev/secret\n",
            "[profile dev]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9000\n\
             ca_bundle = /etc/dev.pem\nmax_attempts = 3\n",
        );
        let home = home.path().to_str().expect("utf-8");
        let c = config(&[("HOME", home), ("AWS_PROFILE", "dev")]).expect("config");
        assert!(
            matches!(&c.credentials, Credentials::Static { key_id, source, .. }
                if key_id == "AKDEV" && source == "profile dev")
        );
        assert_eq!(c.region.as_deref(), Some("eu-west-3"));
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(c.ca_bundle.as_deref(), Some(FsPath::new("/etc/dev.pem")));
        assert_eq!(c.max_attempts, 3);
        // The environment's endpoint wins; the opt-out drops both.
        let c = config(&[
            ("HOME", home),
            ("AWS_PROFILE", "dev"),
            ("AWS_ENDPOINT_URL", "https://minio.example"),
        ])
        .expect("config");
        assert_eq!(c.endpoint.as_deref(), Some("https://minio.example"));
        let c = config(&[
            ("HOME", home),
            ("AWS_PROFILE", "dev"),
            ("AWS_ENDPOINT_URL", "https://minio.example"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ])
        .expect("config");
        assert_eq!(c.endpoint, None);
    }

    #[test]
    fn files_named_by_the_environment_are_read() {
        let home = home_with("", "");
        let credentials = home.path().join("elsewhere");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id=K\naws_secret_access_key=S1234\n",
        )
        .expect("write");
        let c = config(&[(
            "AWS_SHARED_CREDENTIALS_FILE",
            credentials.to_str().expect("utf-8"),
        )])
        .expect("config");
        assert!(matches!(&c.credentials, Credentials::Static { key_id, .. } if key_id == "K"));
    }

    #[test]
    fn unusable_settings_are_named() {
        let home = home_with("", "[profile sso]\nsso_session = corp\n");
        let home = home.path().to_str().expect("utf-8");
        let message = |vars: &[(&str, &str)]| config(vars).expect_err("refused").detail;
        assert!(message(&[("HOME", home), ("AWS_PROFILE", "nope")]).contains("'nope'"));
        assert!(message(&[("HOME", home), ("AWS_PROFILE", "sso")]).contains("sso_session"));
        assert!(message(&[("AWS_ACCESS_KEY_ID", "K")]).contains("AWS_SECRET_ACCESS_KEY"));
        assert!(message(&[("AWS_MAX_ATTEMPTS", "0")]).contains("AWS_MAX_ATTEMPTS"));
        assert!(
            message(&[("HOME", home), ("AWS_EC2_METADATA_DISABLED", "true")])
                .contains("no AWS credentials")
        );
    }

    #[test]
    fn without_keys_object_store_looks_for_ambient_credentials() {
        let c = config(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
        ])
        .expect("config");
        assert!(matches!(c.credentials, Credentials::Ambient));
        assert_eq!(c.passthrough.len(), 2);
    }

    /// A text on one line, as `one_line` makes an error's.
    fn one_line_text(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_servers_answer_is_its_status_code_and_message() {
        let text = "Generic S3 error: Error performing PUT http://127.0.0.1:9/bkt/x?partNumber=3&uploadId=u \
                    in 1.2s, after 1 retries, max_retries: 1, retry_timeout: 180s  - Server \
                    returned non-2xx status code: 500 Internal Server Error: <?xml version=\"1.0\" \
                    encoding=\"UTF-8\"?><Error><Code>InternalError</Code><Message>We \
                    encountered an internal error.</Message><RequestId>1</RequestId></Error>";
        assert_eq!(
            server_answer(text).as_deref(),
            Some(
                "the server answered 500 Internal Server Error, InternalError: We encountered \
                 an internal error."
            )
        );
        assert_eq!(tries(text), Some(2));
        let refused = "Generic S3 error: Error performing PUT http://127.0.0.1:9/bkt/x in 3ms - \
                       HTTP error: error sending request: Connection refused (os error 111)";
        assert_eq!(server_answer(refused), None);
        assert_eq!(
            client_cause(refused),
            "error sending request: Connection refused (os error 111) (http://127.0.0.1:9)"
        );
        let secret = "Error performing GET https://user:pw@host:8/k?X-Amz-Signature=s in 1ms - \
                      HTTP error: reset";
        assert_eq!(client_cause(secret), "reset (https://host:8)");
        assert_eq!(tries(refused), None);
        // A HEAD's answer has no body: the status alone, and what it means.
        for (status, meaning) in [
            ("404 Not Found", "no such object"),
            ("403 Forbidden", "access denied"),
            ("401 Unauthorized", "wants credentials"),
            ("400 Bad Request", "malformed"),
            ("418 I'm a teapot", "refused the request"),
            ("502 Bad Gateway", "failed the request"),
        ] {
            let bare = format!(
                "Object at location k not found: Error performing HEAD http://h/b/k in 1ms - \
                 Server returned non-2xx status code: {status}: "
            );
            let said = server_answer(&one_line_text(&bare)).unwrap();
            assert!(
                said.starts_with(&format!("the server answered {status}: ")),
                "{said}"
            );
            assert!(said.contains(meaning), "{said}");
            assert!(!said.ends_with(':'), "{said}");
        }
        let plain = "Server returned non-2xx status code: 503 Service Unavailable: busy";
        assert_eq!(
            server_answer(plain).as_deref(),
            Some("the server answered 503 Service Unavailable: busy")
        );
    }

    #[test]
    fn debug_shows_no_secret() {
        let c = config(&[
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "verysecretkey123"),
            ("AWS_SESSION_TOKEN", "verysecrettoken456"),
        ])
        .expect("config");
        let text = format!("{c:?}");
        assert!(!text.contains("verysecret"), "{text}");
        assert!(text.contains("AKIAEXAMPLE"), "{text}");
    }
}
