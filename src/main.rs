//! `runbook`: runs operations runbooks written in Lua. The program is the library's
//! `main` (src/lib.rs); the library exists so that the integration tests can read
//! events as the types the program writes them with.

use std::process::ExitCode;

fn main() -> ExitCode {
    runbook::main()
}
