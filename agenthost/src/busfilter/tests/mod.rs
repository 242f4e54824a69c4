//! The filter's tests: what passes ([`policy`]), the relay ([`relay`]) and the wire
//! reading ([`wire`]), with the message builders they share.

use std::sync::{Arc, Mutex};

use tokio::net::UnixStream;

use super::grants::*;
use super::policy::*;
use super::relay::*;
use super::wire::*;
use super::*;

/// A method call as zbus would write it (little endian), to `:1.7`, with no body.
fn call(serial: u32, path: &str, iface: &str, member: &str, flags: u8) -> Vec<u8> {
    let mut m = call_with(Some(":1.7"), path, iface, member, "", &[]);
    m[2] = flags;
    m[8..12].copy_from_slice(&serial.to_le_bytes());
    m
}

/// A method call with a destination (or none) and a body of signature `sig`.
fn call_with(
    dest: Option<&str>,
    path: &str,
    iface: &str,
    member: &str,
    sig: &str,
    body: &[u8],
) -> Vec<u8> {
    call_in(false, dest, path, iface, member, sig, body)
}

/// [`call_with`], in either byte order (`body` already in it).
fn call_in(
    big: bool,
    dest: Option<&str>,
    path: &str,
    iface: &str,
    member: &str,
    sig: &str,
    body: &[u8],
) -> Vec<u8> {
    let u32b = |n: u32| {
        if big {
            n.to_be_bytes()
        } else {
            n.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    let mut field = |code: u8, sig: u8, s: &str| {
        while !f.len().is_multiple_of(8) {
            f.push(0);
        }
        f.extend_from_slice(&[code, 1, sig, 0]);
        if sig == b'g' {
            f.push(s.len() as u8);
        } else {
            while !f.len().is_multiple_of(4) {
                f.push(0);
            }
            f.extend_from_slice(&u32b(s.len() as u32));
        }
        f.extend_from_slice(s.as_bytes());
        f.push(0);
    };
    field(1, b'o', path);
    field(2, b's', iface);
    field(3, b's', member);
    if let Some(d) = dest {
        field(6, b's', d);
    }
    if !sig.is_empty() {
        field(8, b'g', sig);
    }
    let mut m = vec![if big { b'B' } else { b'l' }, METHOD_CALL, 0, 1];
    m.extend_from_slice(&u32b(body.len() as u32));
    m.extend_from_slice(&u32b(3));
    m.extend_from_slice(&u32b(f.len() as u32));
    m.extend_from_slice(&f);
    while !m.len().is_multiple_of(8) {
        m.push(0);
    }
    m.extend_from_slice(body);
    m
}

/// A little-endian body of values of `sig`: "ab" for each string, 7 for each integer.
fn args_of(sig: &str) -> Vec<u8> {
    let parts: Vec<Part> = sig
        .chars()
        .map(|c| if c == 's' { Part::S("ab") } else { Part::I(7) })
        .collect();
    body(false, &parts)
}

/// One value of a test body.
enum Part<'a> {
    I(i32),
    S(&'a str),
    /// A variant holding a double.
    D(f64),
    /// A variant holding an `i`.
    VI(i32),
}

/// A body of `parts`, aligned as from the message's start (a body starts 8-aligned).
fn body(big: bool, parts: &[Part]) -> Vec<u8> {
    let mut b = Vec::new();
    let pad = |b: &mut Vec<u8>, a: usize| {
        while !b.len().is_multiple_of(a) {
            b.push(0);
        }
    };
    let u32b = |n: u32| {
        if big {
            n.to_be_bytes()
        } else {
            n.to_le_bytes()
        }
    };
    for p in parts {
        match p {
            Part::I(i) | Part::VI(i) => {
                if matches!(p, Part::VI(_)) {
                    b.extend_from_slice(&[1, b'i', 0]);
                }
                pad(&mut b, 4);
                b.extend_from_slice(&u32b(*i as u32));
            }
            Part::S(s) => {
                pad(&mut b, 4);
                b.extend_from_slice(&u32b(s.len() as u32));
                b.extend_from_slice(s.as_bytes());
                b.push(0);
            }
            Part::D(d) => {
                b.extend_from_slice(&[1, b'd', 0]);
                pad(&mut b, 8);
                let bits = d.to_bits();
                b.extend_from_slice(&if big {
                    bits.to_be_bytes()
                } else {
                    bits.to_le_bytes()
                });
            }
        }
    }
    b
}

/// The body of `Properties.Set(iface, prop, <double 1.5>)`.
fn set_body(iface: &str, prop: &str) -> Vec<u8> {
    let mut b = Vec::new();
    for s in [iface, prop] {
        while !b.len().is_multiple_of(4) {
            b.push(0);
        }
        b.extend_from_slice(&(s.len() as u32).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
        b.push(0);
    }
    b.extend_from_slice(&[1, b'd', 0]);
    while !b.len().is_multiple_of(8) {
        b.push(0);
    }
    b.extend_from_slice(&1.5f64.to_le_bytes());
    b
}

const APP: &str = ":1.7";

const EL: &str = "/org/a11y/atspi/accessible/12";

fn verdict(link: &Link, grants: &Arc<Grants>, m: &[u8]) -> Verdict {
    let p = Policy::Input {
        link: link.clone(),
        grants: grants.clone(),
    };
    p.judge(&parse_header(m).unwrap(), m)
}

/// A grant of `method` on `path`: of the text "hi" or the number 1.5 where it takes one.
fn grant(method: ActMethod, path: &str) -> Grant {
    Grant {
        bus_name: APP.into(),
        pid: 42,
        path: path.into(),
        method,
        args: match method {
            ActMethod::DoAction => Args::Action(0),
            ActMethod::SelectChild => Args::Index,
            ActMethod::InsertText => Args::Typed {
                text: "hi".into(),
                utf16: false,
            },
            ActMethod::SetTextContents => Args::Text("hi".into()),
            ActMethod::SetCurrentValue => Args::Number(1.5f64.to_bits()),
        },
    }
}

const AUTH_LINE: &[u8] = b"\0AUTH EXTERNAL 31303030\r\n";

const OK_LINE: &[u8] = b"OK 0123456789abcdef0123456789abcdef\r\n";

mod fuzz;
mod policy;
mod relay;
mod wire;
