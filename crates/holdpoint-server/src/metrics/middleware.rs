//! The agent middleware that counts and times tool and model calls.

use std::time::Instant;

use async_trait::async_trait;
use holdpoint::middleware::{Middleware, ModelNext, ToolHookCall, ToolNext};
use holdpoint::model::{GenerateRequest, GenerateResponse};
use holdpoint::tool::ToolOutcome;

use super::Metrics;

/// Counts model calls by outcome and tool calls by tool and outcome. The
/// agent checks that a called tool exists before any middleware runs, so
/// the `tool` label only ever names the agent's own tools.
pub(super) struct CountingMiddleware {
    metrics: Metrics,
}

impl CountingMiddleware {
    pub(super) fn new(metrics: Metrics) -> Self {
        CountingMiddleware { metrics }
    }
}

#[async_trait]
impl Middleware for CountingMiddleware {
    fn name(&self) -> &str {
        "metrics"
    }

    async fn model(&self, request: GenerateRequest, next: ModelNext<'_>) -> holdpoint::Result<GenerateResponse> {
        let out = next.run(request).await;
        self.metrics.model_call(if out.is_ok() { "ok" } else { "error" });
        out
    }

    async fn tool(&self, call: ToolHookCall, next: ToolNext<'_>) -> holdpoint::Result<ToolOutcome> {
        let tool = call.name.clone();
        let started = Instant::now();
        let out = next.run(call).await;
        let outcome = match &out {
            Ok(ToolOutcome::Output { .. }) => "output",
            Ok(ToolOutcome::Interrupt(_)) => "interrupt",
            Ok(ToolOutcome::Failed(_)) => "failed",
            Err(_) => "error",
        };
        self.metrics.tool_call(&tool, outcome, started.elapsed());
        out
    }
}
