//! The `[[approval.rules]]` section: approvers, quorum and timers, checked
//! straight into the core's [`RuleSpec`] (its timers the core's
//! [`HoldTimers`], the type a hold's deadlines are stamped from).

use std::collections::BTreeSet;

use holdpoint::approval::RuleSpec;
use holdpoint::session::{HoldTimers, OnExpire};
use toml::Spanned;

use super::Checker;
use crate::config::error::{ConfigError, ConfigErrorKind as K};
use crate::config::raw::*;

/// What a rule lets the approver see and answer with.
struct Review {
    deny_reasons: Vec<String>,
    redact: Vec<String>,
    max_review_bytes: Option<usize>,
}

impl Checker<'_, '_> {
    pub(super) fn rules(
        &self,
        raw: &[Spanned<RawRule>],
        roles: &BTreeSet<String>,
    ) -> Result<Vec<RuleSpec>, ConfigError> {
        let mut out = Vec::new();
        for (i, rule) in raw.iter().enumerate() {
            let r = rule.get_ref();
            let p = format!("approval.rules[{i}]");
            self.declared(r.approvers.get_ref(), &format!("{p}.approvers"), roles)?;
            let quorum = match &r.quorum {
                None => 1,
                Some(q) => u32::try_from(*q.get_ref()).ok().filter(|n| *n >= 1).ok_or_else(|| {
                    self.err(
                        q,
                        format!("{p}.quorum"),
                        K::Invalid,
                        "must be a whole number, at least 1",
                    )
                })?,
            };
            let timers = self.timers(r, &p, roles)?;
            let Review {
                deny_reasons,
                redact,
                max_review_bytes,
            } = self.review(r, &p)?;
            let spec = RuleSpec {
                name: r.name.as_ref().map(|n| n.get_ref().clone()),
                agent: r.agent.as_ref().map(|n| n.get_ref().clone()),
                tool: r.tool.as_ref().map(|n| n.get_ref().clone()),
                when: r.when.as_ref().map(|n| n.get_ref().clone()),
                approvers: r.approvers.get_ref().iter().map(|s| s.get_ref().clone()).collect(),
                quorum,
                // docs/reference.md §10.5: the owner may answer its own
                // holds unless a rule says otherwise.
                self_approval: r.self_approval.unwrap_or(true),
                timers,
                confirm: r.confirm.unwrap_or(false),
                deny_reasons,
                reason_required: r.reason_required.unwrap_or(false),
                redact,
                max_review_bytes,
                require_preview: r.require_preview.unwrap_or(false),
            };
            out.push(spec);
        }
        Ok(out)
    }

    /// `remind_after`, `escalate_after` with `escalate_to` (both or
    /// neither), `expire_after` and its `on_expire`.
    fn timers(&self, r: &RawRule, p: &str, roles: &BTreeSet<String>) -> Result<HoldTimers, ConfigError> {
        let remind_after = self.duration(&r.remind_after, format!("{p}.remind_after"))?;
        let escalate_after = self.duration(&r.escalate_after, format!("{p}.escalate_after"))?;
        let expire_after = self.duration(&r.expire_after, format!("{p}.expire_after"))?;
        let escalate_to = match &r.escalate_to {
            Some(to) => {
                self.declared(to.get_ref(), &format!("{p}.escalate_to"), roles)?;
                if to.get_ref().is_empty() {
                    return Err(self.err(to, format!("{p}.escalate_to"), K::Invalid, "name at least one role"));
                }
                to.get_ref().iter().map(|s| s.get_ref().clone()).collect()
            }
            None => Vec::new(),
        };
        match (&r.escalate_after, &r.escalate_to) {
            (Some(after), None) => {
                return Err(self.err(
                    after,
                    format!("{p}.escalate_after"),
                    K::Invalid,
                    "needs `escalate_to` (the roles that may answer after it)",
                ));
            }
            (None, Some(to)) => {
                return Err(self.err(
                    to,
                    format!("{p}.escalate_to"),
                    K::Invalid,
                    "needs `escalate_after` (when those roles are added)",
                ));
            }
            _ => {}
        }
        let on_expire = match &r.on_expire {
            None => OnExpire::Expire,
            Some(o) => {
                if r.expire_after.is_none() {
                    return Err(self.err(o, format!("{p}.on_expire"), K::Invalid, "needs `expire_after`"));
                }
                OnExpire::parse(o.get_ref()).ok_or_else(|| {
                    self.err(
                        o,
                        format!("{p}.on_expire"),
                        K::Invalid,
                        "must be \"deny\" or \"expire\"",
                    )
                })?
            }
        };
        Ok(HoldTimers {
            remind_after,
            escalate_after,
            escalate_to,
            expire_after,
            on_expire,
        })
    }

    /// What the approver is shown and may answer: `deny_reasons` (none
    /// empty), `redact`, `max_review_bytes` (positive).
    fn review(&self, r: &RawRule, p: &str) -> Result<Review, ConfigError> {
        let deny_reasons: Vec<String> = r
            .deny_reasons
            .as_ref()
            .map(|v| v.get_ref().iter().map(|s| s.get_ref().trim().to_owned()).collect())
            .unwrap_or_default();
        if let Some(v) = &r.deny_reasons
            && deny_reasons.iter().any(String::is_empty)
        {
            return Err(self.err(v, format!("{p}.deny_reasons"), K::Invalid, "no reason may be empty"));
        }
        let redact: Vec<String> = r
            .redact
            .as_ref()
            .map(|v| v.get_ref().iter().map(|s| s.get_ref().trim().to_owned()).collect())
            .unwrap_or_default();
        let max_review_bytes = match &r.max_review_bytes {
            None => None,
            Some(n) => match usize::try_from(*n.get_ref()) {
                Ok(bytes) if bytes > 0 => Some(bytes),
                _ => {
                    return Err(self.err(
                        n,
                        format!("{p}.max_review_bytes"),
                        K::Invalid,
                        "must be a positive number of bytes",
                    ));
                }
            },
        };
        Ok(Review {
            deny_reasons,
            redact,
            max_review_bytes,
        })
    }
}
