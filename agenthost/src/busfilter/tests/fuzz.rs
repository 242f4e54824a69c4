//! The filter's reading of messages, fuzzed against zbus as the oracle: every message zbus
//! writes reads as the same fields, and every mutation of one is refused or reads as zbus's own
//! decoder (zvariant, with the D-Bus name rules) reads it. Bounded: a few thousand cases each.

use proptest::prelude::*;
use zbus::message::{Builder, Flags};
use zbus::zvariant::Endian;
use zbus::zvariant::Value;
use zbus::zvariant::serialized::{Context, Data};

use super::*;

/// What the oracle reads of a message's header: the fields the filter reports.
#[derive(Debug, PartialEq)]
struct Read {
    msg_type: u8,
    flags: u8,
    serial: u32,
    path: Option<String>,
    interface: Option<String>,
    member: Option<String>,
    destination: Option<String>,
    unix_fds: bool,
    signature: Option<String>,
    body_at: usize,
}

impl From<&Header> for Read {
    fn from(h: &Header) -> Read {
        Read {
            msg_type: h.msg_type,
            flags: h.flags,
            serial: h.serial,
            path: h.path.clone(),
            interface: h.interface.clone(),
            member: h.member.clone(),
            destination: h.destination.clone(),
            unix_fds: h.unix_fds,
            signature: h.signature.clone(),
            body_at: h.body_at,
        }
    }
}

type Fields<'a> = Vec<(u8, Value<'a>)>;

/// The header struct of a message, `(yyyyuua(yv))`, as zvariant reads it.
type HeaderStruct<'a> = (u8, u8, u8, u8, u32, u32, Fields<'a>);

/// The header as zbus's decoder reads it, with the rules of the D-Bus specification it and the
/// bus apply (protocol version 1, a known type, serial not 0, each field once, of its type,
/// valid names, UTF-8 strings without NUL inside); `None` when it refuses the message.
fn oracle(b: &[u8]) -> Option<Read> {
    let endian = match b.first()? {
        b'l' => Endian::Little,
        b'B' => Endian::Big,
        _ => return None,
    };
    let len = message_len(b).ok()??;
    if b.len() < len {
        return None;
    }
    let data = Data::new(b[..len].to_vec(), Context::new_dbus(endian, 0));
    let ((e, msg_type, flags, version, _body_len, serial, fields), fields_end): (
        HeaderStruct<'_>,
        usize,
    ) = data.deserialize().ok()?;
    if e != b[0] || version != 1 || !(1..=4).contains(&msg_type) || serial == 0 {
        return None;
    }
    let body_at = align(fields_end, 8);
    let mut r = Read {
        msg_type,
        flags,
        serial,
        path: None,
        interface: None,
        member: None,
        destination: None,
        unix_fds: false,
        signature: None,
        body_at,
    };
    let mut seen = [false; 256];
    for (code, v) in fields {
        if code == 0 || std::mem::replace(&mut seen[usize::from(code)], true) {
            return None;
        }
        let text = |s: &str| (!s.contains('\0')).then(|| s.to_string());
        match (code, v) {
            (1, Value::ObjectPath(p)) => r.path = Some(p.as_str().to_string()),
            (2, Value::Str(s)) => {
                zbus::names::InterfaceName::try_from(s.as_str()).ok()?;
                r.interface = text(s.as_str());
            }
            (3, Value::Str(s)) => {
                zbus::names::MemberName::try_from(s.as_str()).ok()?;
                r.member = text(s.as_str());
            }
            (4, Value::Str(s)) => {
                zbus::names::ErrorName::try_from(s.as_str()).ok()?;
            }
            (6, Value::Str(s)) => {
                zbus::names::BusName::try_from(s.as_str()).ok()?;
                r.destination = text(s.as_str());
            }
            (7, Value::Str(s)) => {
                zbus::names::UniqueName::try_from(s.as_str()).ok()?;
            }
            (8, Value::Signature(s)) => r.signature = Some(s.to_string_no_parens()),
            (5, Value::U32(_)) => {}
            (9, Value::U32(_)) => r.unix_fds = true,
            (1..=9, _) => return None,
            // Unknown fields are skipped by every reader.
            _ => {}
        }
    }
    Some(r)
}

/// The body values a message may carry in the tests.
#[derive(Clone, Debug)]
enum Args {
    None,
    S(String),
    I(i32),
    Ss(String, String),
    U(u32),
    Ii(i32, i32),
}

fn args() -> impl Strategy<Value = Args> {
    let s = "[a-zA-Z0-9 ./:_-]{0,24}";
    prop_oneof![
        Just(Args::None),
        s.prop_map(Args::S),
        any::<i32>().prop_map(Args::I),
        (s, s).prop_map(|(a, b)| Args::Ss(a, b)),
        any::<u32>().prop_map(Args::U),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Args::Ii(a, b)),
    ]
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}(\\.[a-z][a-z0-9]{0,6}){1,3}"
}

fn member() -> impl Strategy<Value = String> {
    "[A-Z][A-Za-z0-9_]{0,16}"
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![Just("/".to_string()), "(/[a-z0-9_]{1,8}){1,5}",]
}

fn destination() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        "\\:1\\.[0-9]{1,4}".prop_map(Some),
        name().prop_map(Some),
    ]
}

/// A method call as zbus writes it.
#[derive(Clone, Debug)]
struct Call {
    big: bool,
    no_reply: bool,
    path: String,
    interface: Option<String>,
    member: String,
    destination: Option<String>,
    args: Args,
}

fn call() -> impl Strategy<Value = Call> {
    (
        any::<bool>(),
        any::<bool>(),
        path(),
        proptest::option::of(name()),
        member(),
        destination(),
        args(),
    )
        .prop_map(
            |(big, no_reply, path, interface, member, destination, args)| Call {
                big,
                no_reply,
                path,
                interface,
                member,
                destination,
                args,
            },
        )
}

fn build(c: &Call) -> (Vec<u8>, u32) {
    let mut b: Builder<'_> = zbus::Message::method_call(c.path.as_str(), c.member.as_str())
        .unwrap()
        .endian(if c.big { Endian::Big } else { Endian::Little });
    if let Some(i) = &c.interface {
        b = b.interface(i.as_str()).unwrap();
    }
    if let Some(d) = &c.destination {
        b = b.destination(d.as_str()).unwrap();
    }
    if c.no_reply {
        b = b.with_flags(Flags::NoReplyExpected).unwrap();
    }
    let m = match &c.args {
        Args::None => b.build(&()),
        Args::S(s) => b.build(&(s.as_str(),)),
        Args::I(i) => b.build(&(*i,)),
        Args::Ss(x, y) => b.build(&(x.as_str(), y.as_str())),
        Args::U(u) => b.build(&(*u,)),
        Args::Ii(x, y) => b.build(&(*x, *y)),
    }
    .unwrap();
    let serial = m.primary_header().serial_num().get();
    (m.data().to_vec(), serial)
}

fn sig_of(a: &Args) -> &'static str {
    match a {
        Args::None => "",
        Args::S(_) => "s",
        Args::I(_) => "i",
        Args::Ss(..) => "ss",
        Args::U(_) => "u",
        Args::Ii(..) => "ii",
    }
}

/// One change to a message's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// A byte set to a value.
    Set(usize, u8),
    /// The bytes from a point on dropped.
    Cut(usize),
    /// A 32-bit length field (one of the fixed header's, or any place) set to a value.
    Length(usize, u32),
    /// A run of bytes added at a point.
    Insert(usize, Vec<u8>),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        4 => (0usize..256, any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
        1 => (0usize..256).prop_map(Mutation::Cut),
        2 => (prop_oneof![Just(4usize), Just(12), 0usize..256], any::<u32>())
            .prop_map(|(i, v)| Mutation::Length(i, v)),
        1 => (0usize..256, proptest::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
    ];
    proptest::collection::vec(one, 1..4)
}

fn apply(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        let n = b.len().max(1);
        match m {
            Mutation::Set(i, v) => {
                let i = i % n;
                if i < b.len() {
                    b[i] = *v;
                }
            }
            Mutation::Cut(i) => b.truncate(i % n),
            Mutation::Length(i, v) => {
                let i = (i % n) & !3;
                if i + 4 <= b.len() {
                    let bytes = if b[0] == b'B' {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    };
                    b[i..i + 4].copy_from_slice(&bytes);
                }
            }
            Mutation::Insert(i, v) => {
                let i = (i % n).min(b.len());
                b.splice(i..i, v.iter().copied());
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Every method call zbus writes reads as the fields it was built with, and its body as
    /// exactly its arguments.
    #[test]
    fn every_message_zbus_writes_reads_as_it_was_built(c in call()) {
        let (bytes, serial) = build(&c);
        let h = parse_header(&bytes).expect("zbus's message reads");
        prop_assert_eq!(message_len(&bytes), Ok(Some(bytes.len())));
        prop_assert_eq!(h.big_endian, c.big);
        prop_assert_eq!(h.msg_type, METHOD_CALL);
        prop_assert_eq!(h.flags & NO_REPLY_EXPECTED != 0, c.no_reply);
        prop_assert_eq!(h.serial, serial);
        prop_assert_eq!(h.path.as_deref(), Some(c.path.as_str()));
        prop_assert_eq!(&h.interface, &c.interface);
        prop_assert_eq!(h.member.as_deref(), Some(c.member.as_str()));
        prop_assert_eq!(&h.destination, &c.destination);
        prop_assert!(!h.unix_fds);
        let sig = sig_of(&c.args);
        prop_assert_eq!(h.signature.as_deref().unwrap_or(""), sig);
        prop_assert!(body_is(sig, &h, &bytes), "the body is its arguments");
        if let Args::S(s) | Args::Ss(s, _) = &c.args {
            let first = first_string(&h, &bytes);
            prop_assert_eq!(first.as_deref(), Some(s.as_str()));
        }
        // The oracle agrees.
        prop_assert_eq!(oracle(&bytes), Some(Read::from(&h)));
    }

    /// Any mutation of such a message is refused, or reads as zbus's decoder reads it: the
    /// filter never reads a field another way than the bus or the app would.
    #[test]
    fn every_mutation_is_refused_or_read_as_zbus_reads_it(c in call(), ms in mutations()) {
        let (bytes, _) = build(&c);
        let m = apply(bytes, &ms);
        if let Ok(h) = parse_header(&m) {
            let o = oracle(&m);
            prop_assert_eq!(o, Some(Read::from(&h)), "read {:?} of {:?}", h, m);
        }
    }

    /// A body the filter takes as exactly `sig`'s values is one zbus's decoder reads as the
    /// same values.
    #[test]
    fn a_body_taken_is_the_values_zbus_reads(c in call(), ms in mutations()) {
        let (bytes, _) = build(&c);
        let m = apply(bytes, &ms);
        let Ok(h) = parse_header(&m) else { return Ok(()) };
        let sig = h.signature.clone().unwrap_or_default();
        if !matches!(sig.as_str(), "" | "s" | "i" | "u" | "ss" | "ii") || !body_is(&sig, &h, &m) {
            return Ok(());
        }
        if sig.is_empty() {
            prop_assert_eq!(m.len(), h.body_at, "an empty body");
            return Ok(());
        }
        let endian = if h.big_endian { Endian::Big } else { Endian::Little };
        let body = Data::new(m[h.body_at..].to_vec(), Context::new_dbus(endian, 0));
        // zbus's decoder of the signature's values: the first string, and the bytes used.
        let decoded: Option<(Option<String>, usize)> = match sig.as_str() {
            "s" => body.deserialize::<(String,)>().ok().map(|((a,), n)| (Some(a), n)),
            "ss" => body.deserialize::<(String, String)>().ok().map(|((a, _), n)| (Some(a), n)),
            "i" => body.deserialize::<(i32,)>().ok().map(|(_, n)| (None, n)),
            "u" => body.deserialize::<(u32,)>().ok().map(|(_, n)| (None, n)),
            _ => body.deserialize::<(i32, i32)>().ok().map(|(_, n)| (None, n)),
        };
        let (first, used) = decoded.expect("zbus reads the body the filter took");
        prop_assert_eq!(used, m.len() - h.body_at, "nothing after the values");
        prop_assert_eq!(first_string(&h, &m), first);
    }
}
