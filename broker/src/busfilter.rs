//! The reader's D-Bus filter: the broker relays the reader's accessibility-bus and
//! peer-to-peer links, so what the reader may send is decided by a process it does not control.
//!
//! The reader gets one end of a socketpair; the broker holds the real connection. From the
//! reader to the bus, the D-Bus authentication lines are relayed as they are, except
//! `NEGOTIATE_UNIX_FD`, which the filter answers `ERROR` itself (no descriptor passing); after
//! `BEGIN`, each message's header (type, path, interface, member, fields) is read and the
//! message passed on only when it is a method call on the read-only list [`READ_ONLY`], or a
//! reply (method return or error). Anything else is not sent: a method call that wants a reply
//! gets a D-Bus error from the filter (`org.freedesktop.DBus.Error.AccessDenied`), a signal or a
//! call that wants none is dropped. From the bus to the reader, bytes pass as they come; only
//! each message's length is read from its fixed header (to put a refusal between two messages,
//! never inside one): no body and no header field of what the apps send is parsed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// The method calls the reader may make: `org.freedesktop.DBus.Hello` (every bus connection
/// starts with it) and the reader's reads (`reader-agent/src/dbus.rs`, `Read::spec`; a test
/// there checks each is on this list).
pub const READ_ONLY: &[(&str, &str)] = &[
    ("org.freedesktop.DBus", "Hello"),
    ("org.a11y.Bus", "GetAddress"),
    ("org.freedesktop.DBus", "GetConnectionUnixProcessID"),
    ("org.freedesktop.DBus.Peer", "Ping"),
    ("org.a11y.atspi.Accessible", "GetChildren"),
    ("org.a11y.atspi.Accessible", "GetChildAtIndex"),
    ("org.a11y.atspi.Accessible", "GetRole"),
    ("org.a11y.atspi.Accessible", "GetState"),
    ("org.a11y.atspi.Accessible", "GetInterfaces"),
    ("org.freedesktop.DBus.Properties", "Get"),
    ("org.freedesktop.DBus.Properties", "GetAll"),
    ("org.a11y.atspi.Application", "GetApplicationBusAddress"),
    ("org.a11y.atspi.Cache", "GetItems"),
    ("org.a11y.atspi.Component", "GetExtents"),
    ("org.a11y.atspi.Action", "GetActions"),
    ("org.a11y.atspi.Action", "GetName"),
    ("org.a11y.atspi.Text", "GetText"),
    ("org.a11y.atspi.Registry", "RegisterEvent"),
];

/// Longest message relayed (the D-Bus limit is 128 MiB; the reader's are small).
pub const MAX_MESSAGE: usize = 64 << 20;
/// Longest authentication line.
pub const MAX_LINE: usize = 1024;
/// The error name of a refusal.
pub const REFUSED: &str = "org.freedesktop.DBus.Error.AccessDenied";

const METHOD_CALL: u8 = 1;
const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;
const NO_REPLY_EXPECTED: u8 = 1;

/// What the filter reads of a message the reader sends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Big-endian message.
    pub big_endian: bool,
    /// Message type (1 call, 2 return, 3 error, 4 signal).
    pub msg_type: u8,
    /// Flags.
    pub flags: u8,
    /// Serial.
    pub serial: u32,
    /// PATH.
    pub path: Option<String>,
    /// INTERFACE.
    pub interface: Option<String>,
    /// MEMBER.
    pub member: Option<String>,
    /// DESTINATION.
    pub destination: Option<String>,
    /// The message carries descriptors (UNIX_FDS).
    pub unix_fds: bool,
}

fn align(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

fn u32_at(b: &[u8], at: usize, big: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(s)
    } else {
        u32::from_le_bytes(s)
    })
}

/// The whole length of the message starting `b` (`Ok(None)`: fewer than 16 bytes yet).
pub fn message_len(b: &[u8]) -> Result<Option<usize>, &'static str> {
    if b.len() < 16 {
        return Ok(None);
    }
    let big = match b[0] {
        b'l' => false,
        b'B' => true,
        _ => return Err("bad endianness"),
    };
    let body = u32_at(b, 4, big).ok_or("short")? as usize;
    let fields = u32_at(b, 12, big).ok_or("short")? as usize;
    let len = align(16usize.saturating_add(fields), 8).saturating_add(body);
    if len > MAX_MESSAGE {
        return Err("message too long");
    }
    Ok(Some(len))
}

/// Reads the header of one whole message.
pub fn parse_header(b: &[u8]) -> Result<Header, &'static str> {
    let len = message_len(b)?.ok_or("short")?;
    if b.len() < len {
        return Err("short");
    }
    let big = b[0] == b'B';
    let mut h = Header {
        big_endian: big,
        msg_type: b[1],
        flags: b[2],
        serial: u32_at(b, 8, big).ok_or("short")?,
        ..Header::default()
    };
    let end = 16 + u32_at(b, 12, big).ok_or("short")? as usize;
    if end > b.len() {
        return Err("fields past the message");
    }
    let mut pos = 16;
    let mut seen = 0u64;
    while pos < end {
        pos = align(pos, 8);
        let code = *b.get(pos).ok_or("short")?;
        // A field given twice could be read one way here and another way by the receiver
        // (a peer-to-peer link has no bus daemon to reject it): refused.
        let bit = 1u64 << (code % 64);
        if seen & bit != 0 {
            return Err("a header field given twice");
        }
        seen |= bit;
        let sig_len = *b.get(pos + 1).ok_or("short")? as usize;
        let sig = b.get(pos + 2..pos + 2 + sig_len).ok_or("short")?;
        pos += 2 + sig_len + 1;
        match sig {
            b"s" | b"o" => {
                pos = align(pos, 4);
                let n = u32_at(b, pos, big).ok_or("short")? as usize;
                let s = b.get(pos + 4..pos + 4 + n).ok_or("short")?;
                let s = std::str::from_utf8(s).map_err(|_| "not UTF-8")?.to_string();
                pos += 4 + n + 1;
                match code {
                    1 => h.path = Some(s),
                    2 => h.interface = Some(s),
                    3 => h.member = Some(s),
                    6 => h.destination = Some(s),
                    _ => {}
                }
            }
            b"g" => {
                let n = *b.get(pos).ok_or("short")? as usize;
                pos += 1 + n + 1;
            }
            b"u" => {
                pos = align(pos, 4);
                u32_at(b, pos, big).ok_or("short")?;
                pos += 4;
                if code == 9 {
                    h.unix_fds = true;
                }
            }
            _ => return Err("unknown header field type"),
        }
    }
    if pos > end {
        return Err("fields past their array");
    }
    Ok(h)
}

/// What the filter does with one message from the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it on.
    Pass,
    /// Answer the call with a refusal.
    Refuse,
    /// Drop it (a signal, or a call that wants no reply).
    Drop,
}

/// The verdict on a message the reader sends.
pub fn judge(h: &Header) -> Verdict {
    if h.unix_fds {
        return refusal(h);
    }
    match h.msg_type {
        METHOD_RETURN | ERROR => Verdict::Pass,
        METHOD_CALL => {
            let ok = matches!((&h.interface, &h.member), (Some(i), Some(m))
                if READ_ONLY.iter().any(|(ri, rm)| ri == i && rm == m));
            if ok { Verdict::Pass } else { refusal(h) }
        }
        _ => Verdict::Drop,
    }
}

fn refusal(h: &Header) -> Verdict {
    if h.msg_type == METHOD_CALL && h.flags & NO_REPLY_EXPECTED == 0 {
        Verdict::Refuse
    } else {
        Verdict::Drop
    }
}

/// The error reply the filter sends for a refused call (little-endian).
pub fn refusal_message(to: &Header, serial: u32) -> Vec<u8> {
    fn pad(v: &mut Vec<u8>, a: usize) {
        while !v.len().is_multiple_of(a) {
            v.push(0);
        }
    }
    fn field_str(v: &mut Vec<u8>, code: u8, sig: u8, s: &str) {
        pad(v, 8);
        v.extend_from_slice(&[code, 1, sig, 0]);
        pad(v, 4);
        v.extend_from_slice(&(s.len() as u32).to_le_bytes());
        v.extend_from_slice(s.as_bytes());
        v.push(0);
    }
    let text = "refused by the reader's filter";
    let mut body = Vec::new();
    body.extend_from_slice(&(text.len() as u32).to_le_bytes());
    body.extend_from_slice(text.as_bytes());
    body.push(0);
    // Header fields, positioned as if they started at offset 16 (which is 8-aligned).
    let mut f = Vec::new();
    field_str(&mut f, 4, b's', REFUSED);
    pad(&mut f, 8);
    f.extend_from_slice(&[5, 1, b'u', 0]);
    f.extend_from_slice(&to.serial.to_le_bytes());
    pad(&mut f, 8);
    f.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]);
    if let Some(d) = &to.destination {
        field_str(&mut f, 7, b's', d);
    }
    let mut m = vec![b'l', ERROR, NO_REPLY_EXPECTED, 1];
    m.extend_from_slice(&(body.len() as u32).to_le_bytes());
    m.extend_from_slice(&serial.to_le_bytes());
    m.extend_from_slice(&(f.len() as u32).to_le_bytes());
    m.extend_from_slice(&f);
    pad(&mut m, 8);
    m.extend_from_slice(&body);
    m
}

/// Where a byte stream of D-Bus messages stands: reads only each message's fixed 16-byte
/// header (its length), so bytes can be passed on as they come and a refusal put between two
/// messages, never inside one.
#[derive(Debug, Default)]
struct Boundary {
    head: [u8; 16],
    have: usize,
    remaining: usize,
}

impl Boundary {
    /// Accounts for `b`; an error when a length is malformed.
    fn feed(&mut self, mut b: &[u8]) -> Result<(), &'static str> {
        while !b.is_empty() {
            if self.remaining > 0 {
                let take = self.remaining.min(b.len());
                self.remaining -= take;
                b = &b[take..];
                continue;
            }
            let take = (16 - self.have).min(b.len());
            self.head[self.have..self.have + take].copy_from_slice(&b[..take]);
            self.have += take;
            b = &b[take..];
            if self.have == 16 {
                let len = message_len(&self.head)?.ok_or("short")?;
                self.remaining = len - 16;
                self.have = 0;
            }
        }
        Ok(())
    }

    /// Between two messages.
    fn at_end(&self) -> bool {
        self.have == 0 && self.remaining == 0
    }
}

/// A name from a message header as the log shows it: at most 64 characters.
fn log_name(n: Option<&str>) -> String {
    n.unwrap_or("").chars().take(64).collect()
}

/// Relays `agent` (the reader's end) and `bus` (the real connection) through the filter until
/// either side closes.
pub async fn relay(agent: UnixStream, bus: UnixStream, name: &'static str) {
    let (mut agent_rd, mut agent_wr) = agent.into_split();
    let (mut bus_rd, mut bus_wr) = bus.into_split();
    let begun = Arc::new(AtomicBool::new(false));
    let serials = Arc::new(AtomicU32::new(1));
    // What the filter itself answers the reader (refusals, the authentication `ERROR`): the
    // bus-side task writes it when the bus's stream is between two messages.
    let (to_agent, mut own_rx) = mpsc::channel::<Vec<u8>>(64);
    // Bus -> reader: bytes as they come, in one write per read; no copy per message.
    let from_bus = {
        let begun = begun.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            let mut at = Boundary::default();
            let mut pending: std::collections::VecDeque<Vec<u8>> = Default::default();
            let mut own_open = true;
            loop {
                tokio::select! {
                    biased;
                    r = bus_rd.read(&mut chunk) => {
                        let n = match r {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if begun.load(Ordering::SeqCst) && at.feed(&chunk[..n]).is_err() {
                            break;
                        }
                        if agent_wr.write_all(&chunk[..n]).await.is_err() {
                            break;
                        }
                    }
                    own = own_rx.recv(), if own_open => match own {
                        Some(b) => pending.push_back(b),
                        None => own_open = false,
                    },
                }
                while at.at_end()
                    && let Some(b) = pending.pop_front()
                {
                    if agent_wr.write_all(&b).await.is_err() {
                        return;
                    }
                }
            }
            // The bus closed: the reader's end closes too.
            let _ = agent_wr.shutdown().await;
        })
    };
    // Reader -> bus: the filter.
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    'outer: loop {
        let n = match agent_rd.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while !begun.load(Ordering::SeqCst) {
            // The authentication phase: a leading NUL byte, then lines.
            if buf.first() == Some(&0) {
                if bus_wr.write_all(&[0]).await.is_err() {
                    break 'outer;
                }
                buf.remove(0);
                continue;
            }
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                if buf.len() > MAX_LINE {
                    break 'outer;
                }
                continue 'outer;
            };
            let line: Vec<u8> = buf.drain(..end + 2).collect();
            if line.starts_with(b"NEGOTIATE_UNIX_FD") {
                if to_agent.send(b"ERROR\r\n".to_vec()).await.is_err() {
                    break 'outer;
                }
                continue;
            }
            if line.starts_with(b"BEGIN") {
                begun.store(true, Ordering::SeqCst);
            }
            if bus_wr.write_all(&line).await.is_err() {
                break 'outer;
            }
        }
        // Whole messages in `buf[..done]`; consecutive passing ones go out in one write.
        let mut pos = 0;
        let mut pass_from = 0;
        loop {
            let len = match message_len(&buf[pos..]) {
                Ok(Some(len)) if buf.len() - pos >= len => len,
                Ok(_) => break,
                Err(_) => break 'outer,
            };
            let Ok(h) = parse_header(&buf[pos..pos + len]) else {
                break 'outer;
            };
            let verdict = judge(&h);
            if verdict != Verdict::Pass {
                if pass_from < pos && bus_wr.write_all(&buf[pass_from..pos]).await.is_err() {
                    break 'outer;
                }
                pass_from = pos + len;
            }
            match verdict {
                Verdict::Pass => {}
                Verdict::Refuse => {
                    // The names come from a possibly compromised reader: logged cut and escaped
                    // (Debug), so they cannot forge log lines or flood the log.
                    tracing::warn!(
                        agent = name,
                        interface = ?log_name(h.interface.as_deref()),
                        member = ?log_name(h.member.as_deref()),
                        "the reader's filter refused a call"
                    );
                    let serial = 0x8000_0000 | serials.fetch_add(1, Ordering::Relaxed);
                    if to_agent.send(refusal_message(&h, serial)).await.is_err() {
                        break 'outer;
                    }
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

/// Puts a filter between a handed connection and the reader: returns the reader's end of a
/// socketpair, the relay running on the current runtime.
pub fn filtered(real: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let real = std::os::unix::net::UnixStream::from(real);
    real.set_nonblocking(true)?;
    ours.set_nonblocking(true)?;
    let real = UnixStream::from_std(real)?;
    let ours = UnixStream::from_std(ours)?;
    tokio::spawn(relay(ours, real, "nish-reader"));
    Ok(theirs.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method call as zbus would write it (little endian).
    fn call(serial: u32, path: &str, iface: &str, member: &str, flags: u8) -> Vec<u8> {
        let mut f = Vec::new();
        let mut field = |code: u8, sig: u8, s: &str| {
            while !f.len().is_multiple_of(8) {
                f.push(0);
            }
            f.extend_from_slice(&[code, 1, sig, 0]);
            while !f.len().is_multiple_of(4) {
                f.push(0);
            }
            f.extend_from_slice(&(s.len() as u32).to_le_bytes());
            f.extend_from_slice(s.as_bytes());
            f.push(0);
        };
        field(1, b'o', path);
        field(2, b's', iface);
        field(3, b's', member);
        field(6, b's', ":1.7");
        let mut m = vec![b'l', METHOD_CALL, flags, 1];
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(&serial.to_le_bytes());
        m.extend_from_slice(&(f.len() as u32).to_le_bytes());
        m.extend_from_slice(&f);
        while !m.len().is_multiple_of(8) {
            m.push(0);
        }
        m
    }

    #[test]
    fn reads_pass_and_actions_and_setters_are_refused() {
        let get = call(
            5,
            "/org/a11y/atspi/accessible/1",
            "org.a11y.atspi.Accessible",
            "GetRole",
            0,
        );
        assert_eq!(message_len(&get).unwrap(), Some(get.len()));
        let h = parse_header(&get).unwrap();
        assert_eq!(h.serial, 5);
        assert_eq!(h.member.as_deref(), Some("GetRole"));
        assert_eq!(h.destination.as_deref(), Some(":1.7"));
        assert_eq!(judge(&h), Verdict::Pass);
        for (iface, member) in [
            ("org.a11y.atspi.Action", "DoAction"),
            ("org.a11y.atspi.EditableText", "SetTextContents"),
            ("org.freedesktop.DBus.Properties", "Set"),
            ("org.a11y.atspi.Component", "GrabFocus"),
            ("org.freedesktop.systemd1.Manager", "StartTransientUnit"),
        ] {
            let h = parse_header(&call(6, "/x", iface, member, 0)).unwrap();
            assert_eq!(judge(&h), Verdict::Refuse, "{iface}.{member}");
            let h = parse_header(&call(6, "/x", iface, member, NO_REPLY_EXPECTED)).unwrap();
            assert_eq!(judge(&h), Verdict::Drop, "{iface}.{member}");
        }
    }

    #[test]
    fn the_refusal_is_a_well_formed_error_reply() {
        let h = parse_header(&call(9, "/x", "org.a11y.atspi.Action", "DoAction", 0)).unwrap();
        let e = refusal_message(&h, 77);
        assert_eq!(message_len(&e).unwrap(), Some(e.len()));
        let back = parse_header(&e).unwrap();
        assert_eq!(back.msg_type, ERROR);
        assert_eq!(back.serial, 77);
    }

    #[test]
    fn names_logged_from_a_refused_call_are_cut_and_escaped() {
        let hostile = "x\nFORGED log line ".repeat(20);
        let logged = format!("{:?}", log_name(Some(&hostile)));
        assert!(!logged.contains('\n'), "{logged}");
        assert!(logged.contains("\\n"), "{logged}");
        assert_eq!(log_name(Some(&hostile)).chars().count(), 64);
        assert_eq!(log_name(None), "");
    }

    #[test]
    fn a_header_field_given_twice_is_refused() {
        let mut m = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
        // Turn the DESTINATION field (code 6) into a second MEMBER field (code 3).
        let at = m
            .windows(4)
            .position(|w| w == [6, 1, b's', 0])
            .expect("the destination field");
        m[at] = 3;
        assert!(parse_header(&m).is_err());
    }

    #[test]
    fn the_boundary_tracker_finds_message_ends_in_any_cut() {
        let a = call(1, "/x", "org.a11y.atspi.Accessible", "GetRole", 0);
        let b = call(2, "/org/a11y/atspi/accessible/root", "a.b", "Cee", 0);
        let stream: Vec<u8> = [a.clone(), b.clone(), a.clone()].concat();
        let ends = [a.len(), a.len() + b.len(), stream.len()];
        for cut in 1..stream.len() {
            let mut t = Boundary::default();
            for (i, piece) in stream.chunks(cut).enumerate() {
                t.feed(piece).unwrap();
                let fed = ((i + 1) * cut).min(stream.len());
                assert_eq!(t.at_end(), ends.contains(&fed), "cut {cut} at {fed}");
            }
        }
        let mut t = Boundary::default();
        assert!(t.feed(b"x234567890123456").is_err());
    }

    #[test]
    fn malformed_headers_are_refused() {
        assert!(message_len(b"x23456789012345678").is_err());
        let mut m = call(1, "/x", "a.b", "C", 0);
        // An unknown field type.
        m[17] = 1;
        m[18] = b'v';
        assert!(parse_header(&m).is_err());
    }
}
