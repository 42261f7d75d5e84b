//! What the Lua API needs to know of the VM it is registered on. `sandbox.rs` makes that
//! VM and sits above this module: the limits and rules both sides share are defined
//! here, below both.

use crate::abort::Abort;
use crate::ctx::Ctx;
use mlua::{Lua, Table, Value};

/// Lua heap limit per runbook.
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// Name of the registry table (weak keys) holding the coroutines a runbook made with
/// `coroutine.create`/`coroutine.wrap` (the sandbox fills it); see
/// [`in_runbook_coroutine`].
pub const USER_THREADS: &str = "runbook.user_threads";

/// Errors with an [`Abort`] once the running step is interrupted or out of time; the
/// engine words the rest.
pub fn abort_check(ctx: &Ctx, loc: &str) -> mlua::Result<()> {
    match ctx.stopped() {
        Some(why) => Err(Abort::raise(why, loc)),
        None => Ok(()),
    }
}

/// Whether the running Lua code is inside a coroutine the runbook made. A command (any
/// async primitive) must not start there: mlua suspends the caller by yielding a
/// "pending" marker, and that yield would go to the runbook's own `coroutine.resume`,
/// which leaves the command running unsupervised past its step.
pub fn in_runbook_coroutine(lua: &Lua) -> bool {
    let Ok(threads) = lua.named_registry_value::<Table>(USER_THREADS) else {
        return false;
    };
    threads
        .raw_get::<Value>(lua.current_thread())
        .is_ok_and(|v| !v.is_nil())
}

/// Whether the running code can be suspended while a command runs. It cannot inside a
/// callback that Lua's C code makes (`string.gsub`, `table.sort`, `tostring`'s
/// `__tostring`, …): suspending there fails with "attempt to yield across a C-call
/// boundary" after the command was already planned.
pub fn can_suspend(lua: &Lua) -> bool {
    // SAFETY: `state()` is the thread running this callback; lua_isyieldable only reads
    // its C-call counter.
    lua.exec_raw_lua(|raw| unsafe { mlua::ffi::lua_isyieldable(raw.state()) != 0 })
}
