//! `targets(group)`: an inventory group's hosts or a Slurm selection's nodes, as targets.

use super::target::TargetHandle;
use super::{ctx, err_at, string_value};
use crate::targets::registry::Member;
use mlua::{Lua, Table, Value};
use std::rc::Rc;

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals()
        .raw_set("targets", super::async_function(lua, targets)?)
}

/// Lua: targets(group) -> { target, … }
///
/// The hosts of an inventory group, in the inventory's order, e.g. for `parallel`; or
/// the nodes of a Slurm selection, one target each, listed by the scheduler when called
/// (inside a step): `targets("slurm:partition=gpu")` (`sinfo`),
/// `targets("slurm:job=4242")` (the nodes of a running job, each target in that job:
/// `squeue`), `targets("slurm:nodes=gpu[01-64]")` (`scontrol show hostnames`); settings
/// join with `&` (`slurm:nodes=gpu[01-08]&job=4242`, `…&immediate=30s`). An inventory
/// group may list Slurm selections and targets among its members. `parallel` over nodes
/// of one job or partition running the same command launches it once for all of them
/// (`srun --nodelist=a,b,… --ntasks-per-node=1`), each node's output and exit code
/// its own. With `--limit PATTERN` (`run`, `plan`, `apply`), only the hosts the pattern
/// keeps (a warning says when it keeps none of the group). Each target has its
/// inventory `vars` as `t.vars`.
///
/// ```lua
/// parallel(targets("gpu"), function(t) t:exec({ "uptime" }) end, { limit = 8 })
/// ```
/// ---@param group string
/// ---@return runbook.Target[]
async fn targets(lua: Lua, group: Value) -> mlua::Result<Table> {
    let Some(group) = string_value(&lua, group, "targets()")? else {
        return Err(err_at(
            &lua,
            "targets(): give a group name from the inventory, or a Slurm selection (\"slurm:partition=gpu\")",
        ));
    };
    let what = format!("targets(\"{group}\")");
    let mut all = Vec::new();
    if let Some(sel) = group.strip_prefix("slurm:") {
        all = super::slurm::select(&lua, &what, sel).await?;
    } else {
        let members = ctx(&lua)
            .targets
            .group(&group)
            .map_err(|e| err_at(&lua, e))?;
        for member in members {
            match member {
                Member::Target(t, vars) => all.push(TargetHandle(t, Rc::new(vars))),
                Member::Slurm(sel) => all.extend(super::slurm::select(&lua, &what, &sel).await?),
            }
        }
    }
    let ctx = ctx(&lua);
    let total = all.len();
    let list = lua.create_table()?;
    for t in all.into_iter().filter(|t| ctx.targets.keeps(&t.0.name())) {
        list.raw_push(t)?;
    }
    if let (Some(limit), 0, true) = (ctx.targets.limit(), list.raw_len(), total > 0) {
        ctx.bus.emit(crate::actions::events::Event::Log {
            step: ctx.step.get().map(|s| s.index),
            level: crate::actions::events::Level::Warn,
            message: format!(
                "{}: --limit {} keeps none of its {total} member(s): nothing to do on it",
                super::location(&lua),
                limit.text
            ),
        });
    }
    Ok(list)
}
