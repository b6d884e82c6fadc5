//! The AWS shared configuration files (`~/.aws/credentials`,
//! `~/.aws/config`): one profile's settings.
//!
//! object_store reads credentials from the environment only, and the
//! crates that read these files (the AWS SDK's `aws-config`) bring a
//! second HTTP stack and runtime; the format ddx needs is small, so it is
//! parsed here: `[name]` sections in the credentials file, `[profile
//! name]` (or `[default]`) in the config file, `key = value` lines,
//! indented lines as sub-settings of a key with an empty value (`s3 =`
//! then `  endpoint_url = ...`), `[services name]` sections, and comments
//! starting with `#` or `;`. Only static settings are taken (keys, token,
//! region, endpoint, CA bundle); a profile that gets its credentials some
//! other way (SSO, a role, a process) is named as such, not guessed at.

use std::collections::HashMap;

/// The settings of one section: keys lowercased; a sub-setting is
/// `parent.key`.
pub type Section = HashMap<String, String>;

/// Sections by name, as a file spells them after `[` (`profile dev`,
/// `default`, `services local`).
pub type Sections = HashMap<String, Section>;

/// Parse a shared config or credentials file. Malformed lines are
/// skipped, as the AWS CLI skips them.
pub fn parse(text: &str) -> Sections {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    let mut parent: Option<String> = None;
    for raw in text.lines() {
        let indented = raw.starts_with([' ', '\t']);
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if !indented && line.starts_with('[') {
            current = line
                .strip_prefix('[')
                .and_then(|l| l.split_once(']'))
                .map(|(name, _)| name.split_whitespace().collect::<Vec<_>>().join(" "));
            if let Some(name) = &current {
                sections.entry(name.clone()).or_default();
            }
            parent = None;
            continue;
        }
        let Some(section) = current.as_ref().and_then(|name| sections.get_mut(name)) else {
            continue;
        };
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = strip_comment(value.trim());
        match (&parent, indented) {
            (Some(parent), true) => {
                section.insert(format!("{parent}.{key}"), value.to_owned());
            }
            _ => {
                parent = value.is_empty().then(|| key.clone());
                section.insert(key, value.to_owned());
            }
        }
    }
    sections
}

/// A value's inline comment: `#` or `;` after whitespace.
fn strip_comment(value: &str) -> &str {
    let cut = value
        .char_indices()
        .find(|&(i, c)| matches!(c, '#' | ';') && value[..i].ends_with(char::is_whitespace))
        .map(|(i, _)| i);
    match cut {
        Some(i) => value[..i].trim_end(),
        None => value,
    }
}

/// One profile's settings from both files: the credentials file wins
/// over the config file, as in the AWS CLI. None when neither file has
/// the profile.
pub fn profile(name: &str, credentials: &Sections, config: &Sections) -> Option<Section> {
    let from_credentials = credentials.get(name);
    let config_name = format!("profile {name}");
    let from_config = config
        .get(&config_name)
        .or_else(|| (name == "default").then(|| config.get("default")).flatten());
    if from_credentials.is_none() && from_config.is_none() {
        return None;
    }
    let mut merged = Section::new();
    if let Some(section) = from_config {
        merged.extend(section.clone());
        // An endpoint for S3 given through a `services` section.
        if let Some(services) = section.get("services") {
            if let Some(url) = config
                .get(&format!("services {services}"))
                .and_then(|s| s.get("s3.endpoint_url"))
            {
                merged.insert("services.s3.endpoint_url".into(), url.clone());
            }
        }
    }
    if let Some(section) = from_credentials {
        merged.extend(section.clone());
    }
    Some(merged)
}

/// Settings that mean the profile's credentials come from somewhere ddx
/// does not go (the AWS SDK resolves them; ddx reads static keys only).
pub const INDIRECT_CREDENTIALS: [&str; 5] = [
    "credential_process",
    "role_arn",
    "sso_session",
    "sso_start_url",
    "web_identity_token_file",
];

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "\
# keys
[default]
aws_access_key_id = AKIADEFAULT
aws_secret_access_key = default/secret+key

[dev]
aws_access_key_id=AKIADEV
aws_secret_access_key=dev-secret ; inline comment
aws_session_token = tok#en==
";

    const CONFIG: &str = "\
[default]
region = eu-west-1

[profile dev]
region = us-west-2   # Oregon
aws_access_key_id = AKIA_FROM_CONFIG
ca_bundle = /etc/ssl/dev.pem
s3 =
    addressing_style = path
services = local-s3

[services local-s3]
s3 =
  endpoint_url = http://127.0.0.1:9000

[profile  sso]
sso_session = corp
  ; comment inside
[profile broken
region = nowhere
";

    /// Compares the whole merged profile, so that a stray key (a comment
    /// taken for a setting) fails as surely as a missing one.
    fn assert_profile(name: &str, settings: &[(&str, &str)]) {
        let merged = profile(name, &parse(CREDENTIALS), &parse(CONFIG)).expect(name);
        let expected: Section = settings
            .iter()
            .map(|&(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        assert_eq!(merged, expected, "profile {name}");
    }

    #[test]
    fn the_default_profile_comes_from_both_files() {
        assert_profile(
            "default",
            &[
                ("aws_access_key_id", "AKIADEFAULT"),
                ("aws_secret_access_key", "default/secret+key"),
                ("region", "eu-west-1"),
            ],
        );
    }

    #[test]
    fn credentials_win_comments_go_and_services_give_the_endpoint() {
        assert_profile(
            "dev",
            &[
                ("aws_access_key_id", "AKIADEV"),
                ("aws_secret_access_key", "dev-secret"),
                // '#' not after whitespace is part of the value.
                ("aws_session_token", "tok#en=="),
                ("region", "us-west-2"),
                ("ca_bundle", "/etc/ssl/dev.pem"),
                // `s3 =` heads its nested settings and stays, empty.
                ("s3", ""),
                ("s3.addressing_style", "path"),
                ("services", "local-s3"),
                ("services.s3.endpoint_url", "http://127.0.0.1:9000"),
            ],
        );
    }

    #[test]
    fn unknown_and_malformed_profiles() {
        let (credentials, config) = (parse(CREDENTIALS), parse(CONFIG));
        assert!(profile("nope", &credentials, &config).is_none());
        let sso = profile("sso", &credentials, &config).expect("sso");
        assert_eq!(sso["sso_session"], "corp");
        // An unterminated section header starts no section: its lines
        // belong nowhere.
        assert!(!config
            .values()
            .any(|s| s.get("region").is_some_and(|r| r == "nowhere")));
    }

    #[test]
    fn a_default_profile_may_be_spelled_profile_default_in_config() {
        let config = parse("[profile default]\nregion = ap-south-1\n");
        let p = profile("default", &Sections::new(), &config).expect("default");
        assert_eq!(p["region"], "ap-south-1");
    }
}
