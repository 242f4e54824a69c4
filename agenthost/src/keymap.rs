//! The keyboard layout the compositor gives keys by, on a Wayland session: which keysyms the
//! driver's typing can send through the portal.
//!
//! mutter (and KWin) turn a `NotifyKeyboardKeysym` into a key of the current layout group:
//! the first key (in keycode order) and level that holds the keysym, pressed with Shift for
//! level 2 and with the ISO_Level3_Shift key for level 3. A keysym no key of the group has is
//! dropped with nothing said to the sender, and one found first at level 4 or above (or at
//! level 3 with no ISO_Level3_Shift key) is pressed without its modifiers: another character.
//! So before a takeover types, the broker reads the layout as any Wayland client gets it
//! (`wl_keyboard`'s `keymap` event: the compiled XKB keymap as text), on a connection
//! checked as the agents' are (`crate::handover::Opener::wayland_stream`), and
//! - refuses, before anything is sent, text with a character no key of the layout gives
//!   where the compositor can reach it, and key names likewise, when the layout has one group
//!   (with several, the group in use is not known to a client without the keyboard focus, and
//!   nothing is refused here);
//! - sends each character as the keysym the layout holds for it: a Russian layout's keys give
//!   `Cyrillic_a`, not the keysym of the Unicode character, and only the layout's own is
//!   found. Keypad keysyms never stand for a character (with Num Lock off they move the
//!   caret).
//!
//! The keymap comes from the compositor; it is still read as untrusted text: at most
//! [`MAX_KEYMAP`] bytes, from a memory file only, at most four groups, and a keymap not
//! understood is no keymap (the typing then goes as before: each character as its own
//! keysym, and a key the compositor drops stops the batch, see `crate::remote`).

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt as _;
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wayland_client::protocol::{wl_keyboard, wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle, WEnum};

/// Longest wait for the compositor's keymap.
pub const KEYMAP_TIMEOUT: Duration = Duration::from_millis(500);
/// The largest keymap read (a desktop's full keymap is about 60 KB).
pub const MAX_KEYMAP: u32 = 1 << 20;

/// The keysyms of a keyboard layout, by group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    groups: Vec<Group>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Group {
    /// Each keysym's level where the compositor finds it: its first key in keycode order
    /// ([`UNREACHED`] for a level that holds several keysyms: the key gives them all).
    first_level: HashMap<u32, usize>,
    /// The group's ISO_Level3_Shift is first at level 1 of a key (level 3 is reachable).
    level3: bool,
    /// For each character, the keysyms that type it, in the order first seen (keypad
    /// keysyms left out).
    chars: HashMap<char, Vec<u32>>,
}

/// `ISO_Level3_Shift`.
const LEVEL3_SHIFT: u32 = 0xfe03;
/// The level of a keysym the compositor cannot press alone.
const UNREACHED: usize = usize::MAX;

impl Group {
    /// The compositor reaches `sym`: it is on a key, first at a level it can press.
    fn reaches(&self, sym: u32) -> bool {
        self.first_level
            .get(&sym)
            .is_some_and(|&l| l <= 2 || (l == 3 && self.level3))
    }

    /// The compositor gives `sym` pressed in a combination as asked: at level 1, or, for a
    /// character, at a level it reaches (a character typed with its Shift is that character;
    /// a function or modifier key with Shift is another combination).
    fn reaches_key(&self, sym: u32) -> bool {
        self.first_level.get(&sym) == Some(&1)
            || (self.reaches(sym) && xkeysym::Keysym::from(sym).key_char().is_some())
    }

    /// A key of the group holds `sym` where the compositor would press another one for it.
    fn misplaces(&self, sym: u32, as_key: bool) -> bool {
        self.first_level.contains_key(&sym)
            && !(if as_key {
                self.reaches_key(sym)
            } else {
                self.reaches(sym)
            })
    }

    /// The keysym that types `c` here: `own` (the character's own keysym) when reached, else
    /// the first reached keysym that types it.
    fn keysym_for(&self, c: char, own: u32) -> Option<u32> {
        if self.reaches(own) {
            return Some(own);
        }
        self.chars
            .get(&c)?
            .iter()
            .copied()
            .find(|s| self.reaches(*s))
    }
}

impl Layout {
    /// The number of groups (layouts) of the keymap.
    #[cfg(test)]
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// The keysym to send for `c`, whose own keysym is `own`. With one group: the keysym the
    /// group reaches it by, `None` when it does not. With several (the one in use not known):
    /// the keysym every group that reaches it agrees on, else `own`; `None` when a group holds
    /// that keysym where the compositor would press another character for it (a group that
    /// does not hold it drops it, which stops the batch).
    pub fn keysym_for(&self, c: char, own: u32) -> Option<u32> {
        if let [g] = self.groups.as_slice() {
            return g.keysym_for(c, own);
        }
        let found: HashSet<u32> = self
            .groups
            .iter()
            .filter_map(|g| g.keysym_for(c, own))
            .collect();
        let sym = match found.len() {
            1 => found.into_iter().next()?,
            _ => own,
        };
        (!self.groups.iter().any(|g| g.misplaces(sym, false))).then_some(sym)
    }

    /// The compositor gives the key `keysym` as asked in a combination: with one group, the
    /// group reaches it so ([`Group::reaches_key`]); with several, no group holds it where it
    /// would press another key.
    pub fn has_key(&self, keysym: u32) -> bool {
        match self.groups.as_slice() {
            [g] => g.reaches_key(keysym),
            groups => !groups.iter().any(|g| g.misplaces(keysym, true)),
        }
    }
}

/// Reads the compositor's keymap through `stream` (connected to the compositor), waiting at
/// most [`KEYMAP_TIMEOUT`] for it; blocking.
pub fn read(stream: UnixStream) -> Result<Layout, String> {
    let text = fetch(stream, Instant::now() + KEYMAP_TIMEOUT)?;
    parse(&text).ok_or_else(|| "the keymap was not understood".to_string())
}

#[derive(Default)]
struct State {
    seat: Option<u32>,
    synced: u64,
    keymap: Option<Result<(OwnedFd, u32), String>>,
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name, interface, ..
        } = event
            && interface == "wl_seat"
            && state.seat.is_none()
        {
            state.seat = Some(name);
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<wl_keyboard::WlKeyboard, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_keyboard::WlKeyboard,
        event: wl_keyboard::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_keyboard::Event::Keymap { format, fd, size } = event
            && state.keymap.is_none()
        {
            state.keymap = Some(match format {
                WEnum::Value(wl_keyboard::KeymapFormat::XkbV1) => Ok((fd, size)),
                _ => Err("the compositor's keymap is not an XKB keymap".into()),
            });
        }
    }
}

impl Dispatch<wayland_client::protocol::wl_callback::WlCallback, u64> for State {
    fn event(
        state: &mut Self,
        _: &wayland_client::protocol::wl_callback::WlCallback,
        _: wayland_client::protocol::wl_callback::Event,
        token: &u64,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.synced = state.synced.max(*token);
    }
}

/// Dispatches `queue` until `done` or the deadline (also for [`crate::idle_watch`]).
pub(crate) fn wait<S>(
    conn: &Connection,
    queue: &mut EventQueue<S>,
    state: &mut S,
    deadline: Instant,
    done: impl Fn(&S) -> bool,
) -> Result<(), String> {
    conn.flush().map_err(|e| e.to_string())?;
    loop {
        queue.dispatch_pending(state).map_err(|e| e.to_string())?;
        if done(state) {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("the compositor did not answer in time".into());
        }
        if let Some(guard) = queue.prepare_read() {
            let mut fds = [PollFd::new(guard.connection_fd(), PollFlags::POLLIN)];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(n) if n > 0 => {
                    guard.read().map_err(|e| e.to_string())?;
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => drop(guard),
                Err(e) => return Err(format!("poll: {e}")),
            }
        }
    }
}

/// The keymap's text, as the compositor gives it to a new keyboard.
fn fetch(stream: UnixStream, deadline: Instant) -> Result<String, String> {
    let conn = Connection::from_socket(stream).map_err(|e| e.to_string())?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    let registry = conn.display().get_registry(&qh, ());
    let mut state = State::default();
    conn.display().sync(&qh, 1);
    wait(&conn, &mut queue, &mut state, deadline, |s| s.synced >= 1)?;
    let name = state.seat.ok_or("the compositor offers no seat")?;
    let seat: wl_seat::WlSeat = registry.bind(name, 1, &qh, ());
    let keyboard = seat.get_keyboard(&qh, ());
    conn.display().sync(&qh, 2);
    // The compositor sends a new keyboard its keymap before it answers the next sync.
    wait(&conn, &mut queue, &mut state, deadline, |s| {
        s.keymap.is_some() || s.synced >= 2
    })?;
    // The keyboard (version 1, no release request) goes with the connection.
    drop(keyboard);
    let (fd, size) = state
        .keymap
        .take()
        .ok_or("the compositor sent no keymap")??;
    if size > MAX_KEYMAP {
        return Err("the keymap is too large".into());
    }
    // A memory file (a memfd or tmpfs: only those answer for seals), as compositors send it:
    // never a pipe, a socket or a network file that could hold the read up.
    let st = nix::sys::stat::fstat(&fd).map_err(|e| format!("fstat: {e}"))?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG
        || nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GET_SEALS).is_err()
    {
        return Err("the keymap is not a memory file".into());
    }
    // Read at offsets: the compositor may hand every client the same open file, whose
    // position is shared.
    let file = std::fs::File::from(fd);
    let mut text = vec![0u8; size as usize];
    let mut got = 0usize;
    while got < text.len() {
        match file.read_at(&mut text[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the keymap: {e}")),
        }
    }
    text.truncate(got);
    // The text ends with a NUL byte.
    while text.last() == Some(&0) {
        text.pop();
    }
    String::from_utf8(text).map_err(|_| "the keymap is not text".into())
}

/// The layout a compiled XKB keymap's `xkb_symbols` section gives: for each group, the
/// keysyms of its keys at every level. `None` when the text has no symbols section, or a
/// keysym name is not known (the layout is then not known either).
pub fn parse(text: &str) -> Option<Layout> {
    let start = text.find("xkb_symbols")?;
    let body = &text[start..];
    let open = body.find('{')?;
    let body = &body[open + 1..];
    let mut groups: Vec<Group> = Vec::new();
    let mut named_groups = 0usize;
    let mut rest = body;
    loop {
        let at = rest.find(|c: char| !c.is_whitespace())?;
        rest = &rest[at..];
        if rest.starts_with('}') {
            break;
        }
        let (statement, after) = split_statement(rest)?;
        rest = after;
        let statement = statement.trim();
        if let Some(label) = statement.strip_prefix("name[") {
            let group = group_index(label.split(']').next()?)?;
            if !(1..=MAX_GROUPS).contains(&group) {
                return None;
            }
            named_groups = named_groups.max(group);
        } else if let Some(key) = statement.strip_prefix("key ") {
            let open = key.find('{')?;
            let inner = key[open + 1..].trim_end().strip_suffix('}')?;
            let mut unlabelled = 0usize;
            for entry in split_top(inner, ',') {
                let entry = entry.trim();
                let (group, list) = if entry.starts_with('[') {
                    unlabelled += 1;
                    (unlabelled, entry)
                } else if let Some(label) = entry.strip_prefix("symbols[") {
                    let (label, value) = label.split_once(']')?;
                    (
                        group_index(label)?,
                        value.trim_start().strip_prefix('=')?.trim(),
                    )
                } else {
                    continue;
                };
                if !(1..=MAX_GROUPS).contains(&group) {
                    return None;
                }
                let list = list.strip_prefix('[')?.strip_suffix(']')?;
                if groups.len() < group {
                    groups.resize_with(group, Group::default);
                }
                for (at, syms) in split_top(list, ',').into_iter().enumerate() {
                    let syms = syms.trim();
                    let several = syms.starts_with('{');
                    let syms = syms
                        .strip_prefix('{')
                        .and_then(|l| l.strip_suffix('}'))
                        .unwrap_or(syms);
                    for name in syms.split(',') {
                        let sym = keysym_from_name(name.trim())?;
                        if sym == 0 {
                            continue;
                        }
                        let g = &mut groups[group - 1];
                        if g.first_level.contains_key(&sym) {
                            continue;
                        }
                        g.first_level
                            .insert(sym, if several { UNREACHED } else { at + 1 });
                        let k = xkeysym::Keysym::from(sym);
                        if let Some(c) = k.key_char().filter(|_| !k.is_keypad_key()) {
                            g.chars.entry(c).or_default().push(sym);
                        }
                    }
                }
            }
        }
    }
    if groups.len() < named_groups {
        groups.resize_with(named_groups, Group::default);
    }
    for g in &mut groups {
        g.level3 = g.first_level.get(&LEVEL3_SHIFT) == Some(&1);
    }
    (!groups.is_empty()).then_some(Layout { groups })
}

/// The most groups a keymap has (XKB's limit).
const MAX_GROUPS: usize = 4;

/// `1` from `Group1` or `1`.
fn group_index(label: &str) -> Option<usize> {
    let label = label.trim();
    label
        .strip_prefix("Group")
        .unwrap_or(label)
        .parse::<usize>()
        .ok()
}

/// The byte positions of `sep` in `text` outside quotes and brackets, up to a closing bracket
/// with no opening one (the end of the block `text` lies in).
fn top_level(text: &str, sep: char) -> impl Iterator<Item = usize> + '_ {
    let (mut depth, mut quoted) = (0i32, false);
    text.char_indices()
        .map_while(move |(i, c)| {
            match c {
                '"' => quoted = !quoted,
                _ if quoted => {}
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => depth -= 1,
                _ if c == sep && depth == 0 => return Some(Some(i)),
                _ => {}
            }
            (depth >= 0).then_some(None)
        })
        .flatten()
}

/// The statement at the start of `text` (up to its `;` outside quotes and brackets), and the
/// text after it.
fn split_statement(text: &str) -> Option<(&str, &str)> {
    let i = top_level(text, ';').next()?;
    Some((&text[..i], &text[i + 1..]))
}

/// `text` split at `sep` outside quotes and brackets.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    for i in top_level(text, sep) {
        out.push(&text[from..i]);
        from = i + sep.len_utf8();
    }
    out.push(&text[from..]);
    out
}

/// The keysym a keymap names: a name of xkbcommon's table, `U` and a code point, or a number
/// (`0x...`). `None` for a name not known.
fn keysym_from_name(name: &str) -> Option<u32> {
    if name.is_empty() {
        return None;
    }
    if let Some(hex) = name.strip_prefix("0x") {
        return u32::from_str_radix(hex, 16).ok();
    }
    if let Some(&sym) = names().get(name) {
        return Some(sym);
    }
    let hex = name.strip_prefix('U')?;
    let u = u32::from_str_radix(hex, 16).ok()?;
    (hex.len() >= 4 && char::from_u32(u).is_some()).then(|| {
        if (0x20..0x7f).contains(&u) || (0xa0..=0xff).contains(&u) {
            u
        } else {
            0x0100_0000 + u
        }
    })
}

/// Every keysym name the table knows, built once: the legacy keysyms, the named ones of the
/// Unicode range, and the vendors' ranges.
fn names() -> &'static HashMap<String, u32> {
    static NAMES: OnceLock<HashMap<String, u32>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let ranges = [
            0..=0xffff,
            0x0100_0000..=0x0110_ffff,
            0x1000_0000..=0x1000_ffff,
            0x1004_0000..=0x1004_ffff,
            0x1005_0000..=0x1005_ffff,
            0x1006_0000..=0x1006_ffff,
            0x1007_0000..=0x1007_ffff,
            0x1008_0000..=0x1008_ffff,
        ];
        let mut m = HashMap::new();
        for sym in ranges.into_iter().flatten() {
            if let Some(n) = xkeysym::Keysym::from(sym).name() {
                // The table's names are the C macros': `XK_a`, `XF86XK_AudioMute`; a keymap
                // says `a`, `XF86AudioMute`.
                m.entry(n.replacen("XK_", "", 1)).or_insert(sym);
            }
        }
        m
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compiled keymap as an XKB compiler writes one (shortened): one group, keys with one
    /// level, two levels, an explicit type, actions, and several keysyms at a level.
    const US: &str = r#"xkb_keymap {
xkb_keycodes "evdev+aliases(qwerty)" {
	minimum = 8;
	<AE01> = 10;
};
xkb_types "complete" {
	type "ONE_LEVEL" { modifiers= none; level_name[1]= "Any"; };
};
xkb_symbols "pc+us+inet(evdev)" {
	name[Group1]="English (US)";
	key <ESC>                {	[          Escape ] };
	key <AE01>               {	[               1,          exclam ] };
	key <AE03>               {	[               3,      numbersign ] };
	key <AD01>               {	[               q,               Q ] };
	key <SPCE>               {	[           space ] };
	key <RTRN>               {	[          Return ] };
	key <LVL3>               {
		type= "ONE_LEVEL",
		symbols[Group1]= [ ISO_Level3_Shift ]
	};
	key <I120>               {	[     XF86AudioMute ] };
	key <LFSH>               {
		repeat= No,
		symbols[Group1]= [ Shift_L ],
		actions[Group1]= [ SetMods(modifiers=Shift,clearLocks) ]
	};
	key <AB10>               {	[           slash, { question, U2E2E } ] };
	modifier_map Shift { <LFSH> };
};
};
"#;

    #[test]
    fn a_one_group_layout_gives_its_characters_and_refuses_the_rest() {
        let l = parse(US).expect("parsed");
        assert_eq!(l.groups(), 1);
        assert_eq!(l.keysym_for('q', 'q' as u32), Some('q' as u32));
        assert_eq!(l.keysym_for('#', '#' as u32), Some('#' as u32));
        assert_eq!(l.keysym_for(' ', 0x20), Some(0x20));
        assert_eq!(l.keysym_for('/', '/' as u32), Some('/' as u32));
        // A level that holds two keysyms: its key gives both, so neither is reached.
        assert_eq!(l.keysym_for('?', '?' as u32), None);
        assert_eq!(l.keysym_for('⸮', 0x0100_2e2e), None);
        // Not on a key: refused.
        assert_eq!(l.keysym_for('é', 0xe9), None);
        assert_eq!(l.keysym_for('a', 'a' as u32), None);
        assert!(l.has_key(0xff0d), "Return");
        assert!(l.has_key(0xff1b), "Escape");
        assert!(l.has_key(0xffe1), "Shift_L, in a labelled entry");
        assert!(!l.has_key(0xffe3), "no Control_L here");
    }

    /// Two groups, English and Russian, as a desktop with two input sources compiles them.
    const US_RU: &str = r#"xkb_keymap {
xkb_symbols "pc+us+ru:2" {
	name[Group1]="English (US)";
	name[Group2]="Russian";
	key <AD01>               {
		symbols[Group1]= [               q,               Q ],
		symbols[Group2]= [     Cyrillic_shorti,     Cyrillic_SHORTI ]
	};
	key <AE01>               {
		symbols[Group1]= [               1,          exclam ],
		symbols[Group2]= [               1,          exclam ]
	};
};
};
"#;

    /// A German-like key with four levels (ß ? \ ¿), a keypad key, and no ISO_Level3_Shift key:
    /// what the compositor reaches and what it would press as another character.
    const LEVELS: &str = r#"xkb_keymap {
xkb_symbols "x" {
	name[Group1]="German";
	key <AE11>               {
		type= "FOUR_LEVEL_SEMIALPHABETIC",
		[          ssharp,        question,       backslash,    questiondown ]
	};
	key <KP1>                {	[          KP_End,            KP_1 ] };
	key <AE02>               {	[               2,        quotedbl ] };
	key <AC01>               {	[               a,               A ] };
	key <AC02>               {	[               s,               S,     ssharp ] };
};
};
"#;

    #[test]
    fn only_what_the_compositor_reaches_at_its_first_key_counts() {
        let l = parse(LEVELS).expect("parsed");
        assert_eq!(l.keysym_for('ß', 0xdf), Some(0xdf));
        assert_eq!(l.keysym_for('?', '?' as u32), Some('?' as u32));
        // Level 3 with no ISO_Level3_Shift key: pressed plain, it would type ß.
        assert_eq!(l.keysym_for('\\', '\\' as u32), None);
        // Level 4: never reached (the compositor presses it without modifiers).
        assert_eq!(l.keysym_for('¿', 0xbf), None);
        // The keypad's 1 is no character: with Num Lock off the key is End.
        assert_eq!(l.keysym_for('1', '1' as u32), None);
        assert!(l.has_key(0xffb1), "KP_1 for a combination");
        assert_eq!(l.keysym_for('2', '2' as u32), Some('2' as u32));
        // With an ISO_Level3_Shift key, level 3 is reached; level 4 still not.
        let with_l3 = LEVELS.replace(
            "	key <AE02>",
            "	key <LVL3>               {	[ ISO_Level3_Shift ] };\n	key <AE02>",
        );
        let l = parse(&with_l3).expect("parsed");
        assert_eq!(l.keysym_for('\\', '\\' as u32), Some('\\' as u32));
        assert_eq!(l.keysym_for('¿', 0xbf), None);
    }

    #[test]
    fn with_two_groups_nothing_is_refused_and_the_layout_s_keysym_is_sent() {
        let l = parse(US_RU).expect("parsed");
        assert_eq!(l.groups(), 2);
        // The legacy keysym the layout holds, not the Unicode one.
        assert_eq!(l.keysym_for('й', 0x0100_0439), Some(0x6ca));
        assert_eq!(l.keysym_for('q', 'q' as u32), Some('q' as u32));
        // In no group: the group in use is not known, so not refused here.
        assert_eq!(l.keysym_for('é', 0xe9), Some(0xe9));
        assert!(l.has_key(0xffe3));
        // Groups that hold different keysyms for a character: its own is sent.
        let differ = US_RU.replace("q,               Q ]", "q, U0439 ]");
        let l = parse(&differ).expect("parsed");
        assert_eq!(l.keysym_for('й', 0x0100_0439), Some(0x0100_0439));
    }

    #[test]
    fn a_group_that_would_press_another_character_refuses_it_whatever_the_group_in_use() {
        // English, and a German group with ¡ only at level 4 of its 1 key.
        let two = r#"xkb_symbols "x" {
	name[Group1]="English (US)";
	name[Group2]="German";
	key <AE01> {
		symbols[Group1]= [ 1, exclam ],
		symbols[Group2]= [ 1, exclam, onesuperior, exclamdown ]
	};
	key <LALT> { [ Alt_L, Meta_L ] };
};"#;
        let l = parse(two).expect("parsed");
        assert_eq!(l.groups(), 2);
        assert_eq!(l.keysym_for('1', '1' as u32), Some('1' as u32));
        // In the German group the compositor would press 1 for it.
        assert_eq!(l.keysym_for('¡', 0xa1), None);
        // In no group at all: its own keysym, which the compositor drops (the batch stops).
        assert_eq!(l.keysym_for('é', 0xe9), Some(0xe9));
        // Meta_L at level 2 of the Alt key: pressed as Shift+Alt, not as asked.
        assert!(l.has_key(0xffe9), "Alt_L");
        assert!(!l.has_key(0xffe7), "Meta_L");
        let one = parse(&two.replace("name[Group2]=\"German\";", "").replace(
            "		symbols[Group2]= [ 1, exclam, onesuperior, exclamdown ]\n",
            "",
        ))
        .expect("parsed");
        assert_eq!(one.groups(), 1);
        assert!(!one.has_key(0xffe7), "Meta_L, one group");
        assert!(
            one.has_key('!' as u32),
            "a character at level 2 is that character"
        );
    }

    #[test]
    fn a_keymap_past_the_group_limit_is_not_understood() {
        let many = "xkb_symbols \"x\" { name[Group100000000000]=\"x\"; key <A> { [ a ] }; };";
        assert_eq!(parse(many), None);
        let five = "xkb_symbols \"x\" { name[Group5]=\"x\"; key <A> { [ a ] }; };";
        assert_eq!(parse(five), None);
    }

    #[test]
    fn a_keymap_not_understood_is_no_layout() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("xkb_keymap { xkb_types \"x\" { }; };"), None);
        // A name the table does not know.
        let odd = US.replace("numbersign", "no_such_keysym_name");
        assert_eq!(parse(&odd), None);
        // Brackets out of order.
        assert_eq!(parse("xkb_symbols \"x\" { key <A> { [ a ] ] }; };"), None);
        // A fifth group.
        let five = "xkb_symbols \"x\" { key <A> { symbols[Group5]= [ a ] }; };";
        assert_eq!(parse(five), None);
    }

    #[test]
    fn keysym_names_are_those_of_the_table() {
        assert_eq!(keysym_from_name("a"), Some(0x61));
        assert_eq!(keysym_from_name("eacute"), Some(0xe9));
        assert_eq!(keysym_from_name("EuroSign"), Some(0x20ac));
        assert_eq!(keysym_from_name("Cyrillic_a"), Some(0x6c1));
        assert_eq!(keysym_from_name("Return"), Some(0xff0d));
        assert_eq!(keysym_from_name("XF86AudioMute"), Some(0x1008_ff12));
        assert_eq!(keysym_from_name("U0436"), Some(0x0100_0436));
        assert_eq!(keysym_from_name("0x1000436"), Some(0x0100_0436));
        assert_eq!(keysym_from_name("NoSymbol"), Some(0));
        assert_eq!(keysym_from_name("Unothex"), None);
        assert_eq!(keysym_from_name(""), None);
    }

    #[test]
    fn statements_and_lists_split_only_outside_quotes_and_brackets() {
        let text = r#"key <AB01> { [ a, "x;y", b ] }; name[Group1] = "a,b"; } rest;"#;
        let (first, after) = split_statement(text).expect("a statement");
        assert_eq!(first, r#"key <AB01> { [ a, "x;y", b ] }"#);
        let (second, after) = split_statement(after).expect("a second statement");
        assert_eq!(second, r#" name[Group1] = "a,b""#);
        // The block ends before the next `;`: no statement past it.
        assert_eq!(split_statement(after), None);
        assert_eq!(
            split_top(r#"a, [b, c], "d,e", f"#, ','),
            vec!["a", " [b, c]", r#" "d,e""#, " f"]
        );
        assert_eq!(split_top("a, b } c, d", ','), vec!["a", " b } c, d"]);
        assert_eq!(split_top("", ','), vec![""]);
    }
}
