//! The `warmup` primitives (placeholder until implemented: registers nothing yet).
