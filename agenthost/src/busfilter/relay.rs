//! The relay between an agent's end of a socketpair and the real connection: the
//! authentication lines, then each message judged by the [`Policy`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::policy::{Policy, Verdict};
use super::wire::{
    Asked, Boundary, ERROR, MAX_LINE, METHOD_CALL, METHOD_RETURN, message_len, parse_header,
    refusal_message,
};

/// A name from a message header as the log shows it: at most 64 characters.
pub(super) fn log_name(n: Option<&str>) -> String {
    n.unwrap_or("").chars().take(64).collect()
}

/// What the agent's side tells the bus's side, in the order the agent sent its bytes.
pub(super) enum Step {
    /// An authentication line went to the bus: its one reply line goes to the agent next.
    BusLine,
    /// The filter's own answer (the `ERROR` to `NEGOTIATE_UNIX_FD`, a refusal): written to the
    /// agent in its turn during authentication, afterwards between two of the bus's messages.
    Own(Vec<u8>),
    /// The agent sent `BEGIN`: once the replies before it are through, the bus's side answers
    /// whether the bus's last reply was `OK` (the bus authenticated the agent); only then is
    /// `BEGIN` sent to the bus, and the bus's side reads messages from there on.
    Begin(tokio::sync::oneshot::Sender<bool>),
}

/// Steps queued between the agent's side and the bus's side.
pub(super) const STEPS_QUEUED: usize = 64;

/// Longest message an agent may send (the bus's and the apps' answers may be longer, up to
/// [`MAX_MESSAGE`](super::wire::MAX_MESSAGE)): the agents' calls are small, the longest a set_value of 10,000 characters;
/// the relay holds one message whole before it judges it.
pub const MAX_AGENT_MESSAGE: usize = 1 << 20;

/// An authentication line of the agent's, by its command word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AuthCommand {
    /// `AUTH`, `CANCEL`, `DATA`, `ERROR`: passed to the bus, which answers with one line.
    ToBus,
    /// `NEGOTIATE_UNIX_FD`: answered `ERROR` by the filter.
    NegotiateUnixFd,
    /// `BEGIN`.
    Begin,
}

/// The command of an authentication line (with its `\r\n`); `None` for anything the
/// authentication protocol does not have, or spells otherwise (`BEGINX`, `BEGIN x`, a NUL).
pub(super) fn auth_command(line: &[u8]) -> Option<AuthCommand> {
    let body = line.strip_suffix(b"\r\n")?;
    if body.iter().any(|b| !(0x20..0x7f).contains(b)) {
        return None;
    }
    let word = body.split(|b| *b == b' ').next().unwrap_or(&[]);
    match (word, body.len() == word.len()) {
        (b"BEGIN", true) => Some(AuthCommand::Begin),
        (b"NEGOTIATE_UNIX_FD", true) => Some(AuthCommand::NegotiateUnixFd),
        (b"AUTH" | b"DATA" | b"ERROR", _) | (b"CANCEL", true) => Some(AuthCommand::ToBus),
        _ => None,
    }
}

/// The bus's side of a relay: the bus's bytes to the agent, with the filter's own answers put
/// in their place. In the authentication phase the bus answers each line the agent sent with
/// one line, and the agent may send all its lines and its first messages at once (zbus does):
/// the bus's replies are matched to the agent's lines one by one, so that neither an `ERROR`
/// of the filter overtakes the bus's `OK` nor a reply line is read as a message.
pub(super) async fn bus_to_agent(
    mut bus_rd: tokio::net::unix::OwnedReadHalf,
    mut agent_wr: tokio::net::unix::OwnedWriteHalf,
    mut steps_rx: mpsc::Receiver<Step>,
    asked: Arc<Asked>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut at = Boundary::default();
    let mut steps: std::collections::VecDeque<Step> = Default::default();
    let mut steps_open = true;
    // Authentication: the bus's bytes not yet matched to a line of the agent, and whether the
    // bus's last reply line was `OK`.
    let mut auth = true;
    let mut lines: Vec<u8> = Vec::new();
    let mut last_ok = false;
    loop {
        tokio::select! {
            biased;
            r = bus_rd.read(&mut chunk) => {
                let n = match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if auth {
                    lines.extend_from_slice(&chunk[..n]);
                } else {
                    if at.feed(&chunk[..n]).is_err() {
                        break;
                    }
                    // Noted before the bytes reach the agent, so its reply finds them.
                    asked.note(at.take_calls());
                    if agent_wr.write_all(&chunk[..n]).await.is_err() {
                        break;
                    }
                }
            }
            // Bounded: the filter's own answers wait here only while the bus owes a reply line
            // or is inside a message; past that, the agent's side waits.
            step = steps_rx.recv(), if steps_open && steps.len() < STEPS_QUEUED => match step {
                Some(s) => steps.push_back(s),
                None => steps_open = false,
            },
        }
        while auth {
            match steps.front() {
                Some(Step::Own(b)) => {
                    if agent_wr.write_all(b).await.is_err() {
                        return;
                    }
                }
                Some(Step::BusLine) => {
                    let Some(end) = lines.windows(2).position(|w| w == b"\r\n") else {
                        break;
                    };
                    let line: Vec<u8> = lines.drain(..end + 2).collect();
                    last_ok = line.starts_with(b"OK ");
                    if agent_wr.write_all(&line).await.is_err() {
                        return;
                    }
                }
                Some(Step::Begin(_)) => {
                    let Some(Step::Begin(answer)) = steps.pop_front() else {
                        return;
                    };
                    // The bus sends nothing unasked between its `OK` and our `BEGIN`.
                    let ok = last_ok && lines.is_empty();
                    let _ = answer.send(ok);
                    if !ok {
                        return;
                    }
                    auth = false;
                    continue;
                }
                None => break,
            }
            steps.pop_front();
        }
        if auth && lines.len() > 2 * MAX_LINE {
            // A bus that answers with more than it was asked: not a D-Bus server.
            break;
        }
        while !auth && at.at_end() {
            match steps.pop_front() {
                Some(Step::Own(b)) => {
                    if agent_wr.write_all(&b).await.is_err() {
                        return;
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
    }
    // The bus closed: the agent's end closes too.
    let _ = agent_wr.shutdown().await;
}

/// Relays `agent` (the agent's end) and `bus` (the real connection) through the filter, with
/// `policy`, until either side closes.
pub async fn relay(agent: UnixStream, bus: UnixStream, policy: Policy) {
    let name = policy.agent();
    let (mut agent_rd, agent_wr) = agent.into_split();
    let (bus_rd, mut bus_wr) = bus.into_split();
    let mut begun = false;
    let mut first_byte = true;
    let serials = Arc::new(AtomicU32::new(1));
    let (to_agent, steps_rx) = mpsc::channel::<Step>(STEPS_QUEUED);
    let asked = Arc::new(Asked::default());
    let mut from_bus = tokio::spawn(bus_to_agent(bus_rd, agent_wr, steps_rx, asked.clone()));
    // Agent -> bus: the filter.
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    'outer: loop {
        // Either side's end ends the link: a bus side that stopped (the bus closed, or it
        // refused what it read) leaves no agent writing on unheard.
        let n = tokio::select! {
            r = agent_rd.read(&mut chunk) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = &mut from_bus => break,
        };
        buf.extend_from_slice(&chunk[..n]);
        while !begun {
            // The authentication phase: one NUL byte first, then lines whose command word is
            // one the D-Bus authentication protocol has, spelled exactly as the bus reads it.
            if first_byte && !buf.is_empty() {
                if buf[0] != 0 || bus_wr.write_all(&[0]).await.is_err() {
                    break 'outer;
                }
                buf.remove(0);
                first_byte = false;
                continue;
            }
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                if buf.len() > MAX_LINE {
                    break 'outer;
                }
                continue 'outer;
            };
            let line: Vec<u8> = buf.drain(..end + 2).collect();
            let step = match auth_command(&line) {
                Some(AuthCommand::NegotiateUnixFd) => {
                    // Descriptors never pass the filter: answered here, the bus never sees it.
                    if to_agent
                        .send(Step::Own(b"ERROR\r\n".to_vec()))
                        .await
                        .is_err()
                    {
                        break 'outer;
                    }
                    continue;
                }
                Some(AuthCommand::Begin) => {
                    // `BEGIN` goes to the bus only once the bus said `OK` to the agent: on a
                    // bus still authenticating, the bytes after it would be read as lines, and
                    // a message that passed the filter could carry lines and messages of its own.
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    if to_agent.send(Step::Begin(tx)).await.is_err() || rx.await != Ok(true) {
                        break 'outer;
                    }
                    if bus_wr.write_all(&line).await.is_err() {
                        break 'outer;
                    }
                    begun = true;
                    continue;
                }
                Some(AuthCommand::ToBus) => Step::BusLine,
                None => break 'outer,
            };
            if bus_wr.write_all(&line).await.is_err() || to_agent.send(step).await.is_err() {
                break 'outer;
            }
        }
        // Whole messages in `buf[..done]`; consecutive passing ones go out in one write.
        let mut pos = 0;
        let mut pass_from = 0;
        loop {
            let len = match message_len(&buf[pos..]) {
                Ok(Some(len)) if len > MAX_AGENT_MESSAGE => break 'outer,
                Ok(Some(len)) if buf.len() - pos >= len => len,
                Ok(_) => break,
                Err(_) => break 'outer,
            };
            let Ok(h) = parse_header(&buf[pos..pos + len]) else {
                break 'outer;
            };
            // A reply passes only to a call the other side made to the agent on this link, once
            // (on a peer-to-peer link no bus daemon checks it: a forged reply would answer a
            // call of the app's own to someone else with the agent's data).
            let verdict = match h.msg_type {
                METHOD_RETURN | ERROR if !h.reply_serial.is_some_and(|s| asked.answer(s)) => {
                    tracing::warn!(
                        agent = name,
                        "the broker's D-Bus filter dropped a reply to no call of this link"
                    );
                    Verdict::Drop
                }
                _ => policy.judge(&h, &buf[pos..pos + len]),
            };
            if verdict != Verdict::Pass {
                if pass_from < pos && bus_wr.write_all(&buf[pass_from..pos]).await.is_err() {
                    break 'outer;
                }
                pass_from = pos + len;
            }
            match verdict {
                Verdict::Pass => {}
                Verdict::Refuse => {
                    // The names come from a possibly compromised agent: logged cut and escaped
                    // (Debug), so they cannot forge log lines or flood the log.
                    tracing::warn!(
                        agent = name,
                        interface = ?log_name(h.interface.as_deref()),
                        member = ?log_name(h.member.as_deref()),
                        path = ?log_name(h.path.as_deref()),
                        destination = ?log_name(h.destination.as_deref()),
                        "the broker's D-Bus filter refused a call"
                    );
                    policy.refused(&h);
                    let serial = 0x8000_0000 | serials.fetch_add(1, Ordering::Relaxed);
                    if to_agent
                        .send(Step::Own(refusal_message(&h, serial)))
                        .await
                        .is_err()
                    {
                        break 'outer;
                    }
                }
                Verdict::Drop if h.msg_type == METHOD_CALL => {
                    tracing::warn!(
                        agent = name,
                        interface = ?log_name(h.interface.as_deref()),
                        member = ?log_name(h.member.as_deref()),
                        "the broker's D-Bus filter dropped a call that wanted no reply"
                    );
                    policy.refused(&h);
                }
                Verdict::Drop => {}
            }
            pos += len;
        }
        if pass_from < pos && bus_wr.write_all(&buf[pass_from..pos]).await.is_err() {
            break 'outer;
        }
        buf.drain(..pos);
    }
    let _ = bus_wr.shutdown().await;
    drop(to_agent);
    from_bus.abort();
}

/// Puts the reader's filter between a handed connection and the reader: returns the reader's
/// end of a socketpair, the relay running on the current runtime.
pub fn filtered(real: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    filtered_with(real, Policy::Reader)
}

/// Puts a filter with `policy` between a handed connection and its agent: returns the agent's
/// end of a socketpair, the relay running on the current runtime.
pub fn filtered_with(
    real: std::os::fd::OwnedFd,
    policy: Policy,
) -> std::io::Result<std::os::fd::OwnedFd> {
    filtered_holding(real, policy, ())
}

/// [`filtered_with`], `held` kept until the relay ends (a count of the agent's live links).
pub fn filtered_holding<T: Send + 'static>(
    real: std::os::fd::OwnedFd,
    policy: Policy,
    held: T,
) -> std::io::Result<std::os::fd::OwnedFd> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let real = std::os::unix::net::UnixStream::from(real);
    real.set_nonblocking(true)?;
    ours.set_nonblocking(true)?;
    let real = UnixStream::from_std(real)?;
    let ours = UnixStream::from_std(ours)?;
    tokio::spawn(async move {
        relay(ours, real, policy).await;
        drop(held);
    });
    Ok(theirs.into())
}
