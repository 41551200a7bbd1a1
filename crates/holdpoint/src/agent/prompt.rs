//! The built-in turn handler of prompt agents: system prompt, model, tools,
//! middleware, run through the generate loop.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::TurnHandler;
use super::turn::Turn;
use crate::error::Result;
use crate::generate::{Caller, GenerateOptions, Toolset, generate_with};
use crate::message::{Message, Part, Role};
use crate::middleware::Middleware;
use crate::model::{FinishReason, Model};
use crate::tool::Tool;

/// A prompt agent's definition: what each turn sends to the model.
#[derive(Clone)]
pub(crate) struct PromptHandler {
    pub model: Arc<dyn Model>,
    pub system: Option<String>,
    pub tools: Vec<Arc<dyn Tool>>,
    /// Tells the model about settled background tasks (§16.7).
    pub background: super::subagent::Notices,
    /// `tools` by name with their definitions, built once for every turn.
    pub toolset: Arc<Toolset>,
    pub middleware: Vec<Arc<dyn Middleware>>,
    pub max_turns: u32,
    pub config: Option<Value>,
    /// Whether the request context carries the session id to the rule
    /// gate, for standing grants (docs/reference.md §10.9).
    pub session_in_context: bool,
}

#[async_trait]
impl TurnHandler for PromptHandler {
    async fn handle(&self, turn: Turn) -> Result<()> {
        let messages = turn.take_messages();
        let mut options = GenerateOptions::new(Arc::clone(&self.model));
        options.system = self
            .system
            .as_ref()
            .map(|s| Message::new(Role::System, vec![Part::text(s.clone())]));
        options.messages = messages;
        self.background.deliver(&turn, &mut options.messages).await;
        options.tools = self.tools.clone();
        options.middleware = self.middleware.clone();
        options.max_turns = self.max_turns;
        options.config = self.config.clone();
        options.chunks = turn.chunk_sink();
        // Sub-agents: tools that run a child learn the calling session.
        let mut context = turn.request_context();
        if self.session_in_context {
            // Set over whatever a caller put there: the gate trusts it.
            let mut map = (*context).clone();
            map.insert(
                crate::approval::GRANT_SESSION.to_owned(),
                Value::String(turn.session_id()),
            );
            context = Arc::new(map);
        }
        options.context = super::subagent::with_caller(context, || turn.session_id(), &self.tools);
        let seam_turn = turn.clone();
        options.receipts = turn.receipts();
        options.on_seam = Some(Arc::new(move |messages| seam_turn.record_seam(messages)));
        // The resume is lent from the turn's input, not copied.
        let resume = turn.input().resume.as_ref();
        let generation = generate_with(options, resume, Arc::clone(&self.toolset), Caller::Turn).await?;
        let finish = generation.response.finish_reason.unwrap_or(FinishReason::Stop);
        turn.set_messages(generation.messages);
        turn.finish(generation.response.message, finish);
        Ok(())
    }
}
