//! Durations as users write them: `"30s"`, `"5m"`, `"1h 30m"`, `"250ms"`, or a bare number of seconds.

use std::time::Duration;

pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!("'{text}' is not a valid duration"));
    }
    humantime::parse_duration(t).map_err(|e| {
        format!("'{text}' is not a valid duration ({e}); use e.g. \"30s\", \"5m\", \"1h\"")
    })
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
    fn short_form() {
        assert_eq!(short(Duration::from_millis(850)), "850ms");
        assert_eq!(short(Duration::from_millis(3200)), "3.2s");
        assert_eq!(short(Duration::from_secs(125)), "2m05s");
    }
}
