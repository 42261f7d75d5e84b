//! Where events go: the terminal (bars and lines), `--json` (NDJSON on stdout) and the
//! run record (append-only JSONL under the state dir).

pub mod collect;
pub mod json;
pub mod record;
pub mod terminal;
