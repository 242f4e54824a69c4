//! Length-prefixed bincode frames.
//!
//! A frame is a 4-byte big-endian body length followed by the bincode (2.x, standard config)
//! body. [`frame_len`] checks the length against the receiver's maximum before a buffer is
//! allocated; [`encode`] checks it on the sending side too.

use std::io::{Read, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

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

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `msg` as a whole frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T, max: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; 4];
    let body = bincode::serde::encode_to_vec(msg, config())
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if body.len() > max {
        return Err(FrameError::TooLarge {
            len: body.len(),
            max,
        });
    }
    out.extend_from_slice(&body);
    let len = u32::try_from(body.len()).map_err(|_| FrameError::TooLarge {
        len: body.len(),
        max,
    })?;
    out[..4].copy_from_slice(&len.to_be_bytes());
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

/// Decodes a frame body; trailing bytes are an error.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    let (msg, used): (T, usize) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if used != body.len() {
        return Err(FrameError::Malformed(format!(
            "{} trailing bytes",
            body.len() - used
        )));
    }
    Ok(msg)
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

/// Reads one frame from a blocking reader. A clean end of stream before a header is
/// [`FrameError::Closed`].
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R, max: usize) -> Result<T, FrameError> {
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
    let len = frame_len(header, max)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    decode(&body)
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

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut r: &[u8] = &bytes;
            let _ = read_frame::<_, ShimToBroker>(&mut r, 256);
            let _ = decode::<ShimToBroker>(&bytes);
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
