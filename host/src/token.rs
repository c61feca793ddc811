//! Secrets a door is shown — bearer tokens, viewer session ids, CSRF
//! tokens — handled one way at every door: only a SHA-256 digest is kept,
//! digests are compared in constant time, and a lookup compares every
//! candidate, so neither the time taken nor the answer says which came
//! close. `bearer` reads `Authorization: Bearer <token>`.

use axum::http::{HeaderMap, header};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// The digest a secret is kept as.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether two digests are the same, in time independent of where they
/// differ.
pub fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.ct_eq(b).into()
}

/// Whether `given` is the secret kept as `kept`.
pub fn matches(kept: &[u8; 32], given: &str) -> bool {
    same_digest(kept, &digest(given))
}

/// Whether two texts are equal, in time independent of where they differ
/// (their lengths are not secret).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// What `known` keeps under `given`'s digest; every entry is compared.
pub fn find<'a, T>(known: impl IntoIterator<Item = &'a ([u8; 32], T)>, given: &str) -> Option<&'a T>
where
    T: 'a,
{
    let given = digest(given);
    let mut found = None;
    for (kept, value) in known {
        if same_digest(kept, &given) {
            found = Some(value);
        }
    }
    found
}

/// The credentials of `Authorization: Bearer <token>`, if that is sent.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_found_by_its_digest_and_only_by_it() {
        let known = vec![
            (digest("alice-secret"), "alice"),
            (digest("bob-secret"), "bob"),
        ];
        assert_eq!(find(&known, "bob-secret"), Some(&"bob"));
        assert_eq!(find(&known, "bob-secret "), None);
        assert!(matches(&digest("x"), "x") && !matches(&digest("x"), "y"));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }

    #[test]
    fn only_a_bearer_scheme_is_read() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "bearer  t0k ".parse().unwrap());
        assert_eq!(bearer(&headers), Some("t0k"));
        headers.insert(header::AUTHORIZATION, "Basic dXNlcg==".parse().unwrap());
        assert_eq!(bearer(&headers), None);
    }
}
