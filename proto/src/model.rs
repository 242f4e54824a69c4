//! Desktop data shared by the broker and its agents: windows, walked accessibility trees,
//! element states, rectangles, element tokens and the escaping of untrusted app text.

use serde::{Deserialize, Serialize};

/// A rectangle in screen coordinates (pixels).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width.
    pub w: i32,
    /// Height.
    pub h: i32,
}

impl Rect {
    /// A rectangle from its parts.
    pub const fn new(x: i32, y: i32, w: i32, h: i32) -> Self {
        Rect { x, y, w, h }
    }

    /// True when `other` lies inside this rectangle (edges included), allowing `slack` pixels.
    pub fn contains_rect(&self, other: &Rect, slack: i32) -> bool {
        other.x >= self.x - slack
            && other.y >= self.y - slack
            && other.x + other.w <= self.x + self.w + slack
            && other.y + other.h <= self.y + self.h + slack
    }

    /// True when the two overlap by at least one pixel.
    pub fn meets(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    /// The same rectangle moved by (`dx`, `dy`).
    pub fn offset(&self, dx: i32, dy: i32) -> Rect {
        Rect {
            x: self.x + dx,
            y: self.y + dy,
            ..*self
        }
    }

    /// True when the point lies inside.
    pub fn contains_point(&self, x: i32, y: i32) -> bool {
        x >= self.x && y >= self.y && x < self.x + self.w && y < self.y + self.h
    }

    /// True when the rectangle has no area.
    pub fn is_empty(&self) -> bool {
        self.w <= 0 || self.h <= 0
    }

    /// The center point.
    pub fn center(&self) -> (i32, i32) {
        (self.x + self.w / 2, self.y + self.h / 2)
    }

    /// The overlap of two rectangles, if any.
    pub fn intersect(&self, o: &Rect) -> Option<Rect> {
        let x0 = self.x.max(o.x);
        let y0 = self.y.max(o.y);
        let x1 = (self.x + self.w).min(o.x + o.w);
        let y1 = (self.y + self.h).min(o.y + o.h);
        (x1 > x0 && y1 > y0).then(|| Rect::new(x0, y0, x1 - x0, y1 - y0))
    }
}

/// A top-level window as the window list reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowInfo {
    /// The X window id (the client window, not the window manager's frame).
    pub window_id: u64,
    /// The owning process (`_NET_WM_PID`, checked against the X server where possible).
    pub pid: u32,
    /// The app's own name (AT-SPI application name or WM_CLASS): untrusted app text.
    pub app: String,
    /// The window title: untrusted app text.
    pub title: String,
    /// Geometry in screen coordinates.
    pub frame: Rect,
    /// True for the window manager's active window.
    pub active: bool,
    /// True when mapped and not minimized.
    pub visible: bool,
    /// Position in the stacking order, 0 at the bottom.
    pub stacking: u32,
}

/// What identifies a process beyond its pid: pids are reused, start times are not.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcIdentity {
    /// The pid.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// The executable path (`/proc/<pid>/exe`), or empty when unreadable.
    pub exe: String,
}

macro_rules! states {
    ($( $(#[$doc:meta])* $v:ident = $bit:literal => $name:literal, )*) => {
        /// Element states the driver tracks (a subset of AT-SPI's, plus `secure`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[repr(u8)]
        pub enum State { $( $(#[$doc])* $v = $bit, )* }

        impl State {
            /// Every state.
            pub const ALL: &[State] = &[ $( State::$v, )* ];
            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self { $( State::$v => $name, )* }
            }
            /// Parses a wire name (or an AT-SPI name with `-` instead of `_`).
            pub fn from_name(s: &str) -> Option<State> {
                match s.replace('-', "_").as_str() { $( $name => Some(State::$v), )* _ => None }
            }
        }
    };
}

states! {
    /// The window or element is the active one.
    Active = 0 => "active",
    /// The element is busy.
    Busy = 1 => "busy",
    /// Checked (check box, radio, toggle).
    Checked = 2 => "checked",
    /// Can be checked.
    Checkable = 3 => "checkable",
    /// Collapsed (expandable and not expanded).
    Collapsed = 4 => "collapsed",
    /// Text can be edited.
    Editable = 5 => "editable",
    /// Enabled.
    Enabled = 6 => "enabled",
    /// Can expand.
    Expandable = 7 => "expandable",
    /// Expanded.
    Expanded = 8 => "expanded",
    /// Can take focus.
    Focusable = 9 => "focusable",
    /// Has the keyboard focus.
    Focused = 10 => "focused",
    /// Neither checked nor unchecked.
    Indeterminate = 11 => "indeterminate",
    /// Modal.
    Modal = 12 => "modal",
    /// Multi-line text.
    MultiLine = 13 => "multi_line",
    /// Allows several selected children.
    Multiselectable = 14 => "multiselectable",
    /// Pressed (toggle buttons).
    Pressed = 15 => "pressed",
    /// Read-only.
    ReadOnly = 16 => "read_only",
    /// Required form field.
    Required = 17 => "required",
    /// Can be selected.
    Selectable = 18 => "selectable",
    /// Selected.
    Selected = 19 => "selected",
    /// Sensitive (reacts to input).
    Sensitive = 20 => "sensitive",
    /// Showing on screen.
    Showing = 21 => "showing",
    /// Visible (may still be scrolled off).
    Visible = 22 => "visible",
    /// Invalid entry.
    InvalidEntry = 23 => "invalid_entry",
    /// A visited link.
    Visited = 24 => "visited",
    /// Has a popup.
    HasPopup = 25 => "has_popup",
    /// A password or otherwise secure field (driver-derived; never read or typed into).
    Secure = 26 => "secure",
    /// Manages its descendants (tables, trees): children may be created lazily.
    ManagesDescendants = 27 => "manages_descendants",
    /// Default button.
    IsDefault = 28 => "default",
    /// The value was withheld because it looks like a credential (contract §5.3); the row's
    /// value is `None`. Driver-derived, like `secure`.
    Redacted = 29 => "redacted",
}

/// A set of [`State`]s as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StateSet(pub u64);

impl StateSet {
    /// The empty set.
    pub const EMPTY: StateSet = StateSet(0);

    /// Adds a state.
    pub fn insert(&mut self, s: State) {
        self.0 |= 1 << (s as u8);
    }

    /// Removes a state.
    pub fn remove(&mut self, s: State) {
        self.0 &= !(1 << (s as u8));
    }

    /// True when the state is in the set.
    pub fn has(self, s: State) -> bool {
        self.0 & (1 << (s as u8)) != 0
    }

    /// A set from a list.
    pub fn of(list: &[State]) -> StateSet {
        let mut s = StateSet::EMPTY;
        for x in list {
            s.insert(*x);
        }
        s
    }

    /// Every state in the set.
    pub fn iter(self) -> impl Iterator<Item = State> {
        State::ALL.iter().copied().filter(move |s| self.has(*s))
    }

    /// The states a model needs, by name: everything unusual. `enabled`, `sensitive`,
    /// `showing`, `visible`, `focusable`, `selectable`, `checkable` and `expandable` are the
    /// normal case and left out; a disabled element says `disabled`, one that is not showing
    /// says `offscreen`.
    pub fn model_names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for s in self.iter() {
            match s {
                State::Enabled
                | State::Sensitive
                | State::Showing
                | State::Visible
                | State::Focusable
                | State::Selectable
                | State::Checkable
                | State::Expandable
                | State::ManagesDescendants => {}
                other => out.push(other.as_str()),
            }
        }
        if !self.has(State::Sensitive) && !self.has(State::Enabled) {
            out.push("disabled");
        }
        if !self.has(State::Showing) {
            out.push("offscreen");
        }
        out
    }
}

/// Which accessibility interfaces an element implements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ifaces(pub u16);

impl Ifaces {
    /// Action.
    pub const ACTION: u16 = 1;
    /// Text (read).
    pub const TEXT: u16 = 2;
    /// EditableText.
    pub const EDITABLE_TEXT: u16 = 4;
    /// Value.
    pub const VALUE: u16 = 8;
    /// Selection (on a container).
    pub const SELECTION: u16 = 16;
    /// Component (extents).
    pub const COMPONENT: u16 = 32;

    /// True when `bit` is set.
    pub fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
}

/// One element of a walked tree, in document order (row `N` of a snapshot).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Role name in snake_case (`push_button`, `check_box`, `page_tab`, `document_web`).
    pub role: String,
    /// The accessible name, raw: untrusted app text, escaped only when rendered.
    pub name: String,
    /// The accessible description, raw: app text like the name (GTK gives a tooltip as the
    /// description, Chromium `aria-description` or a `title` the name does not use). The
    /// broker's approval judge reads it and a host's approval request shows it; the model's
    /// reads do not ([`crate::lexicon`]).
    pub description: String,
    /// Of a field: the object attributes that say what it takes (a search, a URL:
    /// [`crate::lexicon::FIELD_ATTRIBUTES`], values cut to
    /// [`crate::lexicon::fields::ATTR_VALUE_MAX_CHARS`]); empty for anything else.
    pub field_attrs: Vec<(String, String)>,
    /// States.
    pub states: StateSet,
    /// The value (text contents or a number); always `None` for secure fields and for values
    /// withheld as credential-looking (`State::Redacted`).
    pub value: Option<String>,
    /// Action names.
    pub actions: Vec<String>,
    /// Extents in screen coordinates, when the element has them.
    pub frame: Option<Rect>,
    /// Row of the parent, `None` for the window itself (row 0).
    pub parent: Option<u32>,
    /// Depth below the window (the window is 0).
    pub depth: u16,
    /// Children listed in the walk.
    pub child_count: u32,
    /// Interfaces implemented.
    pub ifaces: Ifaces,
    /// The backend's own address of the element (an AT-SPI `bus:path`, a mock id). Opaque to
    /// the broker, which only passes it back to the agent that acts.
    pub handle: String,
}

impl Node {
    /// True for password and other secure fields.
    pub fn is_secure(&self) -> bool {
        self.states.has(State::Secure) || self.role == "password_text"
    }
}

/// Roles that take typed text or a typed number (a PIN or a card code in a web page's
/// `<input type=number>` is a spin button).
pub fn is_text_input_role(role: &str) -> bool {
    matches!(
        role,
        "entry" | "text" | "password_text" | "autocomplete" | "spin_button" | "editbar"
    )
}

/// A field: editable, or of a role that takes typed text (a read-only field too). Every field
/// of an application whose secure fields no longer fit the memory counts as secure.
pub fn is_field(role: &str, states: StateSet, ifaces: Ifaces) -> bool {
    states.has(State::Editable) || ifaces.has(Ifaces::EDITABLE_TEXT) || is_text_input_role(role)
}

/// Rows inside a secure field carry nothing of it: a field whose text lives in child rows (an
/// editable region whose paragraphs are children, say) would otherwise show its secret as their
/// names. Every descendant of a secure row (rows in document order, parents first) loses its
/// name, description and value and is marked secure itself; the structure stays as it is.
pub fn hide_inside_secure(nodes: &mut [Node]) {
    for i in 0..nodes.len() {
        let inside = nodes[i]
            .parent
            .map(|p| p as usize)
            .filter(|p| *p < i)
            .is_some_and(|p| nodes[p].is_secure());
        if inside {
            let n = &mut nodes[i];
            n.name.clear();
            n.description.clear();
            n.value = None;
            n.states.insert(State::Secure);
        }
        if nodes[i].is_secure() {
            nodes[i].value = None;
        }
    }
}

/// Most objects a settle names in a settle report's `changed` list
/// (`wire::reader::SettleReport`); with more, it names none.
pub const MAX_CHANGED: usize = 32;

/// A window's rows after a change from the rows before it (`before`: the rows re-read right
/// before an act while the app's events were watched, or a kept walk) and the objects that sent
/// events since, read again (`fresh`, one slot per handle of `changed`): their names,
/// descriptions, states, values and field attributes replace the rows'. `None`, so that the
/// whole window is read, when an object could not be read or is not a row, or when its role or
/// interfaces changed or it started or stopped showing (the rows a walk lists would change). Frames and action names stay those of the rows before.
///
/// With `details`, the objects were read with their extents and action names, and those replace
/// the rows' too. A row whose secure state changed is never merged (a field that turned secure
/// may have rows inside it that hold text).
pub fn merge_changed(
    before: &[Node],
    changed: &[String],
    fresh: Vec<Option<Node>>,
    details: bool,
) -> Option<Vec<Node>> {
    // What the reader named is bounded and without repeats, or not used.
    let unique: std::collections::HashSet<&str> = changed.iter().map(String::as_str).collect();
    if fresh.len() != changed.len() || changed.len() > MAX_CHANGED || unique.len() != changed.len()
    {
        return None;
    }
    let rows: std::collections::HashMap<&str, usize> = before
        .iter()
        .enumerate()
        .map(|(i, n)| (n.handle.as_str(), i))
        .collect();
    let mut nodes = before.to_vec();
    let shown = |n: &Node| (n.states.has(State::Showing), n.states.has(State::Visible));
    for (h, f) in changed.iter().zip(fresh) {
        let f = f?;
        let row = *rows.get(h.as_str())?;
        let n = &mut nodes[row];
        if f.handle != *h
            || f.role != n.role
            || f.ifaces != n.ifaces
            || shown(&f) != shown(n)
            || f.is_secure() != n.is_secure()
        {
            return None;
        }
        n.name = f.name;
        n.description = f.description;
        n.states = f.states;
        n.value = f.value;
        n.field_attrs = f.field_attrs;
        if details {
            n.frame = f.frame;
            n.actions = f.actions;
        }
    }
    Some(nodes)
}

/// Why a walk stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TruncReason {
    /// More than the element cap.
    MaxElements,
    /// Deeper than the depth cap.
    MaxDepth,
    /// The time budget ran out.
    TimeBudget,
    /// The app stopped answering part-way.
    AppNotResponding,
    /// The reader's own cut of an app too large to read whole in the time budget (its
    /// whole-tree calls too slow for it): the window was read breadth-first, its top structure
    /// first, a bounded number of children per container.
    AppTooLarge,
}

impl TruncReason {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            TruncReason::MaxElements => "max_elements",
            TruncReason::MaxDepth => "max_depth",
            TruncReason::TimeBudget => "time_budget",
            TruncReason::AppNotResponding => "app_not_responding",
            TruncReason::AppTooLarge => "app_too_large",
        }
    }
}

/// A whole window's walked tree (at most [`WALK_MAX_ELEMENTS`] rows).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// The window.
    pub window: WindowInfo,
    /// Rows in document order; row 0 is the window's frame accessible.
    pub nodes: Vec<Node>,
    /// Set when the walk stopped early.
    pub truncated: Option<TruncReason>,
}

/// Most elements one walk reads.
pub const WALK_MAX_ELEMENTS: usize = 5000;
/// Deepest level one walk reads.
pub const WALK_MAX_DEPTH: u16 = 200;
/// Most bytes a default full or root read's result carries (no `max_elements` given) (an extension: `truncated_reason`
/// `max_bytes`). About 20,000 tokens at 4 bytes a token, under what hosts pass to a model
/// (some cut tool results near 25,000 tokens); counted as each row's element JSON plus its
/// escaped text line twice (the text content and `tree_text` both carry it).
pub const READ_MAX_BYTES: usize = 80_000;
/// Time budget of one walk, in milliseconds.
pub const WALK_BUDGET_MS: u64 = 2500;
/// Children per container a bounded walk reads (an application too large for its whole-tree
/// calls: [`TruncReason::AppTooLarge`]).
pub const BOUNDED_CHILDREN: usize = 100;
/// The share of its budget (in percent) within which a bounded walk answers.
pub const BOUNDED_SHARE: u32 = 60;

/// Escapes untrusted text for a one-line rendering and cuts it to at most `max_chars`
/// characters, escapes and the ellipsis included.
///
/// Backslash, double quote and control characters are escaped (`\\`, `\"`, `\n`, `\t`,
/// `\u{..}`); bidi overrides and other format characters are escaped too, so app text cannot
/// fake line structure or reorder what the model reads. A cut string ends with `…` (counted in
/// `max_chars`), and an escape is never split.
pub fn escape_clip(s: &str, max_chars: usize) -> String {
    let mut out = String::new();
    // Characters in `out`, and the byte length of `out` when it last left room for the `…`.
    let mut count = 0usize;
    let mut room_for_ellipsis = 0usize;
    let mut piece = String::new();
    for c in s.chars() {
        piece.clear();
        match c {
            '\\' => piece.push_str("\\\\"),
            '"' => piece.push_str("\\\""),
            '\n' => piece.push_str("\\n"),
            '\r' => piece.push_str("\\r"),
            '\t' => piece.push_str("\\t"),
            c if c.is_control() || is_format_char(c) => {
                piece.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => piece.push(c),
        }
        let n = piece.chars().count();
        if count + n > max_chars {
            out.truncate(room_for_ellipsis);
            if max_chars > 0 {
                out.push('…');
            }
            return out;
        }
        out.push_str(&piece);
        count += n;
        if count < max_chars {
            room_for_ellipsis = out.len();
        }
    }
    out
}

fn is_format_char(c: char) -> bool {
    matches!(c as u32,
        0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2069 | 0xFEFF | 0x00AD)
}

/// An element token `<snapshot_id>:<N>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    /// The snapshot.
    pub snapshot_id: String,
    /// The row.
    pub index: u32,
}

impl Token {
    /// Parses `<snapshot_id>:<N>`; the id is 1 to 32 ASCII letters and digits.
    pub fn parse(s: &str) -> Option<Token> {
        let (id, n) = s.split_once(':')?;
        if id.is_empty() || id.len() > 32 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        if n.is_empty() || n.len() > 6 || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Token {
            snapshot_id: id.to_string(),
            index: n.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.snapshot_id, self.index)
    }
}

/// Where a cut full or root read resumes (`continue_from`, an extension beyond contract 0.8):
/// `<snapshot_id>/<view>/<row>/<max_depth>`, e.g. `s3/full/412/25` or `s3/root7/90/25`. It
/// carries numbers only, no application text: the snapshot the rows come from, the view
/// (`full`, or `root` with the root's row), the first row not yet returned and the depth the
/// read was cut to, so the next page has the same rows in the same order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Continuation {
    /// The snapshot.
    pub snapshot_id: String,
    /// The root's row of a root (drill-down) read; `None` for a full read.
    pub root: Option<u32>,
    /// The first row the next page may return (document order).
    pub next: u32,
    /// The depth the read was cut to.
    pub max_depth: u32,
}

impl Continuation {
    /// Longest continuation, in bytes.
    pub const MAX_LEN: usize = 64;

    /// Parses `<snapshot_id>/<full|rootN>/<row>/<max_depth>`.
    pub fn parse(s: &str) -> Option<Continuation> {
        if s.len() > Self::MAX_LEN {
            return None;
        }
        let mut parts = s.split('/');
        let (id, view, next, depth) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let number = |n: &str| -> Option<u32> {
            if n.is_empty() || n.len() > 6 || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n.parse().ok()
        };
        let token = Token::parse(&format!("{id}:{}", number(next)?))?;
        let root = match view {
            "full" => None,
            v => Some(number(v.strip_prefix("root")?)?),
        };
        Some(Continuation {
            snapshot_id: token.snapshot_id,
            root,
            next: token.index,
            max_depth: number(depth)?,
        })
    }
}

impl std::fmt::Display for Continuation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.root {
            None => write!(
                f,
                "{}/full/{}/{}",
                self.snapshot_id, self.next, self.max_depth
            ),
            Some(r) => write!(
                f,
                "{}/root{r}/{}/{}",
                self.snapshot_id, self.next, self.max_depth
            ),
        }
    }
}

/// Normalizes an AT-SPI role name (`push button`, `page-tab`) to the wire's snake_case.
pub fn normalize_role(role: &str) -> String {
    role.trim().to_ascii_lowercase().replace([' ', '-'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuations_parse_and_print_back() {
        for s in ["s3/full/412/25", "s12/root7/90/200", "a1/root0/0/1"] {
            let c = Continuation::parse(s).expect(s);
            assert_eq!(c.to_string(), s);
        }
        let c = Continuation::parse("s3/root7/90/25").unwrap();
        assert_eq!(
            (c.snapshot_id.as_str(), c.root, c.next, c.max_depth),
            ("s3", Some(7), 90, 25)
        );
        for bad in [
            "",
            "s3",
            "s3:12",
            "s3/full/12",
            "s3/full/12/25/1",
            "s3/part/12/25",
            "s3/root/12/25",
            "s3/rootx/12/25",
            "s3/full/-1/25",
            "s3/full/1234567/25",
            "s-3/full/1/25",
            "/full/1/25",
            "s3/full/1/",
            "s3/full/1/25 ",
            "s3/full/\u{ff11}/25",
        ] {
            assert_eq!(Continuation::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Continuation::parse(&"s".repeat(70)), None);
    }

    #[test]
    fn escape_clips_and_escapes() {
        assert_eq!(escape_clip("a\"b\\c\nd", 80), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_clip("abcdef", 3), "ab…");
        assert_eq!(escape_clip("abc", 3), "abc");
        assert_eq!(escape_clip("x\u{202e}y", 10), "x\\u{202e}y");
        // An escape is never split: it goes whole or not at all.
        assert_eq!(escape_clip("ab\"c", 4), "ab…");
        assert_eq!(escape_clip("a\"", 3), "a\\\"");
        assert_eq!(escape_clip("abc", 0), "");
        assert_eq!(escape_clip("abc", 1), "…");
    }

    #[test]
    fn clipped_text_is_never_longer_than_asked() {
        let long = "é\"\n\u{202e}x".repeat(60);
        for max in [0usize, 1, 2, 5, 64, 80, 81, 120] {
            let out = escape_clip(&long, max);
            let n = out.chars().count();
            assert!(n <= max, "{max}: {n}");
            // Cut only as far as a whole escape (at most 8 characters) needs.
            assert!(n + 8 >= max, "{max}: {n}");
        }
        let label = "x".repeat(200);
        assert_eq!(escape_clip(&label, 80).chars().count(), 80);
        assert!(escape_clip(&label, 80).ends_with('…'));
        assert_eq!(escape_clip(&"y".repeat(80), 80), "y".repeat(80));
    }

    #[test]
    fn rows_inside_a_secure_field_carry_nothing() {
        let node = |role: &str, name: &str, parent: Option<u32>| Node {
            role: role.into(),
            name: name.into(),
            description: String::new(),
            field_attrs: vec![],
            states: StateSet::EMPTY,
            value: Some(name.into()),
            actions: vec![],
            frame: None,
            parent,
            depth: 0,
            child_count: 0,
            ifaces: Ifaces::default(),
            handle: String::new(),
        };
        let mut nodes = vec![
            node("frame", "w", None),
            node("entry", "Password", Some(0)),
            node("paragraph", "hunter2", Some(1)),
            node("static", "hunter2", Some(2)),
            node("label", "Name", Some(0)),
        ];
        nodes[1].states.insert(State::Secure);
        hide_inside_secure(&mut nodes);
        assert_eq!(nodes[1].value, None);
        for n in &nodes[2..4] {
            assert!(n.is_secure() && n.name.is_empty() && n.value.is_none());
        }
        assert_eq!(nodes[4].name, "Name");
        assert!(!nodes[4].is_secure());
    }

    #[test]
    fn tokens_round_trip() {
        let t = Token::parse("s12:345").unwrap();
        assert_eq!(t.snapshot_id, "s12");
        assert_eq!(t.index, 345);
        assert_eq!(t.to_string(), "s12:345");
        for bad in ["", ":1", "s1:", "s1:x", "s:1:2", "s-1:2", "s1:1234567"] {
            assert!(Token::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn model_state_names() {
        let s = StateSet::of(&[
            State::Enabled,
            State::Sensitive,
            State::Showing,
            State::Checked,
        ]);
        assert_eq!(s.model_names(), vec!["checked"]);
        let d = StateSet::of(&[State::Visible]);
        assert_eq!(d.model_names(), vec!["disabled", "offscreen"]);
    }

    #[test]
    fn roles_normalize() {
        assert_eq!(normalize_role("push button"), "push_button");
        assert_eq!(normalize_role("Page-Tab List"), "page_tab_list");
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn node(handle: &str, name: &str, states: &[State]) -> Node {
        let mut set = StateSet::default();
        for s in states {
            set.insert(*s);
        }
        Node {
            role: "check_box".into(),
            name: name.into(),
            description: String::new(),
            field_attrs: vec![],
            states: set,
            value: None,
            actions: vec!["click".into()],
            frame: Some(Rect::new(1, 2, 3, 4)),
            parent: None,
            depth: 0,
            child_count: 0,
            ifaces: Ifaces(0),
            handle: handle.into(),
        }
    }

    fn before() -> Vec<Node> {
        vec![
            node("a|/0", "Window", &[State::Showing, State::Visible]),
            node("a|/1", "Bold", &[State::Showing, State::Visible]),
            node("a|/2", "Status", &[State::Showing, State::Visible]),
        ]
    }

    #[test]
    fn the_objects_read_again_replace_their_rows_names_states_and_values_only() {
        let b = before();
        let mut fresh = node(
            "a|/1",
            "Bold!",
            &[State::Showing, State::Visible, State::Checked],
        );
        fresh.frame = None;
        fresh.actions = vec![];
        let out = merge_changed(&b, &["a|/1".to_string()], vec![Some(fresh)], false).unwrap();
        assert_eq!(out[1].name, "Bold!");
        assert!(out[1].states.has(State::Checked));
        assert_eq!(out[1].frame, b[1].frame, "the frame is kept");
        assert_eq!(out[1].actions, b[1].actions, "the actions are kept");
        assert_eq!(out[2], b[2], "a row that sent no event is as it was");
    }

    #[test]
    fn anything_the_rows_cannot_show_reads_the_window_whole() {
        let b = before();
        let h = |s: &str| s.to_string();
        let same = || Some(node("a|/1", "Bold", &[State::Showing, State::Visible]));
        // An object not read, or not a row.
        assert!(merge_changed(&b, &[h("a|/1")], vec![None], false).is_none());
        assert!(merge_changed(&b, &[h("a|/9")], vec![same()], false).is_none());
        // A slot for another handle than asked.
        assert!(merge_changed(&b, &[h("a|/2")], vec![same()], false).is_none());
        // Role changed; started or stopped showing.
        let mut role = same().unwrap();
        role.role = "push_button".into();
        assert!(merge_changed(&b, &[h("a|/1")], vec![Some(role)], false).is_none());
        let hidden = node("a|/1", "Bold", &[State::Visible]);
        assert!(merge_changed(&b, &[h("a|/1")], vec![Some(hidden)], false).is_none());
        // A reader naming an object twice, or more than it may, or slots not matching.
        assert!(merge_changed(&b, &[h("a|/1"), h("a|/1")], vec![same(), same()], false).is_none());
        let many: Vec<String> = (0..=MAX_CHANGED).map(|i| format!("a|/{i}")).collect();
        let slots = many.iter().map(|_| same()).collect();
        assert!(merge_changed(&b, &many, slots, false).is_none());
        assert!(merge_changed(&b, &[h("a|/1")], vec![same(), same()], false).is_none());
        // A row that turned secure (rows inside it may hold text).
        let secure = node(
            "a|/1",
            "Bold",
            &[State::Showing, State::Visible, State::Secure],
        );
        assert!(merge_changed(&b, &[h("a|/1")], vec![Some(secure)], false).is_none());
    }

    #[test]
    fn with_details_the_frames_and_action_names_read_again_replace_the_rows_too() {
        let b = before();
        let mut fresh = node("a|/1", "Bold", &[State::Showing, State::Visible]);
        fresh.frame = Some(Rect::new(5, 6, 7, 8));
        fresh.actions = vec!["uncheck".into()];
        let out =
            merge_changed(&b, &["a|/1".to_string()], vec![Some(fresh.clone())], true).unwrap();
        assert_eq!(out[1].frame, fresh.frame);
        assert_eq!(out[1].actions, fresh.actions);
        let out = merge_changed(&b, &["a|/1".to_string()], vec![Some(fresh)], false).unwrap();
        assert_eq!(
            out[1].frame, b[1].frame,
            "without details the frame is kept"
        );
    }
}
