//! What the binary carries: the shipped runbooks (`runbooks/`), the Lua stdlib
//! (`stdlib/runbook/`) and the Lua API reference (from the `/// Lua:` doc comments).

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

pub const LUA_API: &str = include_str!(concat!(env!("OUT_DIR"), "/lua-api.md"));

/// The EmmyLua definitions of the API (`runbook init` writes them for editors; the typo
/// check reads the options tables' exact keys from them).
pub const TYPES: &str = include_str!(concat!(env!("OUT_DIR"), "/runbook-types.lua"));

pub fn stdlib(name: &str) -> Option<&'static str> {
    STDLIB.iter().find(|(n, _)| *n == name).map(|(_, src)| *src)
}

pub fn shipped(name: &str) -> Option<&'static str> {
    SHIPPED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, src)| *src)
}
