//! Rules and the ordered policy that picks the first matching one.

use serde_json::{Map, Value};

use crate::hold::{Condition, ConditionError};
use crate::session::HoldTimers;

/// The shape of one approval rule as configured (a `[[approval.rules]]`
/// table): plain data, checked by [`Policy::new`]. Its default is the
/// configuration file's: quorum 1, self-approval on, no timers.
///
/// ```
/// use holdpoint::approval::{Policy, RuleSpec};
///
/// // `[[approval.rules]]` with tool = "transferMoney", when = "input.amount > 10000",
/// // approvers = ["finance"], quorum = 2, self_approval = false:
/// let large = RuleSpec {
///     name: Some("large transfers".into()),
///     tool: Some("transferMoney".into()),
///     when: Some("input.amount > 10000".into()),
///     approvers: vec!["finance".into()],
///     quorum: 2,
///     self_approval: false,
///     ..RuleSpec::default()
/// };
/// // The rest as the file leaves it: every agent, one approver, the owner may answer.
/// let plain = RuleSpec::default();
/// assert_eq!((plain.agent, plain.quorum, plain.self_approval), (None, 1, true));
/// assert!(Policy::new([large]).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// A name for errors, listings and the audit (defaults to `rule N`).
    pub name: Option<String>,
    /// The agent it covers (a name or a pattern with `*`); `None`: every agent.
    pub agent: Option<String>,
    /// The tool it covers (a name or a pattern with `*`); `None`: every tool.
    pub tool: Option<String>,
    /// A CEL condition over the call; `None`: always.
    pub when: Option<String>,
    /// The roles that may see and answer the holds it covers.
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve (at least 1).
    pub quorum: u32,
    /// Whether the session's owner may answer its own holds.
    pub self_approval: bool,
    /// Reminder, escalation and expiry of its holds, stamped on each hold
    /// and fired from the store's outbox (docs/reference.md §11.3).
    pub timers: HoldTimers,
    /// Whether approving one of its holds asks the approver to confirm
    /// first (a rule for large amounts); stamped on the hold, the page
    /// asks (docs/reference.md §10.5).
    pub confirm: bool,
    /// Reasons an approver may pick when denying its holds (presets; a
    /// reason of one's own stays possible).
    pub deny_reasons: Vec<String>,
    /// Whether a denial of its holds must give a reason
    /// (`INVALID_ARGUMENT` without one).
    pub reason_required: bool,
    /// Paths of the input every surface masks for its holds
    /// (docs/reference.md §22.1), besides the tool's own.
    pub redact: Vec<String>,
    /// A hold whose input is larger than this many bytes (as JSON) is
    /// not approvable as is: only a denial or an edit answers it
    /// (docs/reference.md §22.3).
    pub max_review_bytes: Option<usize>,
    /// Whether a hold the tool cannot fully preview (no preview, a failed
    /// one, or one that names parts it cannot show) is not approvable as is.
    pub require_preview: bool,
}

impl Default for RuleSpec {
    fn default() -> Self {
        RuleSpec {
            name: None,
            agent: None,
            tool: None,
            when: None,
            approvers: Vec::new(),
            quorum: 1,
            self_approval: true,
            timers: HoldTimers::default(),
            confirm: false,
            deny_reasons: Vec::new(),
            reason_required: false,
            redact: Vec::new(),
            max_review_bytes: None,
            require_preview: false,
        }
    }
}

/// Which field of a [`RuleSpec`] a [`PolicyError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyField {
    /// `agent`.
    Agent,
    /// `tool`.
    Tool,
    /// `when`.
    When,
    /// `approvers`.
    Approvers,
    /// `quorum`.
    Quorum,
    /// `redact`.
    Redact,
}

impl PolicyField {
    /// The configuration key.
    pub fn key(self) -> &'static str {
        match self {
            PolicyField::Agent => "agent",
            PolicyField::Tool => "tool",
            PolicyField::When => "when",
            PolicyField::Approvers => "approvers",
            PolicyField::Quorum => "quorum",
            PolicyField::Redact => "redact",
        }
    }
}

/// A rule that cannot be built: which one (0-based), which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval rule {} (`{}`): {message}", .rule + 1, .field.key())]
pub struct PolicyError {
    /// The rule's position in the list (0-based).
    pub rule: usize,
    /// The field at fault.
    pub field: PolicyField,
    /// What is wrong.
    pub message: String,
}

impl From<PolicyError> for crate::Error {
    /// A rule that cannot be built is bad input: `INVALID_ARGUMENT`, with
    /// the rule, the field and why.
    fn from(e: PolicyError) -> Self {
        crate::Error::InvalidArgument(e.to_string())
    }
}

/// A name or a glob with `*` (any run of characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern(String);

impl NamePattern {
    /// A pattern; `*` matches any run of characters.
    pub fn new(pattern: impl Into<String>) -> Self {
        NamePattern(pattern.into())
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        glob(self.0.as_bytes(), name.as_bytes())
    }
}

/// Iterative glob match with `*` only; linear backtracking on the last star.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A checked rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its name (configured, or `rule N`).
    pub name: String,
    /// The agent pattern; `None`: every agent.
    pub agent: Option<NamePattern>,
    /// The tool pattern; `None`: every tool.
    pub tool: Option<NamePattern>,
    /// The condition; `None`: always.
    pub when: Option<Condition>,
    /// The roles that may see and answer its holds.
    pub approvers: Vec<String>,
    /// Distinct approvals needed.
    pub quorum: u32,
    /// Whether the owner may answer.
    pub self_approval: bool,
    /// The timers stamped on its holds.
    pub timers: HoldTimers,
    /// Whether an approval asks for confirmation ([`RuleSpec::confirm`]).
    pub confirm: bool,
    /// Preset denial reasons ([`RuleSpec::deny_reasons`]).
    pub deny_reasons: Vec<String>,
    /// Whether a denial needs a reason ([`RuleSpec::reason_required`]).
    pub reason_required: bool,
    /// Paths its holds mask ([`RuleSpec::redact`]), checked.
    pub redact: crate::review::Redaction,
    /// The largest input approvable as is ([`RuleSpec::max_review_bytes`]).
    pub max_review_bytes: Option<usize>,
    /// Whether its holds need a full preview ([`RuleSpec::require_preview`]).
    pub require_preview: bool,
}

/// What a rule's condition sees of a call.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    /// The agent's name.
    pub agent: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// The call's input.
    pub input: &'a Value,
    /// The request context (principal, roles and whatever the server added).
    pub context: &'a Map<String, Value>,
    /// The tool definition's metadata (an MCP tool's `mcp` entry: server,
    /// tool, annotations), when it has any.
    pub tool_metadata: Option<&'a Map<String, Value>>,
}

impl Rule {
    /// Whether this rule covers the call.
    pub fn matches(&self, call: &CallFacts<'_>) -> Result<bool, ConditionError> {
        if self.agent.as_ref().is_some_and(|p| !p.matches(call.agent)) {
            return Ok(false);
        }
        if self.tool.as_ref().is_some_and(|p| !p.matches(call.tool)) {
            return Ok(false);
        }
        let Some(when) = &self.when else { return Ok(true) };
        when.evaluate(&call.variables())
    }
}

impl CallFacts<'_> {
    /// The variables a condition over this call sees (docs/reference.md
    /// §10.5): `input`, `agent`, `tool`, `principal`, `roles`, `context`,
    /// `mcp` and `annotations`.
    pub fn variables(&self) -> Map<String, Value> {
        let call = self;
        let mut vars = Map::new();
        vars.insert("input".into(), call.input.clone());
        vars.insert("agent".into(), Value::String(call.agent.to_owned()));
        vars.insert("tool".into(), Value::String(call.tool.to_owned()));
        vars.insert(
            "principal".into(),
            call.context.get(crate::hold::PRINCIPAL).cloned().unwrap_or(Value::Null),
        );
        vars.insert(
            "roles".into(),
            call.context
                .get(crate::hold::ROLES)
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        );
        vars.insert("context".into(), Value::Object(call.context.clone()));
        // MCP tools: `mcp` (server, tool, title) and `annotations` (the
        // server's hints, `{}` when none), e.g. `annotations.destructiveHint == true`.
        let mcp = call.tool_metadata.and_then(|m| m.get("mcp")).cloned();
        let annotations = mcp
            .as_ref()
            .and_then(|m| m.get("annotations"))
            .filter(|a| a.is_object())
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        vars.insert("mcp".into(), mcp.unwrap_or(Value::Null));
        vars.insert("annotations".into(), annotations);
        vars
    }
}

/// An ordered list of rules; the first that matches a call governs it.
/// An agent takes one with
/// [`AgentBuilder::approval_policy`](crate::agent::AgentBuilder::approval_policy).
///
/// ```
/// use holdpoint::approval::{CallFacts, Policy, PolicyField, RuleSpec};
/// use serde_json::json;
///
/// # fn main() -> holdpoint::Result<()> {
/// let policy = Policy::new([
///     RuleSpec {
///         name: Some("large transfers".into()),
///         tool: Some("transferMoney".into()),
///         when: Some("input.amount > 10000".into()),
///         approvers: vec!["finance".into()],
///         quorum: 2,
///         ..RuleSpec::default()
///     },
///     RuleSpec {
///         tool: Some("close*".into()), // a glob
///         approvers: vec!["support".into()],
///         ..RuleSpec::default()
///     },
/// ])?; // a PolicyError converts into holdpoint::Error
///
/// // What the rule gate checks for each call of an agent with this policy:
/// let input = json!({"amount": 25000, "toAccount": "savings"});
/// let context = json!({"principal": "alice"}).as_object().cloned().unwrap_or_default();
/// let call = CallFacts {
///     agent: "bankingAgent",
///     tool: "transferMoney",
///     input: &input,
///     context: &context,
///     tool_metadata: None,
/// };
/// let rule = policy.first_match(&call).map_err(|e| holdpoint::Error::Internal(e.to_string()))?;
/// assert_eq!(rule.map(|r| r.name.as_str()), Some("large transfers"));
///
/// // A condition that does not compile stops the build, naming the rule and field.
/// let bad = Policy::new([RuleSpec {
///     when: Some("input.amount >".into()),
///     approvers: vec!["finance".into()],
///     ..RuleSpec::default()
/// }]);
/// assert_eq!(bad.unwrap_err().field, PolicyField::When);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// Checks and compiles `specs`, in order.
    pub fn new(specs: impl IntoIterator<Item = RuleSpec>) -> Result<Self, PolicyError> {
        let mut rules = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let err = |field, message: String| PolicyError {
                rule: index,
                field,
                message,
            };
            for (field, value) in [(PolicyField::Agent, &spec.agent), (PolicyField::Tool, &spec.tool)] {
                if value.as_deref().is_some_and(str::is_empty) {
                    return Err(err(field, "must not be empty".into()));
                }
            }
            if spec.approvers.is_empty() || spec.approvers.iter().any(String::is_empty) {
                return Err(err(PolicyField::Approvers, "name at least one role, none empty".into()));
            }
            if spec.quorum == 0 {
                return Err(err(PolicyField::Quorum, "must be at least 1".into()));
            }
            let when = match &spec.when {
                Some(source) => Some(Condition::compile(source).map_err(|e| err(PolicyField::When, e.to_string()))?),
                None => None,
            };
            let redact =
                crate::review::Redaction::parse(&spec.redact).map_err(|e| err(PolicyField::Redact, e.to_string()))?;
            rules.push(Rule {
                name: spec.name.clone().unwrap_or_else(|| format!("rule {}", index + 1)),
                agent: spec.agent.clone().map(NamePattern::new),
                tool: spec.tool.clone().map(NamePattern::new),
                when,
                approvers: spec.approvers,
                quorum: spec.quorum,
                self_approval: spec.self_approval,
                timers: spec.timers,
                confirm: spec.confirm,
                deny_reasons: spec.deny_reasons,
                reason_required: spec.reason_required,
                redact,
                max_review_bytes: spec.max_review_bytes,
                require_preview: spec.require_preview,
            });
        }
        Ok(Policy { rules })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule that covers `call`; a condition that fails to
    /// evaluate is an error (never a silent skip).
    pub fn first_match(&self, call: &CallFacts<'_>) -> Result<Option<&Rule>, ConditionError> {
        for rule in &self.rules {
            if rule.matches(call)? {
                return Ok(Some(rule));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_default_rule_is_the_configuration_files_and_errors_fit_question_mark() {
        let spec = RuleSpec::default();
        assert_eq!((spec.quorum, spec.self_approval), (1, true));
        fn build() -> crate::Result<Policy> {
            Ok(Policy::new([RuleSpec {
                approvers: vec!["finance".into()],
                ..RuleSpec::default()
            }])?)
        }
        assert_eq!(build().unwrap().rules()[0].quorum, 1);
        fn bad() -> crate::Result<Policy> {
            Ok(Policy::new([RuleSpec::default()])?)
        }
        let err = bad().unwrap_err();
        assert_eq!(err.status(), crate::Status::InvalidArgument);
        assert!(err.to_string().contains("approvers"), "{err}");
    }

    #[test]
    fn patterns() {
        assert!(NamePattern::new("transfer*").matches("transferMoney"));
        assert!(NamePattern::new("*Money").matches("transferMoney"));
        assert!(NamePattern::new("a*c*e").matches("abcde"));
        assert!(!NamePattern::new("transfer").matches("transferMoney"));
        assert!(NamePattern::new("*").matches(""));
    }

    #[test]
    fn first_match_wins_and_bad_cel_is_an_error() {
        let spec = |when: &str, role: &str| RuleSpec {
            tool: Some("transferMoney".into()),
            when: Some(when.into()),
            approvers: vec![role.into()],
            quorum: 1,
            self_approval: false,
            ..RuleSpec::default()
        };
        let policy = Policy::new([spec("input.amount > 10000", "finance"), spec("true", "support")]).unwrap();
        let context = Map::new();
        let big = json!({"amount": 50000});
        let call = CallFacts {
            agent: "bankingAgent",
            tool: "transferMoney",
            input: &big,
            context: &context,
            tool_metadata: None,
        };
        assert_eq!(policy.first_match(&call).unwrap().unwrap().approvers, ["finance"]);
        let small = json!({"amount": 5});
        let call = CallFacts { input: &small, ..call };
        assert_eq!(policy.first_match(&call).unwrap().unwrap().approvers, ["support"]);

        // An MCP tool's annotations are variables of the condition.
        let destructive = Policy::new([spec("annotations.destructiveHint == true", "ops")]).unwrap();
        let meta: Map<String, Value> = serde_json::from_value(
            json!({"mcp": {"server": "fs", "tool": "delete", "annotations": {"destructiveHint": true}}}),
        )
        .unwrap();
        let mcp_call = CallFacts {
            tool_metadata: Some(&meta),
            ..call
        };
        assert!(destructive.first_match(&mcp_call).unwrap().is_some());
        // Without annotations the field is absent, and the rule does not match.
        let plain = CallFacts {
            tool_metadata: None,
            ..call
        };
        assert!(!matches!(destructive.first_match(&plain), Ok(Some(_))));

        let err = Policy::new([spec("input.amount >", "finance")]).unwrap_err();
        assert_eq!((err.rule, err.field), (0, PolicyField::When));
    }
}
