//! Structured content written as the broker wrote it.
//!
//! The broker sends a result's structured content as JSON text. Parsing it into a
//! `serde_json::Value` only for the MCP library to write it out again cost the shim more than
//! the broker's whole read of a big window: for 720 KB of result, 4.6 to 7.7 ms to parse, 1.3 to
//! 2.5 ms to write and 1.8 to 2.5 ms to free (release build, on the 2-core machine), against
//! about 2 ms to check that the text is JSON (as strictly as the parse: nesting depth, string
//! escapes, numbers in range, no repeated key).
//!
//! So a checked result goes into the MCP result as a placeholder object holding a key, and
//! [`SpliceWriter`], between the MCP library and stdout, puts the broker's text in the
//! placeholder's place as the line goes out. The key is a per-process random nonce and a
//! counter, and is matched only as the whole value of the result's `structuredContent` field
//! (`"structuredContent":{"nish_splice":"<key>"}`): application text inside the result is a
//! JSON string, whose quotes are escaped, so it cannot spell that field.
//!
//! A held result is never dropped before its line goes out: when too many results (or too many
//! bytes) are held, the next result takes the parse path instead. A result whose line the MCP
//! library drops (its request was cancelled just as the call ended) stays held; such leftovers
//! only ever send later results down the parse path.

use std::collections::HashMap;
use std::io::Read;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::AsyncWrite;

/// Most results held at once; more take the parse path.
const MAX_HELD: usize = 64;
/// Most bytes of results held at once; more take the parse path.
const MAX_HELD_BYTES: usize = 32 << 20;

/// A placeholder as written, up to its key: the whole value of the result's
/// `structuredContent` field is `{"nish_splice":"<key>"}` (an object: the MCP library moves
/// structured content that is not an object into the text content for older clients, and the
/// broker's results are objects).
const FIELD: &str = "\"structuredContent\":{\"nish_splice\":\"";
/// The placeholder's one field.
const PLACEHOLDER_FIELD: &str = "nish_splice";

/// What [`Splices::hold`] did with a result.
#[derive(Debug)]
pub enum Hold {
    /// Held: the value to put in the result's `structuredContent` in its place.
    Placeholder(Value),
    /// Too much is held: the result, to parse.
    NoRoom(String),
}

/// Results held for the writer, by key.
#[derive(Debug)]
pub struct Splices {
    nonce: String,
    next: AtomicU64,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    by_key: HashMap<String, String>,
    bytes: usize,
}

impl Splices {
    /// An empty set with a fresh random nonce.
    pub fn new() -> Arc<Self> {
        Arc::new(Splices {
            nonce: nonce(),
            next: AtomicU64::new(1),
            held: Mutex::new(Held::default()),
        })
    }

    /// True when `json` can go out as it is: it is an object (or not JSON at all, which
    /// [`hold`](Self::hold) finds) and has no line break (compact JSON, which the broker writes,
    /// has none; a line break between tokens would end the MCP line early).
    pub fn fits_a_line(json: &str) -> bool {
        json.starts_with('{') && !json.contains(['\n', '\r'])
    }

    /// Checks `json` (the text of one JSON value, from the broker, that
    /// [fits a line](Self::fits_a_line)) and holds it for the writer.
    pub fn hold(&self, json: String) -> Result<Hold, serde_json::Error> {
        check_json(&json)?;
        if !Self::fits_a_line(&json) {
            return Err(serde::de::Error::custom("a line break in the result"));
        }
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if h.by_key.len() >= MAX_HELD || h.bytes + json.len() > MAX_HELD_BYTES {
            return Ok(Hold::NoRoom(json));
        }
        let key = format!(
            "{}-{}",
            self.nonce,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        h.bytes += json.len();
        h.by_key.insert(key.clone(), json);
        let mut placeholder = serde_json::Map::new();
        placeholder.insert(PLACEHOLDER_FIELD.into(), Value::String(key));
        Ok(Hold::Placeholder(Value::Object(placeholder)))
    }

    fn is_empty(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .is_empty()
    }

    /// `all` with every held result whose placeholder it holds put in its place, or `None`
    /// when it holds none.
    fn replace_in(&self, all: &[u8]) -> Option<Vec<u8>> {
        // What is handed over may begin with the rest of a line that the stdout pipe took
        // only part of, cut inside a character: the text starts after that character's rest.
        // It always ends with a whole line.
        let skip = all
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        let (head, bytes) = all.split_at(skip);
        let text = std::str::from_utf8(bytes).ok()?;
        let mark = format!("{FIELD}{}-", self.nonce);
        let mut at = text.find(&mark)?;
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(all.len());
        out.extend_from_slice(head);
        let mut copied = 0;
        loop {
            let key_start = at + FIELD.len();
            // The key, then the placeholder's end: `"}`.
            let key_end = text[key_start..]
                .find("\"}")
                .map(|e| key_start + e)
                .filter(|e| !text[key_start..*e].contains('"'));
            if let Some(end) = key_end
                && let Some(json) = h.by_key.remove(&text[key_start..end])
            {
                h.bytes -= json.len();
                out.extend_from_slice(&bytes[copied..at]);
                out.extend_from_slice(b"\"structuredContent\":");
                out.extend_from_slice(json.as_bytes());
                copied = end + 2;
            }
            match text[at + mark.len()..].find(&mark) {
                Some(next) => at += mark.len() + next,
                None => break,
            }
        }
        if copied == 0 {
            return None;
        }
        out.extend_from_slice(&bytes[copied..]);
        Some(out)
    }
}

/// Checks that `json` is one JSON value as strictly as parsing it into a `serde_json::Value`
/// would (nesting at most 128 deep, string escapes whole, numbers in range), and that no
/// object repeats a key (a parse keeps one of them; written as it is, a host might take the
/// other), without building anything.
fn check_json(json: &str) -> Result<(), serde_json::Error> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(json);
    Checked::deserialize(&mut de)?;
    de.end()
}

/// A JSON value, checked and dropped ([`check_json`]).
struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Checked)
    }
}

/// An object's key, borrowed from the text when it has no escape.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::de::Visitor<'de> for Checked {
    type Value = Checked;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
        while a.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
        // Rows have a few keys: a list is quicker than a set, up to a size.
        let mut few: Vec<std::borrow::Cow<'de, str>> = Vec::new();
        let mut many: std::collections::HashSet<std::borrow::Cow<'de, str>> = Default::default();
        while let Some(Key(k)) = a.next_key::<Key<'de>>()? {
            let repeated = if few.len() < 32 {
                few.contains(&k) || {
                    few.push(k);
                    false
                }
            } else {
                few.contains(&k) || !many.insert(k)
            };
            if repeated {
                return Err(serde::de::Error::custom("a key repeated in an object"));
            }
            a.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// 128 random bits, hex: from the kernel, else from the standard library's hash keys (also
/// seeded by the kernel).
fn nonce() -> String {
    let mut b = [0u8; 16];
    let from_kernel = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !from_kernel {
        use std::hash::{BuildHasher, Hasher};
        for (i, chunk) in b.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes to `inner`, putting held results in their placeholders' places. The MCP library
/// hands it each line whole (it encodes a message into its buffer before writing), and it
/// takes a line with a placeholder whole, so a placeholder is never split between writes.
pub struct SpliceWriter<W> {
    inner: W,
    splices: Arc<Splices>,
    /// A replaced line still to write to `inner`, and how much of it is written.
    out: Vec<u8>,
    done: usize,
}

impl<W> SpliceWriter<W> {
    /// A writer to `inner` for the results held in `splices`.
    pub fn new(inner: W, splices: Arc<Splices>) -> Self {
        SpliceWriter {
            inner,
            splices,
            out: Vec::new(),
            done: 0,
        }
    }
}

impl<W: AsyncWrite + Unpin> SpliceWriter<W> {
    /// Writes what is left of a replaced line; ready when nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.done < self.out.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.done..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.done = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SpliceWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        if !this.splices.is_empty()
            && let Some(replaced) = this.splices.replace_in(buf)
        {
            // The whole of `buf` is taken (its results are no longer held): it goes out on the
            // next write or flush, which report what fails.
            this.out = replaced;
            this.done = 0;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn line(structured: &Value, text: &str) -> String {
        let mut s = serde_json::to_string(&serde_json::json!({"jsonrpc": "2.0", "id": 3,
            "result": {"content": [{"type": "text", "text": text}],
                       "structuredContent": structured, "isError": false}}))
        .unwrap();
        s.push('\n');
        s
    }

    fn placeholder(h: Hold) -> Value {
        match h {
            Hold::Placeholder(v) => v,
            Hold::NoRoom(_) => panic!("not held"),
        }
    }

    /// A writer that takes at most `step` bytes a write.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_held_result_goes_out_as_the_broker_wrote_it() {
        let s = Splices::new();
        let broker = r#"{"ok":true,"elements":[{"label":"a \"b\" \\ c"}],"n":1.5e3}"#;
        let placeholder = placeholder(s.hold(broker.to_string()).unwrap());
        // Application text that names the field and the key cannot stand for it.
        let key = placeholder[PLACEHOLDER_FIELD].as_str().unwrap().to_string();
        let hostile = format!("\"structuredContent\":{{\"nish_splice\":\"{key}\"}}");
        let mut w = SpliceWriter::new(
            Trickle {
                got: vec![],
                step: 7,
            },
            s.clone(),
        );
        w.write_all(line(&json!(1), "before").as_bytes())
            .await
            .unwrap();
        w.write_all(line(&placeholder, &hostile).as_bytes())
            .await
            .unwrap();
        w.flush().await.unwrap();
        let got = String::from_utf8(w.inner.got.clone()).unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 2);
        let v: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            v["result"]["structuredContent"],
            serde_json::from_str::<Value>(broker).unwrap()
        );
        assert_eq!(v["result"]["content"][0]["text"], json!(hostile));
        assert!(s.is_empty(), "a result goes out once");
    }

    use serde_json::json;

    #[test]
    fn what_is_not_json_or_not_one_line_is_not_held() {
        let s = Splices::new();
        assert!(s.hold("{\"a\":".into()).is_err());
        assert!(s.hold("{\"a\":1} x".into()).is_err());
        assert!(!Splices::fits_a_line("{\"a\":\n1}"));
        assert!(!Splices::fits_a_line("[1]"), "only objects");
        assert!(!Splices::fits_a_line(" {}"));
        assert!(s.hold("{\"a\":\n1}".into()).is_err());
        assert!(s.is_empty());
    }

    #[test]
    fn a_line_after_the_rest_of_a_cut_character_is_still_replaced() {
        let s = Splices::new();
        let placeholder = placeholder(s.hold(r#"{"ok":true}"#.into()).unwrap());
        // "é" is 0xC3 0xA9: the pipe took the 0xC3, the rest comes with the next line.
        let mut buf = vec![0xA9, b'"', b'}', b'}', b'\n'];
        buf.extend_from_slice(line(&placeholder, "x").as_bytes());
        let out = s.replace_in(&buf).expect("replaced");
        assert_eq!(&out[..5], &buf[..5]);
        let v: Value = serde_json::from_slice(&out[5..out.len() - 1]).unwrap();
        assert_eq!(v["result"]["structuredContent"], json!({"ok": true}));
    }

    #[test]
    fn held_results_are_bounded_and_never_dropped_before_they_go_out() {
        let s = Splices::new();
        let first = placeholder(s.hold("{}".into()).unwrap());
        for _ in 1..MAX_HELD {
            placeholder(s.hold("{}".into()).unwrap());
        }
        assert!(
            matches!(s.hold("{}".into()).unwrap(), Hold::NoRoom(j) if j == "{}"),
            "no room: parse it"
        );
        let l = line(&first, "");
        assert!(
            s.replace_in(l.as_bytes()).is_some(),
            "the first is still held"
        );
        placeholder(s.hold("{}".into()).unwrap());
        let s = Splices::new();
        let big = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_HELD_BYTES / 2));
        placeholder(s.hold(big.clone()).unwrap());
        assert!(
            matches!(s.hold(big).unwrap(), Hold::NoRoom(_)),
            "no room for the bytes"
        );
    }

    #[test]
    fn the_check_is_as_strict_as_a_parse() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert!(check_json(&deep).is_err(), "nesting");
        for bad in [
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":"\q"}"#,
            r#"{"a":1}{"#,
        ] {
            assert!(check_json(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        let mut repeated = many.clone();
        repeated.push("\"k7\":0".into());
        assert!(check_json(&format!("{{{}}}", many.join(","))).is_ok());
        assert!(check_json(&format!("{{{}}}", repeated.join(","))).is_err());
        assert!(check_json(r#"{"a\"b":"\u00e9","a\\\"b":[1,-2.5,true,null,{}]}"#).is_ok());
    }

    #[test]
    fn two_processes_have_other_keys() {
        assert_ne!(Splices::new().nonce, Splices::new().nonce);
        assert_eq!(nonce().len(), 32);
    }
}
