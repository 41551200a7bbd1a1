//! A paused tool request's part: its interrupt state and data, and the
//! untyped restart and respond directives built from it.

use serde_json::Value;

use super::metadata::{self, Marker};
use super::{Part, ToolRequest};
use crate::error::{Error, Result};

/// Why [`Part::interrupt_as`] gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterruptAsError {
    /// The part is not a paused tool request: another kind of part, a
    /// request that did not pause, or one already answered.
    #[error("not a paused tool request: {what}")]
    NotAnInterrupt {
        /// What the part is instead.
        what: String,
    },
    /// The part is paused, but its interrupt data does not decode into the
    /// type asked for.
    #[error("interrupt data of tool \"{tool}\" does not decode: {message}")]
    Decode {
        /// The paused tool's name.
        tool: String,
        /// serde's explanation.
        message: String,
    },
}

impl From<InterruptAsError> for Error {
    fn from(e: InterruptAsError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}

impl Part {
    /// The segment naming this tool request in a sub-agent's compound ref
    /// (docs/reference.md §16.2): its ref, or its tool's name when it has
    /// none. `None` for a part that is not a tool request.
    pub fn ref_segment(&self) -> Option<&str> {
        let req = self.as_tool_request()?;
        Some(req.reference.as_deref().unwrap_or(&req.name))
    }

    /// Whether this is a tool request that is paused and not yet answered.
    pub fn is_interrupt(&self) -> bool {
        self.as_tool_request().is_some() && metadata::is_set(self.metadata.as_ref(), metadata::INTERRUPT)
    }

    /// The interrupt data of a paused tool request (`{}` for a bare `true`).
    pub fn interrupt_data(&self) -> Option<serde_json::Map<String, Value>> {
        if !self.is_interrupt() {
            return None;
        }
        metadata::marker(self.metadata.as_ref(), metadata::INTERRUPT)
            .ok()
            .flatten()
            .map(Marker::into_object)
    }

    /// When this paused request stops being answerable: the `expiresAt`
    /// metadata key, or an `expiresAt` field of the interrupt data (RFC 3339).
    pub fn expires_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let raw = self
            .meta(metadata::EXPIRES_AT)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                self.meta(metadata::INTERRUPT)
                    .or_else(|| self.meta(metadata::RESOLVED_INTERRUPT))
                    .and_then(|d| d.get(metadata::EXPIRES_AT))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })?;
        chrono::DateTime::parse_from_rfc3339(&raw)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }

    /// The middleware that raised this hold, when one did.
    pub fn interrupted_by(&self) -> Option<&str> {
        self.meta(metadata::INTERRUPTED_BY).and_then(Value::as_str)
    }

    /// Decodes the interrupt data of a paused tool request into `T`.
    ///
    /// One result for both ways it can fail, told apart by
    /// [`InterruptAsError`]'s variant: the part is not a paused tool
    /// request, or its data does not decode. `?` turns either into an
    /// `INVALID_ARGUMENT` [`Error`].
    ///
    /// ```
    /// use holdpoint::message::{InterruptAsError, Part};
    /// #[derive(serde::Deserialize)]
    /// struct Ask { details: String }
    ///
    /// let mut paused = Part::tool_request("transferMoney", Some("0".into()), None);
    /// paused.set_meta("interrupt", serde_json::json!({"details": "Transfer $500.00 to savings"}));
    /// assert_eq!(paused.interrupt_as::<Ask>()?.details, "Transfer $500.00 to savings");
    /// assert!(matches!(Part::text("hi").interrupt_as::<Ask>(), Err(InterruptAsError::NotAnInterrupt { .. })));
    /// # Ok::<(), holdpoint::Error>(())
    /// ```
    pub fn interrupt_as<T: serde::de::DeserializeOwned>(&self) -> std::result::Result<T, InterruptAsError> {
        let empty = serde_json::Map::new();
        // Decoded from the borrowed data: no copy of it first.
        let data = match self.interrupt_object() {
            Some(data) => data.unwrap_or(&empty),
            None => {
                let what = match self.as_tool_request() {
                    Some(req) => format!("tool request \"{}\" is not paused (or was already answered)", req.name),
                    None => format!("a {} part", self.kind.key()),
                };
                return Err(InterruptAsError::NotAnInterrupt { what });
            }
        };
        T::deserialize(data).map_err(|source| InterruptAsError::Decode {
            tool: self.as_tool_request().map(|r| r.name.clone()).unwrap_or_default(),
            message: source.to_string(),
        })
    }

    /// [`interrupt_data`](Self::interrupt_data) borrowed: `None` exactly
    /// when that is `None`, `Some(None)` for a bare `true` (read as `{}`).
    fn interrupt_object(&self) -> Option<Option<&serde_json::Map<String, Value>>> {
        if !self.is_interrupt() {
            return None;
        }
        match self.meta(metadata::INTERRUPT) {
            Some(Value::Bool(true)) => Some(None),
            Some(Value::Object(data)) => Some(Some(data)),
            _ => None,
        }
    }

    fn paused_request(&self) -> Result<&ToolRequest> {
        match self.as_tool_request() {
            Some(req) => Ok(req),
            None => Err(Error::InvalidArgument(format!(
                "a resume directive needs a toolRequest part, got a {} part",
                self.kind.key()
            ))),
        }
    }

    /// Untyped restart: re-run this paused request, with optional resume data
    /// (a JSON object). Builds the same part as a typed `call.restart(..)`.
    pub fn restart(&self, resume: Option<Value>) -> Result<Part> {
        let req = self.paused_request()?;
        let marker = Marker::from_data(metadata::RESUMED, resume)?;
        let mut part = Part::tool_request(req.name.clone(), req.reference.clone(), req.input.clone());
        part.set_meta(metadata::RESUMED, marker.to_value());
        Ok(part)
    }

    /// Untyped restart with new input; `replacedInput` keeps the original.
    pub fn restart_with_input(&self, input: Value, resume: Option<Value>) -> Result<Part> {
        let req = self.paused_request()?;
        let original = req.input.clone().unwrap_or(Value::Null);
        let mut part = self.restart(resume)?;
        if let Some(r) = part.as_tool_request_mut() {
            r.input = Some(input);
        }
        part.set_meta(metadata::REPLACED_INPUT, original);
        Ok(part)
    }

    /// Untyped respond: answer this paused request with `output`, without
    /// running the tool.
    pub fn respond(&self, output: Value) -> Result<Part> {
        let req = self.paused_request()?;
        let mut part = Part::tool_response(req.name.clone(), req.reference.clone(), Some(output));
        part.set_meta(metadata::INTERRUPT_RESPONSE, Value::Bool(true));
        Ok(part)
    }
}
