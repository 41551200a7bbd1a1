//! How a resumable tool's resume data says yes or no, so a person can
//! answer its hold with "approve" or "deny" and a reason, without writing
//! the tool's JSON by hand (docs/reference.md §10.8).

use serde::Serialize;
use serde::de::DeserializeOwned;
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

    /// The shape of a resume type with one `bool` field and nothing else
    /// it requires — the README's `Approval { approved: bool }` — read from
    /// its JSON Schema (`schema`): approve sets the field to `true`, deny to
    /// `false`, and a reason goes under its one optional string field, if
    /// it has exactly one. `None` when the type has no such field, several,
    /// or another field it cannot do without; then a tool that wants
    /// approve and deny implements [`ApprovalReply`]. Every candidate is
    /// checked by decoding it into `T` and encoding it back, so a field
    /// that does not round-trip is never guessed.
    ///
    /// [`ResumableTool::define`](crate::tool::ResumableTool::define) uses
    /// it, so such a tool answers `approve` / `deny` with no ceremony.
    ///
    /// ```
    /// use holdpoint::approval::ReplyShape;
    /// use holdpoint::tool::schema_for;
    /// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// struct Approval { approved: bool, reason: Option<String> }
    /// let shape = ReplyShape::infer::<Approval>(&schema_for::<Approval>()).unwrap();
    /// assert_eq!(shape.answer(true, None), serde_json::json!({"approved": true}).as_object().unwrap().clone());
    /// assert_eq!(shape.reason.as_deref(), Some("reason"));
    /// ```
    pub fn infer<T: Serialize + DeserializeOwned>(schema: &Value) -> Option<ReplyShape> {
        let properties = schema.get("properties")?.as_object()?;
        let is = |prop: &Value, ty: &str| match prop.get("type") {
            Some(Value::String(t)) => t == ty,
            Some(Value::Array(ts)) => ts.iter().any(|t| t == ty) && ts.iter().all(|t| t == ty || t == "null"),
            _ => false,
        };
        let mut flags = properties.iter().filter(|(_, p)| is(p, "boolean")).map(|(k, _)| k);
        let (flag, None) = (flags.next()?, flags.next()) else {
            return None;
        };
        // `data` decodes into `T`, and `T` encodes back with every entry of
        // `data`: the type means what the candidate says.
        let fits = |data: &Map<String, Value>| {
            let decoded: T = serde_json::from_value(Value::Object(data.clone())).ok()?;
            let back = object_of(&decoded).ok()?;
            data.iter().all(|(k, v)| back.get(k) == Some(v)).then_some(())
        };
        let with = |value: bool| Map::from_iter([(flag.clone(), Value::Bool(value))]);
        let (approve, deny) = (with(true), with(false));
        fits(&approve)?;
        fits(&deny)?;
        let mut reasons = properties
            .iter()
            .filter(|(k, p)| *k != flag && is(p, "string"))
            .map(|(k, _)| k)
            .filter(|k| {
                let mut probed = deny.clone();
                probed.insert((*k).clone(), Value::String(PROBE.to_owned()));
                fits(&probed).is_some()
            });
        let reason = match (reasons.next(), reasons.next()) {
            (Some(k), None) => Some(k.clone()),
            _ => None,
        };
        Some(ReplyShape { approve, deny, reason })
    }

    /// The shape a paused part carries, if any.
    pub fn on(part: &Part) -> Option<ReplyShape> {
        // Decoded from the borrowed metadata: no copy of it first.
        ReplyShape::deserialize(part.meta(metadata::APPROVAL_REPLY)?).ok()
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
