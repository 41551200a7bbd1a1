//! Holdpoint core (placeholder docs, rewritten below).
#![deny(missing_docs)]

pub mod agent;
pub mod error;
pub mod generate;
pub mod message;
pub mod middleware;
pub mod model;
pub mod session;
pub mod tool;

pub use error::{Error, ErrorBody, Result, Status};
pub use generate::{GenerateOptions, Generation, Resume, generate};
pub use message::{Message, Part, PartKind, Role, ToolRequest, ToolResponse};
pub use model::{
    FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, Model, ScriptedModel, ScriptedTurn, Usage,
};
pub use tool::{ResumableTool, Tool, ToolContext, ToolError, TypedTool, tool};
