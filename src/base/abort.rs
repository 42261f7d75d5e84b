//! Why a step stops before its code ends by itself: its time ran out, a signal
//! interrupted it, or the run record can no longer be written. One type for all three,
//! raised as `mlua::Error::external(Abort)` wherever it is noticed (the instruction hook,
//! a command that was killed, a command that never started) and matched by type
//! (`Abort::of`) by the engine, `parallel()` and `require`, never by the words of a
//! message. Lua code never sees one as a value: every place that catches errors
//! (`pcall`, `xpcall`, `coroutine.resume`/`close`, `load`) raises the abort again.

/// What stopped the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    TimedOut,
    Interrupted,
    /// The run record broke off: runbook makes no change it cannot record.
    RecordBroken,
}

impl Why {
    fn words(self) -> &'static str {
        match self {
            Why::TimedOut => "timed out",
            Why::Interrupted => "interrupted",
            Why::RecordBroken => "the run record can no longer be written (see the error above); runbook does not make changes it cannot record",
        }
    }
}

/// An abort and the runbook line where it was noticed (`file:line`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {}", why.words())]
pub struct Abort {
    pub why: Why,
    pub at: String,
}

impl Abort {
    /// The Lua error that carries this abort.
    pub fn raise(why: Why, at: impl Into<String>) -> mlua::Error {
        mlua::Error::external(Abort { why, at: at.into() })
    }

    /// The abort `e` carries, through mlua's callback wrappers.
    pub fn of(e: &mlua::Error) -> Option<&Abort> {
        e.downcast_ref::<Abort>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_through_callback_wrappers_and_worded_with_its_line() {
        let e = Abort::raise(Why::TimedOut, "rb/x.lua:3");
        let wrapped = mlua::Error::CallbackError {
            traceback: "stack traceback:".into(),
            cause: std::sync::Arc::new(e),
        };
        let a = Abort::of(&wrapped).expect("found");
        assert_eq!(a.why, Why::TimedOut);
        assert_eq!(a.to_string(), "rb/x.lua:3: timed out");
        assert!(Abort::of(&mlua::Error::runtime("rb/x.lua:3: timed out")).is_none());
    }
}
