//! CEL conditions over a call.

use std::fmt;
use std::sync::Arc;

use cel_interpreter::{Context, Program, Value as CelValue};
use serde_json::Value;

/// Why a condition did not compile or could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// The source is not valid CEL.
    #[error("the condition `{source_text}` is not valid CEL: {message}")]
    Syntax {
        /// The condition as written.
        source_text: String,
        /// What the parser said.
        message: String,
    },
    /// Evaluation failed (an unknown variable, a type mismatch).
    #[error("the condition `{source_text}` could not be evaluated: {message}")]
    Evaluation {
        /// The condition as written.
        source_text: String,
        /// What the interpreter said.
        message: String,
    },
    /// The condition evaluated to something other than a boolean.
    #[error("the condition `{source_text}` must evaluate to a boolean")]
    NotBoolean {
        /// The condition as written.
        source_text: String,
    },
}

/// A compiled CEL expression that decides whether a rule applies.
///
/// Variables: `input` (the call's input), `agent`, `tool`, `principal`
/// (a string or null), `roles` (the caller's roles), `context` (the
/// request context), and `mcp` / `annotations` (an MCP tool's server, tool
/// and hints; null and `{}` for other tools).
///
/// ```
/// use holdpoint::approval::Condition;
/// use serde_json::json;
/// let c = Condition::compile("input.amount > 10000").unwrap();
/// let vars = json!({"input": {"amount": 50000}});
/// assert!(c.evaluate(vars.as_object().unwrap()).unwrap());
/// assert!(Condition::compile("input.amount >").is_err());
/// ```
#[derive(Clone)]
pub struct Condition {
    source: Arc<str>,
    program: Arc<Program>,
    /// The names the expression reads as variables: only these are
    /// converted into the evaluation's scope.
    reads: Arc<[Box<str>]>,
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Condition").field(&self.source).finish()
    }
}

impl Condition {
    /// Compiles `source`.
    pub fn compile(source: &str) -> Result<Self, ConditionError> {
        let syntax = |message: String| ConditionError::Syntax {
            source_text: source.to_owned(),
            message,
        };
        // The parser can panic on some malformed input instead of returning
        // an error; a panic here is a syntax error, never a crash at start.
        let parsed = std::panic::catch_unwind(|| Program::compile(source))
            .map_err(|_| syntax("the parser gave up on this expression".into()))?;
        let program = parsed.map_err(|e| syntax(e.to_string()))?;
        Ok(Condition {
            source: source.into(),
            reads: program.references().variables().into_iter().map(Box::from).collect(),
            program: Arc::new(program),
        })
    }

    /// The condition as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression reads the variable `name` (a condition over
    /// `input` alone never needs the caller's context converted).
    pub fn reads(&self, name: &str) -> bool {
        self.reads.iter().any(|r| &**r == name)
    }

    /// Evaluates the condition with `variables` bound by name.
    pub fn evaluate(&self, variables: &serde_json::Map<String, Value>) -> Result<bool, ConditionError> {
        // The standard functions are registered once per process; each
        // evaluation binds its variables in a scope of its own over them.
        static FUNCTIONS: std::sync::LazyLock<Context<'static>> = std::sync::LazyLock::new(Context::default);
        let mut context = FUNCTIONS.new_inner_scope();
        for (name, value) in variables.iter().filter(|(name, _)| self.reads(name)) {
            context
                .add_variable(name.as_str(), value)
                .map_err(|e| self.evaluation(e.to_string()))?;
        }
        match self.program.execute(&context) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(_) => Err(ConditionError::NotBoolean {
                source_text: self.source.to_string(),
            }),
            Err(e) => Err(self.evaluation(e.to_string())),
        }
    }

    fn evaluation(&self, message: String) -> ConditionError {
        ConditionError::Evaluation {
            source_text: self.source.to_string(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_variables_the_expression_reads_are_taken() {
        let c = Condition::compile("input.amount > 10 && has(input.to)").unwrap();
        assert!(c.reads("input"));
        assert!(!c.reads("context") && !c.reads("principal"));
        let vars = json!({"input": {"amount": 50, "to": "savings"}, "context": {"auth": {"deep": [1, 2, 3]}}});
        assert!(c.evaluate(vars.as_object().unwrap()).unwrap());

        let by_role = Condition::compile("'finance' in roles").unwrap();
        assert!(by_role.reads("roles") && !by_role.reads("input"));
        let vars = json!({"input": {}, "roles": ["finance"]});
        assert!(by_role.evaluate(vars.as_object().unwrap()).unwrap());
    }

    #[test]
    fn a_variable_read_but_not_given_is_an_evaluation_error() {
        let c = Condition::compile("principal == 'alice'").unwrap();
        let vars = json!({"input": {}});
        assert!(matches!(
            c.evaluate(vars.as_object().unwrap()),
            Err(ConditionError::Evaluation { .. })
        ));
    }
}
