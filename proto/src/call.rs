//! Tool calls, typed: every tool is a [`Tool`], and a call's arguments are decoded once, against
//! the same schema `tools/list` advertises ([`crate::validate`]), into a [`Call`] with typed
//! fields (element tokens parsed, enums checked, defaults applied). The broker matches on
//! [`Call`]; no tool name is compared as a string anywhere else.
//!
//! `null` counts as absent; unknown arguments are ignored (contract §1); a wrong type is refused
//! with `invalid_arguments` by the schema check before any field is read.

use serde_json::Value;

use crate::errors::{DriverError, ErrorCode};
use crate::model::{Continuation, Token};
use crate::tools::{self, ToolClass, ToolDef};

macro_rules! tools_enum {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// Every tool.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Tool {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl Tool {
            /// Every tool, in `tools/list` order.
            pub const ALL: &'static [Tool] = &[$(Tool::$variant),*];

            /// The wire name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Tool::$variant => $name,)*
                }
            }

            /// The tool of a wire name.
            pub fn from_name(name: &str) -> Option<Tool> {
                match name {
                    $($name => Some(Tool::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

tools_enum! {
    StartSession => "start_session",
    GetSessionState => "get_session_state",
    EndSession => "end_session",
    ListWindows => "list_windows",
    GetWindowState => "get_window_state",
    Click => "click",
    DoubleClick => "double_click",
    RightClick => "right_click",
    TypeText => "type_text",
    SetValue => "set_value",
    PressKey => "press_key",
    Hotkey => "hotkey",
    Scroll => "scroll",
    Drag => "drag",
    BringToFront => "bring_to_front",
    MoveCursor => "move_cursor",
    ClipboardRead => "clipboard_read",
    ClipboardWrite => "clipboard_write",
    ListNotifications => "list_notifications",
    DismissNotification => "dismiss_notification",
    InvokeNotificationAction => "invoke_notification_action",
    HealthReport => "health_report",
    WaitFor => "wait_for",
}

impl Tool {
    /// The tool's row of [`tools::TOOLS`] (description, schema, annotations, class).
    pub fn def(self) -> &'static ToolDef {
        tools::tool(self.name()).expect("every Tool has a row in TOOLS")
    }

    /// Its policy class.
    pub fn class(self) -> ToolClass {
        self.def().class
    }
}

/// The input mode start_session asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskedInput {
    /// Accessibility only.
    Headless,
    /// Visible synthetic input.
    Takeover,
}

/// How an act is delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Accessibility actions and setters (the default).
    #[default]
    Background,
    /// Synthetic input (takeover only).
    Foreground,
}

/// A window named by pid, window id or app.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowTarget {
    /// A process.
    pub pid: Option<u32>,
    /// A window.
    pub window_id: Option<u64>,
    /// An app name or title fragment.
    pub app: Option<String>,
}

/// `observe {tree, screenshot}` of an act (contract §7.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observe {
    /// Add the settled read's rows.
    pub tree: bool,
    /// Add a capture.
    pub screenshot: bool,
}

/// The value of set_value.
#[derive(Clone, Debug, PartialEq)]
pub enum NewValue {
    /// Text.
    Text(String),
    /// A number (sliders, spin buttons).
    Number(f64),
}

/// Where move_cursor's x, y count from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// From the focused approved window's origin (the default).
    #[default]
    Window,
    /// From the screen's origin.
    Desktop,
}

/// A wheel direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Up.
    Up,
    /// Down.
    Down,
    /// Left.
    Left,
    /// Right.
    Right,
}

impl Direction {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Left => "left",
            Direction::Right => "right",
        }
    }
}

/// get_window_state's arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadArgs {
    /// The window.
    pub target: WindowTarget,
    /// Containers and landmarks only.
    pub skeleton: bool,
    /// Read one region.
    pub root: Option<Token>,
    /// Row cap.
    pub max_elements: Option<u32>,
    /// Depth cap.
    pub max_depth: Option<u32>,
    /// Capture the window too.
    pub include_screenshot: bool,
    /// Resume a cut full or root read (an extension beyond contract 0.8).
    pub continue_from: Option<Continuation>,
    /// Which content forms the result carries (an extension beyond contract 0.8).
    pub result_form: ResultForm,
}

/// Which content forms a read's result carries (`result_form`, an extension beyond contract
/// 0.8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResultForm {
    /// The text content and the whole structured content (the contract's result).
    #[default]
    Both,
    /// The text content with the rows; a slim structured content without `elements` and
    /// `tree_text`.
    Text,
    /// The structured content with `elements` (no `tree_text`); a one-line text content.
    Structured,
}

impl ResultForm {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultForm::Both => "both",
            ResultForm::Text => "text",
            ResultForm::Structured => "structured",
        }
    }
}

/// What wait_for waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// A matching element (or window) is there.
    Appears,
    /// No matching element (or window) is there.
    Disappears,
    /// The first match's label, states or value differ from when the wait began.
    Changes,
}

impl Until {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Until::Appears => "appears",
            Until::Disappears => "disappears",
            Until::Changes => "changes",
        }
    }
}

/// Default wait of wait_for, in milliseconds.
pub const WAIT_DEFAULT_MS: u64 = 5_000;

/// wait_for's arguments (an extension beyond contract 0.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitArgs {
    /// The window.
    pub target: WindowTarget,
    /// The role, as rows show it (`window`: a window of the target's app).
    pub role: Option<String>,
    /// A part of the label (or the window's title), any case.
    pub name: Option<String>,
    /// What to wait for.
    pub until: Until,
    /// The bound, 100..=30000 ms.
    pub timeout_ms: u64,
}

/// A pointer act on one element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerArgs {
    /// The element.
    pub token: Token,
    /// How.
    pub delivery: Delivery,
    /// Add a fresh read.
    pub observe: Option<Observe>,
}

/// One decoded tool call.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `start_session`.
    StartSession {
        /// The input mode asked for.
        input: AskedInput,
        /// Apps to pre-tick (their names must equal an app's).
        apps: Option<Vec<String>>,
        /// Also ask to read the clipboard.
        clipboard_read: bool,
        /// The lease asked for, in seconds.
        lease_s: Option<u64>,
    },
    /// `get_session_state`.
    GetSessionState,
    /// `end_session`.
    EndSession,
    /// `health_report`.
    HealthReport,
    /// `list_windows`.
    ListWindows,
    /// `get_window_state`.
    GetWindowState(ReadArgs),
    /// `click`.
    Click(PointerArgs),
    /// `double_click`.
    DoubleClick(PointerArgs),
    /// `right_click`.
    RightClick(PointerArgs),
    /// `type_text`.
    TypeText {
        /// The element.
        token: Token,
        /// The text (never logged).
        text: String,
        /// How.
        delivery: Delivery,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `set_value`.
    SetValue {
        /// The element.
        token: Token,
        /// The value (never logged).
        value: NewValue,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `press_key`.
    PressKey {
        /// The key name.
        key: String,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `hotkey`.
    Hotkey {
        /// Modifiers, then one key.
        keys: Vec<String>,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `scroll`.
    Scroll {
        /// The element.
        token: Token,
        /// Which way.
        direction: Direction,
        /// Wheel steps.
        amount: u32,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `drag`.
    Drag {
        /// The element dragged.
        from: Token,
        /// The element dropped on.
        to: Token,
        /// Add a fresh read.
        observe: Option<Observe>,
    },
    /// `bring_to_front`.
    BringToFront(WindowTarget),
    /// `move_cursor`.
    MoveCursor {
        /// Move to this element's centre instead of x, y.
        token: Option<Token>,
        /// X.
        x: Option<i64>,
        /// Y.
        y: Option<i64>,
        /// Where x, y count from.
        scope: Scope,
        /// Glide time.
        duration_ms: u64,
    },
    /// `clipboard_read`.
    ClipboardRead,
    /// `clipboard_write`.
    ClipboardWrite {
        /// The text (never logged).
        text: String,
    },
    /// `list_notifications`.
    ListNotifications,
    /// `dismiss_notification`.
    DismissNotification,
    /// `invoke_notification_action`.
    InvokeNotificationAction,
    /// `wait_for` (an extension beyond contract 0.8).
    WaitFor(WaitArgs),
}

fn invalid(msg: &str) -> DriverError {
    DriverError::new(ErrorCode::InvalidArguments, msg)
}

/// The arguments object, with `null` read as absent.
struct Args<'a>(&'a serde_json::Map<String, Value>);

impl<'a> Args<'a> {
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    fn str(&self, k: &str) -> Option<&'a str> {
        self.get(k).and_then(Value::as_str)
    }
    fn string(&self, k: &str) -> Option<String> {
        self.str(k).map(str::to_string)
    }
    fn bool(&self, k: &str) -> bool {
        self.get(k).and_then(Value::as_bool).unwrap_or(false)
    }
    fn u64(&self, k: &str) -> Option<u64> {
        self.get(k).and_then(Value::as_u64)
    }
    fn i64(&self, k: &str) -> Option<i64> {
        self.get(k).and_then(Value::as_i64)
    }
    fn u32(&self, k: &str) -> Option<u32> {
        self.u64(k).and_then(|v| u32::try_from(v).ok())
    }
    fn strings(&self, k: &str) -> Option<Vec<String>> {
        self.get(k).and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
    }
    fn token(&self, k: &str) -> Result<Option<Token>, DriverError> {
        match self.str(k) {
            None => Ok(None),
            Some(t) => Token::parse(t)
                .map(Some)
                .ok_or_else(|| invalid("element tokens look like <snapshot_id>:<N>, e.g. s3:12")),
        }
    }
    fn required_token(&self, k: &str) -> Result<Token, DriverError> {
        self.token(k)?
            .ok_or_else(|| invalid("an element token is required"))
    }
    fn delivery(&self) -> Delivery {
        match self.str("delivery_mode") {
            Some("foreground") => Delivery::Foreground,
            _ => Delivery::Background,
        }
    }
    fn observe(&self) -> Option<Observe> {
        let o = self.get("observe")?.as_object()?;
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        Some(Observe {
            tree: flag("tree"),
            screenshot: flag("screenshot"),
        })
    }
    fn target(&self) -> WindowTarget {
        WindowTarget {
            pid: self.u32("pid"),
            window_id: self.u64("window_id"),
            app: self.string("app"),
        }
    }
    fn pointer(&self) -> Result<PointerArgs, DriverError> {
        Ok(PointerArgs {
            token: self.required_token("element_token")?,
            delivery: self.delivery(),
            observe: self.observe(),
        })
    }
}

impl Call {
    /// Decodes a call: the tool by name (`unknown_method` otherwise), the arguments as JSON
    /// (an object), checked against the tool's schema, then read into typed fields.
    pub fn decode(tool: &str, args_json: &str) -> Result<Call, DriverError> {
        let Some(t) = Tool::from_name(tool) else {
            return Err(DriverError::new(
                ErrorCode::UnknownMethod,
                format!("no tool named {}", crate::model::escape_clip(tool, 40)),
            ));
        };
        let args: Value = if args_json.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(args_json).map_err(|_| invalid("arguments are not valid JSON"))?
        };
        Call::from_value(t, &args)
    }

    /// Decodes a call of tool `t` from its arguments object.
    pub fn from_value(t: Tool, args: &Value) -> Result<Call, DriverError> {
        let Some(map) = args.as_object() else {
            return Err(invalid("arguments must be a JSON object"));
        };
        crate::validate::check_args(t.name(), args)?;
        let a = Args(map);
        Ok(match t {
            Tool::StartSession => Call::StartSession {
                input: match a.str("input") {
                    Some("takeover") => AskedInput::Takeover,
                    _ => AskedInput::Headless,
                },
                apps: a.strings("apps"),
                clipboard_read: a.bool("clipboard_read"),
                lease_s: a.u64("lease_s"),
            },
            Tool::GetSessionState => Call::GetSessionState,
            Tool::EndSession => Call::EndSession,
            Tool::HealthReport => Call::HealthReport,
            Tool::ListWindows => Call::ListWindows,
            Tool::GetWindowState => Call::GetWindowState(ReadArgs {
                target: a.target(),
                skeleton: a.bool("skeleton"),
                root: a.token("root")?,
                max_elements: a.u32("max_elements"),
                max_depth: a.u32("max_depth"),
                include_screenshot: a.bool("include_screenshot"),
                continue_from: match a.str("continue_from") {
                    None => None,
                    Some(c) => Some(Continuation::parse(c).ok_or_else(|| {
                        invalid(
                            "continue_from is not a continuation a read gave; pass the \
                             result's continue_from as it is, or read again",
                        )
                    })?),
                },
                result_form: match a.str("result_form") {
                    Some("text") => ResultForm::Text,
                    Some("structured") => ResultForm::Structured,
                    _ => ResultForm::Both,
                },
            }),
            Tool::Click => Call::Click(a.pointer()?),
            Tool::DoubleClick => Call::DoubleClick(a.pointer()?),
            Tool::RightClick => Call::RightClick(a.pointer()?),
            Tool::TypeText => Call::TypeText {
                token: a.required_token("element_token")?,
                text: a
                    .string("text")
                    .ok_or_else(|| invalid("text is required"))?,
                delivery: a.delivery(),
                observe: a.observe(),
            },
            Tool::SetValue => Call::SetValue {
                token: a.required_token("element_token")?,
                value: match a.get("value") {
                    Some(Value::String(s)) => NewValue::Text(s.clone()),
                    Some(v) => NewValue::Number(
                        v.as_f64()
                            .ok_or_else(|| invalid("value is a string or a number"))?,
                    ),
                    None => return Err(invalid("value is required")),
                },
                observe: a.observe(),
            },
            Tool::PressKey => Call::PressKey {
                key: a.string("key").ok_or_else(|| invalid("key is required"))?,
                observe: a.observe(),
            },
            Tool::Hotkey => Call::Hotkey {
                keys: a
                    .strings("keys")
                    .ok_or_else(|| invalid("keys is required"))?,
                observe: a.observe(),
            },
            Tool::Scroll => Call::Scroll {
                token: a.required_token("element_token")?,
                direction: match a.str("direction") {
                    Some("up") => Direction::Up,
                    Some("down") => Direction::Down,
                    Some("left") => Direction::Left,
                    Some("right") => Direction::Right,
                    _ => return Err(invalid("direction is up, down, left or right")),
                },
                amount: a.u32("amount").unwrap_or(3),
                observe: a.observe(),
            },
            Tool::Drag => Call::Drag {
                from: a.required_token("from_token")?,
                to: a.required_token("to_token")?,
                observe: a.observe(),
            },
            Tool::BringToFront => Call::BringToFront(a.target()),
            Tool::MoveCursor => Call::MoveCursor {
                token: a.token("element_token")?,
                x: a.i64("x"),
                y: a.i64("y"),
                scope: match a.str("scope") {
                    Some("desktop") => Scope::Desktop,
                    _ => Scope::Window,
                },
                duration_ms: a.u64("duration_ms").unwrap_or(0),
            },
            Tool::ClipboardRead => Call::ClipboardRead,
            Tool::ClipboardWrite => Call::ClipboardWrite {
                text: a
                    .string("text")
                    .ok_or_else(|| invalid("text is required"))?,
            },
            Tool::ListNotifications => Call::ListNotifications,
            Tool::DismissNotification => Call::DismissNotification,
            Tool::InvokeNotificationAction => Call::InvokeNotificationAction,
            Tool::WaitFor => {
                let role = a.string("role").filter(|r| !r.trim().is_empty());
                let name = a.string("name").filter(|n| !n.trim().is_empty());
                if role.is_none() && name.is_none() {
                    return Err(invalid("wait_for needs role or name"));
                }
                Call::WaitFor(WaitArgs {
                    target: a.target(),
                    role,
                    name,
                    until: match a.str("until") {
                        Some("appears") => Until::Appears,
                        Some("disappears") => Until::Disappears,
                        Some("changes") => Until::Changes,
                        _ => return Err(invalid("until is appears, disappears or changes")),
                    },
                    timeout_ms: a.u64("timeout_ms").unwrap_or(WAIT_DEFAULT_MS),
                })
            }
        })
    }

    /// Which tool this is.
    pub fn tool(&self) -> Tool {
        match self {
            Call::StartSession { .. } => Tool::StartSession,
            Call::GetSessionState => Tool::GetSessionState,
            Call::EndSession => Tool::EndSession,
            Call::HealthReport => Tool::HealthReport,
            Call::ListWindows => Tool::ListWindows,
            Call::GetWindowState(_) => Tool::GetWindowState,
            Call::Click(_) => Tool::Click,
            Call::DoubleClick(_) => Tool::DoubleClick,
            Call::RightClick(_) => Tool::RightClick,
            Call::TypeText { .. } => Tool::TypeText,
            Call::SetValue { .. } => Tool::SetValue,
            Call::PressKey { .. } => Tool::PressKey,
            Call::Hotkey { .. } => Tool::Hotkey,
            Call::Scroll { .. } => Tool::Scroll,
            Call::Drag { .. } => Tool::Drag,
            Call::BringToFront(_) => Tool::BringToFront,
            Call::MoveCursor { .. } => Tool::MoveCursor,
            Call::ClipboardRead => Tool::ClipboardRead,
            Call::ClipboardWrite { .. } => Tool::ClipboardWrite,
            Call::ListNotifications => Tool::ListNotifications,
            Call::DismissNotification => Tool::DismissNotification,
            Call::InvokeNotificationAction => Tool::InvokeNotificationAction,
            Call::WaitFor(_) => Tool::WaitFor,
        }
    }

    /// True when the call sends synthetic input (needs an active takeover, contract §4.1):
    /// foreground clicks and typing, keys, scrolls, drags, raising a window, moving the pointer.
    pub fn synthetic(&self) -> bool {
        match self {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => {
                p.delivery == Delivery::Foreground
            }
            Call::TypeText { delivery, .. } => *delivery == Delivery::Foreground,
            Call::PressKey { .. }
            | Call::Hotkey { .. }
            | Call::Scroll { .. }
            | Call::Drag { .. }
            | Call::BringToFront(_)
            | Call::MoveCursor { .. } => true,
            _ => false,
        }
    }

    /// The act's `observe`, when it asked for one.
    pub fn observe(&self) -> Option<Observe> {
        match self {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => p.observe,
            Call::TypeText { observe, .. }
            | Call::SetValue { observe, .. }
            | Call::PressKey { observe, .. }
            | Call::Hotkey { observe, .. }
            | Call::Scroll { observe, .. }
            | Call::Drag { observe, .. } => *observe,
            _ => None,
        }
    }

    /// Length in characters of the text the call carries (for the audit: lengths only).
    pub fn text_len(&self) -> Option<usize> {
        match self {
            Call::TypeText { text, .. } | Call::ClipboardWrite { text } => {
                Some(text.chars().count())
            }
            Call::SetValue {
                value: NewValue::Text(t),
                ..
            } => Some(t.chars().count()),
            _ => None,
        }
    }

    /// One call of every tool, with typical arguments (for tests of tables over tools).
    pub fn samples() -> Vec<Call> {
        let tok = Token::parse("s1:1").expect("a token");
        let p = |delivery| PointerArgs {
            token: tok.clone(),
            delivery,
            observe: None,
        };
        vec![
            Call::StartSession {
                input: AskedInput::Headless,
                apps: None,
                clipboard_read: false,
                lease_s: None,
            },
            Call::GetSessionState,
            Call::EndSession,
            Call::ListWindows,
            Call::GetWindowState(ReadArgs::default()),
            Call::Click(p(Delivery::Background)),
            Call::DoubleClick(p(Delivery::Background)),
            Call::RightClick(p(Delivery::Background)),
            Call::TypeText {
                token: tok.clone(),
                text: "x".into(),
                delivery: Delivery::Background,
                observe: None,
            },
            Call::SetValue {
                token: tok.clone(),
                value: NewValue::Number(1.0),
                observe: None,
            },
            Call::PressKey {
                key: "Return".into(),
                observe: None,
            },
            Call::Hotkey {
                keys: vec!["ctrl".into(), "s".into()],
                observe: None,
            },
            Call::Scroll {
                token: tok.clone(),
                direction: Direction::Down,
                amount: 3,
                observe: None,
            },
            Call::Drag {
                from: tok.clone(),
                to: tok.clone(),
                observe: None,
            },
            Call::BringToFront(WindowTarget::default()),
            Call::MoveCursor {
                token: Some(tok),
                x: None,
                y: None,
                scope: Scope::Window,
                duration_ms: 0,
            },
            Call::ClipboardRead,
            Call::ClipboardWrite { text: "x".into() },
            Call::ListNotifications,
            Call::DismissNotification,
            Call::InvokeNotificationAction,
            Call::HealthReport,
            Call::WaitFor(WaitArgs {
                target: WindowTarget::default(),
                role: Some("push_button".into()),
                name: None,
                until: Until::Appears,
                timeout_ms: WAIT_DEFAULT_MS,
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_enum_and_the_table_list_the_same_tools_in_the_same_order() {
        let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        let table: Vec<&str> = tools::TOOLS.iter().map(|d| d.name).collect();
        assert_eq!(names, table);
        for t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(*t));
        }
        let sampled: Vec<Tool> = Call::samples().iter().map(Call::tool).collect();
        assert_eq!(sampled, Tool::ALL);
    }

    #[test]
    fn calls_decode_typed_with_defaults() {
        let c = Call::decode(
            "click",
            r#"{"element_token": "s3:12", "delivery_mode": "foreground", "observe": {"tree": true}}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Call::Click(PointerArgs {
                token: Token::parse("s3:12").unwrap(),
                delivery: Delivery::Foreground,
                observe: Some(Observe {
                    tree: true,
                    screenshot: false
                }),
            })
        );
        assert!(c.synthetic());
        let c = Call::decode("scroll", r#"{"element_token": "s1:2", "direction": "up"}"#).unwrap();
        assert!(matches!(
            c,
            Call::Scroll {
                amount: 3,
                direction: Direction::Up,
                ..
            }
        ));
        let c = Call::decode("set_value", r#"{"element_token": "s1:2", "value": 7}"#).unwrap();
        assert!(matches!(c, Call::SetValue { value: NewValue::Number(v), .. } if v == 7.0));
        let c = Call::decode("get_window_state", r#"{"app": "Notes", "pid": null}"#).unwrap();
        assert!(
            matches!(&c, Call::GetWindowState(r) if r.target.app.as_deref() == Some("Notes") && r.target.pid.is_none())
        );
        assert!(
            !Call::decode("type_text", r#"{"element_token": "s1:2", "text": "x"}"#)
                .unwrap()
                .synthetic()
        );
    }

    #[test]
    fn bad_calls_are_refused_with_the_right_code() {
        let code = |t: &str, a: &str| Call::decode(t, a).unwrap_err().code;
        assert_eq!(code("takeover.resume", "{}"), ErrorCode::UnknownMethod);
        assert_eq!(code("click", "[1]"), ErrorCode::InvalidArguments);
        assert_eq!(code("click", "{not json"), ErrorCode::InvalidArguments);
        assert_eq!(
            code("click", r#"{"element_token": "s1-2"}"#),
            ErrorCode::InvalidArguments
        );
        assert_eq!(code("click", r#"{}"#), ErrorCode::InvalidArguments);
        assert_eq!(
            code("get_window_state", r#"{"skeleton": "true"}"#),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code(
                "scroll",
                r#"{"element_token": "s1:2", "direction": "sideways"}"#
            ),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code("wait_for", r#"{"app": "Notes", "until": "appears"}"#),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code(
                "wait_for",
                r#"{"name": "OK", "until": "appears", "timeout_ms": 99}"#
            ),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code(
                "wait_for",
                r#"{"name": "OK", "until": "appears", "timeout_ms": 30001}"#
            ),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code("wait_for", r#"{"name": "OK", "until": "soon"}"#),
            ErrorCode::InvalidArguments
        );
    }

    #[test]
    fn wait_for_decodes_with_its_default_bound() {
        let c = Call::decode(
            "wait_for",
            r#"{"app": "Notes", "name": "Saved", "until": "appears"}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Call::WaitFor(WaitArgs {
                target: WindowTarget {
                    app: Some("Notes".into()),
                    ..WindowTarget::default()
                },
                role: None,
                name: Some("Saved".into()),
                until: Until::Appears,
                timeout_ms: WAIT_DEFAULT_MS,
            })
        );
        assert_eq!(c.tool().class(), ToolClass::Read);
        assert!(!c.synthetic());
    }
}
