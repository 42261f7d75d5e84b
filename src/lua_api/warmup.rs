//! `warmup.*`: not implemented yet; registers nothing.

use mlua::Lua;

pub fn register(_lua: &Lua) -> mlua::Result<()> {
    Ok(())
}
