//! The first claim of a resume in the SQL stores, one rule written once
//! per dialect: a row is claimed only while `resumed_at_ns` is unset (never
//! claimed), and only when its stored document names neither claim key; the
//! claim then sets `resumed_at_ns` and appends `"resumedAt"` and
//! `"resumeLeaseUntil"` ([`claim_members`]) to the document without
//! decoding it. A row the rule does not take is either claimed already
//! (`ABORTED`), missing (`NOT_FOUND`), or an unclaimed row whose document
//! names a claim key, which the store claims through its general path
//! (decode, [`apply_claim`](holdpoint::session::apply_claim), write back
//! whole). A takeover of a lapsed claim always takes the general path.

use chrono::{DateTime, Utc};
use holdpoint::{Error, Result};

/// SQLite's claim of row `?1`: its document `?2` (the stored one with
/// [`with_claim_members`] applied) and `resumed_at_ns` `?3`, only while
/// unclaimed. One row changed when the claim took, none otherwise.
pub const SQLITE_CLAIM: &str =
    "UPDATE holdpoint_snapshots SET data = ?2, resumed_at_ns = ?3 WHERE snapshot_id = ?1 AND resumed_at_ns IS NULL";

/// PostgreSQL's claim of one row of a group-commit batch, as the body of
/// `holdpoint_claim` (migration 3) runs it for the batch's `i`th claim:
/// the members are appended in SQL, and the document test of
/// [`with_claim_members`] is repeated as `strpos` terms. The migration
/// that defines the function is checked to carry exactly this statement.
pub const POSTGRES_CLAIM: &str = "UPDATE holdpoint_snapshots \
       SET resumed_at_ns = p_at_ns[i], \
           data = (left(data::text, -1) || ',' || p_members[i] || '}')::json \
     WHERE snapshot_id = p_ids[i] AND resumed_at_ns IS NULL \
       AND strpos(data::text, '\"resumedAt\"') = 0 \
       AND strpos(data::text, '\"resumeLeaseUntil\"') = 0";

/// PostgreSQL's question after a claim of row `$1` did not take: whether
/// the row was claimed before (no row: it is missing).
pub const POSTGRES_CLAIMED: &str = "SELECT resumed_at_ns IS NOT NULL FROM holdpoint_snapshots WHERE snapshot_id = $1";

/// The members a first claim adds to a stored document,
/// `"resumedAt":…,"resumeLeaseUntil":…` (no braces), the times written as
/// the row's encoder writes them.
pub fn claim_members(at: DateTime<Utc>, lease_until: DateTime<Utc>) -> Result<String> {
    let json =
        |t: &DateTime<Utc>| serde_json::to_string(t).map_err(|e| Error::Internal(format!("encode a claim time: {e}")));
    Ok(format!(
        "\"resumedAt\":{},\"resumeLeaseUntil\":{}",
        json(&at)?,
        json(&lease_until)?
    ))
}

/// The stored document `data` with a first claim's `members` (see
/// [`claim_members`]) appended, without decoding it; `None` when it cannot
/// take them as they are: not an object ending in `}`, or already naming
/// either claim key (the result would repeat a key), and the row is to be
/// claimed whole.
pub fn with_claim_members(data: &str, members: &str) -> Option<String> {
    let body = data.trim_end().strip_suffix('}')?;
    let body = body.trim_end();
    if !data.trim_start().starts_with('{')
        || body.ends_with('{')
        || data.contains("\"resumedAt\"")
        || data.contains("\"resumeLeaseUntil\"")
    {
        return None;
    }
    let mut out = String::with_capacity(body.len() + members.len() + 2);
    out.push_str(body);
    out.push(',');
    out.push_str(members);
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests {
    use holdpoint::model::FinishReason;
    use holdpoint::session::{SessionState, Snapshot};

    use super::*;
    use crate::row::{Columns, decode};

    #[test]
    fn a_claim_appended_to_a_document_decodes_as_the_claimed_row() {
        let mut row = Snapshot::new(SessionState::new("s"));
        row.snapshot_id = "id".into();
        row.finish_reason = Some(FinishReason::Interrupted);
        let data = Columns::of(&row).unwrap().data;
        let at = Utc::now();
        let until = at + chrono::Duration::seconds(60);
        let members = claim_members(at, until).unwrap();
        let claimed = with_claim_members(&data, &members).unwrap();
        let mut expected = row.clone();
        expected.resumed_at = Some(at);
        expected.resume_lease_until = Some(until);
        assert_eq!(decode("id", &claimed).unwrap(), expected);
        // A document that names a claim key, or is no object, is claimed whole.
        assert_eq!(with_claim_members(&claimed, &members), None);
        let mut leased = row;
        leased.resume_lease_until = Some(until);
        let leased = Columns::of(&leased).unwrap().data;
        assert_eq!(with_claim_members(&leased, &members), None);
        assert_eq!(with_claim_members("{}", &members), None);
        assert_eq!(with_claim_members("[1]", &members), None);
    }
}
