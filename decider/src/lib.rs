//! The decider of nish-driver: the part of the broker that decides.
//!
//! It owns sessions, the person's consent and its app scope, the lease, the takeover and pause
//! state, host approvals, the kill switch, policy and the audit. It talks no D-Bus and no X11,
//! starts no process and draws nothing: desktop work goes through a [`backend::Backend`], which
//! the agent host (`nish-agenthost`, the sandboxed agents) implements for the real desktop and
//! test doubles (`nish-testd`) implement outside the daemon's build.
//!
//! - [`session`]: the pure session state machine (property-tested);
//! - [`policy`]: the one judge of every call (table-tested, its table in docs/architecture.md);
//! - [`views`] and [`snapshots`]: full, skeleton and root views of one walk, tokens, diffs;
//! - [`engine`]: every tool, judged, executed, verified and audited;
//! - [`server`]: the Unix socket (0700 directory, same uid only, hello first, bounded);
//! - [`stop`]: the kill switch's own socket, which no flood can fill;
//! - [`conn`]: every connection's state machine and the permission table;
//! - [`audit`]: journald or a JSON-lines file;
//! - [`credentials`]: credential-looking text (contract §5.3);
//! - [`peer`]: the host program behind a shim connection, from the kernel.

pub mod approvals;
pub mod audit;
pub mod audit_event;
pub mod backend;
pub mod conn;
pub mod credentials;
pub mod engine;
pub mod peer;
pub mod policy;
pub mod server;
pub mod session;
pub mod snapshots;
pub mod stop;
pub mod views;
