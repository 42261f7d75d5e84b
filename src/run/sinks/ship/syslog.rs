//! `kind = "syslog"`: RFC 5424 messages over TCP, each framed by its length (RFC 6587's
//! octet counting, which rsyslog's imtcp and syslog-ng take without configuration).
//!
//! TCP says nothing of what the receiving program read, and syslog has no reply. So
//! each batch has a connection of its own: the messages, then our half of the
//! connection closed, then we wait for the receiver to close its half. A receiver
//! closes only once it has read to the end, which is after our last message: that close
//! is the confirmation. A connection that breaks first, or a receiver that does not
//! close within [`CONFIRM`], fails the batch, and the whole batch is sent again later:
//! a receiver may then get some of its messages twice (de-duplicate by the `id` in the
//! structured data), never none.

use super::line::{Destination, Line};
use super::tcp::connect;
use crate::base::project::{Facility, Syslog as Config};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

/// How long the receiver may take to read a batch and close.
const CONFIRM: Duration = Duration::from_secs(5);

/// The SD-ID of our structured data: `name@PEN` is the form RFC 5424 leaves to anyone;
/// runbook has no private enterprise number, and 32473 is the one RFC 5612 sets aside
/// for documentation and examples.
const SD_ID: &str = "runbook@32473";

pub struct Syslog {
    address: String,
    facility: Facility,
    hostname: String,
}

impl Syslog {
    pub fn new(config: &Config, hostname: &str) -> Syslog {
        Syslog {
            address: config.address.0.clone(),
            facility: config.facility,
            hostname: header_word(hostname, 255),
        }
    }
}

impl Destination for Syslog {
    fn deliver(&mut self, lines: &[Line]) -> Result<(), String> {
        let mut frames = Vec::new();
        for line in lines {
            let message = message(line, self.facility, &self.hostname);
            frames.extend_from_slice(format!("{} ", message.len()).as_bytes());
            frames.extend_from_slice(message.as_bytes());
        }
        let mut stream = connect(&self.address)?;
        let io = |e: std::io::Error| format!("{}: {e}", self.address);
        stream.set_write_timeout(Some(CONFIRM)).map_err(io)?;
        stream.set_read_timeout(Some(CONFIRM)).map_err(io)?;
        stream.write_all(&frames).map_err(io)?;
        stream.shutdown(Shutdown::Write).map_err(io)?;
        // Whatever it says before it closes is not ours to read (a syslog receiver says
        // nothing); only the close counts.
        let mut buf = [0u8; 512];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(format!(
                        "{}: the receiver did not close the connection within {}s of the batch's end, so nothing confirms it read the batch",
                        self.address,
                        CONFIRM.as_secs()
                    ))
                }
                Err(e) => return Err(io(e)),
            }
        }
    }
}

/// One RFC 5424 message: `<PRI>1 TIMESTAMP HOSTNAME runbook - MSGID [SD] MSG`, the
/// event's kind its MSGID, its id, run and sequence number the structured data, its JSON
/// the MSG (UTF-8, without the BOM RFC 5424 suggests, which receivers keep as text).
pub fn message(line: &Line, facility: Facility, hostname: &str) -> String {
    let pri = facility.code() as u16 * 8 + severity(line) as u16;
    let msgid = header_word(&line.event, 32);
    let sd = format!(
        "[{SD_ID} id=\"{}\" run=\"{}\" seq=\"{}\"]",
        sd_value(&line.id),
        sd_value(&line.run),
        line.seq
    );
    format!(
        "<{pri}>1 {} {hostname} runbook - {msgid} {sd} {}",
        header_word(&line.ts, 64),
        line.text
    )
}

/// RFC 5424's severities: a failure is an error, a failed command a warning, a log
/// line its own level, everything else informational.
fn severity(line: &Line) -> u8 {
    match (
        line.event.as_str(),
        line.level.as_deref(),
        line.outcome.as_deref(),
    ) {
        ("log", Some("error"), _) => 3,
        ("log", Some("warn"), _) => 4,
        ("log", Some("debug"), _) => 7,
        ("step_finished" | "run_finished", _, Some("failed")) => 3,
        ("run_finished", _, Some("interrupted")) => 4,
        ("action_finished", _, _) if line.ok == Some(false) => 4,
        _ => 6,
    }
}

/// A header field: printable US-ASCII without spaces, at most `max` characters, `-`
/// when nothing is left (RFC 5424's NILVALUE).
fn header_word(text: &str, max: usize) -> String {
    let word: String = text
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(max)
        .collect();
    if word.is_empty() {
        "-".into()
    } else {
        word
    }
}

/// A PARAM-VALUE: `"`, `\` and `]` escaped with `\`.
fn sd_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_as_rfc_5424() {
        let text = r#"{"id":"r:3","run":"r","seq":3,"record":{"ts":"2026-01-02T03:04:05.678Z","event":"step_finished","index":0,"name":"a","outcome":"failed","duration_ms":1}}"#;
        let line = Line::parse(text).unwrap();
        assert_eq!(
            message(&line, Facility::Local0, "node-1"),
            format!("<131>1 2026-01-02T03:04:05.678Z node-1 runbook - step_finished [runbook@32473 id=\"r:3\" run=\"r\" seq=\"3\"] {text}")
        );
        assert_eq!(header_word("a b\u{e9}", 255), "ab");
        assert_eq!(header_word(" ", 255), "-");
        assert_eq!(sd_value(r#"a"b\c]"#), r#"a\"b\\c\]"#);
    }
}
