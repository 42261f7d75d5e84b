//! `kind = "webhook"`: each batch POSTed to the URL as JSON lines
//! (`application/x-ndjson`), over plain HTTP/1.1 written here: the request is one
//! `Content-Length` body on a connection of its own, and only the status line of the
//! answer is read. A 2xx confirms the batch; anything else, or no answer within
//! [`ANSWER`], fails it, and the whole batch is sent again later (a receiver that took
//! it but whose answer was lost gets it twice: de-duplicate by `id`). No TLS: runbook
//! carries no TLS stack, and `runbook.toml` refuses `https://`.

use super::line::{Destination, Line};
use super::tcp::connect;
use crate::base::project::{HttpUrl, Webhook as Config};
use std::io::{Read, Write};
use std::time::Duration;

const ANSWER: Duration = Duration::from_secs(10);

pub struct Webhook {
    config: Config,
}

impl Webhook {
    pub fn new(config: &Config) -> Webhook {
        Webhook {
            config: config.clone(),
        }
    }
}

impl Destination for Webhook {
    fn deliver(&mut self, lines: &[Line]) -> Result<(), String> {
        let mut body = Vec::new();
        for line in lines {
            body.extend_from_slice(line.text.as_bytes());
            body.push(b'\n');
        }
        post(&self.config.url, "application/x-ndjson", &body)
    }
}

/// POSTs `body` to `url` on a connection of its own: `Ok` once the receiver answered a
/// 2xx within [`ANSWER`] (`runbook watch`'s notifications are sent the same way).
pub fn post(url: &HttpUrl, content_type: &str, body: &[u8]) -> Result<(), String> {
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: runbook/{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        url.path,
        url.host,
        env!("CARGO_PKG_VERSION"),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let mut stream = connect(&url.authority)?;
    let io = |e: std::io::Error| format!("{}: {e}", url.text);
    stream.set_write_timeout(Some(ANSWER)).map_err(io)?;
    stream.set_read_timeout(Some(ANSWER)).map_err(io)?;
    stream.write_all(&request).map_err(io)?;
    let status = status_line(&mut stream).map_err(io)?;
    match status_code(&status) {
        Some(code) if (200..300).contains(&code) => Ok(()),
        _ => Err(format!(
            "{}: answered {:?}",
            url.text,
            crate::base::printable::line(&status)
        )),
    }
}

/// The answer's first line (without its line break), read byte by byte up to 1 KiB.
fn status_line(stream: &mut impl Read) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 1024 {
        match stream.read(&mut byte)? {
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
    }
    if line.is_empty() {
        return Err(std::io::Error::other("closed without an answer"));
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// `HTTP/1.1 204 No Content` → 204.
fn status_code(line: &str) -> Option<u16> {
    let mut words = line.split(' ');
    let version = words.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_status() {
        let mut answer: &[u8] = b"HTTP/1.1 204 No Content\r\nX: y\r\n\r\n";
        let line = status_line(&mut answer).unwrap();
        assert_eq!(status_code(&line), Some(204));
        assert_eq!(status_code("SSH-2.0-OpenSSH"), None);
        let mut nothing: &[u8] = b"";
        assert!(status_line(&mut nothing).is_err());
    }
}
