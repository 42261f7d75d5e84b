//! `runbook new NAME [--target local|ssh|pct] [--dir DIR]`: a runbook to start from, in
//! the shipped runbooks' style (two-space indents, double quotes, `runbook { … }`). It
//! passes `runbook check` and the editor types (tests/new.rs holds it to both).

use crate::cli::NewTarget;
use crate::error::{Error, Result};
use std::io::Write as _;
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
    let path = dir.join(format!("{name}.lua"));
    // create_new: the check and the creation are one step, so nothing is ever overwritten.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Error::FileExists(path))
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    file.write_all(skeleton(name, target).as_bytes())
        .map_err(|e| Error::io(&path, e))?;
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

local scratch = "" -- made by "change", removed by "clean up"

step("look", function()
  -- A read: it runs during --dry-run too, so the preview shows what it found.
  local r = box:exec({{ "uname", "-sr" }}, {{ read_only = true }})
  log.info("running on " .. text.trim(r.stdout))
end)

step("change", {{ timeout = "1m" }}, function()
  -- A change: --dry-run only plans it.
  scratch = text.trim(box:exec({{ "mktemp", "-d" }}).stdout)
  box:exec({{ "tee", scratch .. "/note" }}, {{ stdin = params.message .. "\n" }})
end)

step("clean up", {{ always = true }}, function()
  -- always: runs after a failed step or Ctrl-C too, like finally.
  if scratch ~= "" then
    box:exec({{ "rm", "-rf", "--", scratch }})
  end
end)
"#
    )
}
