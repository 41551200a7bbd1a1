//! JSON Schemas from Rust types (schemars) and validation of model-produced
//! values against them (jsonschema).

use std::sync::Arc;

use schemars::JsonSchema;
use serde_json::Value;

use crate::error::{Error, Result};

/// The JSON Schema (2020-12) of a Rust type.
pub fn schema_for<T: JsonSchema>() -> Value {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    schema.to_value()
}

/// A compiled schema that checks values and names the first bad field.
#[derive(Clone)]
pub struct SchemaValidator {
    schema: Value,
    compiled: Option<Arc<jsonschema::Validator>>,
}

impl SchemaValidator {
    /// Compiles `schema`. A schema that does not compile validates nothing
    /// and is reported once through `tracing`.
    pub fn new(schema: Value) -> Self {
        let compiled = match jsonschema::validator_for(&schema) {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(error = %e, "tool schema does not compile; values will not be validated");
                None
            }
        };
        SchemaValidator { schema, compiled }
    }

    /// The schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether the schema compiled and is enforced.
    pub fn is_enforced(&self) -> bool {
        self.compiled.is_some()
    }

    /// Checks `value`; the error names the offending location and why.
    pub fn check(&self, what: &str, value: &Value) -> Result<()> {
        let Some(compiled) = &self.compiled else {
            return Ok(());
        };
        let problems: Vec<String> = compiled
            .iter_errors(value)
            .take(3)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() { "(root)".to_owned() } else { path };
                format!("{at}: {e}")
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "invalid {what}: {}",
                problems.join("; ")
            )))
        }
    }
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaValidator").field("schema", &self.schema).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Transfer {
        amount: f64,
        to_account: String,
    }

    #[test]
    fn names_the_bad_field() {
        let v = SchemaValidator::new(schema_for::<Transfer>());
        assert!(v.is_enforced());
        v.check("input", &json!({"amount": 5, "to_account": "x"})).unwrap();
        let err = v
            .check("input", &json!({"amount": "lots", "to_account": "x"}))
            .unwrap_err();
        assert!(err.to_string().contains("/amount"), "{err}");
        let err = v.check("input", &json!({"amount": 1})).unwrap_err();
        assert!(err.to_string().contains("to_account"), "{err}");
    }

    #[test]
    fn schema_is_2020_12() {
        let s = schema_for::<Transfer>();
        assert_eq!(s["$schema"], json!("https://json-schema.org/draft/2020-12/schema"));
    }
}
