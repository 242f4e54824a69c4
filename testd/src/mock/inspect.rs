//! What contract tests set up on the fake desktop and look at afterwards.

use super::*;

impl MockBackend {
    /// Keeps plain reads' walks from now on (see the field).
    pub fn keep_walks(&self) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(Default::default());
    }

    /// How fresh each light read (an act's re-check) so far asked to be.
    pub fn light_freshness(&self) -> Vec<Freshness> {
        self.light_freshness
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    /// Renames the first element named `from` to `to`, as an app that sends no event for it.
    pub fn rename_silently(&self, from: &str, to: &str) {
        let mut d = self.desk();
        if let Some(e) = d.els.iter_mut().find(|e| e.name == from) {
            e.name = to.to_string();
        }
    }

    /// Lays a panel named `panel` over the first element named `covered` (a little larger, so
    /// the panel's centre lies on it), as the last child of its window: a container whose
    /// centre lies on a button. A click there reaches the button.
    pub fn cover_with_panel(&self, covered: &str, panel: &str) {
        let mut d = self.desk();
        let Some(id) = d.els.iter().position(|e| e.name == covered) else {
            return;
        };
        let Some((w, f)) = d.laid_out(id) else {
            return;
        };
        let p = d.add(Some(w.root), "panel", panel);
        d.els[p].frame = Some(Rect::new(f.x - 4, f.y - 1, f.w + 8, f.h + 2));
    }

    /// Puts a button named `name` inside the first entry named `field`, on the field's centre
    /// (a page's button inside its editable area): a click on the field's centre reaches the
    /// button.
    pub fn put_button_inside(&self, field: &str, name: &str) {
        let mut d = self.desk();
        let Some(id) = d
            .els
            .iter()
            .position(|e| e.name == field && e.role == "entry")
        else {
            return;
        };
        let Some((_, f)) = d.laid_out(id) else {
            return;
        };
        let b = d.add(Some(id), "push_button", name);
        let (cx, cy) = f.center();
        d.els[b].frame = Some(Rect::new(cx - 10, cy - 5, 20, 10));
        d.els[b].actions = vec!["click"];
        d.els[b].ifaces |= Ifaces::ACTION;
    }

    /// Adds a menu item named `name` to the window titled `title` that pastes the clipboard
    /// into the focused field when activated (a menu's Paste).
    pub fn add_paste_item(&self, title: &str, name: &str) {
        let mut d = self.desk();
        let Some(root) = d.windows.iter().find(|w| w.title == title).map(|w| w.root) else {
            return;
        };
        let menu = d.add(Some(root), "menu", "Edit");
        let item = d.add(Some(menu), "menu_item", name);
        // On frames of their own, right of Notes' form below its Shop panel: laid out by their
        // rows they would lie past the window's bottom.
        let at = d.win_of_root(root).map(|w| w.frame).unwrap_or_default();
        d.els[menu].frame = Some(Rect::new(at.x + 300, at.y + 380, 220, 60));
        d.els[item].frame = Some(Rect::new(at.x + 310, at.y + 390, 200, 24));
        d.els[item].actions = vec!["click"];
        d.els[item].ifaces |= Ifaces::ACTION;
        d.els[item].behavior = Behavior::Paste;
    }

    /// The value the app gives the first element named `name` that has one, now (tests check
    /// that a refused act put nothing into a field).
    pub fn value_of(&self, name: &str) -> Option<String> {
        self.desk()
            .els
            .iter()
            .find(|e| e.name == name && e.value.is_some())
            .and_then(|e| e.value.clone())
    }

    /// Gives the keyboard focus to the first element named `name`, as the app may by itself.
    pub fn focus_named(&self, name: &str) {
        let mut d = self.desk();
        if let Some(id) = d.els.iter().position(|e| e.name == name) {
            d.focus(id);
        }
    }

    /// Opens a window titled `title` of a new process that runs `exe` and calls its app
    /// `app`, on top of every other and holding the keyboard focus, as a dialog that asks for
    /// the person's passphrase and answer would: a secure field named Passphrase and an Allow
    /// button. Returns the process's pid and the window's id.
    pub fn add_prompt_window(
        &self,
        app: &'static str,
        title: &'static str,
        exe: &str,
    ) -> (u32, u64) {
        let mut d = self.desk();
        let pid = d.procs.iter().map(|p| p.pid).max().unwrap_or(4100) + 1;
        d.procs.push(ProcIdentity {
            pid,
            start_time: u64::from(pid) * 7,
            exe: exe.into(),
        });
        let window_id = 0x0070_0000 + u64::from(pid);
        let root = d.add(None, "dialog", title);
        let pw = d.add(Some(root), "password_text", "Passphrase");
        d.els[pw].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
        d.els[pw].value = Some(String::new());
        d.els[pw].states.insert(State::Editable);
        d.els[pw].states.insert(State::Secure);
        d.button(root, "Allow", Behavior::Status("Allowed"));
        let status = d.add(Some(root), "label", "Waiting for an answer");
        d.windows.push(Win {
            window_id,
            pid,
            app,
            title,
            frame: Rect::new(380, 300, 420, 240),
            root,
            status: Some(status),
            list: None,
            entry: None,
        });
        d.active = window_id;
        d.focus(pw);
        (pid, window_id)
    }

    /// The status line of the window `window_id` (what its buttons last did), when it has one.
    pub fn status_of(&self, window_id: u64) -> Option<String> {
        let d = self.desk();
        let s = d.win(window_id)?.status?;
        Some(d.els[s].name.clone())
    }

    /// The element that has the keyboard focus now, by name.
    pub fn focused_name(&self) -> Option<String> {
        let d = self.desk();
        d.focused.map(|f| d.els[f].name.clone())
    }

    /// Moves the window titled `title` by (`dx`, `dy`), as the person or another program
    /// could: no accessibility event says so.
    pub fn move_window(&self, title: &str, dx: i32, dy: i32) {
        let mut d = self.desk();
        if let Some(w) = d.windows.iter_mut().find(|w| w.title == title) {
            w.frame.x += dx;
            w.frame.y += dy;
        }
    }

    /// Whole reads of a window with details (frames) so far.
    pub fn full_reads(&self) -> usize {
        self.full_reads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The `keep` of each plain read so far (the mock keeps no walk: it always walks).
    pub fn read_freshness(&self) -> Vec<Freshness> {
        self.read_freshness
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    /// Walks `window` now, leaving the kept walk as it is (whole reads with details counted).
    pub(super) fn walk_now(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Tree, DriverError> {
        if limits.details {
            self.full_reads
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let d = self.desk();
        let (i, w) = d
            .windows
            .iter()
            .enumerate()
            .find(|(_, w)| w.window_id == window.window_id)
            .ok_or_else(|| {
                DriverError::new(ErrorCode::WindowTargetNotFound, "the window is gone")
            })?;
        let (nodes, _, truncated) = d.walk(w, limits);
        Ok(Tree {
            window: d.window_info(w, i),
            nodes,
            truncated,
        })
    }

    /// The handle of the element the last semantic act was on.
    pub(super) fn acted_on(&self) -> Option<String> {
        self.last_acted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Objects read again after a settle named them ([`Backend::read_objects`]) so far.
    pub fn objects_read(&self) -> usize {
        self.objects_read.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The window's rows as a watch sees them.
    pub(super) fn seen_rows(&self, window: &WindowInfo) -> Vec<Seen> {
        let d = self.desk();
        d.windows
            .iter()
            .find(|w| w.window_id == window.window_id)
            .map(|w| {
                d.walk(w, WalkLimits::default())
                    .0
                    .into_iter()
                    .map(|n| (n.handle, n.name, n.states, n.value))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sets how the fake apps send events around an act.
    pub fn set_events(&self, e: MockEvents) {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = e;
    }

    /// Event watches begun and settles asked so far.
    pub fn watches_and_settles(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.watches.load(SeqCst), self.settles.load(SeqCst))
    }

    /// Reports a call of the input agent's that the broker's D-Bus filter refused, as the
    /// Linux backend does (tests of the audit).
    pub fn call_refused(&self, r: nish_decider::backend::Refused) {
        let _ = self.events_tx.send(BackendEvent::CallRefused(r));
    }

    /// Reports a connection refused to an agent that holds the most it may, as the Linux
    /// backend does (tests of the audit).
    pub fn connect_refused(&self, r: nish_decider::backend::HeldRefusal) {
        let _ = self.events_tx.send(BackendEvent::ConnectRefused(r));
    }

    /// How often the engine ended the act under way (the kill switch, a revoke, a pause).
    pub fn acts_ended(&self) -> usize {
        self.acts_ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) fn desk(&self) -> std::sync::MutexGuard<'_, Desk> {
        self.desk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Another client sets `_NET_ACTIVE_WINDOW` to `window` (`None`: the window manager's own
    /// again): the window list calls it active, while the keyboard focus stays where it is.
    pub fn spoof_active(&self, window: Option<u64>) {
        self.desk().spoofed_active = window;
    }

    /// A popup menu of app `pid` opens (`None`: it closes), taking the keyboard focus from the
    /// field that opened it.
    pub fn open_popup(&self, pid: Option<u32>) {
        self.desk().popup = pid;
    }

    /// The pointer position and the active window (tests check headless acts leave them).
    pub fn pointer_and_active(&self) -> ((i32, i32), u64) {
        let d = self.desk();
        (d.pointer, d.active)
    }

    /// The states the app gives the first element named `name` now (tests check that a
    /// refused act left the app as it was).
    pub fn states_of(&self, name: &str) -> Option<StateSet> {
        self.desk()
            .els
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.states)
    }

    /// Every synthetic event kind sent so far.
    pub fn sent_log(&self) -> Vec<String> {
        self.desk().sent.clone()
    }

    /// Keys currently held by the driver.
    pub fn held_keys(&self) -> Vec<String> {
        self.desk().held.clone()
    }

    /// Opens a window of app `app` in a new process of the executable `exe` (another program
    /// giving itself an app's name); returns its pid.
    pub fn add_program_window(&self, app: &str, exe: &str) -> u32 {
        let mut d = self.desk();
        let pid = 4200 + d.procs.len() as u32;
        d.procs.push(ProcIdentity {
            pid,
            start_time: u64::from(pid) * 7,
            exe: exe.into(),
        });
        let app: &'static str = Box::leak(app.to_string().into_boxed_str());
        let root = d.add(None, "frame", app);
        d.windows.push(Win {
            window_id: 0x0090_0000 + u64::from(pid),
            pid,
            app,
            title: app,
            frame: Rect::new(1000, 500, 200, 150),
            root,
            status: None,
            list: None,
            entry: None,
        });
        pid
    }

    /// Opens a window of app `app` whose process is `pid`, running `exe` (e.g. this test's
    /// own process, standing in for the broker's); returns the window's id.
    pub fn add_window_of(&self, app: &str, exe: &str, pid: u32) -> u64 {
        let mut d = self.desk();
        d.procs.push(ProcIdentity {
            pid,
            start_time: 1,
            exe: exe.into(),
        });
        let app: &'static str = Box::leak(app.to_string().into_boxed_str());
        let root = d.add(None, "frame", app);
        let window_id = 0x00a0_0000;
        d.windows.push(Win {
            window_id,
            pid,
            app,
            title: app,
            frame: Rect::new(900, 400, 200, 150),
            root,
            status: None,
            list: None,
            entry: None,
        });
        window_id
    }

    /// The consent dialog on screen now, as the person would read it.
    pub fn open_dialog(&self) -> Option<ConsentRequest> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|p| !p.tx.is_closed())
            .map(|p| p.req.clone())
    }

    /// The indicator: session and paused, when shown.
    pub fn indicator(&self) -> Option<(String, bool)> {
        self.desk().indicator.clone()
    }

    /// Delay between typed characters (tests lengthen it to type while the person moves).
    pub fn set_typing_delay(&self, d: Duration) {
        self.desk().typing_delay = d;
    }

    pub(super) fn resolve(&self, target: &Expect) -> Result<usize, DriverError> {
        let d = self.desk();
        let id: usize = target
            .handle
            .strip_prefix("mock:")
            .and_then(|s| s.parse().ok())
            .filter(|id| *id < d.els.len())
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        let w = d
            .window_of(id)
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        if w.window_id != target.window_id || w.pid != target.pid {
            return Err(DriverError::new(
                ErrorCode::ElementNotFound,
                "the element is not in the named window",
            ));
        }
        // Live re-check: role, name, showing, sensitive and frame as the snapshot recorded.
        let (nodes, ids, _) = d.walk(w, WalkLimits::default());
        let row = ids
            .iter()
            .position(|x| *x == id)
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        let n = &nodes[row];
        if n.role != target.role || n.name != target.name || n.frame != target.frame {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                "the element changed since the snapshot",
            ));
        }
        if !n.states.has(State::Showing) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element is not showing",
            ));
        }
        if !n.states.has(State::Sensitive) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element is disabled",
            ));
        }
        Ok(id)
    }
}
