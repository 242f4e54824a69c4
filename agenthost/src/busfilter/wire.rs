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
    /// REPLY_SERIAL: the serial of the call a reply answers.
    pub reply_serial: Option<u32>,
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

/// Moves `pos` to the next multiple of `a` within `b`: the bytes passed must be zero, as the
/// D-Bus specification requires of padding (the bus refuses other bytes).
fn pad_to(b: &[u8], pos: usize, a: usize) -> Result<usize, &'static str> {
    let to = align(pos, a);
    if b.get(pos..to).ok_or("short")?.iter().any(|x| *x != 0) {
        return Err("padding that is not zero");
    }
    Ok(to)
}

/// The `n` bytes of a string or signature at `at`, checked as the bus checks them: followed by
/// its NUL, no NUL inside, UTF-8.
fn text_at(b: &[u8], at: usize, n: usize) -> Result<String, &'static str> {
    let end = at.checked_add(n).ok_or("short")?;
    let s = b.get(at..end).ok_or("short")?;
    if b.get(end) != Some(&0) {
        return Err("a string without its NUL");
    }
    if s.contains(&0) {
        return Err("a NUL inside a string");
    }
    Ok(std::str::from_utf8(s).map_err(|_| "not UTF-8")?.to_string())
}

/// The D-Bus specification's name rules, as the bus applies them to header fields.
mod names {
    fn element(e: &str, first_digit: bool, dash: bool) -> bool {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || (dash && c == '-');
        !e.is_empty()
            && e.chars().all(ok)
            && (first_digit || !e.starts_with(|c: char| c.is_ascii_digit()))
    }

    /// `/`, or `/`-separated elements of `[A-Za-z0-9_]`.
    pub(super) fn object_path(p: &str) -> bool {
        p == "/"
            || (p.starts_with('/')
                && !p.ends_with('/')
                && p[1..].split('/').all(|e| element(e, true, false)))
    }

    /// Two or more `.`-separated elements not starting with a digit (interfaces, errors).
    pub(super) fn interface(n: &str) -> bool {
        n.len() <= 255
            && n.split('.').count() >= 2
            && n.split('.').all(|e| element(e, false, false))
    }

    /// One element not starting with a digit.
    pub(super) fn member(n: &str) -> bool {
        n.len() <= 255 && element(n, false, false)
    }

    /// A unique name: `:` then elements that may start with a digit.
    pub(super) fn unique_name(n: &str) -> bool {
        n.starts_with(':') && bus_name(n)
    }

    /// A unique name (`:` then elements that may start with a digit) or a well-known one.
    pub(super) fn bus_name(n: &str) -> bool {
        if n.len() > 255 {
            return false;
        }
        match n.strip_prefix(':') {
            Some(u) => u.split('.').count() >= 2 && u.split('.').all(|e| element(e, true, true)),
            None => n.split('.').count() >= 2 && n.split('.').all(|e| element(e, false, true)),
        }
    }

    /// A signature: complete types of the basic codes, arrays, structs in parentheses and dict
    /// entries in braces (only as an array's element), at most 255 bytes.
    pub(super) fn signature(s: &str) -> bool {
        fn one(b: &[u8], i: usize, depth: u32) -> Option<usize> {
            if depth > 64 {
                return None;
            }
            match *b.get(i)? {
                b'y' | b'b' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'd' | b'h' | b's'
                | b'o' | b'g' | b'v' => Some(i + 1),
                b'a' => match b.get(i + 1)? {
                    b'{' => {
                        let k = one(b, i + 2, depth + 1)?;
                        if !matches!(
                            b[i + 2],
                            b'y' | b'b'
                                | b'n'
                                | b'q'
                                | b'i'
                                | b'u'
                                | b'x'
                                | b't'
                                | b'd'
                                | b'h'
                                | b's'
                                | b'o'
                                | b'g'
                        ) {
                            return None;
                        }
                        let v = one(b, k, depth + 1)?;
                        (*b.get(v)? == b'}').then_some(v + 1)
                    }
                    _ => one(b, i + 1, depth + 1),
                },
                b'(' => {
                    let mut j = i + 1;
                    if *b.get(j)? == b')' {
                        return None;
                    }
                    while *b.get(j)? != b')' {
                        j = one(b, j, depth + 1)?;
                    }
                    Some(j + 1)
                }
                _ => None,
            }
        }
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match one(b, i, 0) {
                Some(j) => i = j,
                None => return false,
            }
        }
        b.len() <= 255
    }
}

/// Reads the header of one whole message, as the bus reads it: a message the bus or the
/// receiving library would refuse (another protocol version, an unknown type, serial 0, padding
/// that is not zero, a string without its NUL or with one inside, a field given twice or of the
/// wrong type) is refused here too, so the filter never reads a field one way and the receiver
/// another (`busfilter/tests/fuzz.rs` holds this to zbus's own decoder).
pub fn parse_header(b: &[u8]) -> Result<Header, &'static str> {
    let len = message_len(b)?.ok_or("short")?;
    if b.len() < len {
        return Err("short");
    }
    let big = b[0] == b'B';
    if b[3] != 1 {
        return Err("another protocol version");
    }
    if !(1..=4).contains(&b[1]) {
        return Err("an unknown message type");
    }
    let mut h = Header {
        big_endian: big,
        msg_type: b[1],
        flags: b[2],
        serial: u32_at(b, 8, big).ok_or("short")?,
        ..Header::default()
    };
    if h.serial == 0 {
        return Err("serial 0");
    }
    let end = 16 + u32_at(b, 12, big).ok_or("short")? as usize;
    if end > b.len() {
        return Err("fields past the message");
    }
    let mut pos = 16;
    let mut seen = [false; 256];
    while pos < end {
        pos = pad_to(b, pos, 8)?;
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
        let sig = text_at(b, pos + 2, sig_len)?;
        // A known field of another type than the specification's would be skipped here (a
        // SIGNATURE given as a string would leave the call without arguments): refused.
        let typed: Option<&str> = match code {
            1 => Some("o"),
            2 | 3 | 4 | 6 | 7 => Some("s"),
            5 | 9 => Some("u"),
            8 => Some("g"),
            _ => None,
        };
        if typed.is_some_and(|t| t != sig) {
            return Err("a header field of the wrong type");
        }
        pos += 2 + sig_len + 1;
        match sig.as_str() {
            "s" | "o" => {
                pos = pad_to(b, pos, 4)?;
                let n = u32_at(b, pos, big).ok_or("short")? as usize;
                let s = text_at(b, pos + 4, n)?;
                pos += 4 + n + 1;
                let valid = match code {
                    1 => names::object_path(&s),
                    2 | 4 => names::interface(&s),
                    3 => names::member(&s),
                    6 => names::bus_name(&s),
                    // The sender is the bus's to set, and always a unique name.
                    7 => names::unique_name(&s),
                    _ => true,
                };
                if !valid {
                    return Err("a name the bus would refuse");
                }
                match code {
                    1 => h.path = Some(s),
                    2 => h.interface = Some(s),
                    3 => h.member = Some(s),
                    6 => h.destination = Some(s),
                    _ => {}
                }
            }
            "g" => {
                let n = *b.get(pos).ok_or("short")? as usize;
                let s = text_at(b, pos + 1, n)?;
                if !names::signature(&s) {
                    return Err("a signature the bus would refuse");
                }
                if code == 8 {
                    h.signature = Some(s);
                }
                pos += 1 + n + 1;
            }
            "u" => {
                pos = pad_to(b, pos, 4)?;
                let v = u32_at(b, pos, big).ok_or("short")?;
                pos += 4;
                match code {
                    5 => h.reply_serial = Some(v),
                    9 => h.unix_fds = true,
                    _ => {}
                }
            }
            _ => return Err("unknown header field type"),
        }
    }
    if pos > end {
        return Err("fields past their array");
    }
    h.body_at = pad_to(b, end, 8)?;
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
/// header (its length, and for a call that wants a reply its serial), so bytes can be passed on
/// as they come and a refusal put between two messages, never inside one.
#[derive(Debug, Default)]
pub(super) struct Boundary {
    head: [u8; 16],
    have: usize,
    remaining: usize,
    /// The serials of the method calls that want a reply, of the messages begun since the last
    /// [`Boundary::take_calls`].
    calls: Vec<u32>,
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
                let h = &self.head;
                if h[1] == METHOD_CALL && h[2] & NO_REPLY_EXPECTED == 0 {
                    let serial = u32_at(h, 8, h[0] == b'B').ok_or("short")?;
                    self.calls.push(serial);
                }
                self.remaining = len - 16;
                self.have = 0;
            }
        }
        Ok(())
    }

    /// The serials of the calls wanting a reply that began since the last call.
    pub(super) fn take_calls(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.calls)
    }

    /// Between two messages.
    pub(super) fn at_end(&self) -> bool {
        self.have == 0 && self.remaining == 0
    }
}

/// The calls the agent's peer made to it on one link that still want a reply (by serial, the
/// latest [`Asked::MAX`]): the only ones a reply of the agent's may answer. On the bus the bus
/// daemon checks this too; on a peer-to-peer link nothing else does.
#[derive(Debug, Default)]
pub(super) struct Asked(std::sync::Mutex<std::collections::VecDeque<u32>>);

impl Asked {
    /// Most calls waiting for the agent's reply remembered; an older one's reply is dropped.
    pub(super) const MAX: usize = 64;

    /// Notes calls made to the agent.
    pub(super) fn note(&self, serials: Vec<u32>) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for s in serials {
            if q.len() >= Self::MAX {
                q.pop_front();
            }
            q.push_back(s);
        }
    }

    /// True, once, when a reply to `serial` is owed.
    pub(super) fn answer(&self, serial: u32) -> bool {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match q.iter().position(|s| *s == serial) {
            Some(i) => {
                q.remove(i);
                true
            }
            None => false,
        }
    }
}
