//! The model-facing tools: names, descriptions, input schemas and MCP annotations.
//!
//! Input schemas follow contract §8: root `type: "object"` with `properties`, no `$ref`, no root
//! combinators, each under [`MAX_INPUT_SCHEMA_BYTES`]; the whole `tools/list` result stays under
//! [`MAX_TOOLS_LIST_BYTES`] because it costs every model call context.

use serde_json::{Value, json};

/// Largest input schema of one tool, in bytes of compact JSON (contract §8).
pub const MAX_INPUT_SCHEMA_BYTES: usize = 12_000;
/// Largest `tools/list` result, in bytes of compact JSON.
pub const MAX_TOOLS_LIST_BYTES: usize = 16_384;

/// What a tool is, for policy: the broker's permission table keys on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Opens, reports or ends the session; works in every session state.
    Session,
    /// Reads the desktop; allowed while a takeover is paused.
    Read,
    /// Changes the desktop; refused while paused.
    Act,
}

/// One tool.
#[derive(Clone, Copy, Debug)]
pub struct ToolDef {
    /// The tool name.
    pub name: &'static str,
    /// A short title.
    pub title: &'static str,
    /// The description the model reads.
    pub description: &'static str,
    /// Its policy class.
    pub class: ToolClass,
    /// True when the tool may destroy or overwrite something the person has.
    pub destructive: bool,
    /// True when calling it twice has no extra effect.
    pub idempotent: bool,
    /// True for a tool beyond the contract (contract 0.8 does not name it): `nish-driver
    /// manifest` lists it under `extensions`, and a host that ignores it loses nothing.
    pub extension: bool,
}

impl ToolDef {
    /// True for tools that never change the desktop or the session's grants (MCP readOnlyHint).
    pub fn read_only(&self) -> bool {
        self.class == ToolClass::Read || matches!(self.name, "get_session_state" | "health_report")
    }

    /// The MCP annotations object.
    pub fn annotations(&self) -> Value {
        let ro = self.read_only();
        let mut a = json!({"title": self.title, "readOnlyHint": ro, "openWorldHint": false});
        if !ro {
            a["destructiveHint"] = json!(self.destructive);
            a["idempotentHint"] = json!(self.idempotent);
        }
        a
    }

    /// The input schema.
    pub fn input_schema(&self) -> Value {
        input_schema(self.name).expect("every listed tool has a schema")
    }

    /// This tool's entry of `tools/list`.
    pub fn list_entry(&self) -> Value {
        json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema(),
            "annotations": self.annotations(),
        })
    }
}

macro_rules! t {
    ($name:literal, $title:literal, $class:ident, $destructive:literal, $idem:literal, $desc:literal) => {
        ToolDef {
            name: $name,
            title: $title,
            description: $desc,
            class: ToolClass::$class,
            destructive: $destructive,
            idempotent: $idem,
            extension: false,
        }
    };
}

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[ToolDef] = &[
    t!(
        "start_session",
        "Start session",
        Session,
        false,
        false,
        "Ask the person for consent to use their apps. Blocks until they answer. input: headless (accessibility only, default) or takeover (visible synthetic input). apps: apps to pre-tick."
    ),
    t!(
        "get_session_state",
        "Session state",
        Session,
        false,
        true,
        "Report the session: consent, approved apps, input mode, takeover and pause state, lease."
    ),
    t!(
        "end_session",
        "End session",
        Session,
        false,
        true,
        "End the session and remove any takeover indicator."
    ),
    t!(
        "list_windows",
        "List windows",
        Read,
        false,
        true,
        "List visible windows of approved apps: window_id, pid, app, title, frame, active."
    ),
    t!(
        "get_window_state",
        "Read window",
        Read,
        false,
        true,
        "Read a window's accessibility tree. Rows read [N] role \"label\"; act on a row with token <snapshot_id>:<N>. Dense apps: skeleton first, then root=<token> to drill down. A cut read gives continue_from for the next rows."
    ),
    t!(
        "click",
        "Click",
        Act,
        true,
        false,
        "Activate an element (its accessibility action; foreground needs takeover)."
    ),
    t!(
        "double_click",
        "Double-click",
        Act,
        true,
        false,
        "Open or activate an element."
    ),
    t!(
        "right_click",
        "Right-click",
        Act,
        true,
        false,
        "Open an element's context menu."
    ),
    t!(
        "type_text",
        "Type text",
        Act,
        true,
        false,
        "Insert text into an editable element at its caret; result has readback."
    ),
    t!(
        "set_value",
        "Set value",
        Act,
        true,
        true,
        "Replace an element's whole text or numeric value; result has readback."
    ),
    t!(
        "press_key",
        "Press key",
        Act,
        true,
        false,
        "Press one key (e.g. Return, Escape, Tab). Needs takeover."
    ),
    t!(
        "hotkey",
        "Hotkey",
        Act,
        true,
        false,
        "Press a key combination, e.g. [\"ctrl\",\"s\"]. Needs takeover."
    ),
    t!(
        "scroll",
        "Scroll",
        Act,
        false,
        false,
        "Scroll at an element. Needs takeover."
    ),
    t!(
        "drag",
        "Drag",
        Act,
        true,
        false,
        "Drag from one element to another in the same window. Needs takeover."
    ),
    t!(
        "bring_to_front",
        "Bring to front",
        Act,
        false,
        true,
        "Raise and focus a window. Needs takeover."
    ),
    t!(
        "move_cursor",
        "Move cursor",
        Act,
        false,
        true,
        "Move the pointer to x,y or an element, gliding over duration_ms. Needs takeover."
    ),
    t!(
        "clipboard_read",
        "Read clipboard",
        Read,
        false,
        true,
        "Read the clipboard text. Needs clipboard consent and the host's approval per call."
    ),
    t!(
        "clipboard_write",
        "Write clipboard",
        Act,
        true,
        true,
        "Put text on the clipboard for the session."
    ),
    t!(
        "list_notifications",
        "List notifications",
        Read,
        false,
        true,
        "List desktop notifications (unsupported on X11)."
    ),
    t!(
        "dismiss_notification",
        "Dismiss notification",
        Act,
        true,
        true,
        "Dismiss a notification (unsupported on X11)."
    ),
    t!(
        "invoke_notification_action",
        "Notification action",
        Act,
        true,
        false,
        "Invoke a notification's action (unsupported on X11)."
    ),
    t!(
        "health_report",
        "Health report",
        Session,
        false,
        true,
        "Report the driver's backends and capabilities."
    ),
    ToolDef {
        name: "wait_for",
        title: "Wait for",
        description: "Extension (not in contract 0.8): wait, bounded, until an element matching role/name appears, disappears or changes in a window (role \"window\": a window of its app by title). Times out with timeout.",
        class: ToolClass::Read,
        destructive: false,
        idempotent: true,
        extension: true,
    },
];

/// The tools beyond the contract, in `tools/list` order.
pub fn extensions() -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|t| t.extension)
        .map(|t| t.name)
        .collect()
}

/// Looks a tool up by name.
pub fn tool(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

fn observe() -> Value {
    json!({"type": "object", "description": "Add a fresh read to the result.",
           "properties": {"tree": {"type": "boolean"}, "screenshot": {"type": "boolean"}}})
}

fn token(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn delivery() -> Value {
    json!({"type": "string", "enum": ["background", "foreground"],
           "description": "background (default): accessibility only. foreground: synthetic input, takeover only."})
}

fn window_target() -> serde_json::Map<String, Value> {
    let v = json!({
        "pid": {"type": "integer", "minimum": 1},
        "window_id": {"type": "integer", "minimum": 1},
        "app": {"type": "string", "description": "App name or title fragment instead of pid/window_id."}
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn obj(props: Value, required: &[&str]) -> Value {
    let mut s = json!({"type": "object", "properties": props, "additionalProperties": true});
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    s
}

/// The input schema of a tool, or `None` for an unknown name.
pub fn input_schema(name: &str) -> Option<Value> {
    let s = match name {
        "start_session" => obj(
            json!({
                "input": {"type": "string", "enum": ["headless", "takeover"]},
                "apps": {"type": "array", "items": {"type": "string"}, "maxItems": 32,
                         "description": "Apps to pre-tick; omitted: every app with a window, unticked."},
                "clipboard_read": {"type": "boolean", "description": "Also ask to read the clipboard."},
                "lease_s": {"type": "integer", "minimum": 10, "maximum": 3600,
                            "description": "Session length in seconds (default 900)."}
            }),
            &[],
        ),
        "get_session_state" | "end_session" | "list_windows" | "clipboard_read"
        | "list_notifications" | "health_report" => obj(json!({}), &[]),
        "get_window_state" => {
            let mut p = window_target();
            p.insert(
                "skeleton".into(),
                json!({"type": "boolean", "description": "Containers and landmarks only."}),
            );
            p.insert(
                "root".into(),
                token("Token of an element to read with its descendants."),
            );
            p.insert(
                "max_elements".into(),
                json!({"type": "integer", "minimum": 1, "maximum": 5000}),
            );
            p.insert(
                "max_depth".into(),
                json!({"type": "integer", "minimum": 1, "maximum": 200}),
            );
            p.insert(
                "include_screenshot".into(),
                json!({"type": "boolean",
                       "description": "Also a PNG of the window, secure fields blacked out; waits for an act in flight."}),
            );
            p.insert(
                "continue_from".into(),
                json!({"type": "string", "maxLength": crate::model::Continuation::MAX_LEN,
                       "description": "Extension: a cut read's continue_from, as given; returns the rows after it."}),
            );
            p.insert(
                "result_form".into(),
                json!({"type": "string", "enum": ["both", "text", "structured"],
                       "description": "Extension: both (default), text (rows as text only) or structured (rows as elements only)."}),
            );
            obj(Value::Object(p), &[])
        }
        "click" | "double_click" | "right_click" => obj(
            json!({"element_token": token("<snapshot_id>:<N>"), "delivery_mode": delivery(), "observe": observe()}),
            &["element_token"],
        ),
        "type_text" => obj(
            json!({"element_token": token("<snapshot_id>:<N>"), "text": {"type": "string", "maxLength": 10000},
                   "delivery_mode": delivery(), "observe": observe()}),
            &["element_token", "text"],
        ),
        "set_value" => obj(
            json!({"element_token": token("<snapshot_id>:<N>"),
                   "value": {"type": ["string", "number"], "description": "Text, or a number for sliders and spin buttons."},
                   "observe": observe()}),
            &["element_token", "value"],
        ),
        "press_key" => obj(
            json!({"key": {"type": "string", "description": "Key name: Return, Tab, Escape, a, F5, Page_Down..."},
                   "observe": observe()}),
            &["key"],
        ),
        "hotkey" => obj(
            json!({"keys": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
                   "observe": observe()}),
            &["keys"],
        ),
        "scroll" => obj(
            json!({"element_token": token("<snapshot_id>:<N>"),
                   "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                   "amount": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Wheel steps (default 3)."},
                   "observe": observe()}),
            &["element_token", "direction"],
        ),
        "drag" => obj(
            json!({"from_token": token("Element to drag."), "to_token": token("Element to drop on."),
                   "observe": observe()}),
            &["from_token", "to_token"],
        ),
        "bring_to_front" => obj(Value::Object(window_target()), &[]),
        "wait_for" => {
            let mut p = window_target();
            p.insert(
                "role".into(),
                json!({"type": "string", "maxLength": 64,
                       "description": "Role as rows show it, e.g. push_button; window: a window of the app."}),
            );
            p.insert(
                "name".into(),
                json!({"type": "string", "maxLength": 200,
                       "description": "Part of the label (or title), any case. role or name is required."}),
            );
            p.insert(
                "until".into(),
                json!({"type": "string", "enum": ["appears", "disappears", "changes"],
                       "description": "changes: the first match's label, states or value differ from the start."}),
            );
            p.insert(
                "timeout_ms".into(),
                json!({"type": "integer", "minimum": 100, "maximum": 30000, "description": "Default 5000."}),
            );
            obj(Value::Object(p), &["until"])
        }
        "move_cursor" => obj(
            json!({"x": {"type": "integer"}, "y": {"type": "integer"},
                   "element_token": token("Move to this element's center instead of x,y."),
                   "scope": {"type": "string", "enum": ["window", "desktop"],
                             "description": "window (default): x,y relative to the element's window; desktop: screen."},
                   "duration_ms": {"type": "integer", "minimum": 0, "maximum": 5000}}),
            &[],
        ),
        "clipboard_write" => obj(
            json!({"text": {"type": "string", "maxLength": 100000}}),
            &["text"],
        ),
        "dismiss_notification" => obj(json!({"id": {"type": "string"}}), &["id"]),
        "invoke_notification_action" => obj(
            json!({"id": {"type": "string"}, "action": {"type": "string"}}),
            &["id", "action"],
        ),
        _ => return None,
    };
    Some(s)
}

/// The whole `tools/list` result (`{"tools": [...]}`).
pub fn tools_list() -> Value {
    json!({"tools": TOOLS.iter().map(|t| t.list_entry()).collect::<Vec<_>>()})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_rules_hold() {
        for t in TOOLS {
            let s = t.input_schema();
            assert_eq!(s["type"], json!("object"), "{}", t.name);
            assert!(s["properties"].is_object(), "{}", t.name);
            let text = serde_json::to_string(&s).unwrap();
            assert!(!text.contains("$ref"), "{}", t.name);
            for k in ["anyOf", "oneOf", "allOf", "not", "if"] {
                assert!(s.get(k).is_none(), "{}: root combinator {k}", t.name);
            }
            assert!(text.len() < MAX_INPUT_SCHEMA_BYTES, "{}", t.name);
        }
        let all = serde_json::to_string(&tools_list()).unwrap();
        assert!(
            all.len() < MAX_TOOLS_LIST_BYTES,
            "tools/list is {} bytes",
            all.len()
        );
    }

    #[test]
    fn names_are_unique() {
        let mut n: Vec<_> = TOOLS.iter().map(|t| t.name).collect();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), TOOLS.len());
    }
}
