//! `nish-indicator`: the consent dialog, the takeover frame with its Continue button and the
//! stop hotkey, drawn with plain X11 so no accessibility client can operate them.

fn main() {
    eprintln!("nish-indicator: not built yet; the broker starts it on the Linux backend");
    std::process::exit(2);
}
