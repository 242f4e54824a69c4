//! Credential-looking text (contract §5.3). The rules live in `nish_proto::credentials`, shared
//! with the reader, which applies the field-value rule before a value leaves it; the broker
//! applies the clipboard rule to clipboard reads and the field-value rule again to every read
//! it records (see `engine::reads::validate_tree`).

pub use nish_proto::credentials::{looks_like_credential, value_looks_like_credential};
