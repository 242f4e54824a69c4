//! The broker's wire protocols: shim <-> broker, terminal commands <-> broker and
//! broker <-> agents.
//!
//! Every connection starts with a [`Hello`] from the connecting side (role and protocol version);
//! a mismatch is a readable error, not a decode failure. After it, each side sends only its own
//! direction's message enum (one enum per direction and peer kind), so a reader's dispatcher
//! has no variant for an action and cannot be asked for one.
//!
//! Frames are a 4-byte big-endian length and a body in the codec's serde format. The length
//! is checked against the receiver's maximum, and every length inside the body against the
//! body, before anything is allocated (see [`codec`]). Clients check the broker's socket before they send anything
//! (see [`trust`]).

use serde::{Deserialize, Serialize};

pub mod call;
pub mod call_table;
pub mod cast;
pub mod cli;
#[cfg(feature = "codec")]
pub mod codec;
pub mod indicator;
pub mod input;
pub mod reader;
pub mod shim;
pub mod trust;

/// Version of these wire protocols; bumped on any incompatible change of a message enum.
pub const PROTO_VERSION: u32 = 20;

/// Largest frame any peer accepts (screen captures are the largest messages).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Largest frame the broker accepts from a shim or a terminal command.
pub const MAX_CLIENT_FRAME_BYTES: usize = 1024 * 1024;

/// Who is speaking on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// An MCP shim (`nish-mcp`), one per host.
    Shim,
    /// A terminal command (`nish-driver status`, `stop`, `doctor`).
    Cli,
    /// The reader agent (`nish-reader`).
    Reader,
    /// The input agent (`nish-input`).
    Input,
    /// The indicator and consent process (`nish-indicator`).
    Indicator,
    /// The broker (`nish-driver serve`): its hello answers a client of another protocol
    /// version, so the client can say which versions met ([`Hello::mismatch`]). A [`Hello`]
    /// encodes the same in every version: it is the one frame both can read.
    Broker,
}

impl Role {
    /// A lowercase name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shim => "shim",
            Role::Cli => "cli",
            Role::Reader => "reader",
            Role::Input => "input",
            Role::Indicator => "indicator",
            Role::Broker => "broker",
        }
    }
}

/// The first frame on every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The speaker's role.
    pub role: Role,
    /// [`PROTO_VERSION`] of the speaker's build.
    pub proto_version: u32,
    /// The speaker's driver version, for messages.
    pub driver_version: String,
}

impl Hello {
    /// This build's hello for `role`.
    pub fn new(role: Role) -> Self {
        Hello {
            role,
            proto_version: PROTO_VERSION,
            driver_version: crate::DRIVER_VERSION.into(),
        }
    }

    /// The message for a client whose protocol version is not the broker's (`broker`, the
    /// broker's own hello): both versions, and what to restart — the service when it is older
    /// than the client (it was not restarted after an upgrade), else the host app (it still runs
    /// an older `nish-mcp`).
    pub fn mismatch(&self, broker: &Hello) -> String {
        let theirs = crate::model::escape_clip(&broker.driver_version, 32);
        let restart = if broker.proto_version < self.proto_version {
            "restart the service so it runs the installed version: systemctl --user restart nish-driver.service"
        } else {
            "restart the host app so it starts the nish-mcp installed with it"
        };
        format!(
            "this nish-mcp is version {} (protocol {}) and the running nish-driver is version {} (protocol {}): {restart}",
            crate::model::escape_clip(&self.driver_version, 32),
            self.proto_version,
            theirs,
            broker.proto_version
        )
    }

    /// Checks a peer's hello: the expected role and this build's protocol version.
    pub fn check(&self, expected: &[Role]) -> Result<(), String> {
        if self.proto_version != PROTO_VERSION {
            return Err(format!(
                "protocol version mismatch: peer {} speaks {} (driver {}), this build speaks {} (driver {}); \
                 install matching versions of nish-driver and its programs",
                self.role.as_str(),
                self.proto_version,
                crate::model::escape_clip(&self.driver_version, 32),
                PROTO_VERSION,
                crate::DRIVER_VERSION
            ));
        }
        if !expected.contains(&self.role) {
            return Err(format!("unexpected peer role {}", self.role.as_str()));
        }
        Ok(())
    }
}

/// What an agent reports about its own lock-down before it does any work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockdownReport {
    /// `PR_GET_NO_NEW_PRIVS` is 1.
    pub no_new_privs: bool,
    /// The effective, permitted, inheritable and ambient capability sets are empty.
    pub caps_empty: bool,
    /// A seccomp filter is installed (`Seccomp: 2` in `/proc/self/status`).
    pub seccomp: bool,
    /// Landlock: `full`, `partial` (an older ABI, still no writable path) or `unsupported`.
    pub landlock: String,
    /// One line for the doctor and the audit when something is missing.
    pub detail: String,
}

impl LockdownReport {
    /// True when the agent may be used: everything required is in force. A kernel without
    /// Landlock is accepted only when `allow_no_landlock` is set (the doctor reports it).
    pub fn acceptable(&self, allow_no_landlock: bool) -> bool {
        self.no_new_privs
            && self.caps_empty
            && self.seccomp
            && (self.landlock == "full" || self.landlock == "partial" || allow_no_landlock)
    }
}

/// A failure an agent reports for one request: a code from the error table and a message
/// built from bounded identifiers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentFailure {
    /// The wire name of an [`crate::errors::ErrorCode`]; the broker maps unknown names to
    /// `internal_error`.
    pub code: String,
    /// One line.
    pub message: String,
}

/// The file descriptor on which the broker hands each agent its end of the socketpair; agents
/// are started as `<agent> --fd 3`.
pub const AGENT_FD: i32 = 3;

/// The X11 property (type CARDINAL, value 1) the indicator sets on every window it draws; the
/// reader leaves such windows out of window lists, hit-tests and captures.
pub const OWN_WINDOW_ATOM: &str = "_NISH_DRIVER_WINDOW";

/// The broker's socket: `$XDG_RUNTIME_DIR/nish-driver/broker.sock`, or
/// `/tmp/nish-driver-<uid>/broker.sock` when `XDG_RUNTIME_DIR` is unset. `uid` is the caller's
/// real uid (passed in, so this crate needs no libc).
pub fn default_socket_path(uid: u32) -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => std::path::PathBuf::from(dir)
            .join("nish-driver")
            .join("broker.sock"),
        None => std::path::PathBuf::from(format!("/tmp/nish-driver-{uid}")).join("broker.sock"),
    }
}

/// A connection an agent asks the broker for. No agent opens a socket of its own: the broker
/// connects, checks the peer, and hands the descriptor over on the agent's link (`SCM_RIGHTS`,
/// attached to the first byte of the answer's frame). The indicator may ask only for
/// [`ConnectTarget::X11`] and [`ConnectTarget::Wayland`]; of the other agents only the input
/// agent may ask for the latter (the clipboard, through the compositor's data-control), and only
/// the reader for [`ConnectTarget::CastFrame`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectTarget {
    /// The X display, the setup handshake already done by the broker.
    X11,
    /// The accessibility bus, not yet authenticated (the agent runs the D-Bus authentication
    /// over the handed stream).
    A11yBus,
    /// A peer-to-peer link to one application, by its unique name on the accessibility bus.
    /// The broker refuses an application whose process is not the target of a request it made
    /// (in scope of a live session), and checks that the listener is that process.
    App {
        /// The application's unique bus name (`:1.42`).
        bus_name: String,
    },
    /// The Wayland compositor's socket (`WAYLAND_DISPLAY`), for the indicator and the input
    /// agent's clipboard on a Wayland session: connected by the broker, which checks that the
    /// listener runs as its own user.
    Wayland,
    /// The first frame of a window's screen-cast stream, for the reader's capture on a Wayland
    /// session: read by the broker (the reader gets no PipeWire connection), once, for a stream
    /// the broker started for a capture and that still lives; handed as the window's part of
    /// the frame, packed RGBA, in a sealed memfd ([`Handed::CastFrame`]).
    CastFrame {
        /// The stream's PipeWire node.
        node: u32,
    },
}

/// Widest or tallest screen-cast frame handed ([`Handed::CastFrame`]).
pub const MAX_CAST_SIDE: u32 = 8_192;
/// Most pixels of a screen-cast frame handed: an 8K monitor's.
pub const MAX_CAST_PIXELS: u64 = 7_680 * 4_320;

/// Most bytes of a unique bus name in a [`ConnectTarget::App`].
pub const MAX_BUS_NAME: usize = 255;

/// What comes with a handed descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Handed {
    /// An X connection: the server's setup reply as received (bytes), and the screen of the
    /// display name.
    X11 {
        /// The raw setup reply (success), to be parsed by the agent.
        setup: Vec<u8>,
        /// The default screen.
        screen: u32,
    },
    /// An unauthenticated stream to the accessibility bus.
    A11yBus,
    /// An unauthenticated stream to an application's peer-to-peer server.
    App,
    /// The application offers no peer-to-peer address: no descriptor comes with this answer,
    /// and calls go through the bus.
    NoLink,
    /// A connected stream to the Wayland compositor (no handshake: the Wayland protocol has
    /// none).
    Wayland,
    /// A screen-cast frame: a sealed memfd of `width * height * 4` bytes, RGBA (the fourth byte
    /// as the compositor gave it), at most [`MAX_CAST_SIDE`] a side and [`MAX_CAST_PIXELS`].
    CastFrame {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
    },
}

impl Handed {
    /// True when a descriptor comes with this answer.
    pub fn has_fd(&self) -> bool {
        !matches!(self, Handed::NoLink)
    }
}

/// The broker's answer to a [`ConnectTarget`] request: on success (other than
/// [`Handed::NoLink`]) exactly one descriptor is attached to the frame.
pub type Connected = Result<Handed, AgentFailure>;

/// Checks a D-Bus address that the session bus or an application handed out: only local Unix
/// socket transports (`unix:path=` or `unix:abstract=`), first entry of a list. Anything else
/// (TCP, `unixexec`, `autolaunch`, `launchd`) is refused.
pub fn local_unix_address(addr: &str) -> Option<String> {
    let first = addr.split(';').next()?.trim();
    let rest = first.strip_prefix("unix:")?;
    let mut has_target = false;
    for kv in rest.split(',') {
        let (k, v) = kv.split_once('=')?;
        match k {
            "path" | "abstract" if !v.is_empty() => has_target = true,
            "guid" => {}
            _ => return None,
        }
    }
    has_target.then(|| first.to_string())
}

#[cfg(test)]
mod address_tests {
    use super::*;

    #[test]
    fn only_local_unix_addresses_are_used() {
        assert_eq!(
            local_unix_address("unix:path=/tmp/at-spi2/socket").as_deref(),
            Some("unix:path=/tmp/at-spi2/socket")
        );
        assert_eq!(
            local_unix_address("unix:abstract=/tmp/dbus-x,guid=abc;tcp:host=x,port=1").as_deref(),
            Some("unix:abstract=/tmp/dbus-x,guid=abc")
        );
        for bad in [
            "",
            "tcp:host=10.0.0.1,port=5",
            "unixexec:path=/bin/sh",
            "autolaunch:",
            "unix:tmpdir=/tmp",
            "unix:path=",
            "unix:path=/x,runtime=yes",
            "launchd:env=X",
        ] {
            assert_eq!(local_unix_address(bad), None, "{bad}");
        }
    }
}
