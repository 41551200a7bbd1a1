//! Typed tools whose schemas come from Rust types, resumable tools
//! `<In, Out, Res>`, and the claim of a paused call (`Interrupted`).

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::context::{ToolCall, ToolContext, ToolError};
use super::schema::{SchemaValidator, schema_for};
use super::{Tool, ToolOutcome};
use crate::error::{Error, Result};
use crate::hold::{ApprovalReply, ReplyShape};
use crate::message::{InterruptAsError, Part};
use crate::model::ToolDefinition;
use crate::review::HoldView;

type ToolFn<In, Out, Res> =
    dyn Fn(ToolContext, In, Option<Res>) -> BoxFuture<'static, std::result::Result<Out, ToolError>> + Send + Sync;

/// A tool whose calls may pause and later restart with resume data of type
/// `Res` (a struct or map). The function gets `None` on the first call and
/// `Some(res)` on a restart; a bare restart gives `Some(Res::default())`.
///
/// Cloning is cheap; keep a clone to claim its interrupts later.
///
/// ```
/// use holdpoint::tool::{ResumableTool, ToolContext};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, Serialize, JsonSchema)]
/// struct Transfer { amount: f64 }
/// #[derive(Deserialize, Serialize, JsonSchema, Default)]
/// struct Approval { approved: bool }
///
/// let transfer = ResumableTool::<Transfer, String, Approval>::define(
///     "transferMoney",
///     "Moves money; needs approval",
///     |ctx: ToolContext, t: Transfer, approval: Option<Approval>| async move {
///         match approval {
///             None => Err(ctx.interrupt(serde_json::json!({"details": format!("Transfer ${:.2}", t.amount)}))),
///             Some(a) if a.approved => Ok("txn-123".to_string()),
///             Some(_) => Err(ctx.fail("the person declined")),
///         }
///     },
/// )?;
/// use holdpoint::Tool;
/// assert_eq!(transfer.definition().name, "transferMoney");
/// # Ok::<(), holdpoint::Error>(())
/// ```
pub struct ResumableTool<In, Out, Res> {
    inner: Arc<Inner<In, Out, Res>>,
    /// How its resume type says yes or no, when it declares one.
    reply: Option<Arc<Reply>>,
    /// How its held calls are shown (redaction, preview).
    view: Option<Arc<HoldView>>,
}

/// A typed tool with no resume type of its own (resume data, if any, is
/// available as JSON through [`ToolContext::resumed`]).
pub type TypedTool<In, Out> = ResumableTool<In, Out, Map<String, Value>>;

struct Inner<In, Out, Res> {
    definition: ToolDefinition,
    input: SchemaValidator,
    output: SchemaValidator,
    f: Box<ToolFn<In, Out, Res>>,
}

/// A tool's [`ReplyShape`] and its JSON, serialised once: every hold of
/// the tool carries a copy under `approvalReply`.
struct Reply {
    shape: ReplyShape,
    /// `None` if the shape did not serialise (its holds then carry none,
    /// as before the JSON was kept).
    value: Option<Value>,
}

impl Reply {
    fn new(shape: ReplyShape) -> Arc<Reply> {
        let value = serde_json::to_value(&shape).ok();
        Arc::new(Reply { shape, value })
    }
}

impl<In, Out, Res> Clone for ResumableTool<In, Out, Res> {
    fn clone(&self) -> Self {
        ResumableTool {
            inner: Arc::clone(&self.inner),
            reply: self.reply.clone(),
            view: self.view.clone(),
        }
    }
}

/// Defines a typed tool: the input schema comes from `In`, the output schema
/// from `Out`, and model-produced arguments are validated before `f` runs.
///
/// ```
/// use holdpoint::tool::{tool, ToolContext};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, serde::Serialize, JsonSchema)]
/// struct Account { account: String }
/// let get_balance = tool("getBalance", "Returns the balance", |_ctx: ToolContext, a: Account| async move {
///     Ok(format!("{}: $1,250.00", a.account))
/// });
/// use holdpoint::Tool;
/// assert!(get_balance.definition().input_schema.is_some());
/// ```
pub fn tool<In, Out, F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> TypedTool<In, Out>
where
    In: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
    Out: Serialize + JsonSchema + Send + 'static,
    F: Fn(ToolContext, In) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Out, ToolError>> + Send + 'static,
{
    ResumableTool::build(name.into(), description.into(), move |ctx, input, _res| f(ctx, input))
}

impl<In, Out, Res> ResumableTool<In, Out, Res>
where
    In: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
    Out: Serialize + JsonSchema + Send + 'static,
    Res: DeserializeOwned + Serialize + JsonSchema + Default + Send + 'static,
{
    /// Defines a resumable tool. Fails when `Res` is not a struct or map.
    ///
    /// When `Res` has one `bool` field and needs no other (`Approval {
    /// approved: bool }`, with perhaps an optional `reason: Option<String>`),
    /// approve and deny map onto it ([`ReplyShape::infer`]): `holdpoint
    /// approve` / `deny`, `POST /agents/{name}/answer`, the page and
    /// [`Decisions::answer`](crate::agent::Decisions::answer) answer its holds with
    /// no more code. Any other resume type says yes or no through
    /// [`approval_reply`](Self::approval_reply).
    pub fn define<F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> Result<Self>
    where
        F: Fn(ToolContext, In, Option<Res>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Out, ToolError>> + Send + 'static,
    {
        let name = name.into();
        let res_schema = schema_for::<Res>();
        if res_schema.get("type") != Some(&Value::String("object".into())) {
            return Err(Error::InvalidArgument(format!(
                "resumable tool \"{name}\": the resume type must be a struct or map (a JSON object), its schema is {res_schema}"
            )));
        }
        let reply = ReplyShape::infer::<Res>(&res_schema).map(Reply::new);
        Ok(ResumableTool {
            reply,
            ..Self::build(name, description.into(), f)
        })
    }

    fn build<F, Fut>(name: String, description: String, f: F) -> Self
    where
        F: Fn(ToolContext, In, Option<Res>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Out, ToolError>> + Send + 'static,
    {
        let input_schema = schema_for::<In>();
        let output_schema = schema_for::<Out>();
        let definition = ToolDefinition {
            name,
            description,
            input_schema: Some(input_schema.clone()),
            output_schema: Some(output_schema.clone()),
            metadata: None,
        };
        ResumableTool {
            inner: Arc::new(Inner {
                definition,
                input: SchemaValidator::new(input_schema),
                output: SchemaValidator::new(output_schema),
                f: Box::new(move |ctx, input, res| Box::pin(f(ctx, input, res))),
            }),
            reply: None,
            view: None,
        }
    }

    /// Shows its held calls through `view`: the input paths every
    /// surface masks and a preview of what the call will do
    /// (docs/reference.md §22.1, §22.2).
    ///
    /// ```
    /// use holdpoint::review::{HoldView, Preview};
    /// use holdpoint::tool::{ToolContext, tool};
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Deserialize, Serialize, JsonSchema)]
    /// struct Charge { amount: f64, card: String }
    /// let charge = tool("charge", "Charges a card", |_ctx: ToolContext, c: Charge| async move {
    ///     Ok(format!("charged {}", c.amount))
    /// })
    /// .hold_view(
    ///     HoldView::new()
    ///         .redact(["card"])?
    ///         .preview(|i| Ok(Preview::new(format!("Charge ${:.2}", i["amount"].as_f64().unwrap_or(0.0))))),
    /// );
    /// # let _ = charge;
    /// # Ok::<(), holdpoint::review::RedactPathError>(())
    /// ```
    pub fn hold_view(mut self, view: HoldView) -> Self {
        self.view = Some(Arc::new(view));
        self
    }

    /// Declares that this tool asks for approval itself and how its resume
    /// type means yes or no ([`ApprovalReply`]): its holds then carry the
    /// [`ReplyShape`] under `approvalReply`, so `approve` / `deny` (CLI,
    /// HTTP, the page) answer them without hand-written JSON, the audit
    /// records them `approve` or `deny`, and an approval rule that covers
    /// it annotates its own interrupt instead of holding it first.
    /// Fails when approve and deny serialise alike or not to objects.
    /// Not needed for a resume type with one `bool` field (see
    /// [`define`](Self::define)); declared, it replaces the inferred shape.
    pub fn approval_reply(mut self) -> Result<Self>
    where
        Res: ApprovalReply,
    {
        self.reply = Some(Reply::new(ReplyShape::of::<Res>()?));
        Ok(self)
    }

    /// Claims a paused call of this tool: `Some` only for this tool's own,
    /// unresolved interrupt (not a middleware's hold) whose input decodes
    /// into `In`. A sub-agent call that surfaced its child's holds is seen
    /// through: when exactly one of them is this tool's, that one is
    /// claimed under its compound ref, answerable at the root (with
    /// several, claim each from [`AgentOutput::holds`](crate::agent::AgentOutput::holds)).
    pub fn interrupted(&self, part: &Part) -> Option<Interrupted<In, Out, Res>> {
        if crate::message::surfaced::SurfacedHold::is_surfaced(part) {
            let mut ours = crate::message::surfaced::answerable(part)
                .into_iter()
                .filter_map(|p| self.interrupted(&p));
            let first = ours.next()?;
            return ours.next().is_none().then_some(first);
        }
        let input = self.own_input(part)?;
        Some(Interrupted {
            input,
            part: part.clone(),
            tool: self.clone(),
        })
    }

    /// [`interrupted`](Self::interrupted), keeping `part` instead of a
    /// copy of it.
    pub fn interrupted_owned(&self, part: Part) -> Option<Interrupted<In, Out, Res>> {
        if crate::message::surfaced::SurfacedHold::is_surfaced(&part) {
            return self.interrupted(&part);
        }
        let input = self.own_input(&part)?;
        Some(Interrupted {
            input,
            part,
            tool: self.clone(),
        })
    }

    /// The decoded input of `part` when it is this tool's own unresolved
    /// interrupt (not a middleware's hold).
    fn own_input(&self, part: &Part) -> Option<In> {
        let req = part.as_tool_request()?;
        if req.name != self.inner.definition.name || !part.is_interrupt() || part.interrupted_by().is_some() {
            return None;
        }
        // Decoded from the borrowed input (a missing one reads as `{}`).
        match &req.input {
            Some(value) => In::deserialize(value),
            None => In::deserialize(&Value::Object(Map::new())),
        }
        .ok()
    }

    /// Shares this tool as a trait object for an agent or generation.
    pub fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }

    fn decode_resume(&self, resumed: Option<&Map<String, Value>>) -> Result<Option<Res>> {
        let Some(map) = resumed else {
            return Ok(None);
        };
        match Res::deserialize(map) {
            Ok(res) => Ok(Some(res)),
            Err(_) if map.is_empty() => Ok(Some(Res::default())),
            Err(e) => Err(Error::InvalidArgument(format!(
                "tool \"{}\": resume data does not decode: {e}",
                self.inner.definition.name
            ))),
        }
    }
}

#[async_trait]
impl<In, Out, Res> Tool for ResumableTool<In, Out, Res>
where
    In: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
    Out: Serialize + JsonSchema + Send + 'static,
    Res: DeserializeOwned + Serialize + JsonSchema + Default + Send + 'static,
{
    fn definition(&self) -> &ToolDefinition {
        &self.inner.definition
    }

    async fn call(&self, call: ToolCall) -> Result<ToolOutcome> {
        let name = &self.inner.definition.name;
        if let Err(e) = self.inner.input.check("input", &call.input) {
            return Ok(ToolOutcome::Failed(format!("tool \"{name}\": {e}")));
        }
        let input: In = match serde_json::from_value(call.input) {
            Ok(v) => v,
            Err(e) => {
                return Ok(ToolOutcome::Failed(format!("tool \"{name}\": invalid input: {e}")));
            }
        };
        let resume = self.decode_resume(call.context.resumed())?;
        let context = call.context.clone();
        match (self.inner.f)(call.context, input, resume).await {
            Ok(out) => {
                let output = serde_json::to_value(out)
                    .map_err(|e| Error::Internal(format!("tool \"{name}\": output does not serialise: {e}")))?;
                Ok(ToolOutcome::Output {
                    output,
                    content: context.take_attached(),
                })
            }
            Err(ToolError::Interrupt(mut data)) => {
                if let Some(value) = self.reply.as_ref().and_then(|r| r.value.clone()) {
                    data.insert(crate::message::metadata::CARRIED_META[1].0.to_owned(), value);
                }
                Ok(ToolOutcome::Interrupt(data))
            }
            Err(ToolError::Fail(msg)) => Ok(ToolOutcome::Failed(msg)),
            Err(ToolError::Error(msg)) => Err(Error::ToolFailed {
                tool: name.clone(),
                message: msg,
            }),
        }
    }

    fn check_output(&self, output: &Value) -> Result<()> {
        self.inner
            .output
            .check(&format!("output for tool \"{}\"", self.inner.definition.name), output)
    }

    fn check_resume(&self, resumed: &Map<String, Value>) -> Result<()> {
        self.decode_resume(Some(resumed)).map(drop)
    }

    fn approval_reply(&self) -> Option<&ReplyShape> {
        self.reply.as_deref().map(|r| &r.shape)
    }

    fn hold_view(&self) -> Option<&HoldView> {
        self.view.as_deref()
    }
}

/// A claimed paused call of a [`ResumableTool`]: its typed input and the
/// directives that answer it.
pub struct Interrupted<In, Out, Res> {
    /// The input the model produced, decoded.
    pub input: In,
    part: Part,
    tool: ResumableTool<In, Out, Res>,
}

impl<In, Out, Res> Interrupted<In, Out, Res>
where
    In: DeserializeOwned + Serialize + JsonSchema + Send + 'static,
    Out: Serialize + JsonSchema + Send + 'static,
    Res: DeserializeOwned + Serialize + JsonSchema + Default + Send + 'static,
{
    /// The paused request part.
    pub fn part(&self) -> &Part {
        &self.part
    }

    /// Decodes the interrupt data (see [`Part::interrupt_as`]; a claimed
    /// call is always paused, so only [`InterruptAsError::Decode`] occurs).
    pub fn interrupt_as<T: DeserializeOwned>(&self) -> std::result::Result<T, InterruptAsError> {
        self.part.interrupt_as()
    }

    /// Re-runs the call with resume data (`None`: a bare restart).
    pub fn restart(&self, res: Option<Res>) -> Result<Part> {
        self.part.restart(encode_resume(res)?)
    }

    /// Re-runs the call with new input; `replacedInput` keeps the original.
    pub fn restart_with_input(&self, input: In, res: Option<Res>) -> Result<Part> {
        let input = serde_json::to_value(input)
            .map_err(|e| Error::InvalidArgument(format!("input does not serialise: {e}")))?;
        self.part.restart_with_input(input, encode_resume(res)?)
    }

    /// Answers the call with `output` without running the tool.
    pub fn respond(&self, output: Out) -> Result<Part> {
        let output = serde_json::to_value(output)
            .map_err(|e| Error::InvalidArgument(format!("output does not serialise: {e}")))?;
        self.tool.check_output(&output)?;
        self.part.respond(output)
    }
}

fn encode_resume<Res: Serialize>(res: Option<Res>) -> Result<Option<Value>> {
    res.map(|r| {
        serde_json::to_value(r).map_err(|e| Error::InvalidArgument(format!("resume data does not serialise: {e}")))
    })
    .transpose()
}
