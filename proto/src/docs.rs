//! The generated parts of docs/: the tool list and the error table, written from this crate so
//! the documentation cannot drift from the wire (a test compares the files with these).
//! Regenerate with `cargo run -p nish-proto --example gen_docs`.

use std::fmt::Write;

use crate::errors::ERRORS;
use crate::tools::{TOOLS, ToolClass};

const HEADER: &str =
    "<!-- Generated from proto by `cargo run -p nish-proto --example gen_docs`; do not edit. -->\n";

/// docs/errors.md: every code with its disposition and fixed suggestion.
pub fn errors_md() -> String {
    let mut s = String::from(HEADER);
    let _ = writeln!(s, "# Error codes\n");
    let _ = writeln!(
        s,
        "Every failed call is an MCP result with `isError: true` and `structuredContent` \
         `{{\"ok\": false, \"error\": {{code, message, disposition: {{retry}}, suggestion, ...}}}}`; \
         its text is `<code>: <message> [retry: <disposition>] <suggestion>`. The suggestion is fixed \
         per code and never built from application text.\n"
    );
    let _ = writeln!(
        s,
        "Dispositions: `safe` (nothing happened; send again after a short wait), `unsafe` \
         (something may have happened; observe before acting again), `after_refresh` (read again, then \
         retry with fresh tokens or targets), `never` (change the arguments or ask the person).\n"
    );
    let _ = writeln!(s, "| code | retry | suggestion |");
    let _ = writeln!(s, "|---|---|---|");
    for e in ERRORS {
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {} |",
            e.name,
            e.retry.as_str(),
            e.suggestion.replace('|', "\\|")
        );
    }
    s
}

/// About how many bytes the slim structured content of a `result_form: text` read has
/// (measured on the mock: `testd/tests/contract.rs`, which checks it stays under this).
pub const READ_SLIM_STRUCTURED_BYTES: usize = 400;

fn class(c: ToolClass) -> &'static str {
    match c {
        ToolClass::Session => "session",
        ToolClass::Read => "read",
        ToolClass::Act => "act",
    }
}

/// docs/tools.md: every tool with its class, annotations, arguments and description.
pub fn tools_md() -> String {
    let mut s = String::from(HEADER);
    let _ = writeln!(s, "# Tools\n");
    let _ = writeln!(
        s,
        "Class `read` tools work while a takeover is paused; `act` tools are refused then. \
         `readOnly` and `destructive` are the MCP annotations each tool carries. Tools marked \
         **extension** go beyond contract {}: `nish-driver manifest` lists them under \
         `extensions`, and a host that ignores them loses nothing.\n",
        crate::CONTRACT_VERSION
    );
    let _ = writeln!(
        s,
        "**Results that fit** (extension): the rows of a default full or root `get_window_state` result \
         (no `max_elements` given) stay under {} bytes on the wire (about 20,000 tokens at 4 bytes a token; hosts cut tool results \
         near 25,000), counted as each row's element JSON plus its text line twice, since the \
         text content and `tree_text` both carry it. Rows go in document order (the window, \
         then each container before its children), so the rows that fit are the top of the \
         tree; a read cut there says `truncated: true`, `truncated_reason: max_bytes`. Read the rest with `continue_from` \
         (below), `root=<token>` of a container further down, or `skeleton` first; a caller who names \
         `max_elements` gets that many rows whatever their size.\n",
        crate::model::READ_MAX_BYTES
    );
    let _ = writeln!(
        s,
        "**Continuing a cut read** (extension): a full or root read cut by the byte budget or \
         by `max_elements` carries `continue_from` (in the structured content, and in the text \
         content's line `more rows: continue_from \"...\"`). Call `get_window_state` again with \
         `continue_from` set to it, as given, and the result has the rows that follow, in the \
         same document order, under the same limits (`max_elements`, or the byte budget when it \
         is left out; the same `max_depth`): the pages put together are the rows of one read \
         without limits, none twice and none left out. The last page has no `continue_from`. \
         The continuation is `<snapshot_id>/<full|rootN>/<row>/<max_depth>`, numbers only. It is \
         bound to its snapshot: each page reads the window again, judged as any read (the \
         session, its apps, a pause, secure fields), and when the window's structure, the names \
         in its lists or the session's epoch changed, or the snapshot is not this session's, \
         the call fails with `stale_element_token`: read again. The first call's arguments \
         may be sent again with it; `skeleton`, `include_screenshot`, another `root`, \
         `max_depth` or window fail with `invalid_arguments`; a continuation that does not parse too. Skeleton reads have none: \
         use `max_elements` up to 200.\n"
    );
    let _ = writeln!(
        s,
        "**Result forms** (extension): `result_form` is `both` (default: the contract's result, \
         the rows as text lines in the text content and in `tree_text`, and as `elements`), \
         `text` or `structured`. `text` gives the text content as `both` does, and a slim \
         structured content without `elements` and `tree_text`: `ok`, `snapshot_id`, `window`, \
         `view`, `truncated`, `truncated_reason`, `element_count`, `continue_from`, \
         `result_form` (about {} bytes), kept so the result is still the contract's envelope and \
         a host reads where to continue as data. `structured` gives `elements` without \
         `tree_text`, and a text content of the header lines only (no rows); a host that shows \
         the model only the text content gets no rows from it. The tools advertise no MCP \
         `outputSchema`, so MCP asks for no structured content; the driver keeps one in every \
         form. The byte budget counts what the form carries, so a page of one form holds more \
         rows: per row, the element JSON plus the text line twice (`both`), the text line once \
         (`text`), the element JSON alone (`structured`). Measured on the mock's dense window \
         (2,216 rows, `cargo test -p nish-testd --test contract fits -- --nocapture`): about \
         260 bytes a row for `both`, 47 for `text`, 165 for `structured`; the slim structured \
         content about 300 bytes. The default row count (250) holds in every form.\n",
        READ_SLIM_STRUCTURED_BYTES
    );
    let _ = writeln!(
        s,
        "**Huge windows** (extension): an application too large for its whole-tree calls (a \
         GTK 3 window of tens of thousands of objects, whose whole-cache call would keep it busy \
         for seconds) is read bounded: breadth-first, the window's top structure before deep \
         leaves, at most {} children per container, within {}% of the read's budget. Its reads \
         say `truncated: true`, `truncated_reason: app_too_large` (the reader's own cut, not \
         the limits'). The reader learns this once per application (from a first look at a \
         window or from a whole-cache call that did not answer in time) and keeps to it for \
         the application's life; secure fields are withheld as on every read. A container \
         cut this way shows its first children only; the rest are not read.\n",
        crate::model::BOUNDED_CHILDREN,
        crate::model::BOUNDED_SHARE
    );
    for t in TOOLS {
        let a = t.annotations();
        if t.extension {
            let _ = writeln!(s, "## `{}` (extension)\n", t.name);
        } else {
            let _ = writeln!(s, "## `{}`\n", t.name);
        }
        let _ = writeln!(s, "{}\n", t.description);
        let _ = writeln!(
            s,
            "Class: `{}` · readOnly: `{}` · destructive: `{}`\n",
            class(t.class),
            a["readOnlyHint"],
            a.get("destructiveHint")
                .map_or("n/a".to_string(), |v| v.to_string())
        );
        let schema = t.input_schema();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let props = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if props.is_empty() {
            let _ = writeln!(s, "No arguments.\n");
            continue;
        }
        let _ = writeln!(s, "| argument | type | required | notes |");
        let _ = writeln!(s, "|---|---|---|---|");
        for (k, v) in props {
            let ty = match &v["type"] {
                serde_json::Value::String(x) => x.clone(),
                serde_json::Value::Array(a) => a
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                _ => String::new(),
            };
            let mut notes = v["description"].as_str().unwrap_or("").to_string();
            if let Some(e) = v["enum"].as_array() {
                let list: Vec<String> = e
                    .iter()
                    .map(|x| format!("`{}`", x.as_str().unwrap_or("")))
                    .collect();
                notes = format!("{} one of {}", notes, list.join(", "))
                    .trim()
                    .to_string();
            }
            for (key, label) in [
                ("minimum", "min"),
                ("maximum", "max"),
                ("maxLength", "max length"),
                ("maxItems", "max items"),
            ] {
                if let Some(n) = v.get(key) {
                    notes = format!("{notes} {label} {n}").trim().to_string();
                }
            }
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} |",
                k,
                ty,
                if required.contains(&k.as_str()) {
                    "yes"
                } else {
                    "no"
                },
                notes.replace('|', "\\|")
            );
        }
        let _ = writeln!(s);
    }
    s
}
