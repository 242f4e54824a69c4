//! Text renderings of results for MCP text content (contract §2.1 for failures).
//!
//! Hosts that show the model only text get the same facts as `structuredContent`: a read is a
//! header line and the tree text; an act is one summary line (plus the observed tree); other
//! results are their compact JSON.

use serde_json::Value;

use crate::errors::DriverError;
use crate::model::escape_clip;

/// How many of an act's changed rows its text lists (the structured content has them all, up
/// to the diff's own cap).
pub const ACT_TEXT_CHANGED_ROWS: usize = 8;

/// The text of a failed call: `<code>: <message> [retry: <disposition>] <suggestion>`.
pub fn error_text(e: &DriverError) -> String {
    e.text()
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The text of a read (`get_window_state`) whose structured content is `v`, of `rows` rows
/// (`v` may leave its `elements` out: the broker writes them straight).
pub fn read_text(v: &Value, rows: usize) -> String {
    read_text_with(v, rows, s(v, "tree_text"))
}

/// The text of a read as [`read_text`], with the rows' text lines `tree_text` (a result of the
/// text form leaves them out of its structured content; one of the structured form has none).
/// A cut read that may go on says where (`continue_from`, an extension).
pub fn read_text_with(v: &Value, rows: usize, tree_text: &str) -> String {
    let w = &v["window"];
    let mut out = format!(
        "window {} pid {} app \"{}\" title \"{}\" | snapshot {} | view {} | {} rows{}{}\n",
        w["window_id"],
        w["pid"],
        escape_clip(s(w, "app"), 64),
        escape_clip(s(w, "title"), 80),
        s(v, "snapshot_id"),
        s(v, "view"),
        rows,
        if v["truncated"] == Value::Bool(true) {
            format!(
                " | truncated ({})",
                v["truncated_reason"].as_str().unwrap_or("limits")
            )
        } else {
            String::new()
        },
        if v.get("screenshot").is_some() {
            " | screenshot attached"
        } else {
            ""
        },
    );
    out.push_str(&format!("tokens are {}:<N>\n", s(v, "snapshot_id")));
    if let Some(c) = v.get("continue_from").and_then(Value::as_str) {
        out.push_str(&format!("more rows: continue_from \"{c}\"\n"));
    }
    out.push_str(tree_text);
    out
}

/// The text of a successful call of `tool` whose structured content is `v`.
pub fn success_text(tool: &str, v: &Value) -> String {
    match tool {
        "get_window_state" => read_text(v, v["elements"].as_array().map_or(0, Vec::len)),
        "wait_for" => {
            let mut out = format!(
                "matched: {} | waited {} ms | {} reads | snapshot {}",
                s(v, "until"),
                v["waited_ms"],
                v["reads"],
                s(v, "snapshot_id")
            );
            if let Some(w) = v.get("window").filter(|w| w.is_object()) {
                out.push_str(&format!(
                    " | window {} \"{}\"",
                    w["window_id"],
                    escape_clip(s(w, "title"), 80)
                ));
            }
            if v.get("gone") == Some(&Value::Bool(true)) {
                out.push_str(" | the element is gone");
            }
            if let Some(row) = v.get("row_text").and_then(Value::as_str) {
                out.push('\n');
                out.push_str(row);
            }
            out
        }
        t if crate::tools::tool(t).is_some_and(|d| d.class == crate::tools::ToolClass::Act)
            && v.get("effect").is_some()
            && v.get("verified").is_some() =>
        {
            let mut out = format!(
                "effect: {} | verified: {} | path: {}",
                s(v, "effect"),
                v["verified"],
                s(v, "path")
            );
            if let Some(r) = v.get("readback").and_then(Value::as_str) {
                out.push_str(&format!(" | readback: {r}"));
            }
            if let Some(sid) = v.get("snapshot_id").and_then(Value::as_str) {
                out.push_str(&format!(" | snapshot {sid}"));
            }
            if let Some(d) = v.get("diff").filter(|d| d.is_object()) {
                let n = |k: &str| d[k].as_array().map_or(0, Vec::len);
                out.push_str(&format!(
                    " | diff: +{} -{} ~{}{}",
                    n("added"),
                    n("removed"),
                    n("changed"),
                    if d["truncated"] == Value::Bool(true) {
                        " (truncated)"
                    } else {
                        ""
                    }
                ));
                for item in d["changed"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .take(ACT_TEXT_CHANGED_ROWS)
                {
                    out.push_str(&format!(
                        "\n  ~[{}] {} \"{}\" {}",
                        item["element_index"],
                        s(item, "role"),
                        s(item, "label"),
                        item["fields"].as_array().map_or(String::new(), |f| {
                            f.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                    ));
                }
            }
            if let Some(e) = v.get("escalation").filter(|e| e.is_object()) {
                out.push_str(&format!(
                    " | escalation: {} ({})",
                    s(e, "recommend"),
                    s(e, "reason")
                ));
            }
            if let Some(o) = v.get("observe") {
                if let Some(t) = o.get("tree_text").and_then(Value::as_str) {
                    out.push_str(&format!(
                        "\nobserved snapshot {}:\n{}",
                        s(o, "snapshot_id"),
                        t
                    ));
                }
                for k in ["error", "screenshot_error"] {
                    if let Some(e) = o.get(k) {
                        out.push_str(&format!(
                            "\nobserve {k}: {}: {}",
                            s(e, "code"),
                            s(e, "message")
                        ));
                    }
                }
            }
            out
        }
        _ => serde_json::to_string(v).unwrap_or_default(),
    }
}
