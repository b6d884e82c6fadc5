//! Keeping credentials out of every text the object ends produce.
//!
//! A secret key, a session token, a password in a URL or a presigned
//! URL's signature must never reach a message, `--verbose`, the progress
//! JSON or a `Debug` print. Two guards: [`Secret`] holds a value whose
//! `Debug` prints stars (and which has no `Display`), and [`Redactor`]
//! knows every secret an end was built with and blanks it out of any text
//! before the text leaves the module: a server's error body can quote a
//! request back (S3's SignatureDoesNotMatch quotes the canonical request,
//! session token included), and the crate's error texts quote URLs.

use std::fmt;
use std::sync::Arc;

/// A value that must not be shown: `Debug` prints `***`, and there is no
/// `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the one place that needs it (the store's
    /// builder).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// What replaces a secret in a text.
const BLANK: &str = "***";

/// Secrets shorter than this are not blanked: a two-letter password would
/// blank every occurrence of those letters in a message, and is no secret
/// worth the name anyway.
const SHORTEST: usize = 4;

/// Blanks a known set of secrets out of texts. Cheap to clone.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<String>>,
}

impl Redactor {
    /// A redactor for `secrets`, each also in its percent-encoded forms
    /// (how a token or a signature appears inside a URL).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Redactor {
        let mut all: Vec<String> = Vec::new();
        for secret in secrets {
            if secret.len() < SHORTEST {
                continue;
            }
            all.push(secret.to_owned());
            all.push(percent_encoding::utf8_percent_encode(secret, STRICT).to_string());
            all.push(
                percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        // Longest first, so that a secret containing another is blanked
        // whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        all.dedup();
        Redactor {
            secrets: Arc::new(all),
        }
    }

    /// `text` with every secret replaced by `***`. Until none is left:
    /// blanking one can make another out of the stars and what was
    /// around it. (Each pass shortens the text, a secret being longer
    /// than the blank, so this ends.)
    pub fn clean(&self, text: &str) -> String {
        let mut text = text.to_owned();
        loop {
            let mut blanked = false;
            for secret in self.secrets.iter() {
                if text.contains(secret.as_str()) {
                    text = text.replace(secret.as_str(), BLANK);
                    blanked = true;
                }
            }
            if !blanked {
                return text;
            }
        }
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} forms)", self.secrets.len())
    }
}

/// The characters a URL query or path escapes in practice (what S3's
/// signing and reqwest encode): everything but the unreserved set.
const STRICT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_blanked_in_plain_and_encoded_forms() {
        let token = "FwoGZX/IvYXdz+EBo=";
        let redactor = Redactor::new(["wJalrXUtnFEMI/K7MDENG", token]);
        let text = format!(
            "denied: secret wJalrXUtnFEMI/K7MDENG, header {token}, url ?X-Amz-Security-Token={}",
            percent_encoding::utf8_percent_encode(token, STRICT)
        );
        let clean = redactor.clean(&text);
        assert!(!clean.contains("wJalrXUtnFEMI"), "{clean}");
        assert!(!clean.contains("FwoGZX"), "{clean}");
        assert_eq!(clean.matches(BLANK).count(), 3, "{clean}");
    }

    #[test]
    fn a_secret_made_by_blanking_another_is_blanked_too() {
        // Longest first: "x***y" is looked for before "abcd" is blanked.
        let redactor = Redactor::new(["x***y", "abcd"]);
        assert_eq!(redactor.clean("xabcdy"), BLANK);
    }

    #[test]
    fn a_secret_prints_as_stars() {
        let secret = Secret::new("hunter2hunter2");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(secret.expose(), "hunter2hunter2");
    }

    #[test]
    fn very_short_values_are_not_treated_as_secrets() {
        let redactor = Redactor::new(["ab"]);
        assert_eq!(redactor.clean("abc"), "abc");
    }
}
