//! The `venv` primitives (placeholder until implemented: registers nothing yet).
