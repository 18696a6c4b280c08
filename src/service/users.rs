//! Users as the store keeps them: the scheduler's user name, or — where a site's
//! configuration asks (`user_key = "hmac"`) — a keyed hash of it (HMAC-SHA256, RFC 2104,
//! with a secret from the environment), so that a copy of the store names nobody. The
//! engine only tells users apart (how many of a job's own jobs are pending ahead of
//! it); no answer ever shows a key.
//!
//! May import: std, sha2, the crate's config types.

use sha2::{Digest, Sha256};

use crate::config::UserKeyRule;

/// SHA-256's block size, bytes.
const BLOCK: usize = 64;

/// How one site's user names become keys.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum UserKeys {
    /// The name itself.
    #[default]
    Name,
    /// HMAC-SHA256 of the name under this secret, as 32 hex digits (its first 128 bits:
    /// collisions among a machine's users are out of reach, 2⁻⁶⁴ for 4 billion users).
    Hmac(Vec<u8>),
}

impl std::fmt::Debug for UserKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is never written out.
        f.write_str(match self {
            UserKeys::Name => "Name",
            UserKeys::Hmac(_) => "Hmac(…)",
        })
    }
}

impl UserKeys {
    /// The rule of a site's configuration, reading the secret with `env`; `Err` names
    /// what is missing.
    pub fn from_rule(
        rule: UserKeyRule,
        secret_env: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        match rule {
            UserKeyRule::Name => Ok(UserKeys::Name),
            UserKeyRule::Hmac => {
                let var = secret_env.ok_or("user_key = \"hmac\" needs user_key_secret_env")?;
                match env(var) {
                    Some(s) if s.len() >= 16 => Ok(UserKeys::Hmac(s.into_bytes())),
                    Some(_) => Err(format!("the secret in {var} is shorter than 16 bytes")),
                    None => Err(format!(
                        "environment variable {var} (the user key secret) is not set"
                    )),
                }
            }
        }
    }

    /// The key stored for user `name`.
    pub fn key(&self, name: &str) -> String {
        match self {
            UserKeys::Name => name.to_string(),
            UserKeys::Hmac(secret) => hmac_sha256(secret, name.as_bytes())[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }
}

/// HMAC-SHA256 (RFC 2104).
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 and test case 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn keys_follow_the_rule_and_refuse_what_is_missing() {
        let env = |v: &str| (v == "QBETS_KEY").then(|| "a secret of 24 bytes....".to_string());
        let name = UserKeys::from_rule(UserKeyRule::Name, None, env).unwrap();
        assert_eq!(name.key("alice"), "alice");
        let h = UserKeys::from_rule(UserKeyRule::Hmac, Some("QBETS_KEY"), env).unwrap();
        let (a, b) = (h.key("alice"), h.key("bob"));
        assert_eq!(a.len(), 32);
        assert!(a != b && a == h.key("alice") && !a.contains("alice"));
        assert_eq!(format!("{h:?}"), "Hmac(…)");
        assert!(UserKeys::from_rule(UserKeyRule::Hmac, None, env).is_err());
        let unset = UserKeys::from_rule(UserKeyRule::Hmac, Some("NOPE"), env).unwrap_err();
        assert!(unset.contains("NOPE"), "{unset}");
    }
}
