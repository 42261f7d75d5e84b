//! What the Lua API needs to know of the VM it is registered on. `sandbox.rs` makes that
//! VM and sits above this module: the limits and rules both sides share are defined
//! here, below both.

use crate::actions::ctx::Ctx;
use crate::base::abort::Abort;
use mlua::{Lua, Table, Value};

/// Lua heap limit per runbook.
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// Name of the registry table (weak keys) holding the coroutines a runbook made with
/// `coroutine.create`/`coroutine.wrap` (the sandbox fills it); see
/// [`in_runbook_coroutine`]. Each one's value is the thread that last resumed it (`true`
/// before its first resume): see [`resumed_at`].
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

/// `file:line` where the runbook resumed the coroutine that runs now, for code in it
/// whose own stack holds no runbook line: a tail call (`coroutine.wrap(function() return
/// box:exec(…) end)`) leaves only the called function there. Looked up through the
/// resumers (a coroutine may be resumed by another), a few at most.
pub fn resumed_at(lua: &Lua) -> Option<String> {
    let threads = lua.named_registry_value::<Table>(USER_THREADS).ok()?;
    let mut thread = lua.current_thread();
    for _ in 0..8 {
        let Ok(Value::Thread(resumer)) = threads.raw_get::<Value>(&thread) else {
            return None;
        };
        if let Some(at) = runbook_line(&resumer) {
            return Some(at);
        }
        thread = resumer;
    }
    None
}

/// The innermost `file:line` of runbook code (a chunk named `@file`) on `thread`'s stack.
fn runbook_line(thread: &mlua::Thread) -> Option<String> {
    use mlua::ffi;
    let state = thread.state();
    for level in 0..64 {
        // SAFETY: `state` is a live thread of this VM (held by `thread`), suspended while
        // this callback runs; lua_getstack/lua_getinfo only read its call frames, and the
        // strings they hand back live as long as the functions on that stack.
        unsafe {
            let mut ar = std::mem::zeroed::<ffi::lua_Debug>();
            if ffi::lua_getstack(state, level, &mut ar) == 0 {
                return None;
            }
            if ffi::lua_getinfo(state, c"Sl".as_ptr(), &mut ar) == 0 || ar.source.is_null() {
                continue;
            }
            let source = std::ffi::CStr::from_ptr(ar.source).to_string_lossy();
            if let Some(file) = source.strip_prefix('@') {
                if ar.currentline > 0 {
                    return Some(format!("{file}:{}", ar.currentline));
                }
            }
        }
    }
    None
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
