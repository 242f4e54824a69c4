//! The broker.
