//! The D-Bus filter's relay, alone: round trips of a small method call (the size of an AT-SPI
//! read) to a fake application that answers every call at once, over a direct socket and
//! through the filter, interleaved in one run. Prints the median and p95 per round trip.
//!
//! `cargo bench -p nish-agenthost --bench relay` (`NISH_BENCH_ROUNDS`, default 20000 per side).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nish_agenthost::busfilter;

fn pad(v: &mut Vec<u8>, a: usize) {
    while !v.len().is_multiple_of(a) {
        v.push(0);
    }
}

fn field_str(f: &mut Vec<u8>, code: u8, sig: u8, s: &str) {
    pad(f, 8);
    f.extend_from_slice(&[code, 1, sig, 0]);
    f.extend_from_slice(&(s.len() as u32).to_le_bytes());
    f.extend_from_slice(s.as_bytes());
    f.push(0);
}

fn message(kind: u8, serial: u32, fields: &[u8], body: &[u8]) -> Vec<u8> {
    let mut m = vec![b'l', kind, 0, 1];
    m.extend_from_slice(&(body.len() as u32).to_le_bytes());
    m.extend_from_slice(&serial.to_le_bytes());
    m.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    m.extend_from_slice(fields);
    pad(&mut m, 8);
    m.extend_from_slice(body);
    m
}

/// `org.a11y.atspi.Accessible.GetRole` on an element, as a reader sends it.
fn get_role(serial: u32) -> Vec<u8> {
    let mut f = Vec::new();
    field_str(&mut f, 1, b'o', "/org/a11y/atspi/accessible/1234");
    field_str(&mut f, 2, b's', "org.a11y.atspi.Accessible");
    field_str(&mut f, 3, b's', "GetRole");
    field_str(&mut f, 6, b's', ":1.42");
    message(1, serial, &f, &[])
}

/// A method return with a `u` body, as the application answers.
fn role_reply(serial: u32, to: u32) -> Vec<u8> {
    let mut f = Vec::new();
    pad(&mut f, 8);
    f.extend_from_slice(&[5, 1, b'u', 0]);
    f.extend_from_slice(&to.to_le_bytes());
    pad(&mut f, 8);
    f.extend_from_slice(&[8, 1, b'g', 0, 1, b'u', 0]);
    message(2, serial, &f, &37u32.to_le_bytes())
}

fn read_message(s: &mut UnixStream, buf: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some(len)) = busfilter::message_len(buf)
            && buf.len() >= len
        {
            return Ok(buf.drain(..len).collect());
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The fake application: skips the authentication bytes up to `BEGIN\r\n`, then answers every
/// call.
fn serve(mut s: UnixStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(7).any(|w| w == b"BEGIN\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let at = buf.windows(7).position(|w| w == b"BEGIN\r\n").unwrap_or(0);
    buf.drain(..at + 7);
    let mut serial = 1;
    while let Ok(m) = read_message(&mut s, &mut buf) {
        let to = u32::from_le_bytes([m[8], m[9], m[10], m[11]]);
        serial += 1;
        if s.write_all(&role_reply(serial, to)).is_err() {
            return;
        }
    }
}

/// A client end whose peer is the fake application, directly or through the filter.
fn link(side: usize, rt: &tokio::runtime::Runtime) -> UnixStream {
    let (ours, app) = UnixStream::pair().expect("socketpair");
    std::thread::spawn(move || serve(app));
    let mut client = match side {
        1 => {
            let _g = rt.enter();
            UnixStream::from(busfilter::filtered(ours.into()).expect("the filter"))
        }
        _ => ours,
    };
    client.write_all(b"\0BEGIN\r\n").expect("begin");
    client
}

fn round_trips(s: &mut UnixStream, n: usize, serial: &mut u32) -> Vec<Duration> {
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        *serial += 1;
        let t = Instant::now();
        s.write_all(&get_role(*serial)).expect("write");
        let m = read_message(s, &mut buf).expect("reply");
        out.push(t.elapsed());
        assert_eq!(m[1], 2, "a method return");
    }
    out
}

fn figures(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (
        us(v[v.len() / 2]),
        us(v[(v.len() * 95 / 100).min(v.len() - 1)]),
    )
}

fn main() {
    let rounds: usize = std::env::var("NISH_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // The broker's runtime: two workers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let names = ["direct", "through the filter"];
    let mut links: Vec<UnixStream> = (0..names.len()).map(|i| link(i, &rt)).collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let mut serial = 1;
    // Warm-up, then interleaved batches.
    for l in links.iter_mut() {
        round_trips(l, 500, &mut serial);
    }
    let batch = 500;
    for _ in 0..rounds.div_ceil(batch) {
        for (l, t) in links.iter_mut().zip(times.iter_mut()) {
            t.extend(round_trips(l, batch, &mut serial));
        }
    }
    println!("relay: {rounds} round trips per side, GetRole call and its reply");
    let mut base = 0.0;
    for (i, (name, t)) in names.iter().zip(times).enumerate() {
        let (m, p) = figures(t);
        if i == 0 {
            base = m;
        }
        println!(
            "  {name:18} median {m:7.1} us   p95 {p:7.1} us   (+{:.1} us)",
            m - base
        );
    }
}
