//! `nish-input`: the input agent. It will own every change to the desktop: AT-SPI actions,
//! EditableText, Value and Selection; XTEST pointer and keys in a takeover; the XInput2 watcher
//! of the person's own input; clipboard ownership.

fn main() {
    eprintln!("nish-input: not built yet; the broker starts it on the Linux backend");
    std::process::exit(2);
}
