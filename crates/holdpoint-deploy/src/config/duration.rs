//! Durations as written in the configuration: `"500ms"`, `"30s"`, `"4h"`,
//! `"1h30m"`, `"2d"`.

use std::time::Duration;

/// The longest duration accepted: 366 days.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// Parses a sequence of `<integer><unit>` (units `ms`, `s`, `m`, `h`, `d`);
/// the total must be more than zero and at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const HINT: &str = "write a number and a unit: \"500ms\", \"30s\", \"15m\", \"4h\", \"1h30m\", \"2d\"";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("{text:?} is not a duration; {HINT}"));
        }
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let n: u64 = number.parse().map_err(|_| format!("{text:?} is too long"))?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3_600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "" => return Err(format!("{text:?} has no unit; {HINT}")),
            other => return Err(format!("unknown unit {other:?} in {text:?}; {HINT}")),
        };
        total = total.saturating_add(part);
        rest = tail.trim_start();
    }
    if total.is_zero() {
        return Err(format!("{text:?} is zero; give a positive duration"));
    }
    if total > MAX_DURATION {
        return Err(format!("{text:?} is longer than 366 days"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5_400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        for bad in [
            "",
            "3",
            "s",
            "3 weeks",
            "0s",
            "-1s",
            "1.5h",
            "400d",
            "99999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
