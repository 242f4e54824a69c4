//! The same frames over tokio streams (cargo feature `tokio`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{FrameError, READ_CHUNK, decode, encode, frame_len};

/// Reads one frame header; a clean end of stream before it is [`FrameError::Closed`].
pub async fn read_len<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<usize, FrameError> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut header[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                FrameError::Closed
            } else {
                FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())
            });
        }
        got += n;
    }
    frame_len(header, max)
}

/// Reads a body of `len` bytes, the buffer growing as bytes arrive.
pub async fn read_exact_body<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut body = Vec::new();
    let mut chunk = [0u8; READ_CHUNK];
    while body.len() < len {
        let want = (len - body.len()).min(READ_CHUNK);
        match r.read(&mut chunk[..want]).await? {
            0 => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            n => body.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(body)
}

/// Reads one whole frame body (at most `max` bytes).
pub async fn read_body<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Vec<u8>, FrameError> {
    let len = read_len(r, max).await?;
    read_exact_body(r, len).await
}

/// Reads one frame; a clean end of stream before a header is [`FrameError::Closed`].
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    r: &mut R,
    max: usize,
) -> Result<T, FrameError> {
    decode(&read_body(r, max).await?)
}

/// Writes an already encoded frame and flushes.
pub async fn write_encoded<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

/// Encodes and writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    msg: &T,
    max: usize,
) -> Result<(), FrameError> {
    let buf = encode(msg, max)?;
    write_encoded(w, &buf).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::shim::{BrokerToShim, CallResult, Image};
    use crate::wire::{Hello, Role};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn round_trip_through_a_socket_in_small_pieces() {
        rt().block_on(async {
            let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
            let msg = BrokerToShim::Result {
                id: 7,
                result: CallResult {
                    is_error: false,
                    structured_json: "{\"ok\":true}".into(),
                    text: "ok".into(),
                    images: vec![Image {
                        mime: "image/png".into(),
                        data: (0..=255).collect(),
                    }],
                },
            };
            let buf = encode(&msg, 1 << 20).unwrap();
            // Dribble the frame a few bytes at a time: the reader must reassemble it.
            let writer = tokio::spawn(async move {
                for chunk in buf.chunks(3) {
                    a.write_all(chunk).await.unwrap();
                    tokio::task::yield_now().await;
                }
                a
            });
            let back: BrokerToShim = read_frame(&mut b, 1 << 20).await.unwrap();
            assert_eq!(back, msg);
            drop(writer.await.unwrap());
            assert!(matches!(
                read_frame::<_, BrokerToShim>(&mut b, 1 << 20).await,
                Err(FrameError::Closed)
            ));
        });
    }

    #[test]
    fn oversized_header_is_refused_before_reading_the_body() {
        rt().block_on(async {
            let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
            a.write_all(&(64u32 * 1024 * 1024).to_be_bytes())
                .await
                .unwrap();
            let e = read_frame::<_, Hello>(&mut b, 1024).await.unwrap_err();
            assert!(matches!(e, FrameError::TooLarge { max: 1024, .. }), "{e}");
        });
    }

    #[test]
    fn truncated_header_is_an_error_not_a_clean_close() {
        rt().block_on(async {
            let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
            a.write_all(&[0, 0]).await.unwrap();
            drop(a);
            let e = read_frame::<_, Hello>(&mut b, 1024).await.unwrap_err();
            assert!(matches!(e, FrameError::Io(_)), "{e}");
        });
    }

    #[test]
    fn write_then_read() {
        rt().block_on(async {
            let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
            write_frame(&mut a, &Hello::new(Role::Shim), 1024)
                .await
                .unwrap();
            let h: Hello = read_frame(&mut b, 1024).await.unwrap();
            assert_eq!(h, Hello::new(Role::Shim));
        });
    }

    proptest::proptest! {
        /// The async reader agrees with the blocking one on any bytes, fed in small pieces:
        /// same messages, same refusals, no panic.
        #[test]
        fn agrees_with_the_blocking_reader(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            piece in 1usize..9,
        ) {
            let blocking: Vec<Result<crate::wire::shim::ShimToBroker, String>> = {
                let mut r: &[u8] = &bytes;
                let mut out = Vec::new();
                loop {
                    match crate::wire::codec::read_frame(&mut r, 256) {
                        Ok(m) => out.push(Ok(m)),
                        Err(FrameError::Closed) => break,
                        Err(e) => {
                            out.push(Err(e.reason().to_string()));
                            break;
                        }
                    }
                }
                out
            };
            let asynchronous = rt().block_on(async {
                let (mut a, mut b) = tokio::io::duplex(64);
                let data = bytes.clone();
                let writer = tokio::spawn(async move {
                    for c in data.chunks(piece) {
                        if a.write_all(c).await.is_err() {
                            return;
                        }
                    }
                });
                let mut out = Vec::new();
                loop {
                    match read_frame::<_, crate::wire::shim::ShimToBroker>(&mut b, 256).await {
                        Ok(m) => out.push(Ok(m)),
                        Err(FrameError::Closed) => break,
                        Err(e) => {
                            out.push(Err(e.reason().to_string()));
                            break;
                        }
                    }
                }
                writer.abort();
                out
            });
            proptest::prop_assert_eq!(blocking, asynchronous);
        }
    }
}
