//! Output schemas: the `structuredContent` of every tool's success ([`output_schema`]) and of
//! every failure ([`error_schema`]), contract §8. They are not advertised as MCP `outputSchema`
//! (some clients reject results that do not match exactly); the conformance tests validate
//! every result against them.

use serde_json::{Value, json};

use crate::errors::ERRORS;

fn rect() -> Value {
    json!({"type": "object", "required": ["x", "y", "w", "h"],
           "properties": {"x": {"type": "integer"}, "y": {"type": "integer"},
                          "w": {"type": "integer"}, "h": {"type": "integer"}}})
}

fn ok_object(required: &[&str], props: Value) -> Value {
    let mut p = props;
    p["ok"] = json!({"const": true});
    let mut req = vec!["ok"];
    req.extend_from_slice(required);
    json!({"type": "object", "required": req, "properties": p})
}

fn window() -> Value {
    json!({"type": "object", "required": ["window_id", "pid", "app", "title", "frame", "active"],
           "properties": {"window_id": {"type": "integer"}, "pid": {"type": "integer"},
                          "app": {"type": "string"}, "title": {"type": "string"},
                          "frame": rect(), "active": {"type": "boolean"},
                          "origin": {"enum": ["screen", "window"]}}})
}

fn element() -> Value {
    json!({"type": "object",
           "required": ["element_index", "element_token", "role", "label", "states", "actions", "frame"],
           "properties": {
               "element_index": {"type": "integer", "minimum": 0},
               "element_token": {"type": "string", "pattern": "^[A-Za-z0-9]{1,32}:[0-9]+$"},
               "role": {"type": "string"},
               "label": {"type": "string", "maxLength": 80},
               "states": {"type": "array", "items": {"type": "string"}},
               "value": {"type": ["string", "null"]},
               "actions": {"type": "array", "items": {"type": "string"}},
               "frame": {"anyOf": [rect(), {"type": "null"}]},
               "parent_index": {"type": ["integer", "null"]},
               "depth": {"type": "integer", "minimum": 0},
               "child_count": {"type": "integer", "minimum": 0},
               "descendant_count": {"type": "integer", "minimum": 0}}})
}

fn image_meta() -> Value {
    json!({"type": "object", "required": ["mime", "width", "height", "redacted"],
           "properties": {"mime": {"const": "image/png"}, "width": {"type": "integer"},
                          "height": {"type": "integer"}, "redacted": {"type": "integer", "minimum": 0},
                          "bytes": {"type": "integer"}}})
}

fn read_body() -> Value {
    json!({
        "snapshot_id": {"type": "string"},
        "truncated": {"type": "boolean"},
        "truncated_reason": {"type": ["string", "null"]},
        "elements": {"type": "array", "items": element()},
        "tree_text": {"type": "string"},
    })
}

fn session_state() -> Value {
    ok_object(
        &[
            "session",
            "state",
            "input",
            "takeover",
            "apps",
            "clipboard_read",
            "lease",
        ],
        json!({
            "session": {"type": ["string", "null"]},
            "state": {"enum": ["none", "consent_pending", "granted", "ended", "expired", "stopped", "revoked", "denied"]},
            "input": {"enum": ["headless", "takeover"]},
            "takeover": {"type": "object", "required": ["on", "indicator", "paused"],
                         "properties": {"on": {"type": "boolean"}, "indicator": {"type": "boolean"},
                                        "paused": {"type": "boolean"},
                                        "paused_reason": {"enum": ["pointer_moved", "key_pressed", "button_pressed", "person_input"]},
                                        "reason": {"type": "string"}}},
            "apps": {"type": "array", "items": {"type": "object", "required": ["app", "pids"],
                     "properties": {"app": {"type": "string"}, "pids": {"type": "array", "items": {"type": "integer"}}}}},
            "clipboard_read": {"type": "boolean"},
            "lease": {"type": ["object", "null"],
                      "properties": {"seconds_left": {"type": "integer", "minimum": 0}, "lease_s": {"type": "integer"}}},
        }),
    )
}

fn act_result() -> Value {
    let diff_item = json!({"type": "object", "required": ["element_index", "role"],
                           "properties": {"element_index": {"type": "integer"}, "role": {"type": "string"},
                                          "label": {"type": "string"}, "fields": {"type": "array", "items": {"type": "string"}}}});
    ok_object(
        &[
            "effect",
            "verified",
            "path",
            "took_cursor",
            "escalation",
            "diff",
            "snapshot_id",
            "settle",
        ],
        json!({
            "effect": {"enum": ["confirmed", "dispatched", "refused", "stopped"]},
            "verified": {"type": "boolean"},
            "path": {"type": "string"},
            "took_cursor": {"type": "boolean"},
            "escalation": {"anyOf": [{"type": "null"},
                {"type": "object", "required": ["recommend", "reason"],
                 "properties": {"recommend": {"type": "string"}, "reason": {"type": "string"}}}]},
            "diff": {"anyOf": [{"type": "null"}, {"type": "object", "required": ["added", "removed", "changed", "truncated"],
                     "properties": {"added": {"type": "array", "items": diff_item},
                                    "removed": {"type": "array", "items": diff_item},
                                    "changed": {"type": "array", "items": diff_item},
                                    "truncated": {"type": "boolean"}}}]},
            "snapshot_id": {"type": ["string", "null"]},
            "settle": {"type": "object", "required": ["ms", "settled"],
                       "properties": {"ms": {"type": "integer"}, "settled": {"type": "boolean"}}},
            "readback": {"enum": ["match", "mismatch", "unverified"]},
            "typed_characters": {"type": "integer"},
            "observe": {"type": "object", "properties": {
                "snapshot_id": {"type": "string"}, "truncated": {"type": "boolean"},
                "elements": {"type": "array", "items": element()}, "tree_text": {"type": "string"},
                "screenshot": image_meta(), "error": error_object(), "screenshot_error": error_object()}},
        }),
    )
}

fn backend_entry() -> Value {
    json!({"type": "object", "required": ["id", "status", "required", "reason_code", "action"],
           "properties": {"id": {"type": "string"},
                          "status": {"enum": ["available", "unavailable", "planned"]},
                          "required": {"type": "boolean"},
                          "reason_code": {"type": ["string", "null"]}, "action": {"type": ["string", "null"]}}})
}

fn capability_entry() -> Value {
    json!({"type": "object", "required": ["name", "status", "reason_code", "action", "consent"],
           "properties": {"name": {"type": "string"},
                          "status": {"enum": ["available", "unavailable", "unsupported", "planned"]},
                          "reason_code": {"type": ["string", "null"]}, "action": {"type": ["string", "null"]},
                          "consent": {"enum": ["session", "takeover", "separate", "host_approval"]}}})
}

/// The schema of a backend registry entry (shared with the doctor schema).
pub fn backend_entry_schema() -> Value {
    backend_entry()
}

/// The schema of a capability entry (shared with the doctor schema).
pub fn capability_entry_schema() -> Value {
    capability_entry()
}

/// The `structuredContent` schema of a tool's success, or `None` for an unknown tool.
pub fn output_schema(tool: &str) -> Option<Value> {
    let s = match tool {
        "start_session" | "get_session_state" => session_state(),
        "end_session" => ok_object(
            &["session", "ended"],
            json!({"session": {"type": ["string", "null"]}, "ended": {"type": "boolean"}}),
        ),
        "list_windows" => ok_object(
            &["windows"],
            json!({"windows": {"type": "array", "items": window()}}),
        ),
        "get_window_state" => {
            let mut p = read_body();
            p["window"] = window();
            p["view"] = json!({"enum": ["full", "skeleton", "root"]});
            p["root"] = json!({"type": "string"});
            p["element_count"] = json!({"type": "integer"});
            p["screenshot"] = image_meta();
            // Extensions beyond contract 0.8: where a cut read resumes, and the form asked
            // for when it is not both.
            p["continue_from"] =
                json!({"type": "string", "maxLength": crate::model::Continuation::MAX_LEN});
            p["result_form"] = json!({"enum": ["text", "structured"]});
            let mut s = ok_object(&["snapshot_id", "truncated", "window", "view"], p);
            // The contract's result (no result_form) has both elements and tree_text; the
            // structured form has elements alone, the text form neither.
            s["anyOf"] = json!([
                {"required": ["elements", "tree_text"], "not": {"required": ["result_form"]}},
                {"required": ["elements", "result_form"], "properties": {"result_form": {"const": "structured"}},
                 "not": {"required": ["tree_text"]}},
                {"required": ["result_form"], "properties": {"result_form": {"const": "text"}},
                 "allOf": [{"not": {"required": ["elements"]}}, {"not": {"required": ["tree_text"]}}]},
            ]);
            s
        }
        "click" | "double_click" | "right_click" | "type_text" | "set_value" | "press_key"
        | "hotkey" | "scroll" | "drag" | "bring_to_front" | "move_cursor" => act_result(),
        "clipboard_read" => ok_object(
            &["text", "length"],
            json!({"text": {"type": "string"}, "length": {"type": "integer"}}),
        ),
        "clipboard_write" => ok_object(
            &["effect", "length"],
            json!({"effect": {"enum": ["confirmed", "dispatched"]}, "length": {"type": "integer"}}),
        ),
        "list_notifications" => ok_object(
            &["notifications"],
            json!({"notifications": {"type": "array", "items": {"type": "object"}}}),
        ),
        "dismiss_notification" | "invoke_notification_action" => ok_object(
            &["effect"],
            json!({"effect": {"enum": ["confirmed", "dispatched"]}}),
        ),
        "health_report" => ok_object(
            &[
                "contract_version",
                "driver_version",
                "backends",
                "capabilities",
            ],
            json!({"contract_version": {"type": "string"}, "driver_version": {"type": "string"},
                   "session_type": {"type": "string"},
                   "backends": {"type": "array", "items": backend_entry()},
                   "capabilities": {"type": "array", "items": capability_entry()}}),
        ),
        "wait_for" => ok_object(
            &["matched", "until", "waited_ms", "reads"],
            json!({"matched": {"const": true},
                   "until": {"enum": ["appears", "disappears", "changes"]},
                   "waited_ms": {"type": "integer", "minimum": 0},
                   "reads": {"type": "integer", "minimum": 1},
                   "snapshot_id": {"type": "string"},
                   "window": window(),
                   "element": element(),
                   "row_text": {"type": "string"},
                   "gone": {"type": "boolean"}}),
        ),
        _ => return None,
    };
    Some(s)
}

fn error_object() -> Value {
    let codes: Vec<&str> = ERRORS.iter().map(|e| e.name).collect();
    json!({"type": "object", "required": ["code", "message", "disposition", "suggestion"],
           "properties": {
               "code": {"enum": codes},
               "message": {"type": "string"},
               "disposition": {"type": "object", "required": ["retry"],
                               "properties": {"retry": {"enum": ["safe", "unsafe", "after_refresh", "never"]}}},
               "suggestion": {"type": "string"},
               "candidates": {"type": "array", "maxItems": 8, "items": {"type": "object",
                   "required": ["window_id", "pid", "app"],
                   "properties": {"window_id": {"type": "integer"}, "pid": {"type": "integer"},
                                  "app": {"type": "string", "maxLength": 64}}}},
               "candidates_truncated": {"type": "boolean"},
               "escalation": {"type": "object", "required": ["recommend", "reason"]},
               "effect": {"enum": ["refused", "stopped"]},
               "typed_characters": {"type": "integer"},
               "paused_reason": {"enum": ["pointer_moved", "key_pressed", "button_pressed", "person_input"]}}})
}

/// The `structuredContent` schema of every failed call (contract §2.1).
pub fn error_schema() -> Value {
    json!({"type": "object", "required": ["ok", "error"],
           "properties": {"ok": {"const": false}, "error": error_object()}})
}
