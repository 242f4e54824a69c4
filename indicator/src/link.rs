//! The broker link: frames in and out over the inherited socket.
//!
//! The main loop polls the socket together with the X connection, so reads never block: after
//! `poll` reports the socket readable, one `read` takes what is there, and whole frames are cut
//! from the buffer. Writes are small and blocking (the broker reads all the time).

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use nish_proto::wire::codec::{self, FrameError};
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
    buf: Vec<u8>,
}

impl BrokerLink {
    /// Wraps the inherited socket, sends the hello and the lock-down report.
    pub fn start(stream: UnixStream, report: LockdownReport) -> anyhow::Result<Self> {
        let mut link = BrokerLink {
            stream,
            buf: Vec::new(),
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
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(Incoming::Messages(cut_frames(&mut self.buf)?))
    }
}

/// Cuts every whole frame off the front of `buf`. The announced length is checked before the
/// body is waited for, so an oversized frame is refused at once.
fn cut_frames(buf: &mut Vec<u8>) -> anyhow::Result<Vec<BrokerToIndicator>> {
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let rest = &buf[start..];
        if rest.len() < 4 {
            break;
        }
        let header = [rest[0], rest[1], rest[2], rest[3]];
        let len = codec::frame_len(header, MAX_IN_FRAME)
            .map_err(|e: FrameError| anyhow::anyhow!("bad frame from the broker: {e}"))?;
        if rest.len() < 4 + len {
            break;
        }
        let msg: BrokerToIndicator = codec::decode(&rest[4..4 + len])
            .map_err(|e| anyhow::anyhow!("bad frame from the broker: {e}"))?;
        out.push(msg);
        start += 4 + len;
    }
    buf.drain(..start);
    Ok(out)
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
        let mut buf = bytes;
        let got = cut_frames(&mut buf).unwrap();
        assert_eq!(got, vec![a]);
        assert_eq!(buf.len(), fb.len() - 2);
        buf.extend_from_slice(&fb[fb.len() - 2..]);
        assert_eq!(cut_frames(&mut buf).unwrap(), vec![b]);
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_header_is_refused_before_the_body_arrives() {
        let mut buf = ((MAX_IN_FRAME + 1) as u32).to_be_bytes().to_vec();
        assert!(cut_frames(&mut buf).is_err());
    }

    #[test]
    fn garbage_body_is_an_error() {
        let mut buf = 3u32.to_be_bytes().to_vec();
        buf.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(cut_frames(&mut buf).is_err());
    }
}
