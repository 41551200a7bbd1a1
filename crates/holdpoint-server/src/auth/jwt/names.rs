//! Which claim values may name a principal: short, and with nothing in them
//! that changes how text is shown without being seen.

use super::{AuthError, unauthenticated};

/// A code point that changes how text is shown without being seen:
/// controls, bidi embeddings, overrides, isolates and marks, zero-width and
/// other invisible format characters, line and paragraph separators, and
/// tag characters.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// `Ok` when `value` may appear in a principal: 1 to `max` bytes, nothing
/// hidden.
pub(super) fn check_name(value: &str, claim: &str, max: usize) -> Result<(), AuthError> {
    if value.is_empty() {
        return Err(unauthenticated(format!("bearer token claim `{claim}` is empty")));
    }
    if value.len() > max {
        return Err(unauthenticated(format!(
            "bearer token claim `{claim}` is longer than {max} bytes"
        )));
    }
    if value.chars().any(is_hidden) {
        return Err(unauthenticated(format!(
            "bearer token claim `{claim}` contains control or invisible formatting characters"
        )));
    }
    Ok(())
}
