//! The D-Bus wire as the filter reads it: message lengths, the header fields of the agents'
//! messages, a body's values, message boundaries in a byte stream, and the refusal reply.

/// A reader of a message body's values, in the message's byte order (offsets from the
/// message's start, where the body's alignment is counted from).
pub(super) struct Body<'a> {
    msg: &'a [u8],
    pub(super) pos: usize,
    big: bool,
}

impl<'a> Body<'a> {
    /// A reader of the body of `msg`, whose header is `h`.
    pub(super) fn of(h: &Header, msg: &'a [u8]) -> Self {
        Body {
            msg,
            pos: h.body_at,
            big: h.big_endian,
        }
    }

    /// Moves to the next multiple of `a`: the padding passed must be zero bytes, as libdbus
    /// requires (between the body's values; the header's own padding is not checked).
    pub(super) fn pad(&mut self, a: usize) -> Option<()> {
        let to = align(self.pos, a);
        if self.msg.get(self.pos..to)?.iter().any(|b| *b != 0) {
            return None;
        }
        self.pos = to;
        Some(())
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        self.pad(4)?;
        let v = u32_at(self.msg, self.pos, self.big)?;
        self.pos += 4;
        Some(v)
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.pad(8)?;
        let b: [u8; 8] = self
            .msg
            .get(self.pos..self.pos.checked_add(8)?)?
            .try_into()
            .ok()?;
        self.pos += 8;
        Some(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// A string's bytes (its closing NUL checked and passed).
    pub(super) fn string(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u32()?).ok()?;
        self.bytes(n)
    }

    /// A signature's bytes (one length byte, no alignment).
    pub(super) fn signature(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(*self.msg.get(self.pos)?);
        self.pos += 1;
        self.bytes(n)
    }

    pub(super) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.msg.get(self.pos..end)?;
        if self.msg.get(end) != Some(&0) {
            return None;
        }
        self.pos = end + 1;
        Some(s)
    }
}

/// Longest message relayed (the D-Bus limit is 128 MiB; the reader's are small).
pub const MAX_MESSAGE: usize = 64 << 20;
/// Longest authentication line.
pub const MAX_LINE: usize = 1024;
/// The error name of a refusal.
pub const REFUSED: &str = "org.freedesktop.DBus.Error.AccessDenied";

pub(super) const METHOD_CALL: u8 = 1;
pub(super) const METHOD_RETURN: u8 = 2;
pub(super) const ERROR: u8 = 3;
pub(super) const NO_REPLY_EXPECTED: u8 = 1;

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
    /// SIGNATURE.
    pub signature: Option<String>,
    /// Where the body starts in the message.
    pub body_at: usize,
}

pub(super) fn align(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

pub(super) fn u32_at(b: &[u8], at: usize, big: bool) -> Option<u32> {
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
    h.body_at = align(end, 8);
    let mut pos = 16;
    let mut seen = [false; 256];
    while pos < end {
        pos = align(pos, 8);
        let code = *b.get(pos).ok_or("short")?;
        if code == 0 {
            return Err("a header field of code 0 (invalid)");
        }
        // A field given twice could be read one way here and another way by the receiver
        // (a peer-to-peer link has no bus daemon to reject it): refused.
        if std::mem::replace(&mut seen[usize::from(code)], true) {
            return Err("a header field given twice");
        }
        let sig_len = *b.get(pos + 1).ok_or("short")? as usize;
        let sig = b.get(pos + 2..pos + 2 + sig_len).ok_or("short")?;
        // A known field of another type than the specification's would be skipped here (a
        // SIGNATURE given as a string would leave the call without arguments): refused.
        let typed: Option<&[u8]> = match code {
            1 => Some(b"o"),
            2 | 3 | 4 | 6 | 7 => Some(b"s"),
            5 | 9 => Some(b"u"),
            8 => Some(b"g"),
            _ => None,
        };
        if typed.is_some_and(|t| t != sig) {
            return Err("a header field of the wrong type");
        }
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
                let s = b.get(pos + 1..pos + 1 + n).ok_or("short")?;
                if code == 8 {
                    h.signature =
                        Some(std::str::from_utf8(s).map_err(|_| "not UTF-8")?.to_string());
                }
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

/// The error reply the filter sends for a refused call (little-endian).
pub fn refusal_message(to: &Header, serial: u32) -> Vec<u8> {
    pub(super) fn pad(v: &mut Vec<u8>, a: usize) {
        while !v.len().is_multiple_of(a) {
            v.push(0);
        }
    }
    pub(super) fn field_str(v: &mut Vec<u8>, code: u8, sig: u8, s: &str) {
        pad(v, 8);
        v.extend_from_slice(&[code, 1, sig, 0]);
        pad(v, 4);
        v.extend_from_slice(&(s.len() as u32).to_le_bytes());
        v.extend_from_slice(s.as_bytes());
        v.push(0);
    }
    let text = "refused by the broker's filter";
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
pub(super) struct Boundary {
    head: [u8; 16],
    have: usize,
    remaining: usize,
}

impl Boundary {
    /// Accounts for `b`; an error when a length is malformed.
    pub(super) fn feed(&mut self, mut b: &[u8]) -> Result<(), &'static str> {
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
    pub(super) fn at_end(&self) -> bool {
        self.have == 0 && self.remaining == 0
    }
}
