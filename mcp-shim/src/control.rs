//! The host's control pipe: one JSON object a line in each direction.
//!
//! Lines the host writes (verbs such as `takeover.resume`) are forwarded to the broker as
//! [`ShimToBroker::Control`](nish_proto::wire::shim::ShimToBroker::Control) without being
//! interpreted: the broker decides. Events and acks from the broker are written back one a line.
//! A line over [`MAX_LINE`] bytes is discarded and answered with an `invalid_arguments` error
//! line. End of input only stops reading; events keep flowing to the output.

use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;

use nish_proto::{DriverError, ErrorCode};
use nish_sandbox::sys::{AdoptError, Kind, adopt};
use serde_json::json;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::link::BrokerLink;

/// Longest control line, without its newline.
pub const MAX_LINE: usize = 16 * 1024;
/// Lines waiting for the control output.
pub const OUTPUT_QUEUE: usize = 256;

/// The `--control-fd` argument: one bidirectional descriptor or an input and an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlFds {
    /// A socketpair end used both ways.
    Both(i32),
    /// Separate input and output descriptors (pipes).
    Split {
        /// Read end.
        input: i32,
        /// Write end.
        output: i32,
    },
}

impl std::str::FromStr for ControlFds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let num = |v: &str| {
            v.trim()
                .parse::<i32>()
                .map_err(|_| format!("{v:?} is not a descriptor number"))
        };
        match s.split_once(':') {
            None => Ok(ControlFds::Both(num(s)?)),
            Some((i, o)) => {
                let (input, output) = (num(i)?, num(o)?);
                if input == output {
                    // The same descriptor both ways: one bidirectional descriptor.
                    Ok(ControlFds::Both(input))
                } else {
                    Ok(ControlFds::Split { input, output })
                }
            }
        }
    }
}

/// The control pipe's two directions, taken from the inherited descriptors.
pub struct ControlIo {
    /// Where the host writes verbs.
    pub input: Pin<Box<dyn AsyncRead + Send>>,
    /// Where the shim writes events.
    pub output: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for ControlIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlIo")
    }
}

/// Descriptors taken at startup, before the runtime exists.
#[derive(Debug)]
pub enum TakenFds {
    /// One bidirectional socket.
    Both(OwnedFd),
    /// An input and an output, each a pipe or a socket.
    Split((OwnedFd, Kind), (OwnedFd, Kind)),
}

/// Takes ownership of the descriptors named by `--control-fd` (call first thing in `main`):
/// each an inherited descriptor of the kind the host may pass, adopted once
/// (`nish_sandbox::sys::adopt`, which refuses the standard streams: stdin and stdout carry MCP,
/// stderr the log).
pub fn take(fds: ControlFds) -> Result<TakenFds, String> {
    match fds {
        ControlFds::Both(fd) => match adopt(fd, &[Kind::UnixStream]) {
            Ok((owned, _)) => Ok(TakenFds::Both(owned)),
            Err(e @ AdoptError::Kind { .. }) => Err(format!(
                "{e}; pass a socketpair end, or --control-fd IN:OUT for two pipes"
            )),
            Err(e) => Err(e.to_string()),
        },
        ControlFds::Split { input, output } => {
            let i = adopt(input, &[Kind::Fifo, Kind::UnixStream]).map_err(|e| e.to_string())?;
            let o = adopt(output, &[Kind::Fifo, Kind::UnixStream]).map_err(|e| e.to_string())?;
            Ok(TakenFds::Split(i, o))
        }
    }
}

/// Wraps taken descriptors for tokio (needs the runtime).
pub fn into_io(fds: TakenFds) -> std::io::Result<ControlIo> {
    match fds {
        TakenFds::Both(fd) => {
            let (r, w) = socket(fd)?.into_split();
            Ok(ControlIo {
                input: Box::pin(r),
                output: Box::pin(w),
            })
        }
        TakenFds::Split((i, ikind), (o, okind)) => {
            let input: Pin<Box<dyn AsyncRead + Send>> = match ikind {
                Kind::Fifo => Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(i)?),
                Kind::UnixStream => Box::pin(socket(i)?),
            };
            let output: Pin<Box<dyn AsyncWrite + Send>> = match okind {
                Kind::Fifo => Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(o)?),
                Kind::UnixStream => Box::pin(socket(o)?),
            };
            Ok(ControlIo { input, output })
        }
    }
}

fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

/// One item read from the control input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its newline (and without a trailing `\r`).
    Text(String),
    /// A line over the limit, discarded; its length in bytes.
    TooLong(usize),
    /// A line that is not UTF-8, discarded.
    NotUtf8,
}

/// Reads the next line of at most `max` bytes. Longer lines are consumed to their end without
/// being kept. `None` at end of input (a last line without a newline still counts).
pub async fn next_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            if total == 0 {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        total += take;
        if total <= max {
            buf.extend_from_slice(&chunk[..take]);
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if buf.last() == Some(&b'\r') && total <= max {
        buf.pop();
    }
    if total > max {
        return Ok(Some(Line::TooLong(total)));
    }
    Ok(Some(match String::from_utf8(buf) {
        Ok(s) => Line::Text(s),
        Err(_) => Line::NotUtf8,
    }))
}

/// The one-line error the shim writes on the control output.
pub fn error_line(e: &DriverError) -> String {
    json!({"event": "error", "error": e.error_object()}).to_string()
}

/// Reads control lines and forwards them until end of input. `host` gives the host name to open
/// a session with when the link must connect.
pub async fn read_loop(
    input: Pin<Box<dyn AsyncRead + Send>>,
    link: Arc<BrokerLink>,
    host: impl Fn() -> String,
    out: mpsc::Sender<String>,
) {
    let mut r = BufReader::new(input);
    loop {
        let line = match next_line(&mut r, MAX_LINE).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                tracing::info!("control input closed; no more verbs from the host");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "control input failed; no more verbs from the host");
                return;
            }
        };
        let err = match line {
            Line::Text(t) if t.trim().is_empty() => continue,
            Line::Text(t) => {
                tracing::debug!(bytes = t.len(), "control line");
                link.control(&host(), t).await.err()
            }
            Line::TooLong(n) => {
                tracing::warn!(bytes = n, "control line too long; discarded");
                Some(DriverError::new(
                    ErrorCode::InvalidArguments,
                    format!("control line of {n} bytes is over the limit of {MAX_LINE}; discarded"),
                ))
            }
            Line::NotUtf8 => Some(DriverError::new(
                ErrorCode::InvalidArguments,
                "control line is not UTF-8; discarded",
            )),
        };
        if let Some(e) = err
            && out.try_send(error_line(&e)).is_err()
        {
            tracing::warn!("control output is full or closed; error line dropped");
        }
    }
}

/// Writes lines to the control output until the queue closes. After a write failure (the host
/// closed its end) lines are drained and dropped.
pub async fn write_loop(
    mut output: Pin<Box<dyn AsyncWrite + Send>>,
    mut rx: mpsc::Receiver<String>,
) {
    let mut broken = false;
    while let Some(mut line) = rx.recv().await {
        if broken {
            continue;
        }
        line.retain(|c| c != '\n' && c != '\r');
        line.push('\n');
        let r = async {
            output.write_all(line.as_bytes()).await?;
            output.flush().await
        }
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "control output failed; events are dropped from now on");
            broken = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // A tiny buffer so lines straddle many fill_buf calls.
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(l) = next_line(&mut r, max).await.unwrap() {
            out.push(l);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_last_line_without_newline() {
        let got = lines(b"{\"a\":1}\n\r\nxyz\r\nlast", 100).await;
        assert_eq!(
            got,
            vec![
                Line::Text("{\"a\":1}".into()),
                Line::Text(String::new()),
                Line::Text("xyz".into()),
                Line::Text("last".into()),
            ]
        );
    }

    #[tokio::test]
    async fn long_lines_are_discarded_and_the_next_line_survives() {
        let mut input = vec![b'x'; 25];
        input.push(b'\n');
        input.extend_from_slice(b"exactly10!\nok\n");
        let got = lines(&input, 10).await;
        assert_eq!(
            got,
            vec![
                Line::TooLong(25),
                Line::Text("exactly10!".into()),
                Line::Text("ok".into())
            ]
        );
    }

    #[tokio::test]
    async fn non_utf8_is_reported() {
        let got = lines(b"\xff\xfe\nok\n", 100).await;
        assert_eq!(got, vec![Line::NotUtf8, Line::Text("ok".into())]);
    }

    /// What the control reader must return: the input split on newlines (a last line without
    /// one counts), a trailing `\r` dropped, lines over `max` reported by length.
    fn reference(input: &[u8], max: usize) -> Vec<Line> {
        let mut segs: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
        if segs.last().is_some_and(|s| s.is_empty()) {
            segs.pop();
        }
        segs.into_iter()
            .map(|seg| {
                if seg.len() > max {
                    return Line::TooLong(seg.len());
                }
                let seg = seg.strip_suffix(b"\r").unwrap_or(seg);
                match String::from_utf8(seg.to_vec()) {
                    Ok(s) => Line::Text(s),
                    Err(_) => Line::NotUtf8,
                }
            })
            .collect()
    }

    /// Control lines under fuzzing: arbitrary bytes (JSON verbs, newlines, carriage returns,
    /// invalid UTF-8, long runs) read through buffers of every small size must split exactly
    /// as the reference says, never keeping more than `max` bytes of a line.
    #[test]
    fn fuzz_control_lines() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let piece = prop_oneof![
            Just(b"{\"method\":\"takeover.resume\"}".to_vec()),
            Just(
                b"{\"method\":\"approval.answer\",\"params\":{\"id\":\"a1\",\"approve\":true}}"
                    .to_vec()
            ),
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(vec![0xff, 0xfe]),
            Just(vec![0xe2, 0x82]),
            (1usize..64).prop_map(|n| vec![b'x'; n]),
            proptest::collection::vec(any::<u8>(), 0..16),
        ];
        let input = proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat());
        let mut runner = TestRunner::new(Config {
            cases: 512,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&(input, 1usize..80, 1usize..17), |(input, max, cap)| {
                let got = rt.block_on(async {
                    let mut r = BufReader::with_capacity(cap, &input[..]);
                    let mut out = Vec::new();
                    while let Some(l) = next_line(&mut r, max).await.unwrap() {
                        if let Line::Text(t) = &l {
                            assert!(t.len() <= max);
                        }
                        out.push(l);
                    }
                    out
                });
                prop_assert_eq!(got, reference(&input, max));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn parses_control_fd_forms() {
        assert_eq!("5".parse::<ControlFds>(), Ok(ControlFds::Both(5)));
        assert_eq!(
            "5:6".parse::<ControlFds>(),
            Ok(ControlFds::Split {
                input: 5,
                output: 6
            })
        );
        assert_eq!("7:7".parse::<ControlFds>(), Ok(ControlFds::Both(7)));
        assert!("x".parse::<ControlFds>().is_err());
        assert!("5:".parse::<ControlFds>().is_err());
    }

    #[test]
    fn error_line_is_one_json_object_with_the_envelope_error() {
        let e = DriverError::new(ErrorCode::InvalidArguments, "control line too long");
        let line = error_line(&e);
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "error");
        assert_eq!(v["error"]["code"], "invalid_arguments");
        assert_eq!(v["error"]["disposition"]["retry"], "never");
        assert_eq!(v["error"], e.error_object());
    }
}
