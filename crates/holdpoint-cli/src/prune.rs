//! `holdpoint prune`: deletes the sessions that are over and older than a
//! cutoff, in bounded steps (docs/reference.md §11.4), straight from the
//! store.

use chrono::{DateTime, Utc};
use clap::Args;
use holdpoint::session::{MAX_PRUNE_BATCH, PruneOutcome, PruneRequest};
use serde::Serialize;

use crate::backend::Backend;
use crate::error::CliError;
use crate::output::{print, print_json, time};

/// `prune`'s options.
#[derive(Args, Debug, Clone)]
pub struct PruneArgs {
    /// How old a session's last change must be: a count and a unit, `s`,
    /// `m`, `h`, `d` or `w` (e.g. `30d`).
    #[arg(long, value_parser = parse_age)]
    pub older_than: chrono::Duration,
    /// Also delete the pruned sessions' audit records (kept by default).
    #[arg(long)]
    pub audit: bool,
    /// Count what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Sessions examined per step (each step is one short transaction).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=MAX_PRUNE_BATCH as i64))]
    pub batch: u32,
}

/// `--older-than`: a positive count and a unit (`s`, `m`, `h`, `d`, `w`).
pub fn parse_age(text: &str) -> Result<chrono::Duration, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text}: give a unit, e.g. 30d (s, m, h, d or w)"))?;
    let (count, unit) = text.split_at(unit_at);
    let count: i64 = count
        .parse()
        .map_err(|_| format!("{text}: expected a count then a unit, e.g. 30d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("{text}: unknown unit {unit:?} (s, m, h, d or w)")),
    };
    count
        .checked_mul(seconds)
        .filter(|s| *s > 0 && *s <= 100 * 365 * 86_400)
        .map(chrono::Duration::seconds)
        .ok_or_else(|| format!("{text}: expected an age from 1s to 100 years"))
}

/// What `prune --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Pruned {
    dry_run: bool,
    older_than: DateTime<Utc>,
    examined: u64,
    sessions: u64,
    snapshots: u64,
    audit_records: u64,
}

/// Walks the whole store in steps of `args.batch` sessions.
pub async fn prune(args: PruneArgs, backend: &Backend, agent: Option<&str>, json: bool) -> Result<(), CliError> {
    let Backend::Store(store) = backend else {
        return Err(CliError::Usage(
            "prune: open the store with --store (a server does not prune over HTTP)".into(),
        ));
    };
    if agent.is_some() {
        return Err(CliError::Usage(
            "prune: --agent is not supported; prune applies to every session in the store".into(),
        ));
    }
    let older_than = Utc::now() - args.older_than;
    let mut total = PruneOutcome::default();
    let mut after: Option<String> = None;
    loop {
        let request = PruneRequest {
            older_than,
            audit: args.audit,
            dry_run: args.dry_run,
            batch: args.batch as usize,
            after: after.take(),
        };
        let step = store.store.capabilities().prune()?.prune_sessions(&request).await?;
        total.add(&step);
        // Each step examines sessions after the last one the step before
        // examined, so the walk ends after one pass over the store.
        match step.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let out = Pruned {
        dry_run: args.dry_run,
        older_than,
        examined: total.examined,
        sessions: total.sessions,
        snapshots: total.snapshots,
        audit_records: total.audit_records,
    };
    if json {
        return Ok(print_json(&out)?);
    }
    let verb = if args.dry_run { "would delete" } else { "deleted" };
    let audit = if args.audit {
        format!(", {} audit records", out.audit_records)
    } else {
        String::new()
    };
    Ok(print(&format!(
        "{verb} {} sessions ({} snapshots{audit}) last changed before {}; {} sessions examined",
        out.sessions,
        out.snapshots,
        time(older_than),
        out.examined
    ))?)
}

#[cfg(test)]
mod tests {
    use super::parse_age;

    #[test]
    fn ages_need_a_positive_count_and_a_known_unit() {
        assert_eq!(parse_age("30d"), Ok(chrono::Duration::days(30)));
        assert_eq!(parse_age("2w"), Ok(chrono::Duration::weeks(2)));
        assert_eq!(parse_age("90m"), Ok(chrono::Duration::minutes(90)));
        for bad in ["30", "d", "0d", "30x", "-1d", "99999999999999w", ""] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
