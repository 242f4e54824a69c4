//! The indicator's tests on private desktops: the desktop tier of the test suite, outside the
//! workspace's default members (`cargo test` on those starts no desktop).
//!
//! The tests are in `tests/`; this library is empty. Run them with
//! `cargo build --workspace --bins && cargo test -p nish-indicator-tests` (they start the built
//! `nish-indicator`), or with the rest of the desktop tier through `scripts/test.sh`.
