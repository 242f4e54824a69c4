//! Whether approvals can be asked through the MCP client's elicitation ([`crate::elicit`]),
//! and of whom: set once `initialize` shows what the client offers.

use std::sync::OnceLock;

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::Peer;

/// How many approval events may wait for the elicitor (one at a time is normal).
pub const QUEUE: usize = 16;

/// Whether approvals can be asked through the client, and of whom.
#[derive(Debug, Default)]
pub struct Elicitor {
    /// The client, once it declared form elicitation on a protocol that allows it.
    peer: OnceLock<Peer<RoleServer>>,
    /// `--no-elicitation`.
    off: bool,
}

impl Elicitor {
    /// An elicitor; `off` keeps it from ever being ready.
    pub fn new(off: bool) -> Self {
        Elicitor {
            peer: OnceLock::new(),
            off,
        }
    }

    /// Called after `initialize`: the client can be asked when it declared form elicitation
    /// and the protocol lets a server send it requests.
    pub fn offer(&self, peer: &Peer<RoleServer>) {
        if self.off {
            return;
        }
        let Some(info) = peer.peer_info() else {
            return;
        };
        if info.protocol_version >= ProtocolVersion::V_2026_07_28 {
            return;
        }
        // Form elicitation: declared as such, or (as the first elicitation clients did) with
        // neither form nor url named.
        let form = info
            .capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if form {
            let _ = self.peer.set(peer.clone());
        }
    }

    /// True once approvals can be asked through the client.
    pub fn ready(&self) -> bool {
        self.peer.get().is_some()
    }

    /// The client to ask, once ready.
    pub fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.get().cloned()
    }
}
