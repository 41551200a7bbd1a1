//! How a resumable tool's resume data says yes or no, so a person can
//! answer its hold with "approve" or "deny" and a reason, without writing
//! the tool's JSON by hand (docs/reference.md §10.8).

use serde::Serialize;
use serde::{Deserialize, Serialize as SerializeDerive};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::message::{Part, metadata};

/// A resume type that means yes or no, with an optional reason: the
/// banking example's `Approval { approved, reason }`, say.
///
/// ```
/// use holdpoint::approval::{ApprovalReply, ReplyShape};
/// #[derive(serde::Serialize, Default)]
/// struct Approval { approved: bool, #[serde(skip_serializing_if = "Option::is_none")] reason: Option<String> }
/// impl ApprovalReply for Approval {
///     fn approve(reason: Option<String>) -> Self { Approval { approved: true, reason } }
///     fn deny(reason: Option<String>) -> Self { Approval { approved: false, reason } }
/// }
/// let shape = ReplyShape::of::<Approval>().unwrap();
/// assert_eq!(shape.reason.as_deref(), Some("reason"));
/// assert_eq!(shape.read(&shape.answer(false, Some("no"))), Some((false, Some("no".into()))));
/// ```
pub trait ApprovalReply: Serialize {
    /// The resume data that approves.
    fn approve(reason: Option<String>) -> Self;
    /// The resume data that denies.
    fn deny(reason: Option<String>) -> Self;
}

/// The resume data that approves and denies a resumable tool's hold, and
/// the key its reason goes under: what the paused part carries under
/// `approvalReply`.
#[derive(Debug, Clone, PartialEq, SerializeDerive, Deserialize)]
pub struct ReplyShape {
    /// The data that approves (without a reason).
    pub approve: Map<String, Value>,
    /// The data that denies (without a reason).
    pub deny: Map<String, Value>,
    /// The key the reason goes under, if the type has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

const PROBE: &str = "holdpoint reason probe";

fn object_of<T: Serialize>(value: &T) -> Result<Map<String, Value>> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::InvalidArgument(
            "an approval reply must serialise to a JSON object".into(),
        )),
        Err(e) => Err(Error::InvalidArgument(format!(
            "an approval reply does not serialise: {e}"
        ))),
    }
}

impl ReplyShape {
    /// The shape of `T`: its approve and deny data, and the key a reason
    /// lands under. Fails when approve and deny serialise alike (they
    /// could not be told apart) or not to objects.
    pub fn of<T: ApprovalReply>() -> Result<ReplyShape> {
        let approve = object_of(&T::approve(None))?;
        let deny = object_of(&T::deny(None))?;
        if approve == deny {
            return Err(Error::InvalidArgument(
                "an approval reply's approve and deny serialise alike".into(),
            ));
        }
        let probed = object_of(&T::deny(Some(PROBE.to_owned())))?;
        let reason = probed
            .iter()
            .find(|(_, v)| v.as_str() == Some(PROBE))
            .map(|(k, _)| k.clone());
        Ok(ReplyShape { approve, deny, reason })
    }

    /// The shape a paused part carries, if any.
    pub fn on(part: &Part) -> Option<ReplyShape> {
        serde_json::from_value(part.meta(metadata::APPROVAL_REPLY)?.clone()).ok()
    }

    /// The resume data of an approval (`true`) or a denial, with `reason`.
    pub fn answer(&self, approve: bool, reason: Option<&str>) -> Map<String, Value> {
        let mut data = if approve {
            self.approve.clone()
        } else {
            self.deny.clone()
        };
        if let (Some(key), Some(reason)) = (&self.reason, reason) {
            data.insert(key.clone(), Value::String(reason.to_owned()));
        }
        data
    }

    /// What resume `data` means: `Some((true, reason))` when it carries
    /// every entry of the approve data, `Some((false, reason))` for the
    /// deny data, `None` for anything else.
    pub fn read(&self, data: &Map<String, Value>) -> Option<(bool, Option<String>)> {
        let has = |template: &Map<String, Value>| template.iter().all(|(k, v)| data.get(k) == Some(v));
        let reason = self
            .reason
            .as_ref()
            .and_then(|k| data.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if has(&self.approve) {
            Some((true, reason))
        } else if has(&self.deny) {
            Some((false, reason))
        } else {
            None
        }
    }
}
