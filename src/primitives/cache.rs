//! The `cache` primitives (placeholder until implemented: registers nothing yet).
