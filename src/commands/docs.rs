//! `runbook docs`: the Lua API reference, carried in the binary.

use crate::embedded::LUA_API;
use crate::error::{Error, Result};

pub fn docs(topic: Option<&str>, markdown: bool) -> Result<()> {
    let Some(topic) = topic.filter(|_| !markdown) else {
        print!("{LUA_API}");
        return Ok(());
    };
    let wanted = topic.trim().trim_end_matches("()").to_lowercase();
    let mut out = String::new();
    let mut topics = Vec::new();
    // A section is a "## module" (all of it) or a "### `signature`" naming the function.
    let mut keep_level = 0;
    for line in LUA_API.lines() {
        let level = line.chars().take_while(|c| *c == '#').count();
        if level == 2 || level == 3 {
            let title = line[level..].trim().trim_matches('`').to_lowercase();
            if level == 2 {
                topics.push(title.clone());
            }
            let names_it = title == wanted
                || title.starts_with(&format!("{wanted}("))
                || title.contains(&format!(":{wanted}("))
                || title.contains(&format!(".{wanted}("))
                || title.contains(&format!(" {wanted}("))
                || (level == 3 && title.split(['(', ' ']).next() == Some(wanted.as_str()));
            if names_it {
                keep_level = level;
            } else if keep_level != 0 && level <= keep_level {
                keep_level = 0;
            }
        }
        if keep_level != 0 {
            out.push_str(line);
            out.push('\n');
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!(
            "no docs for '{topic}'{}; topics: {}",
            crate::suggest::hint(&wanted, topics.iter().map(|s| s.as_str())),
            topics.join(", ")
        )));
    }
    print!("{out}");
    Ok(())
}
