//! Between the primitives and Lua: a primitive's result becomes a Lua value (`to_lua`)
//! and its error the Lua error here, and only here, so every primitive fails the same
//! way (`file:line: message`, or an [`Abort`](crate::base::abort::Abort) matched by type).

use crate::primitives;

/// A serde value as a Lua value, with `None` as nil (mlua's default is a truthy null).
pub fn to_lua<T: serde::Serialize>(lua: &mlua::Lua, value: &T) -> mlua::Result<mlua::Value> {
    use mlua::LuaSerdeExt;
    let opts = mlua::serde::ser::Options::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    lua.to_value_with(value, opts)
}

impl From<primitives::Error> for mlua::Error {
    fn from(e: primitives::Error) -> Self {
        match e {
            primitives::Error::Stop(abort) => mlua::Error::external(abort),
            failed @ primitives::Error::Failed { .. } => mlua::Error::runtime(failed.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::base::abort::{Abort, Why};
    use crate::primitives::Error;

    #[test]
    fn failures_name_their_line_and_stops_stay_aborts() {
        let failed: mlua::Error = Error::Failed {
            at: "rb/x.lua:3".into(),
            msg: "git.head: repo is empty".into(),
        }
        .into();
        assert!(
            matches!(&failed, mlua::Error::RuntimeError(m) if m == "rb/x.lua:3: git.head: repo is empty")
        );
        let stopped: mlua::Error = Error::Stop(Abort {
            why: Why::TimedOut,
            at: "rb/x.lua:4".into(),
        })
        .into();
        let abort = Abort::of(&stopped).expect("an abort");
        assert_eq!(
            (abort.why, abort.at.as_str()),
            (Why::TimedOut, "rb/x.lua:4")
        );
    }
}
