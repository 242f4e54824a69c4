//! The atoms the reader names, interned once per connection.

use x11rb::errors::ReplyError;
use x11rb::protocol::xproto::{Atom, ConnectionExt as _};
use x11rb::rust_connection::RustConnection;

pub(super) struct Atoms {
    pub(super) client_list_stacking: Atom,
    pub(super) client_list: Atom,
    pub(super) wm_pid: Atom,
    pub(super) net_wm_name: Atom,
    pub(super) utf8_string: Atom,
    pub(super) active_window: Atom,
    pub(super) wm_state_net: Atom,
    pub(super) wm_state_hidden: Atom,
    pub(super) wm_state: Atom,
    pub(super) own_window: Atom,
}

impl Atoms {
    pub(super) fn intern(conn: &RustConnection) -> Result<Atoms, ReplyError> {
        let names: [&[u8]; 10] = [
            b"_NET_CLIENT_LIST_STACKING",
            b"_NET_CLIENT_LIST",
            b"_NET_WM_PID",
            b"_NET_WM_NAME",
            b"UTF8_STRING",
            b"_NET_ACTIVE_WINDOW",
            b"_NET_WM_STATE",
            b"_NET_WM_STATE_HIDDEN",
            b"WM_STATE",
            nish_proto::wire::OWN_WINDOW_ATOM.as_bytes(),
        ];
        let cookies = names
            .iter()
            .map(|n| conn.intern_atom(false, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut a = Vec::with_capacity(cookies.len());
        for c in cookies {
            a.push(c.reply()?.atom);
        }
        Ok(Atoms {
            client_list_stacking: a[0],
            client_list: a[1],
            wm_pid: a[2],
            net_wm_name: a[3],
            utf8_string: a[4],
            active_window: a[5],
            wm_state_net: a[6],
            wm_state_hidden: a[7],
            wm_state: a[8],
            own_window: a[9],
        })
    }
}
