//! Broker results to MCP `CallToolResult`s.

use nish_proto::wire::shim::CallResult;
use nish_proto::{DriverError, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};

use crate::splice::{Hold, Splices};

/// Renders a broker result: `is_error` -> `isError`, `structured_json` -> `structuredContent`,
/// `text` -> one text block, each image -> an image block (base64). With `splices`, the
/// structured content is checked and held to go out as the broker wrote it (see
/// [`crate::splice`]); without, it is parsed here.
pub fn call_result(id_for_log: u64, r: CallResult, splices: Option<&Splices>) -> CallToolResult {
    let CallResult {
        is_error,
        structured_json,
        text,
        images,
    } = r;
    let structured = if structured_json.trim().is_empty() {
        None
    } else {
        let parse = |json: &str| serde_json::from_str::<serde_json::Value>(json);
        let checked = match splices {
            Some(s) if Splices::fits_a_line(&structured_json) => match s.hold(structured_json) {
                Ok(Hold::Placeholder(v)) => Ok(v),
                Ok(Hold::NoRoom(json)) => parse(&json),
                Err(e) => Err(e),
            },
            _ => parse(&structured_json),
        };
        match checked {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(id = id_for_log, error = %e, "broker sent structured content that is not JSON");
                return driver_error(&DriverError::new(
                    ErrorCode::InternalError,
                    "the broker sent a malformed result",
                ));
            }
        }
    };
    let mut content = Vec::with_capacity(1 + images.len());
    content.push(ContentBlock::text(text));
    for img in images {
        content.push(ContentBlock::image(base64(&img.data), img.mime));
    }
    let mut out = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    out.structured_content = structured;
    out
}

/// The contract's error envelope as an MCP result: `isError`, the envelope as
/// `structuredContent`, its text form as the one text block.
pub fn driver_error(e: &DriverError) -> CallToolResult {
    let mut out = CallToolResult::error(vec![ContentBlock::text(e.text())]);
    out.structured_content = Some(e.envelope());
    out
}

/// Standard base64 (RFC 4648 §4) with padding.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| ALPHABET[((n >> shift) & 63) as usize] as char;
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::shim::Image;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want, "{input:?}");
        }
        assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
        assert_eq!(base64(&[0, 0, 0]), "AAAA");
    }

    fn to_json(r: &CallToolResult) -> serde_json::Value {
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn success_with_image() {
        let r = call_result(
            1,
            CallResult {
                is_error: false,
                structured_json: r#"{"ok":true,"n":3}"#.into(),
                text: "three".into(),
                images: vec![Image {
                    mime: "image/png".into(),
                    data: b"foobar".to_vec(),
                }],
            },
            None,
        );
        let v = to_json(&r);
        assert_eq!(v["isError"], false);
        assert_eq!(
            v["structuredContent"],
            serde_json::json!({"ok": true, "n": 3})
        );
        assert_eq!(
            v["content"][0],
            serde_json::json!({"type": "text", "text": "three"})
        );
        assert_eq!(v["content"][1]["type"], "image");
        assert_eq!(v["content"][1]["data"], "Zm9vYmFy");
        assert_eq!(v["content"][1]["mimeType"], "image/png");
        assert_eq!(v["content"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn error_is_passed_through_not_reinterpreted() {
        let e = DriverError::new(ErrorCode::RequiresTakeover, "click needs takeover")
            .with_escalation("takeover", "no_accessible_action");
        let r = call_result(
            2,
            CallResult {
                is_error: true,
                structured_json: e.envelope().to_string(),
                text: e.text(),
                images: vec![],
            },
            None,
        );
        let v = to_json(&r);
        assert_eq!(v["isError"], true);
        assert_eq!(v["structuredContent"], e.envelope());
        assert_eq!(v["content"][0]["text"], e.text());
    }

    #[test]
    fn malformed_structured_content_becomes_an_internal_error() {
        let r = call_result(
            3,
            CallResult {
                is_error: false,
                structured_json: "{not json".into(),
                text: "x".into(),
                images: vec![],
            },
            None,
        );
        let v = to_json(&r);
        assert_eq!(v["isError"], true);
        assert_eq!(v["structuredContent"]["error"]["code"], "internal_error");
    }

    #[test]
    fn driver_error_has_envelope_and_text() {
        let e = DriverError::new(ErrorCode::BackendUnavailable, crate::link::NOT_REACHABLE);
        let v = to_json(&driver_error(&e));
        assert_eq!(v["isError"], true);
        assert_eq!(v["structuredContent"]["ok"], false);
        assert_eq!(
            v["structuredContent"]["error"]["code"],
            "backend_unavailable"
        );
        let text = v["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(
            "backend_unavailable: the nish-driver broker is not reachable [retry: unsafe] "
        ));
    }
}
