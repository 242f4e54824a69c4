//! The broker link: frames in and out over the inherited socket.
//!
//! The main loop polls the socket together with the X connection, so reads never block: after
//! `poll` reports the socket readable, one `read` takes what is there, and whole frames are cut
//! from the buffer. Writes are small and blocking (the broker reads all the time).

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use nish_proto::wire::codec::{self, FrameCutter};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use nish_proto::wire::{Hello, LockdownReport, MAX_CLIENT_FRAME_BYTES, Role};

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

/// The broker connection.
#[derive(Debug)]
pub struct BrokerLink {
    stream: UnixStream,
    cutter: FrameCutter,
}

impl BrokerLink {
    /// Wraps the inherited socket, sends the hello and the lock-down report.
    pub fn start(stream: UnixStream, report: LockdownReport) -> anyhow::Result<Self> {
        let mut link = BrokerLink {
            stream,
            cutter: FrameCutter::new(MAX_IN_FRAME),
        };
        codec::write_frame(
            &mut link.stream,
            &Hello::new(Role::Indicator),
            MAX_OUT_FRAME,
        )
        .map_err(|e| anyhow::anyhow!("error sending hello to the broker: {e}"))?;
        link.send(&IndicatorToBroker::Lockdown(report))?;
        Ok(link)
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

    /// Reads what is available (call only when `poll` says the socket is readable) and returns
    /// the whole frames in it.
    pub fn read_available(&mut self) -> anyhow::Result<Incoming> {
        let mut chunk = [0u8; 16 * 1024];
        let n = loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Ok(Incoming::Closed);
                }
                Err(e) => return Err(anyhow::anyhow!("error reading from the broker: {e}")),
            }
        };
        if n == 0 {
            return Ok(Incoming::Closed);
        }
        cut_frames(&mut self.cutter, &chunk[..n]).map(Incoming::Messages)
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
