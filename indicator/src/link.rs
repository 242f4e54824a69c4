//! The broker link: frames in and out over the inherited socket.
//!
//! The main loop polls the socket together with the X connection, so reads never block: after
//! `poll` reports the socket readable, one `read` takes what is there, and whole frames are cut
//! from the buffer. Writes are small and blocking (the broker reads all the time).
//!
//! The display connection comes over this link too ([`BrokerLink::connect_display`]): the
//! indicator asks for X right after its lock-down report (and for the Wayland compositor when
//! the broker refuses X), and the broker answers with the connected stream attached
//! (`SCM_RIGHTS`). Descriptors that come with any other message are closed.

use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nish_proto::wire::codec::{self, FrameCutter};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use nish_proto::wire::{ConnectTarget, Handed, MAX_CLIENT_FRAME_BYTES};

/// Largest frame accepted from the broker. A consent request with many apps is well below it.
pub const MAX_IN_FRAME: usize = MAX_CLIENT_FRAME_BYTES;
/// Largest frame sent to the broker.
const MAX_OUT_FRAME: usize = 64 * 1024;

/// What one read from the broker gave.
#[derive(Debug)]
pub enum Incoming {
    /// Zero or more whole messages (a partial frame stays buffered).
    Messages(Vec<BrokerToIndicator>),
    /// The broker closed its end.
    Closed,
}

/// Longest wait for the broker's answer to the X connection request (the broker's own
/// connect and handshake take at most 3 s).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An X connection handed in by the broker: the stream (handshake done), the server's setup
/// reply as received, and the screen of the display name.
#[derive(Debug)]
pub struct HandedX {
    /// The stream.
    pub stream: UnixStream,
    /// The raw setup reply.
    pub setup: Vec<u8>,
    /// The default screen.
    pub screen: u32,
}

/// The display connection the broker handed.
#[derive(Debug)]
pub enum HandedDisplay {
    /// An X session.
    X11(HandedX),
    /// A Wayland session: the compositor's socket.
    Wayland(UnixStream),
}

/// The broker connection.
#[derive(Debug)]
pub struct BrokerLink {
    stream: UnixStream,
    cutter: FrameCutter,
    /// Messages read while waiting for the X connection, handled first by the main loop.
    backlog: VecDeque<BrokerToIndicator>,
}

impl BrokerLink {
    /// Wraps the broker's socket, on which the hello and the lock-down report went at the
    /// indicator's start (`nish_sandbox::start::start`).
    pub fn new(stream: UnixStream) -> Self {
        BrokerLink {
            stream,
            cutter: FrameCutter::new(MAX_IN_FRAME),
            backlog: VecDeque::new(),
        }
    }

    /// The socket, for `poll`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &IndicatorToBroker) -> anyhow::Result<()> {
        codec::write_frame(&mut self.stream, msg, MAX_OUT_FRAME)
            .map_err(|e| anyhow::anyhow!("error writing to the broker: {e}"))?;
        self.stream.flush()?;
        Ok(())
    }

    /// Asks the broker for the display connection and waits for it (at most
    /// [`CONNECT_TIMEOUT`] each): X first, and the Wayland compositor when the broker refuses X
    /// (a Wayland session). Other messages that arrive meanwhile are kept for
    /// [`BrokerLink::take_backlog`].
    pub fn connect_display(&mut self) -> anyhow::Result<HandedDisplay> {
        let x = match self.connect(1, ConnectTarget::X11)? {
            (Ok(Handed::X11 { setup, screen }), Some(fd)) => {
                return Ok(HandedDisplay::X11(HandedX {
                    stream: UnixStream::from(fd),
                    setup,
                    screen,
                }));
            }
            (Ok(_), _) => anyhow::bail!("the broker handed no X connection"),
            (Err(f), _) => f.code,
        };
        match self.connect(2, ConnectTarget::Wayland)? {
            (Ok(Handed::Wayland), Some(fd)) => Ok(HandedDisplay::Wayland(UnixStream::from(fd))),
            (Ok(_), _) => anyhow::bail!("the broker handed no Wayland connection"),
            (Err(f), _) => anyhow::bail!(
                "the broker could not connect to the X display ({x}) nor to the Wayland compositor ({})",
                f.code
            ),
        }
    }

    /// Sends one connection request and waits for its answer and descriptor.
    fn connect(
        &mut self,
        id: u64,
        target: ConnectTarget,
    ) -> anyhow::Result<(nish_proto::wire::Connected, Option<OwnedFd>)> {
        self.send(&IndicatorToBroker::Connect { id, target })?;
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        // The descriptor rides on the first byte of the answer's frame, which may come in an
        // earlier read than the frame's end.
        let mut handed_fd = None;
        let result = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            anyhow::ensure!(
                !left.is_zero(),
                "the broker did not hand the display connection in time"
            );
            self.stream.set_read_timeout(Some(left))?;
            let (incoming, fd) = self.read_with_fd()?;
            if fd.is_some() {
                handed_fd = fd;
            }
            let msgs = match incoming {
                Incoming::Closed => anyhow::bail!("the broker closed the link"),
                Incoming::Messages(m) => m,
            };
            let mut answer = None;
            for m in msgs {
                match m {
                    BrokerToIndicator::Connected { id: got, result }
                        if got == id && answer.is_none() =>
                    {
                        answer = Some(result);
                    }
                    BrokerToIndicator::Connected { .. } => {}
                    other => self.backlog.push_back(other),
                }
            }
            if let Some(result) = answer {
                break (result, handed_fd.take());
            }
        };
        self.stream.set_read_timeout(None)?;
        Ok(result)
    }

    /// Messages read while waiting for the X connection, oldest first (once).
    pub fn take_backlog(&mut self) -> Vec<BrokerToIndicator> {
        self.backlog.drain(..).collect()
    }

    /// Reads what is available (call only when `poll` says the socket is readable) and returns
    /// the whole frames in it. A descriptor sent with them is closed.
    pub fn read_available(&mut self) -> anyhow::Result<Incoming> {
        self.read_with_fd().map(|(incoming, _)| incoming)
    }

    /// One read: the whole frames in it, and the first descriptor that came with the bytes
    /// (the rest are closed).
    fn read_with_fd(&mut self) -> anyhow::Result<(Incoming, Option<OwnedFd>)> {
        let mut chunk = [0u8; 16 * 1024];
        let (n, fd) = loop {
            match nish_sandbox::sys::recv_with_fds(self.stream.as_fd(), &mut chunk, false) {
                Ok((n, fds)) => break (n, fds.into_iter().next()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Ok((Incoming::Closed, None));
                }
                Err(e) => return Err(anyhow::anyhow!("error reading from the broker: {e}")),
            }
        };
        if n == 0 {
            return Ok((Incoming::Closed, None));
        }
        cut_frames(&mut self.cutter, &chunk[..n]).map(|m| (Incoming::Messages(m), fd))
    }
}

/// Adds bytes from the broker and cuts every whole frame; the announced length is checked
/// before the body is waited for, so an oversized frame is refused at once.
fn cut_frames(cutter: &mut FrameCutter, bytes: &[u8]) -> anyhow::Result<Vec<BrokerToIndicator>> {
    cutter
        .push(bytes)
        .and_then(|()| cutter.drain())
        .map_err(|e| anyhow::anyhow!("bad frame from the broker: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(msg: &BrokerToIndicator) -> Vec<u8> {
        codec::encode(msg, MAX_IN_FRAME).unwrap()
    }

    #[test]
    fn cuts_whole_frames_and_keeps_the_partial_rest() {
        let a = BrokerToIndicator::DriverPress;
        let b = BrokerToIndicator::HideTakeover {
            session: "mcp:h:1".into(),
        };
        let mut bytes = frame(&a);
        let fb = frame(&b);
        bytes.extend_from_slice(&fb[..fb.len() - 2]);
        let mut c = FrameCutter::new(MAX_IN_FRAME);
        let got = cut_frames(&mut c, &bytes).unwrap();
        assert_eq!(got, vec![a]);
        assert_eq!(c.buffered(), fb.len() - 2);
        assert_eq!(cut_frames(&mut c, &fb[fb.len() - 2..]).unwrap(), vec![b]);
        assert_eq!(c.buffered(), 0);
    }

    #[test]
    fn oversized_header_is_refused_before_the_body_arrives() {
        let mut c = FrameCutter::new(MAX_IN_FRAME);
        assert!(cut_frames(&mut c, &((MAX_IN_FRAME + 1) as u32).to_be_bytes()).is_err());
    }

    #[test]
    fn garbage_body_is_an_error() {
        let mut bytes = 3u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(cut_frames(&mut FrameCutter::new(MAX_IN_FRAME), &bytes).is_err());
    }

    #[test]
    fn a_string_bomb_is_refused_without_allocating_it() {
        // ShowTakeover (variant 2) whose session string claims 2^42 bytes.
        let mut body = vec![2u8, 253];
        body.extend_from_slice(&(1u64 << 42).to_le_bytes());
        let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&body);
        assert!(cut_frames(&mut FrameCutter::new(MAX_IN_FRAME), &bytes).is_err());
    }
}
