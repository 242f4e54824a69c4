//! Async framing over tokio for the proto codec: a 4-byte big-endian length, then the bincode
//! body. The length is checked against the limit before the body buffer is allocated.

use nish_proto::wire::codec::{self, FrameError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Reads one frame. A clean end of stream before a header is [`FrameError::Closed`].
pub async fn read_frame<R, T>(r: &mut R, max: usize) -> Result<T, FrameError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < header.len() {
        match r.read(&mut header[got..]).await? {
            0 if got == 0 => return Err(FrameError::Closed),
            0 => return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into())),
            n => got += n,
        }
    }
    let len = codec::frame_len(header, max)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    codec::decode(&body)
}

/// Writes an already encoded frame and flushes.
pub async fn write_encoded<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

/// Encodes and writes one frame.
pub async fn write_frame<W, T>(w: &mut W, msg: &T, max: usize) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let buf = codec::encode(msg, max)?;
    write_encoded(w, &buf).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::shim::{BrokerToShim, CallResult, Image};
    use nish_proto::wire::{Hello, Role};

    #[tokio::test]
    async fn round_trip_through_a_socket_in_small_pieces() {
        let (mut a, b) = tokio::net::UnixStream::pair().unwrap();
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
        let buf = codec::encode(&msg, 1 << 20).unwrap();
        // Dribble the frame a few bytes at a time: the reader must reassemble it.
        let writer = tokio::spawn(async move {
            for chunk in buf.chunks(3) {
                a.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
            a
        });
        let mut b = b;
        let back: BrokerToShim = read_frame(&mut b, 1 << 20).await.unwrap();
        assert_eq!(back, msg);
        drop(writer.await.unwrap());
        assert!(matches!(
            read_frame::<_, BrokerToShim>(&mut b, 1 << 20).await,
            Err(FrameError::Closed)
        ));
    }

    #[tokio::test]
    async fn oversized_header_is_refused_before_reading_the_body() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
        a.write_all(&(64u32 * 1024 * 1024).to_be_bytes())
            .await
            .unwrap();
        let e = read_frame::<_, Hello>(&mut b, 1024).await.unwrap_err();
        assert!(matches!(e, FrameError::TooLarge { max: 1024, .. }), "{e}");
    }

    #[tokio::test]
    async fn truncated_header_is_an_error_not_a_clean_close() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
        a.write_all(&[0, 0]).await.unwrap();
        drop(a);
        let e = read_frame::<_, Hello>(&mut b, 1024).await.unwrap_err();
        assert!(matches!(e, FrameError::Io(_)), "{e}");
    }

    #[tokio::test]
    async fn write_then_read() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().unwrap();
        write_frame(&mut a, &Hello::new(Role::Shim), 1024)
            .await
            .unwrap();
        let h: Hello = read_frame(&mut b, 1024).await.unwrap();
        assert_eq!(h, Hello::new(Role::Shim));
    }
}
