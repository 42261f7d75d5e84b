//! Where events go: the terminal (bars and lines), `--json` (NDJSON on stdout), the
//! run record (append-only JSONL under the state dir) and the sinks of `runbook.toml`
//! (ship/: syslog, webhook, a directory).

pub mod collect;
pub mod json;
pub mod record;
pub mod ship;
pub mod terminal;
