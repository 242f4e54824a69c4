//! `nish-reader`: the read-only reader agent. It will own AT-SPI reads, the X11 window list and
//! geometry, window captures, and walked trees; it has no message for any action.

fn main() {
    eprintln!("nish-reader: not built yet; the broker starts it on the Linux backend");
    std::process::exit(2);
}
