//! Length-prefixed frames: the one framing of every connection of the driver (broker, shims,
//! terminal commands and agents).
//!
//! A frame is a 4-byte big-endian body length followed by the body in the driver's own
//! serde format (little-endian, variable-length integers; [`ser`] writes it, [`de`] reads it).
//! Nothing is allocated for what a peer merely claims:
//! - [`frame_len`] checks the announced length against the receiver's maximum before anything
//!   else;
//! - bodies are read as their bytes arrive ([`read_body`]), so a header announcing a large
//!   frame costs nothing until the bytes are there;
//! - [`decode`] checks every length inside the body against the bytes left in it (see [`de`])
//!   before allocating, so a short body claiming a huge string or sequence is refused.
//!
//! Three ways to read, one format: blocking ([`read_frame`], [`write_frame`]), an incremental
//! [`FrameCutter`] for poll loops, and async versions over tokio in [`aio`] (cargo feature
//! `tokio`; without it this crate does not depend on tokio).

use std::io::{Read, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

#[cfg(feature = "tokio")]
pub mod aio;
pub mod de;
pub mod ser;

/// Bytes read at a time while a body arrives (into a buffer on the stack); the body grows
/// with what came, never with what the header announced.
pub const READ_CHUNK: usize = 8 * 1024;

/// A frame that could not be sent or received.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// An I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A frame longer than the receiver (or sender) allows.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// A body that does not decode as the expected message.
    #[error("malformed frame: {0}")]
    Malformed(String),
}

impl FrameError {
    /// A fixed name for audits and logs: `closed`, `io`, `frame_too_large`,
    /// `undecodable_frame`.
    pub fn reason(&self) -> &'static str {
        match self {
            FrameError::Closed => "closed",
            FrameError::Io(_) => "io",
            FrameError::TooLarge { .. } => "frame_too_large",
            FrameError::Malformed(_) => "undecodable_frame",
        }
    }
}

/// Encodes `msg` as a whole frame (length prefix included), refused when the body is over
/// `max`.
pub fn encode<T: Serialize>(msg: &T, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; 4];
    ser::to_vec_into(msg, &mut out).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = out.len() - 4;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let n = u32::try_from(len).map_err(|_| FrameError::TooLarge { len, max })?;
    out[..4].copy_from_slice(&n.to_be_bytes());
    Ok(out)
}

/// The body length a frame header announces, refused when over `max`.
pub fn frame_len(header: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok(len)
}

/// Decodes a frame body; every length inside it is checked against the bytes left before
/// anything is allocated, and trailing bytes are an error.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    de::from_body(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Reads one frame header; a clean end of stream before it is [`FrameError::Closed`].
pub fn read_len<R: Read>(r: &mut R, max: usize) -> Result<usize, FrameError> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    frame_len(header, max)
}

/// Reads a body of `len` bytes, the buffer growing as bytes arrive.
pub fn read_exact_body<R: Read>(r: &mut R, len: usize) -> Result<Vec<u8>, FrameError> {
    let mut body = Vec::new();
    let mut chunk = [0u8; READ_CHUNK];
    while body.len() < len {
        let want = (len - body.len()).min(READ_CHUNK);
        match r.read(&mut chunk[..want]) {
            Ok(0) => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(body)
}

/// Reads one whole frame body (at most `max` bytes).
pub fn read_body<R: Read>(r: &mut R, max: usize) -> Result<Vec<u8>, FrameError> {
    let len = read_len(r, max)?;
    read_exact_body(r, len)
}

/// Reads one frame from a blocking reader. A clean end of stream before a header is
/// [`FrameError::Closed`].
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R, max: usize) -> Result<T, FrameError> {
    decode(&read_body(r, max)?)
}

/// Writes one frame to a blocking writer.
pub fn write_frame<W: Write, T: Serialize>(
    w: &mut W,
    msg: &T,
    max: usize,
) -> Result<(), FrameError> {
    let buf = encode(msg, max)?;
    w.write_all(&buf)?;
    w.flush()?;
    Ok(())
}

/// Cuts whole frames from bytes as they arrive, for poll loops that read what is there.
///
/// The header of the first frame is checked as soon as its four bytes are in, so an oversized
/// frame is refused before its body is waited for; at most one frame (its header and at most
/// `max` body bytes) plus the rest of the last chunk pushed is ever buffered.
#[derive(Debug)]
pub struct FrameCutter {
    buf: Vec<u8>,
    max: usize,
}

impl FrameCutter {
    /// A cutter for frames of at most `max` body bytes.
    pub fn new(max: usize) -> Self {
        FrameCutter {
            buf: Vec::new(),
            max,
        }
    }

    /// Adds bytes just read. Fails when the frame at the front announces more than `max`.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(bytes);
        self.front_len().map(|_| ())
    }

    /// Bytes waiting (a partial frame, or whole frames not cut yet).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn front_len(&self) -> Result<Option<usize>, FrameError> {
        match self.buf.get(..4) {
            Some(h) => frame_len([h[0], h[1], h[2], h[3]], self.max).map(Some),
            None => Ok(None),
        }
    }

    /// The next whole frame's body, if one is complete.
    pub fn next_body(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let Some(len) = self.front_len()? else {
            return Ok(None);
        };
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }

    /// The next whole frame, decoded, if one is complete.
    pub fn next_frame<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        match self.next_body()? {
            Some(body) => decode(&body).map(Some),
            None => Ok(None),
        }
    }

    /// Every whole frame buffered, decoded; a partial frame stays.
    pub fn drain<T: DeserializeOwned>(&mut self) -> Result<Vec<T>, FrameError> {
        let mut out = Vec::new();
        while let Some(m) = self.next_frame()? {
            out.push(m);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::shim::ShimToBroker;
    use crate::wire::{Hello, Role};
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let h = Hello::new(Role::Shim);
        let buf = encode(&h, 1024).unwrap();
        let back: Hello = read_frame(&mut &buf[..], 1024).unwrap();
        assert_eq!(h, back);
    }

    #[test]
    fn oversized_header_is_refused_before_allocating() {
        let header = (u32::MAX).to_be_bytes();
        let mut r: &[u8] = &header;
        let e = read_frame::<_, Hello>(&mut r, 1024).unwrap_err();
        assert!(matches!(e, FrameError::TooLarge { len, max: 1024 } if len == u32::MAX as usize));
        assert_eq!(e.reason(), "frame_too_large");
    }

    #[test]
    fn the_hello_string_bomb_is_refused() {
        // Role::Shim, protocol 1, a driver version claiming 2^42 bytes: 11 body bytes.
        let mut body = vec![0u8, 1, 253];
        body.extend_from_slice(&(1u64 << 42).to_le_bytes());
        assert_eq!(body.len(), 11);
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let e = read_frame::<_, Hello>(&mut &frame[..], 1024).unwrap_err();
        assert!(matches!(e, FrameError::Malformed(_)), "{e}");
        assert_eq!(e.reason(), "undecodable_frame");
    }

    #[test]
    fn a_body_is_read_as_it_arrives() {
        // A header announcing 1 MiB followed by 3 bytes: the buffer never reached 1 MiB.
        let mut frame = (1u32 << 20).to_be_bytes().to_vec();
        frame.extend_from_slice(&[1, 2, 3]);
        let mut r: &[u8] = &frame;
        let len = read_len(&mut r, 1 << 20).unwrap();
        let e = read_exact_body(&mut r, len).unwrap_err();
        assert!(matches!(e, FrameError::Io(_)), "{e}");
    }

    #[test]
    fn oversized_message_is_refused_on_send() {
        let msg = ShimToBroker::Call {
            id: 1,
            tool: "type_text".into(),
            args_json: "x".repeat(2000),
        };
        assert!(matches!(
            encode(&msg, 1000),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn clean_eof_is_closed() {
        let mut r: &[u8] = &[];
        assert!(matches!(
            read_frame::<_, Hello>(&mut r, 10),
            Err(FrameError::Closed)
        ));
    }

    #[test]
    fn cutter_cuts_whole_frames_and_keeps_the_partial_rest() {
        let a = Hello::new(Role::Cli);
        let b = Hello::new(Role::Shim);
        let fa = encode(&a, 1024).unwrap();
        let fb = encode(&b, 1024).unwrap();
        let mut c = FrameCutter::new(1024);
        let mut bytes = fa.clone();
        bytes.extend_from_slice(&fb[..fb.len() - 2]);
        c.push(&bytes).unwrap();
        assert_eq!(c.drain::<Hello>().unwrap(), vec![a]);
        assert_eq!(c.buffered(), fb.len() - 2);
        c.push(&fb[fb.len() - 2..]).unwrap();
        assert_eq!(c.next_frame::<Hello>().unwrap(), Some(b));
        assert_eq!(c.buffered(), 0);
        assert_eq!(c.next_frame::<Hello>().unwrap(), None);
    }

    #[test]
    fn cutter_refuses_an_oversized_header_before_the_body() {
        let mut c = FrameCutter::new(16);
        c.push(&[0, 0]).unwrap();
        assert!(matches!(c.push(&[0, 17]), Err(FrameError::TooLarge { .. })));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut r: &[u8] = &bytes;
            let _ = read_frame::<_, ShimToBroker>(&mut r, 256);
            let _ = decode::<ShimToBroker>(&bytes);
            let mut c = FrameCutter::new(256);
            if c.push(&bytes).is_ok() {
                let _ = c.drain::<ShimToBroker>();
            }
        }

        #[test]
        fn calls_round_trip(id in any::<u64>(), tool in "[a-z_]{1,20}", args in ".{0,200}") {
            let msg = ShimToBroker::Call { id, tool, args_json: args };
            let buf = encode(&msg, 4096).unwrap();
            let back: ShimToBroker = read_frame(&mut &buf[..], 4096).unwrap();
            prop_assert_eq!(msg, back);
        }
    }
}
