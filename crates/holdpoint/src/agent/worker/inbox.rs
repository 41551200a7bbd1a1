//! The worker's inbox: the inputs waiting for a turn, and what arrives
//! while one runs.
//!
//! Invariants: inputs are handed out in the order they arrived; once the
//! run is detached no further input is read from the caller (only those
//! already queued run); a detach request that arrives mid-turn is split
//! from its payload, which waits for its own turn.

use std::collections::VecDeque;

use tokio::sync::mpsc;

use super::super::io::AgentInput;

/// What [`Inbox::during_turn`] received.
pub(super) enum Arrival {
    /// A detach request (any payload it carried is queued).
    Detach,
    /// An input, queued for a later turn.
    Queued,
    /// The caller closed its input side.
    Closed,
}

/// Inputs to run, in order: those queued, then those the caller sends.
pub(super) struct Inbox {
    queue: VecDeque<AgentInput>,
    /// Where the caller's inputs arrive; `None` for a single run.
    inputs: Option<mpsc::UnboundedReceiver<AgentInput>>,
    /// Whether the caller may still send inputs.
    open: bool,
}

impl Inbox {
    /// An inbox holding `first`, then reading `inputs` (if any).
    pub fn new(first: Option<AgentInput>, inputs: Option<mpsc::UnboundedReceiver<AgentInput>>) -> Inbox {
        Inbox {
            queue: first.into_iter().collect(),
            open: inputs.is_some(),
            inputs,
        }
    }

    /// Whether the caller may still send inputs.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Whether nothing is queued and nothing more can arrive: the turn
    /// about to run is the last one (unless a detach keeps it going).
    pub fn is_drained(&self) -> bool {
        self.queue.is_empty() && !self.open
    }

    /// The next input to run; `None` once there is none. A detached run
    /// only runs what is already queued.
    pub async fn next(&mut self, detached: bool) -> Option<AgentInput> {
        if let Some(input) = self.queue.pop_front() {
            return Some(input);
        }
        if !self.open || detached {
            return None;
        }
        let next = self.recv().await;
        if next.is_none() {
            self.open = false;
        }
        next
    }

    /// Takes what the caller sends while a turn runs: inputs are queued,
    /// a detach request is reported. Cancel-safe (nothing is awaited after
    /// an input is received), so a turn that ends first loses nothing.
    pub async fn during_turn(&mut self) -> Arrival {
        match self.recv().await {
            Some(mut input) if input.is_detach() => {
                input.detach = None;
                if input.has_payload() {
                    self.queue.push_back(input);
                }
                Arrival::Detach
            }
            Some(input) => {
                self.queue.push_back(input);
                Arrival::Queued
            }
            None => {
                self.open = false;
                Arrival::Closed
            }
        }
    }

    async fn recv(&mut self) -> Option<AgentInput> {
        match &mut self.inputs {
            Some(rx) => rx.recv().await,
            None => None,
        }
    }
}
