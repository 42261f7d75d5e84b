//! Durations as users write them: `"30s"`, `"5m"`, `"1h 30m"`, `"250ms"`, or a bare number of seconds.
//!
//! Every duration from a runbook or a flag goes through here, so they all share one upper
//! bound: anything longer than [`MAX`] is refused with a clear error instead of reaching
//! `Instant + Duration` or `Duration::from_secs_f64`, which panic on overflow.

use std::time::Duration;

/// The longest duration runbook accepts anywhere (a timeout, a wait, a delay): 365 days.
/// Longer is always a mistake (or an attempt at "forever", which is spelt `0` for a
/// timeout), and staying far below what `Instant` can hold keeps every deadline
/// computation in range.
pub const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// How an error about a too-long duration ends.
const TOO_LONG: &str = "is longer than the longest duration runbook accepts (365 days)";

/// What an error about a timeout adds: the way to say "none".
pub const NO_TIMEOUT_HINT: &str = "; for no timeout, give 0";

pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return from_secs(secs).map_err(|e| format!("'{text}' {e}"));
    }
    let d = humantime::parse_duration(t).map_err(|e| {
        // humantime's own words list units up to years; say what a runbook would use.
        let why = match e {
            humantime::DurationError::UnknownUnit { unit, .. } => {
                format!("unknown unit '{unit}': use ms, s, m, h or d")
            }
            humantime::DurationError::NumberOverflow => return format!("'{text}' {TOO_LONG}"),
            other => other.to_string(),
        };
        format!("'{text}' is not a valid duration ({why}); use e.g. \"30s\", \"5m\", \"1h 30m\"")
    })?;
    if d > MAX {
        return Err(format!("'{text}' {TOO_LONG}"));
    }
    Ok(d)
}

/// A number of seconds (from Lua or a bare number in a string), range-checked. The error
/// says what is wrong with the number; the caller names where it came from.
pub fn from_secs(secs: f64) -> Result<Duration, String> {
    if secs.is_nan() || secs.is_infinite() {
        return Err("is not a valid duration (a finite number of seconds is needed)".into());
    }
    if secs < 0.0 {
        return Err("is not a valid duration (it is negative)".into());
    }
    if secs > MAX.as_secs_f64() {
        return Err(TOO_LONG.into());
    }
    let d = Duration::from_secs_f64(secs);
    // A positive amount too small for a nanosecond must not turn into 0, which means
    // "no timeout" for timeouts: the smallest real duration is what was asked for.
    if d.is_zero() && secs > 0.0 {
        return Ok(Duration::from_nanos(1));
    }
    Ok(d)
}

/// A whole number of seconds (a Lua integer), range-checked.
pub fn from_whole_secs(secs: i64) -> Result<Duration, String> {
    if secs < 0 {
        return Err("is not a valid duration (it is negative)".into());
    }
    let d = Duration::from_secs(secs.unsigned_abs());
    if d > MAX {
        return Err(TOO_LONG.into());
    }
    Ok(d)
}

/// Short human form for terminal lines: `850ms`, `3.2s`, `2m05s`.
pub fn short(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse("soon").is_err());
        assert!(parse("-3").is_err());
    }

    #[test]
    fn refuses_what_would_overflow() {
        for text in [
            "18446744073709551615s",
            "1e300",
            "1e20",
            "366d",
            "inf",
            "NaN",
            "-0.5",
            "99999999999999999999999999s",
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(&format!("'{text}'")), "{text}: {e}");
        }
        assert!(parse("1e300").unwrap_err().contains("365 days"));
        assert_eq!(parse("365d").unwrap(), MAX);
        assert!(from_secs(f64::MAX).is_err());
        assert!(from_whole_secs(i64::MAX).is_err());
        assert!(from_whole_secs(-1).is_err());
        assert_eq!(from_whole_secs(0).unwrap(), Duration::ZERO);
    }

    #[test]
    fn an_unknown_unit_names_the_units_a_runbook_uses() {
        let e = parse("5 fortnights").unwrap_err();
        assert!(
            e.contains("unknown unit 'fortnights': use ms, s, m, h or d"),
            "{e}"
        );
        assert!(!e.contains("years"), "{e}");
    }

    #[test]
    fn zero_is_zero_in_every_spelling_and_tiny_is_not() {
        for text in ["0", "0.0", "0s", "0ms", "-0"] {
            assert_eq!(parse(text).unwrap(), Duration::ZERO, "{text}");
        }
        assert_eq!(from_secs(1e-12).unwrap(), Duration::from_nanos(1));
    }

    #[test]
    fn short_form() {
        assert_eq!(short(Duration::from_millis(850)), "850ms");
        assert_eq!(short(Duration::from_millis(3200)), "3.2s");
        assert_eq!(short(Duration::from_secs(125)), "2m05s");
    }
}
