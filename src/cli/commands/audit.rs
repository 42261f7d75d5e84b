//! `audit verify`: the run records checked for tampering (`run/audit.rs`), one line each.

use crate::base::error::{Error, Result};
use crate::base::printable;
use crate::cli::args::AuditAction;
use crate::run::audit::{self, Audit, Checked, IndexVerdict, Verdict};
use crate::run::state;

pub fn audit(action: AuditAction) -> Result<()> {
    match action {
        AuditAction::Verify {
            run,
            all: _,
            json,
            state_dir,
        } => {
            let dir = state::state_dir(state_dir);
            let found = audit::verify(&dir, run.as_deref())?;
            if json {
                print_json(&found);
            } else {
                print_text(&found);
            }
            outcome(&found)
        }
    }
}

/// The start of a hash, as `history` shows a plan's.
fn short(hash: &str) -> String {
    format!("{}…", &hash[..hash.len().min(12)])
}

fn text_of(c: &Checked) -> String {
    match &c.verdict {
        Verdict::Ok { lines, last } => format!("ok ({lines} lines, last hash {})", short(last)),
        Verdict::Incomplete { lines, last, why } => format!(
            "incomplete ({why}): {lines} lines, chain intact, last hash {}",
            short(last)
        ),
        Verdict::Unchained => "unchained (made before records were chained): not checked".into(),
        Verdict::Empty => "empty (no line was written)".into(),
        Verdict::Bad { what, .. } => {
            format!(
                "TAMPERED {}: {what}",
                printable::line(&c.path.display().to_string())
            )
        }
    }
}

fn print_text(found: &Audit) {
    for c in &found.records {
        println!("{:<22} {}", printable::line(&c.run_id), text_of(c));
    }
    let path = found.index_path.display().to_string();
    let index = printable::line(&path);
    let said = match &found.index {
        IndexVerdict::Ok { lines } => format!("ok ({lines} lines, {index})"),
        IndexVerdict::None => format!("none yet ({index})"),
        IndexVerdict::Bad(why) => format!("TAMPERED the index itself, {index}: {why}"),
    };
    println!("{:<22} {said}", "index");
    let unchained = found
        .records
        .iter()
        .filter(|c| c.verdict == Verdict::Unchained)
        .count();
    if unchained > 0 {
        println!(
            "{unchained} record(s) made before records were chained were not checked (they do not fail the verify)"
        );
    }
}

/// A `--json` line: a record's (`run_id`, `record`) or the index's (`index`).
#[derive(serde::Serialize, Default)]
struct JsonLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<&'a std::path::Path>,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<&'a std::path::Path>,
    /// ok, incomplete, unchained, empty, tampered (a record); ok, none, tampered (the index).
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
    /// The first bad line, 1-based, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<&'a str>,
}

fn print_json(found: &Audit) {
    let print = |line: JsonLine| {
        if let Ok(text) = serde_json::to_string(&line) {
            println!("{text}");
        }
    };
    for c in &found.records {
        let of = JsonLine {
            run_id: Some(&c.run_id),
            record: Some(&c.path),
            ..JsonLine::default()
        };
        print(match &c.verdict {
            Verdict::Ok { lines, last } => JsonLine {
                status: "ok",
                lines: Some(*lines),
                last: Some(last),
                ..of
            },
            Verdict::Incomplete { lines, last, why } => JsonLine {
                status: "incomplete",
                lines: Some(*lines),
                last: Some(last),
                why: Some(why),
                ..of
            },
            Verdict::Unchained => JsonLine {
                status: "unchained",
                ..of
            },
            Verdict::Empty => JsonLine {
                status: "empty",
                lines: Some(0),
                ..of
            },
            Verdict::Bad { line, what } => JsonLine {
                status: "tampered",
                line: *line,
                problem: Some(what),
                ..of
            },
        });
    }
    let of = JsonLine {
        index: Some(&found.index_path),
        ..JsonLine::default()
    };
    print(match &found.index {
        IndexVerdict::Ok { lines } => JsonLine {
            status: "ok",
            lines: Some(*lines),
            ..of
        },
        IndexVerdict::None => JsonLine {
            status: "none",
            ..of
        },
        IndexVerdict::Bad(why) => JsonLine {
            status: "tampered",
            problem: Some(why),
            ..of
        },
    });
}

fn outcome(found: &Audit) -> Result<()> {
    let bad = found.records.iter().filter(|c| c.verdict.failed()).count();
    let index_bad = matches!(found.index, IndexVerdict::Bad(_));
    if bad == 0 && !index_bad {
        return Ok(());
    }
    let mut what = format!(
        "{bad} of {} run record(s) failed the verify",
        found.records.len()
    );
    if index_bad {
        what += ", and so did the index of runs";
    }
    Err(Error::RecordsTampered(format!(
        "{what} (each is named above)"
    )))
}
