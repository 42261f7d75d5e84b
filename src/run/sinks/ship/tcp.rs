//! Opening a TCP connection to a sink, within a bounded time.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a connection may take to open: a receiver whose packets are dropped (a
/// firewall, a host gone) costs the thread no more than this per address.
const CONNECT: Duration = Duration::from_secs(2);

/// The first address `address` (`HOST:PORT`) resolves to that takes a connection.
pub fn connect(address: &str) -> Result<TcpStream, String> {
    let addrs = address
        .to_socket_addrs()
        .map_err(|e| format!("{address}: {e}"))?;
    let mut last = format!("{address}: resolves to no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, CONNECT) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("{address}: {e}"),
        }
    }
    Err(last)
}
