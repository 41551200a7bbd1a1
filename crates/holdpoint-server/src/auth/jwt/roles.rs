//! Roles from a token's claims: an array of role names under a configured
//! claim name or dotted path.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::names::check_name;
use super::{AuthError, unauthenticated};

/// The most roles taken from one token; more refuse it.
pub const MAX_ROLES: usize = 64;

/// The longest role name accepted from a token, in bytes.
pub const MAX_ROLE_BYTES: usize = 128;

/// The claim's value: the exact name first (claim names such as
/// `https://example.com/roles` hold dots), else the dotted path.
fn lookup<'a>(claims: &'a Map<String, Value>, claim: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(claim) {
        return Some(value);
    }
    let mut parts = claim.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// The roles `claims` carry under `claim` (none when it is absent).
pub(super) fn roles_of(claims: &Map<String, Value>, claim: &str) -> Result<BTreeSet<String>, AuthError> {
    let shape = || unauthenticated(format!("bearer token claim `{claim}` must be an array of role names"));
    let Some(value) = lookup(claims, claim) else {
        return Ok(BTreeSet::new());
    };
    let Value::Array(items) = value else {
        return Err(shape());
    };
    if items.len() > MAX_ROLES {
        return Err(unauthenticated(format!(
            "bearer token claim `{claim}` names more than {MAX_ROLES} roles"
        )));
    }
    let mut roles = BTreeSet::new();
    for item in items {
        let role = item.as_str().ok_or_else(shape)?;
        check_name(role, claim, MAX_ROLE_BYTES)?;
        roles.insert(role.to_owned());
    }
    Ok(roles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn exact_names_then_dotted_paths() {
        let c = claims(json!({"roles": ["finance", "ops"], "realm_access": {"roles": ["cfo"]},
            "https://x.example/roles": ["a"]}));
        assert_eq!(roles_of(&c, "roles").unwrap().len(), 2);
        assert_eq!(
            roles_of(&c, "realm_access.roles")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            ["cfo"]
        );
        assert_eq!(roles_of(&c, "https://x.example/roles").unwrap().len(), 1);
        assert!(roles_of(&c, "missing.path").unwrap().is_empty());
        assert!(roles_of(&claims(json!({"roles": "finance"})), "roles").is_err());
        assert!(roles_of(&claims(json!({"roles": [1]})), "roles").is_err());
        assert!(roles_of(&claims(json!({"roles": ["a\u{202e}b"]})), "roles").is_err());
    }
}
