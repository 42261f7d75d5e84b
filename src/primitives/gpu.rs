//! The `gpu` primitives (placeholder until implemented: registers nothing yet).
