//! `GET /inbox` and `GET /audit`: the approver's queue and the audit trail
//! across every agent the caller may use, filtered, sorted and paged on a
//! cursor, with the true total (docs/reference.md §12.8).
//!
//! Both walk every row the caller may see (up to [`SCAN_LIMIT`] per agent;
//! beyond it the answer says `truncated`, never a silent cap), filter and
//! sort them, and return one page. The cursor is the sort key of the last
//! item of a page: the next page starts strictly after it, so holds that
//! arrive or go between two pages neither repeat nor push others out.
//!
//! The cursor, the agents a listing reads and the page size are here;
//! each listing is in its own submodule ([`queue`], [`audit`]).

mod audit;
mod queue;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use holdpoint::agent::Agent;

use crate::auth::Identity;
use crate::error::ApiError;
use crate::state::AppState;

pub(crate) use audit::audit;
pub(crate) use queue::inbox;

/// How many rows of one agent a listing reads at most before it answers
/// `truncated: true`.
pub(crate) const SCAN_LIMIT: usize = 100_000;

/// A page size when none is asked for.
const DEFAULT_PAGE: usize = 50;

fn encode_cursor(key: &(i64, i64, String)) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}\u{1e}{}\u{1e}{}", key.0, key.1, key.2))
}

/// The position a listing's `cursor` names (`None`: from the start).
fn after_cursor(cursor: Option<&str>) -> Result<Option<(i64, i64, String)>, ApiError> {
    cursor.filter(|c| !c.is_empty()).map(decode_cursor).transpose()
}

fn decode_cursor(cursor: &str) -> Result<(i64, i64, String), ApiError> {
    let bad = || ApiError::invalid("cursor: not a cursor this listing gave out");
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '\u{1e}');
    let expires = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let held = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let id = parts.next().ok_or_else(bad)?.to_owned();
    Ok((expires, held, id))
}

/// The agents of `caller` that `only` (an agent name, if any) selects:
/// 404 for an unknown one, 403 for one outside the caller's scope.
fn agents_of<'a>(state: &'a AppState, caller: &Identity, only: Option<&str>) -> Result<Vec<&'a Agent>, ApiError> {
    match only.filter(|a| !a.is_empty()) {
        Some(name) => Ok(vec![state.agent(caller, name)?]),
        None => Ok(state
            .agents()
            .values()
            .filter(|a| a.is_server_managed() && caller.scope.allows(a.name()))
            .collect()),
    }
}

fn page_size(state: &AppState, limit: Option<usize>) -> usize {
    limit.unwrap_or(DEFAULT_PAGE).clamp(1, state.limits().max_list)
}
