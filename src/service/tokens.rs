//! API tokens: a 256-bit random secret shown once, stored as its SHA-256 hash, and
//! checked by comparing hashes in constant time.
//!
//! A token reads `qbets_` followed by 64 hex digits. The first 8 digits are stored
//! as a lookup prefix (32 of the 256 bits: knowing them does not help guess the rest);
//! every candidate row with that prefix is compared, without stopping early.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::store::{ApiToken, NewApiToken, Scope, Store, StoreError, StoreResult};

/// What every token starts with (so that it can be recognised in a leaked file).
pub const TOKEN_PREFIX: &str = "qbets_";
/// Hex digits of the secret stored for lookup.
const LOOKUP_LEN: usize = 8;

/// A token's secret, as printed once to its owner. Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The token text, to print once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Makes a new token: the secret to give out and the record to store.
pub fn generate(name: &str, scope: Scope) -> (Secret, NewApiToken) {
    let mut bytes = [0u8; 32];
    // The thread RNG is a CSPRNG seeded from the operating system.
    rand::fill(&mut bytes);
    let hex = to_hex(&bytes);
    let text = format!("{TOKEN_PREFIX}{hex}");
    let record = NewApiToken {
        name: name.to_string(),
        scope,
        prefix: hex[..LOOKUP_LEN].to_string(),
        hash: hash(&text),
    };
    (Secret(text), record)
}

/// Creates and stores a token; returns the secret (to print once) and the stored row.
pub async fn create<S: Store>(
    store: &S,
    name: &str,
    scope: Scope,
) -> StoreResult<(Secret, ApiToken)> {
    // The name is what reservations are owned by and what `token list` shows.
    super::check_name(name).map_err(|e| StoreError::Invalid(format!("token name {e}")))?;
    let (secret, record) = generate(name, scope);
    let stored = store.insert_token(&record).await?;
    Ok((secret, stored))
}

/// The stored token a presented text belongs to, if any. Malformed text is simply not
/// a token (no error tells an attacker why).
pub async fn verify<S: Store>(store: &S, presented: &str) -> StoreResult<Option<ApiToken>> {
    let Some(hex) = presented.strip_prefix(TOKEN_PREFIX) else {
        return Ok(None);
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let candidates = store.tokens_with_prefix(&hex[..LOOKUP_LEN]).await?;
    let presented_hash = hash(presented);
    let mut found = None;
    for token in candidates {
        // Compare every candidate fully; the match is remembered, not returned early.
        if bool::from(token.hash.as_slice().ct_eq(presented_hash.as_slice())) {
            found = Some(token);
        }
    }
    Ok(found)
}

/// SHA-256 of the text (also the digest of keyed reservation requests).
pub(crate) fn hash(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

/// Lower-case hex, two digits per byte.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex_and_stored_only_as_hashes() {
        let (a, rec_a) = generate("a", Scope::Read);
        let (b, _) = generate("b", Scope::Read);
        assert_ne!(a, b);
        let text = a.expose();
        assert!(text.starts_with("qbets_"));
        assert_eq!(text.len(), 6 + 64);
        assert_eq!(rec_a.prefix, text[6..14]);
        assert_eq!(rec_a.hash, hash(text));
        assert_eq!(rec_a.hash.len(), 32);
        assert!(!format!("{a:?}").contains(&text[6..]));
    }

    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(to_hex(&[0, 15, 16, 255]), "000f10ff");
    }

    #[test]
    fn sha256_matches_the_standard_vector() {
        assert_eq!(
            to_hex(&hash("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
