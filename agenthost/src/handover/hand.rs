//! What every opening shares: its time bounds, its result ([`Opened`]) and failures, and
//! handing the descriptor over on the agent's socket.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nish_proto::errors::ErrorCode;
use nish_proto::wire::{AgentFailure, Connected, Handed};

/// Longest wait for one connection and its handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest wait for an application's peer-to-peer address and for connecting to it (the
/// reader waited as long when it asked itself): a hung application holds a link request no
/// longer than this.
pub const P2P_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest X setup reply accepted.
pub const MAX_X_SETUP: usize = 1 << 20;
/// How long a process stays reachable by peer-to-peer link after the last request naming it.
pub const REACHABLE_FOR: Duration = Duration::from_secs(120);

/// A handed connection: what the agent is told, and the descriptor (none for
/// [`Handed::NoLink`]).
pub type Opened = (Handed, Option<OwnedFd>);

pub(super) fn failure(code: ErrorCode, message: impl Into<String>) -> AgentFailure {
    AgentFailure {
        code: code.as_str().to_string(),
        message: message.into(),
    }
}

pub(super) fn unavailable(message: impl Into<String>) -> AgentFailure {
    failure(ErrorCode::BackendUnavailable, message)
}

/// Splits an open result into the agent's answer and the descriptor to attach.
pub fn answer(r: Result<Opened, AgentFailure>) -> (Connected, Option<OwnedFd>) {
    match r {
        Ok((h, fd)) => (Ok(h), fd),
        Err(f) => (Err(f), None),
    }
}

/// Sends `frame` on a blocking socket with `fd` attached to its first byte.
pub fn send_with_fd(sock: &UnixStream, frame: &[u8], fd: Option<&OwnedFd>) -> std::io::Result<()> {
    let mut sent = 0;
    if let Some(fd) = fd {
        let raws = [fd.as_raw_fd()];
        let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&raws)];
        sent = nix::sys::socket::sendmsg::<()>(
            sock.as_raw_fd(),
            &[std::io::IoSlice::new(frame)],
            &cmsg,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(std::io::Error::from)?;
    }
    let mut w = sock;
    w.write_all(&frame[sent..])
}

/// Sends `frame` on the broker's async link with `fd` attached to its first byte.
pub async fn send_with_fd_async(
    sock: &tokio::net::UnixStream,
    frame: &[u8],
    fd: &OwnedFd,
) -> std::io::Result<()> {
    use tokio::io::Interest;
    let raws = [fd.as_raw_fd()];
    let sent = loop {
        sock.writable().await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&raws)];
            nix::sys::socket::sendmsg::<()>(
                sock.as_raw_fd(),
                &[std::io::IoSlice::new(frame)],
                &cmsg,
                nix::sys::socket::MsgFlags::MSG_NOSIGNAL | nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                None,
            )
            .map_err(std::io::Error::from)
        });
        match r {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    };
    let mut rest = &frame[sent..];
    while !rest.is_empty() {
        sock.writable().await?;
        match sock.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
