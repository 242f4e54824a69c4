//! The nish-driver broker: the one process that decides.
//!
//! It owns sessions, the person's consent and its app scope, the lease, the takeover and pause
//! state, host approvals, the kill switch, policy and the audit. It never talks AT-SPI or X11
//! input and never draws: desktop work goes through a [`backend::Backend`], either the real
//! Linux one (sandboxed agents) or the in-process mock desktop for contract tests.
//!
//! - [`session`]: the pure session state machine (property-tested);
//! - [`policy`]: the one judge of every call (table-tested, its table in docs/architecture.md);
//! - [`views`] and [`snapshots`]: full, skeleton and root views of one walk, tokens, diffs;
//! - [`engine`]: every tool, judged, executed, verified and audited;
//! - [`server`]: the Unix socket (0700 directory, same uid only, hello first, bounded);
//! - [`conn`]: every connection's state machine and the permission table;
//! - [`audit`]: journald or a JSON-lines file;
//! - [`credentials`]: credential-looking text (contract §5.3);
//! - [`peer`]: the host program behind a shim connection, from the kernel.

pub mod approvals;
pub mod assistive;
pub mod audit;
pub mod audit_event;
pub mod backend;
pub mod busfilter;
pub mod conn;
pub mod credentials;
pub mod engine;
pub mod handover;
pub mod notify;
pub mod peer;
pub mod policy;
pub mod server;
pub mod session;
pub mod snapshots;
pub mod sys;
pub mod views;
