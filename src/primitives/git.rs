//! The `git` primitives (placeholder until implemented: registers nothing yet).
