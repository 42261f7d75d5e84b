//! The `proc` primitives (placeholder until implemented: registers nothing yet).
