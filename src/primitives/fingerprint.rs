//! The `fingerprint` primitives (placeholder until implemented: registers nothing yet).
