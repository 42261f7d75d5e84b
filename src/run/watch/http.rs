//! The listener Alertmanager's webhook POSTs to: HTTP/1.1 on a loopback TCP port or a
//! unix socket, written here (runbook carries no HTTP server, and one request shape is
//! all it takes): a request line, headers, a `Content-Length` body of 1 MiB at most,
//! read within [`READ_LIMIT`]; one request per connection, answered and closed. What
//! the body means is the caller's (`alerts.rs`).

use super::config::Listen;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest body taken: Alertmanager's payloads are a few KiB per alert.
const MAX_BODY: usize = 1024 * 1024;
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request.
pub const READ_LIMIT: Duration = Duration::from_secs(10);

pub enum Listener {
    Tcp(tokio::net::TcpListener),
    /// The socket, removed when the listener is dropped.
    Unix(tokio::net::UnixListener, PathBuf),
}

/// A connection taken by the listener.
pub trait Conn: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Conn for T {}

impl Listener {
    /// Listens at `listen`. A unix socket left by a watcher that died is replaced; a
    /// path that is something else, or a socket someone answers on, is refused.
    pub async fn bind(listen: &Listen) -> Result<Listener, String> {
        match listen {
            Listen::Tcp(addr) => tokio::net::TcpListener::bind(addr)
                .await
                .map(Listener::Tcp)
                .map_err(|e| format!("cannot listen on {addr}: {e}")),
            Listen::Unix(path) => {
                use std::os::unix::fs::FileTypeExt;
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    if !meta.file_type().is_socket() {
                        return Err(format!(
                            "cannot listen on unix:{}: something else than a socket is there",
                            path.display()
                        ));
                    }
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(format!(
                            "cannot listen on unix:{}: something listens there already",
                            path.display()
                        ));
                    }
                    std::fs::remove_file(path).map_err(|e| {
                        format!("cannot replace the stale socket {}: {e}", path.display())
                    })?;
                }
                // Only this user may connect (a proxy in front of it runs as this user):
                // the socket is made 0600 by the umask, so that it is never open to others,
                // not even between bind and a chmod.
                // SAFETY: umask only swaps the process's file-creation mask.
                let old = unsafe { libc::umask(0o177) };
                let bound = tokio::net::UnixListener::bind(path);
                // SAFETY: as above, putting the mask back.
                unsafe { libc::umask(old) };
                let l =
                    bound.map_err(|e| format!("cannot listen on unix:{}: {e}", path.display()))?;
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
                Ok(Listener::Unix(l, path.clone()))
            }
        }
    }

    /// The address it listens at (a port of 0 given is the one the system chose).
    pub fn shown(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map_or_else(|_| "?".into(), |a| format!("http://{a}/")),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }

    pub async fn accept(&self) -> std::io::Result<Box<dyn Conn>> {
        Ok(match self {
            Listener::Tcp(l) => Box::new(l.accept().await?.0),
            Listener::Unix(l, _) => Box::new(l.accept().await?.0),
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A request as read.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// A request that cannot be taken: the status to answer and why.
#[derive(Debug, PartialEq)]
pub struct Refusal(pub u16, pub String);

/// Reads one request (not bounded in time: the caller is).
pub async fn read_request<S: AsyncRead + Unpin>(s: &mut S) -> Result<Request, Refusal> {
    let bad = |why: &str| Refusal(400, why.to_string());
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(Refusal(431, "the request's headers are too long".into()));
        }
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| bad(&format!("reading the request: {e}")))?;
        if n == 0 {
            return Err(bad("the connection closed before the request's end"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head =
        std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("headers that are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut words = first.split(' ');
    let (method, path, version) = (words.next(), words.next(), words.next());
    let (Some(method), Some(path), Some(version)) = (method, path, version) else {
        return Err(bad("not an HTTP request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Refusal(505, "HTTP/1.x only".into()));
    }
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("a header line without ':'"));
        };
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| bad("Content-Length is not a number"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Refusal(411, "send the body with a Content-Length".into()));
        }
    }
    let length = length.unwrap_or(0);
    if length > MAX_BODY {
        return Err(Refusal(
            413,
            format!("a body of more than {MAX_BODY} bytes"),
        ));
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| bad(&format!("reading the body: {e}")))?;
        if n == 0 {
            return Err(bad("the connection closed before the body's end"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        body,
    })
}

/// Answers with `code` and a one-line text body, and closes.
pub async fn respond<S: AsyncWrite + Unpin>(s: &mut S, code: u16, text: &str) {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let body = format!("{}\n", crate::base::printable::line(text));
    let answer = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(answer.as_bytes()).await;
    let _ = s.shutdown().await;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> Result<Request, Refusal> {
        let mut s = bytes;
        read_request(&mut s).await
    }

    #[tokio::test]
    async fn reads_a_post_and_refuses_what_it_does_not_take() {
        let r = read(b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            .await
            .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/alerts"));
        assert_eq!(r.body, b"hello");
        let chunked = read(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").await;
        assert_eq!(chunked.unwrap_err().0, 411);
        let big = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(read(big.as_bytes()).await.unwrap_err().0, 413);
        assert_eq!(
            read(b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nhi")
                .await
                .unwrap_err()
                .0,
            400
        );
        assert_eq!(read(b"GARBAGE\r\n\r\n").await.unwrap_err().0, 400);
        assert_eq!(read(b"GET / HTTP/2\r\n\r\n").await.unwrap_err().0, 505);
    }
}
