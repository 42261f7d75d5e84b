//! `runbook new NAME [--target local|ssh|pct] [--dir DIR]`: a runbook to start from, in
//! the shipped runbooks' style (two-space indents, double quotes, `runbook { … }`). It
//! passes `runbook check` and the editor types (tests/new.rs holds it to both).

use crate::base::error::{Error, Result};
use crate::base::fsx;
use crate::cli::args::NewTarget;
use std::path::Path;

pub fn new(name: &str, target: NewTarget, dir: Option<&Path>) -> Result<()> {
    let name = name.strip_suffix(".lua").unwrap_or(name);
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(Error::Usage(format!(
            "new {name:?}: a runbook name is letters, digits, '-' and '_' (e.g. cache-reset), at most 64"
        )));
    }
    let dir = dir.unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "new --dir {}: no such directory",
            dir.display()
        )));
    }
    let file = format!("{name}.lua");
    let path = dir.join(&file);
    // Never overwritten, and never written through a link (a dangling one would create
    // its target wherever it points): the file is made beside it and linked into place.
    let written = fsx::write(
        dir,
        Path::new(&file),
        skeleton(name, target).as_bytes(),
        fsx::Mode::Usual,
        fsx::Replace::No,
        false,
    );
    match written {
        Err(e) if matches!(e.why, fsx::Why::Exists) => return Err(Error::FileExists(path)),
        other => other?,
    }
    println!(
        "wrote {}: try `runbook check {0}`, then `runbook run {0} --dry-run`",
        path.display()
    );
    Ok(())
}

/// The skeleton for `name` on a target of kind `target`.
pub fn skeleton(name: &str, target: NewTarget) -> String {
    let (param, handle) = match target {
        NewTarget::Local => ("", "target(\"local\")"),
        NewTarget::Ssh => (
            "    host = { default = \"root@node1.example\", help = \"user@host, an ssh config alias or an inventory name\" },\n",
            "target(params.host)",
        ),
        NewTarget::Pct => (
            "    node = { default = \"root@pve1.example\", help = \"the Proxmox node the container is on\" },\n    \
             ctid = { type = \"integer\", default = 200, help = \"the container's id\" },\n",
            "target(params.node):pct(params.ctid)",
        ),
    };
    format!(
        r#"-- {name}: say here what it is for and when to run it.
--   runbook check {name}.lua && runbook run {name}.lua --dry-run
runbook {{
  name = "{name}",
  description = "What {name} does, in a line",
  params = {{
{param}    message = {{ type = "string", default = "hello", help = "what the change step writes" }},
  }},
}}

local text = require("runbook.text")
local box = {handle}

-- Where the change writes, under the target user's home ($HOME is read there). Planned
-- and real runs send the same words: a confirmed run is held to the commands its plan
-- showed, so no command here is built from an earlier change's output.
local place = "$HOME/.cache/{name}"

step("look", function()
  -- A read: it runs during --dry-run too, so the preview shows what it found.
  local r = box:exec({{ "uname", "-sr" }}, {{ read_only = true }})
  log.info("running on " .. text.trim(r.stdout))
end)

step("change", {{ timeout = "1m" }}, function()
  -- A change: --dry-run only plans it. Values reach sh as "$1", never pasted into it.
  box:exec({{ "sh", "-c", 'mkdir -p -- "$HOME/.cache/$1" && cat > "$HOME/.cache/$1/note"', "sh", "{name}" }}, {{
    stdin = params.message .. "\n",
    summary = "write " .. place .. "/note",
  }})
end)

step("clean up", {{ always = true }}, function()
  -- always: runs after a failed step or Ctrl-C too, like finally.
  box:exec({{ "sh", "-c", 'rm -rf -- "$HOME/.cache/$1"', "sh", "{name}" }}, {{
    summary = "remove " .. place,
    destructive = true,
  }})
end)
"#
    )
}
