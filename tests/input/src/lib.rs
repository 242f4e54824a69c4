//! The input agent's tests on private desktops: the desktop tier of the test suite, outside
//! the workspace's default members (`cargo test` on those starts no desktop).
//!
//! The tests are in `tests/` and the act latency example in `examples/`; this library is
//! empty. Run them with `cargo build --workspace --bins && cargo test -p nish-input-tests`
//! (they start the built `nish-input` and `nish-reader`), or with the rest of the desktop tier
//! through `scripts/test.sh`.
